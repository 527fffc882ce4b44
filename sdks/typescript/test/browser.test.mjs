// The unbundled ES module in headless Chromium: a page on another origin imports dist/index.js
// with <script type="module"> (no bundler), subscribes over WebSocket and over SSE, receives, and
// resumes after the server is killed and restarted on the same port.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join, normalize, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { Herald, WAIT_MS } from './harness.mjs';

const PACKAGE = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';

const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>herald-push-client without a bundler</title>
<script type="module">
  import { HeraldClient } from '/dist/index.js';
  window.state = { received: [], events: [], errors: [] };
  window.start = (url, token, transport, channel) => {
    const client = new HeraldClient({ url, token: () => token, transport, backoff: { initialMs: 50, maxMs: 300 } });
    client.on('connected', (e) => window.state.events.push('connected:' + e.transport));
    client.on('disconnected', (e) => window.state.events.push('disconnected:' + e.code));
    client.on('error', (e) => window.state.errors.push(e.code + ': ' + e.message));
    const sub = client.subscribe(channel, (m) => { window.state.received.push(m.data.n); });
    window.client = client;
    return client.connect().then(() => sub.ready).then(() => client.transport);
  };
  window.state.loaded = true;
</script>`;

/** Serves the page and the package's dist/ from an origin of its own. */
async function servePackage() {
  const server = createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    if (path === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(PAGE);
      return;
    }
    const file = normalize(join(PACKAGE, path));
    if (path.startsWith('/dist/') && file.startsWith(join(PACKAGE, 'dist')) && existsSync(file)) {
      res.writeHead(200, { 'content-type': file.endsWith('.js') ? 'text/javascript' : 'application/octet-stream' });
      res.end(readFileSync(file));
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}/`, close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

let herald;
let site;
let browser;
before(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}: run scripts/install-browser-deps.sh or set CHROMIUM_BIN`);
  herald = await Herald.start();
  site = await servePackage();
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    timeout: WAIT_MS,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});
after(async () => {
  await browser?.close();
  await site?.close();
  await herald?.stop();
});

async function waitInPage(page, what, fn, arg) {
  try {
    await page.waitForFunction(fn, arg, { timeout: WAIT_MS, polling: 50 });
  } catch (e) {
    const state = await page.evaluate(() => JSON.stringify(window.state)).catch(() => '(gone)');
    throw new Error(`${what}: ${e.message.split('\n')[0]}\npage state: ${state}\nconsole:\n${page.lines.join('\n')}`);
  }
}

for (const transport of ['websocket', 'sse']) {
  test(`Chromium, ${transport}: the unbundled module subscribes, receives, and resumes after a restart`, async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.lines = [];
    page.on('console', (m) => page.lines.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (e) => page.lines.push(`[pageerror] ${e.message}`));
    try {
      await page.goto(site.url);
      await waitInPage(page, 'the module to load', () => window.state?.loaded);
      const channel = `browser/${transport}`;
      const token = await herald.token();
      const used = await page.evaluate(([u, t, tr, c]) => window.start(u, t, tr, c), [herald.url, token, transport, channel]);
      assert.equal(used, transport);
      await herald.publisher().publish(channel, { n: 1 });
      await waitInPage(page, 'the first message', () => window.state.received.length === 1);

      await herald.kill9();
      await waitInPage(page, 'the client to notice', () => window.state.events.some((e) => e.startsWith('disconnected:')));
      await herald.startAgain();
      for (let n = 2; n <= 4; n++) await herald.publisher().publish(channel, { n });
      await waitInPage(page, 'every message after the restart', () => window.state.received.length >= 4);
      await herald.publisher().publish(channel, { n: 5 });
      await waitInPage(page, 'a live message after the resume', () => window.state.received.length >= 5);
      const state = await page.evaluate(() => window.state);
      assert.deepEqual(state.received, [1, 2, 3, 4, 5]);
      assert.ok(state.events.filter((e) => e === `connected:${transport}`).length >= 2, JSON.stringify(state.events));
      await page.evaluate(() => window.client.close());
    } finally {
      await context.close();
    }
  });
}
