// The subscriber client over WebSocket against the real server: receive, publish, exact resume
// across kill -9 and restart, token refresh, a refused subscribe, a slow-consumer disconnect.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import WebSocket from 'ws';

import { HeraldError } from '../dist/index.js';
import { Herald, collector, nextEvent, withTimeout } from './harness.mjs';

let herald;
before(async () => { herald = await Herald.start(); });
after(async () => { await herald?.stop(); });

test('publish over HTTP reaches the handler; publish over the WebSocket too', async () => {
  const client = herald.client();
  const got = collector();
  const connected = nextEvent(client, 'connected');
  const sub = client.subscribe('news/basic', (m) => got.push(m));
  await withTimeout(client.connect(), 'connect');
  assert.equal((await connected).transport, 'websocket');
  const reply = await withTimeout(sub.ready, 'subscribe');
  assert.deepEqual(reply, { channel: 'news/basic', seq: 0, epoch: '', recovered: false });
  await herald.publisher().publish('news/basic', { n: 1 });
  const published = await client.publish('news/basic', { n: 2 }, { id: 'ws-2' });
  assert.equal(published.id, 'ws-2');
  assert.equal(published.seq, 2);
  await got.waitFor(2);
  assert.deepEqual(got.items.map((m) => [m.seq, m.data.n]), [[1, 1], [2, 2]]);
  assert.deepEqual(sub.position, { epoch: published.epoch, seq: 2 });
  const history = await client.history('news/basic');
  assert.equal(history.messages.length, 2);
  client.close();
});

test('resume across kill -9 and restart: messages published while down arrive once, in order', async () => {
  // The token callback is held while the server is away, so the client cannot come back before
  // the messages of the outage are published.
  let gate = null;
  const client = herald.client({ token: async () => { if (gate) await gate.promise; return herald.token(); } });
  const got = collector();
  const unrecovered = [];
  client.on('unrecovered', (e) => unrecovered.push(e));
  const sub = client.subscribe('resume/a', (m) => got.push(m.data.n));
  await withTimeout(client.connect(), 'connect');
  await withTimeout(sub.ready, 'subscribe'); // a plain subscribe delivers what comes after its reply
  const publisher = herald.publisher();
  for (let n = 1; n <= 3; n++) await publisher.publish('resume/a', { n });
  await got.waitFor(3);

  gate = Promise.withResolvers ? Promise.withResolvers() : (() => { let resolve; const promise = new Promise((r) => { resolve = r; }); return { promise, resolve }; })();
  const disconnected = nextEvent(client, 'disconnected');
  await herald.kill9();
  const gone = await disconnected;
  assert.equal(gone.code, 'connection_lost');
  assert.equal(gone.willReconnect, true);
  await herald.startAgain();
  for (let n = 4; n <= 8; n++) await herald.publisher().publish('resume/a', { n });
  const back = nextEvent(client, 'connected');
  gate.resolve();
  gate = null;
  await back;
  for (let n = 9; n <= 10; n++) await herald.publisher().publish('resume/a', { n });
  await got.waitFor(10);
  assert.deepEqual(got.items, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  assert.deepEqual(unrecovered, []);
  client.close();
});

test('token expiry: the server closes with token_expired, the callback gives a fresh token, the client goes on', async () => {
  let calls = 0;
  const client = herald.client({
    refreshBeforeExpiryMs: 0, // no refresh ahead of time: let the server expire the token
    token: () => {
      calls += 1;
      // The first token expires in 2 s; later ones in an hour.
      const exp = Math.floor(Date.now() / 1000) + (calls === 1 ? 2 : 3600);
      return herald.token({ exp });
    },
  });
  const got = collector();
  const sub = client.subscribe('refresh/a', (m) => got.push(m.data.n));
  await withTimeout(client.connect(), 'connect');
  await sub.ready;
  await herald.publisher().publish('refresh/a', { n: 1 });
  await got.waitFor(1);
  const expired = await nextEvent(client, 'disconnected');
  assert.equal(expired.code, 'token_expired');
  assert.equal(expired.closeCode, 4001);
  await nextEvent(client, 'connected');
  assert.ok(calls >= 2, `token callback called ${calls} times`);
  await herald.publisher().publish('refresh/a', { n: 2 });
  await got.waitFor(2);
  assert.deepEqual(got.items, [1, 2]);
  client.close();
});

test('token refresh ahead of expiry: a connect with the new token, no disconnect', async () => {
  const firstExp = Math.floor(Date.now() / 1000) + 3;
  let calls = 0;
  const client = herald.client({
    refreshBeforeExpiryMs: 2500,
    token: () => {
      calls += 1;
      return herald.token({ exp: calls === 1 ? firstExp : Math.floor(Date.now() / 1000) + 3600 });
    },
  });
  const disconnects = [];
  client.on('disconnected', (e) => disconnects.push(e));
  const got = collector();
  const refreshed = nextEvent(client, 'token_refreshed');
  const sub = client.subscribe('refresh/ahead', (m) => got.push(m.data.n));
  await withTimeout(client.connect(), 'connect');
  await sub.ready;
  const { expires } = await refreshed;
  assert.ok(expires > firstExp);
  assert.equal(calls, 2);
  // Past the first token's expiry (a clock condition, bounded): the connection is still the same.
  await withTimeout((async () => { while (Date.now() < firstExp * 1000 + 300) await new Promise((r) => setTimeout(r, 100)); })(), 'the first token to expire');
  await herald.publisher().publish('refresh/ahead', { n: 1 });
  await got.waitFor(1);
  assert.deepEqual(disconnects, []);
  client.close();
});

test('a refused subscribe reaches the caller as a typed error with the server code', async () => {
  const client = herald.client({ token: () => herald.token({ channels: ['allowed/*'] }) });
  const errors = [];
  client.on('error', (e) => errors.push(e));
  const ok = client.subscribe('allowed/x', () => {});
  const refused = client.subscribe('secret/x', () => {});
  await withTimeout(client.connect(), 'connect');
  await ok.ready;
  await assert.rejects(refused.ready, (e) => e instanceof HeraldError && e.code === 'forbidden' && e.channel === 'secret/x' && e.message.includes('secret/x'));
  assert.ok(errors.some((e) => e.code === 'forbidden'));
  const duplicate = client.subscribe('allowed/x', () => {});
  await assert.rejects(duplicate.ready, (e) => e.code === 'already_subscribed');
  // Publishing without `publish` permission is refused too.
  const denied = herald.client({ token: () => herald.token({ publish: [] }) });
  await denied.connect();
  await assert.rejects(denied.publish('allowed/x', 1), (e) => e instanceof HeraldError && e.code === 'forbidden');
  denied.close();
  client.close();
});

test('a bad static token stops the client with a typed error', async () => {
  const client = herald.client({ token: 'not.a.jwt' });
  const error = nextEvent(client, 'error');
  const stopped = nextEvent(client, 'disconnected');
  client.connect().catch(() => {});
  assert.equal((await error).code, 'unauthorized');
  assert.equal((await stopped).willReconnect, false);
});

test('a slow consumer is disconnected with code slow_consumer, and resumes without loss', async () => {
  const slow = await Herald.start({ HERALD_OUTBOX_BYTES: '4096' });
  try {
    const sockets = [];
    class RecordingWebSocket extends WebSocket {
      constructor(...args) { super(...args); sockets.push(this); }
    }
    const client = slow.client({ WebSocket: RecordingWebSocket });
    const got = collector();
    const sub = client.subscribe('slow/a', (m) => got.push(m.data.n));
    await withTimeout(client.connect(), 'connect');
    await sub.ready;
    const disconnected = nextEvent(client, 'disconnected');
    // Stop reading the socket: the server's queue fills up behind the kernel buffers.
    sockets.at(-1).pause();
    const publisher = slow.publisher();
    const pad = 'x'.repeat(60_000);
    const total = 120;
    for (let n = 1; n <= total; n++) await publisher.publish('slow/a', { n, pad });
    sockets.at(-1).resume();
    const event = await disconnected;
    assert.equal(event.code, 'slow_consumer');
    assert.equal(event.closeCode, 4008);
    await got.waitFor(total, 'every message after the reconnect');
    assert.deepEqual(got.items, Array.from({ length: total }, (_, i) => i + 1));
    client.close();
  } finally {
    await slow.stop();
  }
});
