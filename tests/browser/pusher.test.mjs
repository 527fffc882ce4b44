// pusher-js in headless Chromium: its browser build (tests/pusher/node_modules/pusher-js/dist/
// web/pusher.js, installed by scripts/install-pusher-clients.sh) on a page from another origin
// connects to herald's `/app/{key}`, subscribes to a public channel and to a private one
// authorised by the page's own auth endpoint (`channelAuthorization.endpoint`, signing with the
// Pusher Node SDK's authorizeChannel as an app's backend does), and receives a trigger of
// Pusher's HTTP API (the Node SDK) and a Herald publish on both. Then, as in a rolling restart
// behind a load balancer (a TCP proxy on loopback here, in front of two herald nodes holding the
// same imported Pusher credentials), the node it is connected to shuts down, closing the socket
// with 4200; pusher-js reconnects at once through the proxy to the other node, is authorised
// again for its new socket, subscribes again and receives what is triggered there.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { connect, createServer as createTcpServer } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Herald, launchBrowser, openPage, waitInPage, WAIT_MS } from './lib/harness.mjs';

const PUSHER_CLIENTS = resolve(dirname(fileURLToPath(import.meta.url)), '../pusher');
const BUNDLE = resolve(PUSHER_CLIENTS, 'node_modules/pusher-js/dist/web/pusher.js');

// The page records every WebSocket close code before pusher-js is loaded, so the test can see
// the 4200 herald's shutdown sends (pusher-js only shows that it reconnects).
const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>pusher-js</title></head>
<body><script>
window.state = { sockets: [], states: [], errors: [], events: [], closes: [] };
const Native = window.WebSocket;
window.WebSocket = class extends Native {
  constructor(...args) {
    super(...args);
    this.addEventListener('close', (e) => window.state.closes.push(e.code));
  }
};
</script></body>
</html>`;

/** The node the page first connects to, and the one it reconnects to. */
let first;
let second;
/** The loopback TCP proxy the page connects to (`proxy.target` is the port it forwards to). */
let proxy;
let site;
let browser;
/** The Pusher Node SDK with the apps' credentials, for each node. */
let signers;
let appKey;
/** The channels the page's auth endpoint signed, with the socket each was for. */
const authorised = [];

/**
 * A TCP proxy on loopback: every new connection is forwarded to the port `target` holds when it
 * is accepted, as a load balancer forwards to the nodes it has.
 */
async function startProxy(target) {
  const sockets = new Set();
  const state = { target, port: 0 };
  const server = createTcpServer((client) => {
    const upstream = connect(state.target, '127.0.0.1');
    for (const [from, to] of [[client, upstream], [upstream, client]]) {
      sockets.add(from);
      from.on('close', () => sockets.delete(from));
      from.on('error', () => to.destroy());
      from.pipe(to);
    }
  });
  await new Promise((done, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', done);
  });
  state.port = server.address().port;
  state.close = () => new Promise((done) => {
    for (const socket of sockets) socket.destroy();
    server.close(() => done());
  });
  return state;
}

/** The page's origin: the page itself and its backend's `/pusher/auth`. */
async function serveSite() {
  const server = createServer((req, res) => {
    if (req.method === 'GET' && (req.url === '/' || req.url.startsWith('/?'))) {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      res.end(PAGE);
      return;
    }
    if (req.method === 'POST' && req.url === '/pusher/auth') {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk) => { body += chunk; });
      req.on('end', () => {
        const form = new URLSearchParams(body);
        const socketId = form.get('socket_id');
        const channel = form.get('channel_name');
        authorised.push({ channel, socketId });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(signers[0].authorizeChannel(socketId, channel)));
      });
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found');
  });
  await new Promise((done, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', done);
  });
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    close: () => new Promise((done) => {
      server.closeAllConnections();
      server.close(() => done());
    }),
  };
}

before(async () => {
  assert.ok(existsSync(BUNDLE), `${BUNDLE} is missing: run scripts/install-pusher-clients.sh`);
  first = await Herald.start();
  second = await Herald.start();
  const created = await first.api('POST', '/v1/apps/default/pusher');
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const { app_id: appId, key, secret } = created.body;
  // The second node holds the same credentials, imported (section 1 of docs/pusher.md).
  const imported = await second.api('POST', '/v1/apps/default/pusher', { app_id: appId, key, secret });
  assert.equal(imported.status, 201, JSON.stringify(imported.body));
  appKey = key;
  // The Pusher Node SDK installed beside pusher-js (CommonJS).
  const PusherServer = createRequire(resolve(PUSHER_CLIENTS, 'package.json'))('pusher');
  signers = [first, second].map((node) => new PusherServer({
    appId, key, secret, host: '127.0.0.1', port: String(node.port), useTLS: false,
  }));
  proxy = await startProxy(first.port);
  site = await serveSite();
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await site?.close();
  await proxy?.close();
  await first?.stop();
  await second?.stop();
});

/** Triggers `event` with `data` on `channels` through `node`'s Pusher HTTP API (the Node SDK). */
async function trigger(node, channels, event, data) {
  const response = await signers[node].trigger(channels, event, data);
  assert.equal(response.status, 200);
}

/** The page's events of `channel` that are not pusher-js's own (`pusher:...`). */
async function eventsOf(page, channel) {
  const state = await page.evaluate(() => window.state);
  return state.events
    .filter((e) => e.channel === channel && !e.event.startsWith('pusher:'))
    .map(({ event, data }) => ({ event, data }));
}

test('pusher-js in Chromium: public and private channels, an HTTP trigger, and a reconnect after 4200', { timeout: 6 * WAIT_MS }, async () => {
  const page = await openPage(browser, site.url);
  await page.addScriptTag({ path: BUNDLE });
  await page.evaluate(({ key, port }) => {
    const pusher = new window.Pusher(key, {
      cluster: 'herald',
      wsHost: '127.0.0.1',
      wsPort: port,
      forceTLS: false,
      enabledTransports: ['ws'],
      disableStats: true,
      channelAuthorization: { endpoint: '/pusher/auth' },
    });
    window.pusher = pusher;
    pusher.connection.bind('connected', () => window.state.sockets.push(pusher.connection.socket_id));
    pusher.connection.bind('state_change', (s) => window.state.states.push(s.current));
    pusher.connection.bind('error', (e) => window.state.errors.push(e));
    for (const name of ['orders', 'private-orders']) {
      pusher.subscribe(name).bind_global((event, data) => window.state.events.push({ channel: name, event, data }));
    }
  }, { key: appKey, port: proxy.port });

  await waitInPage(page, 'both subscriptions', (n) => window.state.events.filter((e) => e.event === 'pusher:subscription_succeeded').length >= n, 2);
  let state = await page.evaluate(() => window.state);
  assert.equal(state.sockets.length, 1, JSON.stringify(state));
  const [firstSocket] = state.sockets;
  assert.deepEqual(authorised, [{ channel: 'private-orders', socketId: firstSocket }]);

  await trigger(0, ['orders', 'private-orders'], 'order-placed', { id: 1 });
  await first.publish('orders', { n: 1 });
  await waitInPage(page, 'the trigger and the publish', () => window.state.events.length >= 5);
  assert.deepEqual(await eventsOf(page, 'orders'), [
    { event: 'order-placed', data: { id: 1 } },
    { event: 'message', data: { n: 1 } },
  ]);
  assert.deepEqual(await eventsOf(page, 'private-orders'), [{ event: 'order-placed', data: { id: 1 } }]);

  // The load balancer sends new connections to the second node, and the first shuts down
  // (SIGTERM): its connections are closed with 4200, after which pusher-js reconnects at once
  // and subscribes its channels again.
  proxy.target = second.port;
  await first.stop();
  await waitInPage(page, 'a second connection', () => window.state.sockets.length >= 2);
  await waitInPage(page, 'both subscriptions again', (n) => window.state.events.filter((e) => e.event === 'pusher:subscription_succeeded').length >= n, 4);
  state = await page.evaluate(() => window.state);
  // pusher:error 4200, then the close frame with 4200; no failed attempt before the new
  // connection (the proxy forwards it to the node that is up).
  assert.equal(state.errors[0]?.data?.code, 4200, JSON.stringify(state));
  assert.deepEqual(state.closes, [4200], JSON.stringify(state));
  assert.deepEqual(state.states, ['connected', 'connecting', 'connected']);
  const secondSocket = state.sockets[1];
  assert.notEqual(secondSocket, firstSocket);
  assert.deepEqual(authorised, [
    { channel: 'private-orders', socketId: firstSocket },
    { channel: 'private-orders', socketId: secondSocket },
  ]);

  await trigger(1, ['orders', 'private-orders'], 'order-shipped', { id: 1 });
  await second.publish('orders', { n: 2 });
  await waitInPage(page, 'the trigger and the publish after the reconnect', () => window.state.events.length >= 10);
  assert.deepEqual((await eventsOf(page, 'orders')).slice(2), [
    { event: 'order-shipped', data: { id: 1 } },
    { event: 'message', data: { n: 2 } },
  ]);
  assert.deepEqual((await eventsOf(page, 'private-orders')).slice(1), [{ event: 'order-shipped', data: { id: 1 } }]);
  await page.evaluate(() => window.pusher.disconnect());
});
