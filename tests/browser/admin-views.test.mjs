// The admin dashboard's views in a real browser, beyond the page-by-page tour of
// admin.test.mjs: the app picker follows the app a URL names (a device of another app opens in
// that app) and a failed load shows its error in place of the card; provider figures and a
// receipt's provider path are tables (pushes through a mock Web Push service, one subscription
// gone); a publisher sees channel messages delivered to its subscribers, apart from pushes;
// the channel page updates by itself; a webhook endpoint's dead letters are replayed and
// dropped from its page; and at 390 px no page is wider than the screen. Each view is saved as
// a screenshot in target/test-artifacts/admin-views/.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import {
  ADMIN_KEY, API_KEY, Herald, WAIT_MS, adminArgs, artifactsDir, launchBrowser, mintToken,
  openPage, sleep, startMock, waitInPage,
} from './lib/harness.mjs';

let herald;
let mock;
let browser;
/** The admin's page, logged in. */
let page;
/** The push sent through the mock Web Push service, and its receipt once settled. */
let providerPush;
const shots = artifactsDir('admin-views');
/** The server's config file: webhook events die 1 s after their endpoint starts failing. */
const configDir = mkdtempSync(join(tmpdir(), 'herald-admin-views-'));
const configFile = join(configDir, 'herald.toml');
writeFileSync(configFile, '[hooks]\nretry_horizon = "1s"\n');

async function shot(p, name, fullPage = false) {
  await p.screenshot({ path: join(shots, `${name}.png`), fullPage });
}

/** A request to the API with `key`; returns `{ status, body }`. */
async function api(key, method, path, body) {
  const r = await fetch(`${herald.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(WAIT_MS),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

/** A new tab (same browser context as `page`, so the same session cookie) on `hash`. */
async function newTab(hash, viewport = { width: 1280, height: 800 }) {
  const tab = await page.context().newPage();
  tab.setDefaultTimeout(WAIT_MS);
  tab.consoleLines = [];
  tab.on('console', (msg) => tab.consoleLines.push(`[${msg.type()}] ${msg.text()}`));
  tab.on('pageerror', (err) => tab.consoleLines.push(`[pageerror] ${err.message}`));
  await tab.setViewportSize(viewport);
  await tab.goto(`${herald.url}/admin${hash}`);
  return tab;
}

async function login(p, key) {
  await p.waitForSelector('#login-form');
  await p.fill('#key', key);
  await p.click('#login-button');
  await p.waitForSelector('main[data-page="overview"]');
}

/** Opens an SSE subscriber of `channel` (default app); returns its AbortController. */
async function subscribeSse(channel) {
  const token = mintToken({ channels: [channel] });
  const sse = new AbortController();
  const stream = await fetch(`${herald.url}/v1/sse?channel=${encodeURIComponent(channel)}&token=${token}`, { signal: sse.signal });
  assert.equal(stream.status, 200);
  // Read (and drop) what arrives, so the server's writes never back up.
  (async () => {
    try {
      for await (const _ of stream.body) { /* drained */ }
    } catch { /* aborted */ }
  })();
  return sse;
}

before(async () => {
  mock = await startMock('webpush', ['--subscriptions', '2']);
  herald = await Herald.start([
    ...adminArgs(),
    '--provider-ca-file', join(mock.dir, 'ca.pem'),
    '--outbound-allow', '127.0.0.1',
    '--config', configFile,
  ]);
  browser = await launchBrowser();
  page = await openPage(browser, `${herald.url}/admin`);
  await page.setViewportSize({ width: 1280, height: 800 });
  await login(page, ADMIN_KEY);

  // A second app with a device, for the app picker.
  const shop = await api(ADMIN_KEY, 'POST', '/v1/apps', { id: 'shop', name: 'Shop' });
  assert.equal(shop.status, 201, JSON.stringify(shop.body));
  const device = await api(shop.body.key, 'POST', '/v1/devices', { platform: 'herald', id: 'shop-phone', tags: ['vip'] });
  assert.ok(device.status < 300, JSON.stringify(device.body));

  // The default app pushes through the mock Web Push service: two subscriptions it knows and
  // one it has dropped (410 Gone), so the figures have accepted and failed sends.
  const creds = await api(API_KEY, 'PUT', '/v1/apps/default/providers/webpush', { subject: 'mailto:ops@example.com', generate: true });
  assert.equal(creds.status, 201, JSON.stringify(creds.body));
  const { devices } = JSON.parse(readFileSync(join(mock.dir, 'subscriptions.json'), 'utf8'));
  const gone = { ...devices[0], id: 'webpush-gone', token: `${mock.url}/push/no-such-subscription` };
  const batch = await api(API_KEY, 'POST', '/v1/devices/batch', { devices: [...devices, gone] });
  assert.equal(batch.status, 200, JSON.stringify(batch.body));
  const pushed = await api(API_KEY, 'POST', '/v1/push', {
    target: { app: true },
    delivery: 'provider',
    notification: { title: 'Dashboard test', body: 'through the mock' },
    data: { n: 1 },
  });
  assert.ok(pushed.status < 300, JSON.stringify(pushed.body));
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const receipt = await api(API_KEY, 'GET', `/v1/push/${encodeURIComponent(pushed.body.id)}`);
    const p = receipt.body?.providers;
    if (p && p.sent === 3 && p.queued === 0) {
      providerPush = receipt.body;
      break;
    }
    if (Date.now() > deadline) throw new Error(`the provider push did not settle: ${JSON.stringify(receipt.body)}`);
    await sleep(100);
  }
});

after(async () => {
  await browser?.close();
  await herald?.stop();
  await mock?.stop();
  rmSync(configDir, { recursive: true, force: true });
});

/** Polls `GET path` (publisher key) until `ok(body)`, at most twice WAIT_MS; the last body. */
async function until(path, ok, what) {
  const deadline = Date.now() + 2 * WAIT_MS;
  for (;;) {
    const answer = await api(API_KEY, 'GET', path);
    if (answer.status === 200 && ok(answer.body)) return answer.body;
    if (Date.now() > deadline) throw new Error(`${what}: ${JSON.stringify(answer.body)}`);
    await sleep(100);
  }
}

test('a webhook endpoint\'s dead letters are listed, replayed and dropped on its page', { timeout: 90_000 }, async () => {
  // A receiver that answers `status`: 503 until the test says otherwise.
  let status = 503;
  const received = [];
  const receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      received.push({ status, body });
      res.writeHead(status);
      res.end();
    });
  });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const subscribers = [];
  try {
    const url = `http://127.0.0.1:${receiver.address().port}/hooks`;
    const created = await api(API_KEY, 'POST', '/v1/apps/default/hooks', { url, events: ['client.connected'] });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.hook.id;
    // Two connections: two events, refused past the 1 s horizon, so two dead letters.
    subscribers.push(await subscribeSse('hook-dead-1'), await subscribeSse('hook-dead-2'));
    const hookPath = `/v1/apps/default/hooks/${id}`;
    await until(hookPath, (h) => h.dead === 2 && h.queued === 0, 'two dead letters');

    await page.goto(`${herald.url}/admin#/hooks?app=default`);
    await waitInPage(page, 'the list shows two dead letters', () =>
      document.querySelector('#hook-list tr[data-hook] [data-figure="dead"]')?.textContent === '2');
    await waitInPage(page, 'and the last error', () =>
      /503/.test(document.querySelector('#hook-list tr[data-hook]')?.textContent));
    await shot(page, 'hooks-failing');
    await page.goto(`${herald.url}/admin#/hooks/${id}?app=default`);
    await waitInPage(page, 'two dead letters listed', () => document.querySelectorAll('#hook-dead tr[data-dead]').length === 2);
    const rows = await page.$$eval('#hook-dead tr[data-dead]', (trs) => trs.map((tr) => ({
      id: tr.dataset.dead, text: tr.textContent,
    })));
    assert.ok(rows.every((r) => r.text.includes('client.connected') && r.text.includes('503')), JSON.stringify(rows));
    await shot(page, 'hook-dead-letters');

    // The receiver is back: the replayed one is delivered, the dropped one is gone.
    status = 204;
    await page.click(`[data-replay="${rows[0].id}"]`);
    await waitInPage(page, 'one dead letter left', () => document.querySelectorAll('#hook-dead tr[data-dead]').length === 1);
    page.once('dialog', (dialog) => dialog.accept());
    await page.click(`[data-drop="${rows[1].id}"]`);
    await waitInPage(page, 'no dead letters left', () => document.querySelector('#hook-dead .empty') !== null);
    const after = await until(hookPath, (h) => h.delivered === 1, 'the replayed event delivered');
    assert.equal(after.dead, 0);
    const delivered = received.filter((r) => r.status === 204).map((r) => JSON.parse(r.body).events);
    assert.equal(delivered.length, 1);
    assert.equal(delivered[0].length, 1);
    assert.equal(delivered[0][0].type, 'client.connected');
    const removed = await api(API_KEY, 'DELETE', hookPath);
    assert.equal(removed.status, 204);
  } finally {
    subscribers.forEach((sse) => sse.abort());
    receiver.closeAllConnections();
    await new Promise((resolve) => receiver.close(resolve));
  }
});

test('the app picker follows the app in the URL, and a failed load shows its error', { timeout: 60_000 }, async () => {
  // The admin's tab acts for `default`; a link to a device of `shop` opens in `shop`.
  assert.equal(await page.inputValue('#acting-app'), 'default');
  await page.goto(`${herald.url}/admin#/devices/shop-phone?app=shop`);
  await page.waitForSelector('#inbox-cursor');
  assert.equal(await page.inputValue('#acting-app'), 'shop', 'the picker follows the URL');
  assert.match(await page.textContent('main .page-head'), /App shop/);
  assert.equal(await page.$('main .alert.error'), null, 'no error beside the device');
  await shot(page, 'device-of-another-app');

  // The same link in a new tab (whose picker starts at `default`).
  const tab = await newTab('#/devices/shop-phone?app=shop');
  await tab.waitForSelector('#inbox-cursor');
  assert.equal(await tab.inputValue('#acting-app'), 'shop');
  // Links on the page keep the app.
  assert.equal(await tab.getAttribute('main a.button[href^="#/devices"]', 'href'), '#/devices?app=shop');
  await tab.close();

  // An app's own page moves the picker too; picking another app there opens that app's page.
  await page.goto(`${herald.url}/admin#/apps/default`);
  await page.waitForSelector('#create-key-form');
  assert.equal(await page.inputValue('#acting-app'), 'default');
  await page.selectOption('#acting-app', 'shop');
  await waitInPage(page, 'the picker opens the app it names', () => window.location.hash === '#/apps/shop');
  await waitInPage(page, 'the shop app page', () => /App shop/.test(document.querySelector('main h2')?.textContent));

  // Picking another app on a device page goes to that app's devices.
  await page.goto(`${herald.url}/admin#/devices/shop-phone?app=shop`);
  await page.waitForSelector('#inbox-cursor');
  await page.selectOption('#acting-app', 'default');
  await waitInPage(page, 'the devices of default', () => window.location.hash === '#/devices?app=default');

  // A device that is not in the app named: the error, and no card left loading.
  await page.goto(`${herald.url}/admin#/devices/shop-phone?app=default`);
  await page.waitForSelector('main .alert.error[data-code="not_found"]');
  await waitInPage(page, 'no card is left loading',
    () => !document.querySelector('main .loading') && !document.querySelector('main').textContent.includes('Loading'));
  assert.match(await page.textContent('main .alert.error'), /shop-phone/);
  await shot(page, 'device-not-found');

  // A link without an app opens in the picker's app, and the URL then names it.
  await page.goto(`${herald.url}/admin#/devices/shop-phone`);
  await waitInPage(page, 'the URL gains the app', () => window.location.hash === '#/devices/shop-phone?app=default');
  await page.waitForSelector('main .alert.error[data-code="not_found"]');
});

test('provider figures and the provider path are tables, not JSON', { timeout: 60_000 }, async () => {
  await page.goto(`${herald.url}/admin#/apps/default`);
  const row = '#app-providers tr[data-provider="webpush"]';
  await page.waitForSelector(row);
  const cell = (figure) => page.textContent(`${row} [data-figure="${figure}"]`);
  assert.equal(await cell('accepted'), '2');
  assert.equal(await cell('failed'), '1');
  assert.equal(await cell('sends'), '3');
  assert.equal(await cell('retries'), '0');
  assert.equal(await cell('dead'), '0');
  assert.equal(await cell('in-flight'), '0');
  const reasons = await page.$$eval('#app-providers tr[data-failure]', (trs) => trs.map((tr) => tr.dataset.failure));
  assert.equal(reasons.length, 1, JSON.stringify(reasons));
  assert.match(reasons[0], /^unregistered/);
  const raw = await page.$$eval('main code, main pre', (els) => els.filter((e) => /"successes"|\{"/.test(e.textContent)).length);
  assert.equal(raw, 0, 'no raw JSON on the app page');
  await page.$eval('#app-providers', (el) => el.scrollIntoView());
  await shot(page, 'app-provider-figures');

  await page.goto(`${herald.url}/admin#/overview`);
  await page.waitForSelector('main tr[data-provider="webpush"][data-app="default"] [data-figure="accepted"]');
  await waitInPage(page, 'the overview counts the accepted sends',
    () => document.querySelector('main tr[data-provider="webpush"][data-app="default"] [data-figure="accepted"]')?.textContent === '2');

  await page.goto(`${herald.url}/admin#/pushes/${encodeURIComponent(providerPush.id)}?app=default`);
  await page.waitForSelector('#receipt-providers');
  const states = await page.$$eval('#receipt-providers tbody tr', (trs) => trs.map((tr) => ({
    state: tr.dataset.state,
    reason: tr.dataset.reason || null,
    jobs: tr.querySelector('td.num').textContent,
  })));
  const jobs = (state) => states.filter((s) => s.state === state).map((s) => s.jobs);
  assert.deepEqual(jobs('accepted'), ['2'], JSON.stringify(states));
  assert.deepEqual(jobs('failed'), ['1'], JSON.stringify(states));
  assert.match(states.find((s) => s.state === 'failed').reason, /^unregistered/);
  assert.deepEqual(jobs('queued'), ['0']);
  assert.deepEqual(jobs('dead'), ['0']);
  assert.equal(await page.$('#receipt pre'), null, 'no raw JSON in the receipt');
  await shot(page, 'receipt-provider-path');
});

test('a publisher sees channel messages delivered to its subscribers, apart from pushes', { timeout: 60_000 }, async () => {
  const context = await browser.newContext();
  const publisher = await context.newPage();
  publisher.setDefaultTimeout(WAIT_MS);
  publisher.consoleLines = [];
  await publisher.setViewportSize({ width: 1280, height: 800 });
  await publisher.goto(`${herald.url}/admin`);
  await login(publisher, API_KEY);
  const subscribers = [await subscribeSse('ticker'), await subscribeSse('ticker')];
  try {
    let stop = false;
    const publishing = (async () => {
      for (let i = 0; !stop && i < 60; i += 1) {
        await herald.publish('ticker', { i });
        await sleep(200);
      }
    })();
    try {
      await waitInPage(publisher, 'messages delivered per second on the tile',
        () => Number(document.querySelector('#tile-messages-delivered')?.textContent) > 0);
      await waitInPage(publisher, 'the chart has a line of messages delivered',
        () => (document.querySelector('svg[aria-label="Throughput / s"] path.line.s1')?.getAttribute('d') || '').includes('L'));
      await waitInPage(publisher, 'the app row counts messages delivered',
        () => Number(document.querySelector('main tr[data-app="default"] [data-figure="messages-delivered"]')
          ?.textContent.replace(/,/g, '')) >= 2);
      assert.ok(await publisher.$('#tile-pushes-delivered'), 'pushes delivered have a tile of their own');
      await shot(publisher, 'publisher-messages-delivered');
    } finally {
      stop = true;
      await publishing;
    }
    await publisher.goto(`${herald.url}/admin#/apps`);
    await waitInPage(publisher, 'the app page shows messages delivered',
      () => Number(document.querySelector('#usage-messages-delivered')?.textContent.replace(/,/g, '')) >= 2);
  } finally {
    for (const s of subscribers) s.abort();
    await context.close();
  }
});

test('the channel page updates by itself', { timeout: 60_000 }, async () => {
  // Opened by a link that names no app: the page acts for the picker's (`default`).
  await page.goto(`${herald.url}/admin#/channels/live-news`);
  await page.waitForSelector('#channel-subscribers');
  assert.equal(await page.textContent('#channel-subscribers'), '0');
  // Published elsewhere (the API), not from the page.
  await herald.publish('live-news', { text: 'live one' });
  await herald.publish('live-news', { text: 'live two' });
  await waitInPage(page, 'the history shows messages published elsewhere',
    () => [...document.querySelectorAll('pre.data')].some((p) => p.textContent.includes('live two')));
  const sse = await subscribeSse('live-news');
  try {
    await waitInPage(page, 'the subscriber count follows',
      () => document.querySelector('#channel-subscribers')?.textContent === '1');
    await shot(page, 'channel-live');
  } finally {
    sse.abort();
  }
  await waitInPage(page, 'and goes back down', () => document.querySelector('#channel-subscribers')?.textContent === '0');
});

test('at 390 px wide no page is wider than the screen', { timeout: 120_000 }, async () => {
  const tab = await newTab('#/overview', { width: 390, height: 844 });
  const views = [
    ['overview', '#/overview', () => document.querySelectorAll('.chart path.line').length > 0],
    ['apps', '#/apps', () => document.querySelector('main td a')],
    ['app', '#/apps/default', () => document.querySelector('#app-providers tr[data-provider]')],
    ['channels', '#/channels?app=default', () => document.querySelector('main td a')],
    ['channel', '#/channels/live-news?app=default', () => document.querySelector('main pre.data')],
    ['devices', '#/devices?app=default', () => document.querySelector('#device-results td a')],
    ['device', '#/devices/shop-phone?app=shop', () => document.querySelector('#inbox-cursor')],
    ['receipt', `#/pushes/${encodeURIComponent(providerPush.id)}?app=default`, () => document.querySelector('#receipt-providers')],
    ['hooks', '#/hooks?app=default', () => document.querySelector('#create-hook-form')],
  ];
  for (const [name, hash, ready] of views) {
    await tab.goto(`${herald.url}/admin${hash}`);
    await waitInPage(tab, `the ${name} page at 390 px`, ready);
    await waitInPage(tab, `nothing left loading on the ${name} page`, () => !document.querySelector('main .loading'));
    const size = await tab.evaluate(() => ({
      scrollWidth: document.documentElement.scrollWidth,
      innerWidth: window.innerWidth,
      wider: [...document.querySelectorAll('body *')]
        .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1 && !el.closest('.table-wrap'))
        .slice(0, 5)
        .map((el) => `${el.tagName.toLowerCase()}.${el.className}`),
    }));
    await shot(tab, `narrow-${name}`, true);
    assert.ok(size.scrollWidth <= size.innerWidth,
      `${name}: the page is ${size.scrollWidth} px wide in a ${size.innerWidth} px window (${size.wider.join(', ')})`);
  }
  // The provider figures are wider than the screen: they scroll inside their panel.
  await tab.goto(`${herald.url}/admin#/apps/default`);
  await tab.waitForSelector('#app-providers tr[data-provider]');
  const wrap = await tab.$eval('#app-providers .table-wrap', (el) => ({
    scrollWidth: el.scrollWidth, clientWidth: el.clientWidth, overflowX: getComputedStyle(el).overflowX,
  }));
  assert.ok(wrap.scrollWidth > wrap.clientWidth, `the table is wider than its panel: ${JSON.stringify(wrap)}`);
  assert.equal(wrap.overflowX, 'auto');
  await tab.close();
  const csp = page.consoleLines.filter((l) => /Content Security Policy/i.test(l));
  assert.deepEqual(csp, [], 'no Content-Security-Policy violations');
});
