// Test harness for Herald's real-browser tests: starts the real `herald` binary on its own data
// directory, mints client tokens, publishes over the HTTP API, serves test pages from a second
// origin, and drives one headless Chromium through playwright-core.
//
// Every wait is bounded (WAIT_MS) so a broken server fails a test quickly instead of hanging it,
// and everything started here is stopped by the test that started it (and, as a last resort, when
// the test process exits).

import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

const HERE = dirname(fileURLToPath(import.meta.url));

/** Upper bound of any single wait in these tests. */
export const WAIT_MS = 15_000;

export const API_KEY = 'hk_browser_test_publisher_key';
export const TOKEN_SECRET = 'browser-test-token-secret-0123456789';
/** The admin key of servers started with `adminArgs()`. */
export const ADMIN_KEY = 'hk_browser_test_admin_key_0123456789';

/** `herald serve` flags that turn app administration (and the admin dashboard's admin view) on. */
export function adminArgs() {
  return ['--admin-key', ADMIN_KEY];
}

/** Where tests save screenshots: target/test-artifacts/NAME/ of this workspace (created). */
export function artifactsDir(name) {
  const dir = resolve(HERE, '../../../target/test-artifacts', name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** The herald binary: $HERALD_BIN, or target/debug/herald of this workspace. */
export function heraldBin() {
  const bin = process.env.HERALD_BIN
    ? resolve(process.env.HERALD_BIN)
    : resolve(HERE, '../../../target/debug/herald');
  if (!existsSync(bin)) {
    throw new Error(`herald binary not found at ${bin}: run \`cargo build -p herald\` or set HERALD_BIN`);
  }
  return bin;
}

/** Chromium: $CHROMIUM_BIN, or Debian's /usr/bin/chromium. Never a browser download. */
export function chromiumBin() {
  const bin = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
  if (!existsSync(bin)) {
    throw new Error(`Chromium not found at ${bin}: run scripts/install-browser-deps.sh or set CHROMIUM_BIN`);
  }
  return bin;
}

// Children still running when the process exits (a crashed test) are killed here.
const live = new Set();
process.on('exit', () => {
  for (const child of live) {
    try { child.kill('SIGKILL'); } catch { /* already gone */ }
  }
});

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * A running herald process on its own data directory. `restart` reuses the directory and the
 * port, as a real deployment would after a crash.
 */
export class Herald {
  constructor() {
    this.tmp = mkdtempSync(join(tmpdir(), 'herald-browser-'));
    this.data = join(this.tmp, 'data');
    this.child = null;
    this.port = 0;
    this.url = '';
    /** Extra `herald serve` flags (e.g. the Meteor ports). */
    this.extraArgs = [];
    /** `http://ADDR` of the Meteor subscriber port, when started with `--meteor`. */
    this.meteorUrl = '';
    /** The last few KB the server wrote to stderr, for failure messages. */
    this.log = '';
  }

  static async start(extraArgs = []) {
    const h = new Herald();
    h.extraArgs = extraArgs;
    try {
      await h.#spawn('127.0.0.1:0');
    } catch (e) {
      h.cleanup();
      throw e;
    }
    return h;
  }

  async #spawn(listen) {
    const env = {};
    for (const [k, v] of Object.entries(process.env)) {
      // The server reads HERALD_* settings; none of the caller's may leak into a test server.
      if (!k.startsWith('HERALD_')) env[k] = v;
    }
    env.HERALD_LOG = process.env.HERALD_TEST_LOG || 'warn';
    const child = spawn(heraldBin(), [
      'serve',
      '--listen', listen,
      '--data', this.data,
      '--api-key', API_KEY,
      '--token-secret', TOKEN_SECRET,
      ...this.extraArgs,
    ], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(child);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => {
      this.log = (this.log + chunk).slice(-8192);
    });
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    }));
    child.exitedPromise = exited;
    const lines = createInterface({ input: child.stdout });
    const listening = new Promise((resolve, reject) => {
      lines.on('line', (line) => {
        // The Meteor line, when there is one, comes first.
        const meteor = /^herald meteor listening on (\S+)$/.exec(line.trim());
        if (meteor) this.meteorUrl = `http://${meteor[1]}`;
        const m = /^herald listening on http:\/\/(\S+)$/.exec(line.trim());
        if (m) resolve(m[1]);
      });
      exited.then(({ code, signal }) => reject(new Error(
        `herald exited (code ${code}, signal ${signal}) before listening on ${listen}\n${this.log}`)));
      child.once('error', reject);
    });
    let addr;
    try {
      addr = await withTimeout(listening, WAIT_MS, `herald to report its address (${listen})`);
    } catch (e) {
      child.kill('SIGKILL');
      await exited;
      throw e;
    }
    this.child = child;
    this.port = Number(addr.split(':').pop());
    this.url = `http://${addr}`;
  }

  /** `kill -9`, and wait until the process is gone. */
  async kill9() {
    const child = this.child;
    if (!child) return;
    this.child = null;
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await withTimeout(child.exitedPromise, WAIT_MS, 'herald to die after SIGKILL');
  }

  /**
   * kill -9, then start again on the same data directory and the same port. The old listening
   * socket can linger for a moment, so binding is retried within WAIT_MS.
   */
  async restartSamePort() {
    const port = this.port;
    await this.kill9();
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      try {
        await this.#spawn(`127.0.0.1:${port}`);
        return;
      } catch (e) {
        if (Date.now() > deadline) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** SIGTERM (then SIGKILL if it lingers), and remove the data directory. */
  async stop() {
    const child = this.child;
    this.child = null;
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      try {
        await withTimeout(child.exitedPromise, 5_000, 'herald to exit after SIGTERM');
      } catch {
        child.kill('SIGKILL');
        await withTimeout(child.exitedPromise, WAIT_MS, 'herald to die after SIGKILL');
      }
    }
    this.cleanup();
  }

  cleanup() {
    rmSync(this.tmp, { recursive: true, force: true });
  }

  /** POST /v1/channels/{channel}/messages; returns the response body. */
  async publish(channel, data) {
    const r = await fetch(`${this.url}/v1/channels/${encodeURIComponent(channel)}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ data }),
      signal: AbortSignal.timeout(WAIT_MS),
    });
    const body = await r.text();
    if (r.status !== 200) throw new Error(`publish to ${channel} failed: ${r.status} ${body}`);
    return JSON.parse(body);
  }

  /** A request to the publisher API with the test API key; returns `{ status, body }`. */
  async api(method, path, body) {
    const r = await fetch(`${this.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(WAIT_MS),
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : null };
  }
}

/**
 * `herald mock KIND` (apns, fcm, webpush) on a free loopback port, writing its certificate and
 * credentials into a temporary folder: `{ url, dir, stop() }`. `args` are extra flags.
 */
export async function startMock(kind, args = []) {
  const dir = mkdtempSync(join(tmpdir(), `herald-mock-${kind}-`));
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('HERALD_')) env[k] = v;
  const child = spawn(heraldBin(), ['mock', kind, '--listen', '127.0.0.1:0', '--out', dir, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  let log = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => { log = (log + chunk).slice(-4096); });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => {
    live.delete(child);
    resolve({ code, signal });
  }));
  const lines = createInterface({ input: child.stdout });
  const listening = new Promise((resolve, reject) => {
    lines.on('line', (line) => {
      const m = new RegExp(`^herald mock ${kind} listening on (\\S+)$`).exec(line.trim());
      if (m) resolve(m[1]);
    });
    exited.then(({ code, signal }) => reject(new Error(
      `herald mock ${kind} exited (code ${code}, signal ${signal}) before listening\n${log}`)));
    child.once('error', reject);
  });
  let url;
  try {
    url = await withTimeout(listening, WAIT_MS, `herald mock ${kind} to report its address`);
  } catch (e) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    url,
    dir,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      try {
        await withTimeout(exited, 5_000, `herald mock ${kind} to exit`);
      } catch {
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function b64url(buf) {
  return Buffer.from(buf).toString('base64url');
}

/** An HS256 client token signed with the test servers' token secret. */
export function mintToken(claims, secret = TOKEN_SECRET) {
  const header = b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const payload = b64url(JSON.stringify({ sub: 'browser', publish: [], ...claims }));
  const signature = createHmac('sha256', secret).update(`${header}.${payload}`).digest('base64url');
  return `${header}.${payload}.${signature}`;
}

/**
 * Serves `html` at `/` from 127.0.0.1 on a port of its own: a different origin from herald's, as
 * a real web app embedding Herald would be.
 */
export async function servePage(html) {
  const server = createServer((req, res) => {
    if (req.url === '/' || req.url.startsWith('/?')) {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      res.end(html);
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found');
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/`,
    origin: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** One headless Chromium with a fresh temporary profile (playwright's default). */
export async function launchBrowser() {
  return chromium.launch({
    executablePath: chromiumBin(),
    headless: true,
    timeout: WAIT_MS,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** A new page on `url` whose console errors are kept for failure messages. */
export async function openPage(browser, url) {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  page.consoleLines = [];
  page.on('console', (msg) => page.consoleLines.push(`[${msg.type()}] ${msg.text()}`));
  page.on('pageerror', (err) => page.consoleLines.push(`[pageerror] ${err.message}`));
  await page.goto(url);
  return page;
}

/**
 * Waits until `fn(arg)` is truthy in the page, at most WAIT_MS; on timeout the error says `what`
 * and shows the page's state and console.
 */
export async function waitInPage(page, what, fn, arg) {
  try {
    await page.waitForFunction(fn, arg, { timeout: WAIT_MS, polling: 50 });
  } catch (e) {
    let state = '(unavailable)';
    try {
      state = JSON.stringify(await page.evaluate(() => window.state));
      if (state.length > 3000) state = `${state.slice(0, 3000)}...`;
    } catch { /* page gone */ }
    throw new Error(`${what}: ${e.message.split('\n')[0]}\npage state: ${state}\n` +
      `console:\n${page.consoleLines.slice(-20).join('\n')}`);
  }
}

/** Resolves after `ms`. */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
