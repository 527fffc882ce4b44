// Test harness: starts the real `herald` binary ($HERALD_BIN) on a fresh data directory, restarts
// it on the same port after kill -9, mints tokens, and bounds every wait in time.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import WebSocket from 'ws';

import { HeraldClient, HeraldPublisher, mintToken } from '../dist/index.js';

const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(HERE, '../../..');
export const WAIT_MS = 15_000;
export const API_KEY = 'hk_sdk_ts_test_publisher_key';
export const ADMIN_KEY = 'adm_sdk_ts_test_admin_key_0123';
export const TOKEN_SECRET = 'sdk-ts-test-token-secret-0123456789';

export function heraldBin() {
  const bin = resolve(process.env.HERALD_BIN || resolve(ROOT, 'target/debug/herald'));
  if (!existsSync(bin)) throw new Error(`herald binary not found at ${bin}: set HERALD_BIN`);
  return bin;
}

const live = new Set();
process.on('exit', () => {
  for (const child of live) {
    try { child.kill('SIGKILL'); } catch { /* gone */ }
  }
});

export function withTimeout(promise, what, ms = WAIT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * A running herald on its own data directory; `env` adds server environment variables, `through`
 * is a command the server runs under (`['prlimit', '--fsize=N:']`).
 */
export class Herald {
  constructor(env = {}, config = '', through = []) {
    this.tmp = mkdtempSync(join(tmpdir(), 'herald-sdk-ts-'));
    this.data = join(this.tmp, 'data');
    this.extraEnv = env;
    this.configArgs = [];
    if (config) {
      const path = join(this.tmp, 'herald.toml');
      writeFileSync(path, config);
      this.configArgs = ['--config', path];
    }
    this.through = through;
    this.child = null;
    this.port = 0;
    this.url = '';
    this.log = '';
    /** Clients made by `client()`: closed by `stop()` even when a test failed before closing them. */
    this.clients = new Set();
  }

  static async start(env = {}, config = '', through = []) {
    const h = new Herald(env, config, through);
    try {
      await h.spawn('127.0.0.1:0');
    } catch (e) {
      h.cleanup();
      throw e;
    }
    return h;
  }

  async spawn(listen) {
    const env = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('HERALD_')) env[k] = v;
    Object.assign(env, { HERALD_LOG: process.env.HERALD_TEST_LOG || 'warn' }, this.extraEnv);
    const [program, ...args] = [...this.through, heraldBin(), 'serve', '--listen', listen, '--data', this.data,
      '--api-key', API_KEY, '--admin-key', ADMIN_KEY, '--token-secret', TOKEN_SECRET, ...this.configArgs];
    const child = spawn(program, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(child);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => { this.log = (this.log + chunk).slice(-8192); });
    child.exited = new Promise((res) => child.once('exit', () => { live.delete(child); res(); }));
    const lines = createInterface({ input: child.stdout });
    const listening = new Promise((res, rej) => {
      lines.on('line', (line) => {
        const m = /^herald listening on http:\/\/(\S+)$/.exec(line.trim());
        if (m) res(m[1]);
      });
      child.exited.then(() => rej(new Error(`herald exited before listening on ${listen}\n${this.log}`)));
    });
    let addr;
    try {
      addr = await withTimeout(listening, `herald to listen on ${listen}`);
    } catch (e) {
      child.kill('SIGKILL');
      await child.exited;
      throw e;
    }
    this.child = child;
    this.port = Number(addr.split(':').pop());
    this.url = `http://${addr}`;
  }

  async kill9() {
    const child = this.child;
    this.child = null;
    if (!child) return;
    child.kill('SIGKILL');
    await withTimeout(child.exited, 'herald to die');
  }

  /** Starts again on the same port and data directory (retrying the bind). */
  async startAgain() {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      try {
        await this.spawn(`127.0.0.1:${this.port}`);
        return;
      } catch (e) {
        if (Date.now() > deadline) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  async stop() {
    for (const client of this.clients) client.close();
    const child = this.child;
    this.child = null;
    if (child) {
      child.kill('SIGTERM');
      try {
        await withTimeout(child.exited, 'herald to exit', 5000);
      } catch {
        child.kill('SIGKILL');
        await withTimeout(child.exited, 'herald to die');
      }
    }
    this.cleanup();
  }

  cleanup() {
    rmSync(this.tmp, { recursive: true, force: true });
  }

  publisher(options = {}) {
    return new HeraldPublisher({ url: this.url, apiKey: API_KEY, adminKey: ADMIN_KEY, ...options });
  }

  /** A token for the default app; `channels` and `publish` default to everything. */
  token(claims = {}) {
    return mintToken(TOKEN_SECRET, { sub: 'sdk-test', channels: ['**'], publish: ['**'], ...claims });
  }

  /** A subscriber client on this server over the `ws` package, with quick reconnects. */
  client(options = {}) {
    const client = new HeraldClient({
      url: this.url,
      token: () => this.token(),
      WebSocket,
      backoff: { initialMs: 50, maxMs: 300 },
      requestTimeoutMs: 5000,
      ...options,
    });
    this.clients.add(client);
    return client;
  }
}

/** Collects what a handler receives; `waitFor(n)` resolves once n items are in. */
export function collector() {
  const items = [];
  const waiters = [];
  const check = () => {
    for (const w of [...waiters]) {
      if (items.length >= w.n) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(items);
      }
    }
  };
  return {
    items,
    push(item) { items.push(item); check(); },
    waitFor(n, what = `${n} items`) {
      const p = new Promise((resolve) => { waiters.push({ n, resolve }); check(); });
      return withTimeout(p, `${what} (have ${items.length}: ${JSON.stringify(items).slice(0, 500)})`);
    },
  };
}

/** Resolves with the next `name` event of `client` (matching `predicate`). */
export function nextEvent(client, name, predicate = () => true) {
  return withTimeout(new Promise((resolve) => {
    const off = client.on(name, (event) => {
      if (predicate(event)) {
        off();
        resolve(event);
      }
    });
  }), `the client's ${name} event`);
}

/**
 * An HTTP proxy to `target` that forwards plain requests (SSE, ack) but refuses every WebSocket
 * upgrade: what a WebSocket-hostile proxy in front of Herald looks like.
 */
export async function noUpgradeProxy(targetUrl) {
  const target = new URL(targetUrl);
  const server = createServer((req, res) => {
    const upstream = httpRequest({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.on('upgrade', (req, socket) => {
    socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
  });
  await new Promise((res) => server.listen(0, '127.0.0.1', res));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((res) => { server.closeAllConnections(); server.close(() => res()); }),
  };
}
