// The SSE transport: forced by the option, and chosen by itself when the WebSocket cannot be
// opened (a proxy that answers HTTP but refuses the upgrade). Resume, refusals and token expiry.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { HeraldError } from '../dist/index.js';
import { Herald, collector, nextEvent, noUpgradeProxy, withTimeout } from './harness.mjs';

let herald;
before(async () => { herald = await Herald.start(); });
after(async () => { await herald?.stop(); });

test('forced SSE: receive on two channels, subscribe later, unsubscribe; publish is not supported', async () => {
  const client = herald.client({ transport: 'sse' });
  const got = collector();
  const a = client.subscribe('sse/a', (m) => got.push(`${m.channel}:${m.data}`));
  const connected = nextEvent(client, 'connected');
  await withTimeout(client.connect(), 'connect');
  assert.equal((await connected).transport, 'sse');
  await a.ready;
  const publisher = herald.publisher();
  await publisher.publish('sse/a', 1);
  await got.waitFor(1);
  const b = client.subscribe('sse/b', (m) => got.push(`${m.channel}:${m.data}`));
  await withTimeout(b.ready, 'second subscribe');
  await publisher.publish('sse/b', 2);
  await publisher.publish('sse/a', 3);
  await got.waitFor(3);
  await client.unsubscribe('sse/b');
  await publisher.publish('sse/b', 4);
  await publisher.publish('sse/a', 5);
  await got.waitFor(4);
  assert.deepEqual(got.items.sort(), ['sse/a:1', 'sse/a:3', 'sse/a:5', 'sse/b:2']);
  assert.equal(client.transport, 'sse');
  await assert.rejects(client.publish('sse/a', 6), (e) => e instanceof HeraldError && e.code === 'not_supported');
  client.close();
});

test('forced SSE: a refused channel is a typed error with code and status; the others go on', async () => {
  const client = herald.client({ transport: 'sse', token: () => herald.token({ channels: ['open/*'] }) });
  const got = collector();
  const ok = client.subscribe('open/1', (m) => got.push(m.data));
  const refused1 = client.subscribe('closed/1', () => {});
  const refused2 = client.subscribe('closed/2', () => {});
  client.connect().catch(() => {});
  for (const r of [refused1, refused2]) {
    await assert.rejects(withTimeout(r.ready, 'refusal'), (e) => e instanceof HeraldError && e.code === 'forbidden' && e.status === 403);
  }
  await withTimeout(ok.ready, 'the allowed channel');
  await herald.publisher().publish('open/1', 'yes');
  await got.waitFor(1);
  client.close();
});

test('SSE resumes exactly across kill -9 and restart', async () => {
  let gate = null;
  const client = herald.client({ transport: 'sse', token: async () => { if (gate) await gate.promise; return herald.token(); } });
  const got = collector();
  const sub = client.subscribe('sse/resume', (m) => got.push(m.data));
  client.subscribe('sse/resume-quiet', (m) => got.push(`quiet ${m.data}`));
  await withTimeout(client.connect(), 'connect');
  await withTimeout(sub.ready, 'subscribe');
  for (let n = 1; n <= 2; n++) await herald.publisher().publish('sse/resume', n);
  await got.waitFor(2);
  let release;
  gate = { promise: new Promise((r) => { release = r; }) };
  const disconnected = nextEvent(client, 'disconnected');
  await herald.kill9();
  assert.equal((await disconnected).code, 'connection_lost');
  await herald.startAgain();
  for (let n = 3; n <= 5; n++) await herald.publisher().publish('sse/resume', n);
  const back = nextEvent(client, 'connected');
  gate = null;
  release();
  await back;
  await herald.publisher().publish('sse/resume', 6);
  await got.waitFor(6);
  assert.deepEqual(got.items, [1, 2, 3, 4, 5, 6]);
  client.close();
});

test('SSE token expiry: disconnect token_expired, the callback gives a new token, the stream resumes', async () => {
  let calls = 0;
  const client = herald.client({
    transport: 'sse',
    token: () => {
      calls += 1;
      return herald.token({ exp: Math.floor(Date.now() / 1000) + (calls === 1 ? 2 : 3600) });
    },
  });
  const got = collector();
  const sub = client.subscribe('sse/exp', (m) => got.push(m.data));
  await withTimeout(client.connect(), 'connect');
  await withTimeout(sub.ready, 'subscribe');
  await herald.publisher().publish('sse/exp', 1);
  await got.waitFor(1);
  const expired = await nextEvent(client, 'disconnected');
  assert.equal(expired.code, 'token_expired');
  await nextEvent(client, 'connected');
  await herald.publisher().publish('sse/exp', 2);
  await got.waitFor(2);
  assert.deepEqual(got.items, [1, 2]);
  assert.ok(calls >= 2);
  client.close();
});

test('auto: when the WebSocket upgrade is refused the client falls back to SSE', async () => {
  const proxy = await noUpgradeProxy(herald.url);
  try {
    const client = herald.client({ url: proxy.url });
    const got = collector();
    const sub = client.subscribe('fallback/a', (m) => got.push(m.data));
    const connected = nextEvent(client, 'connected');
    await withTimeout(client.connect(), 'connect');
    await withTimeout(sub.ready, 'subscribe');
    assert.equal((await connected).transport, 'sse');
    await herald.publisher().publish('fallback/a', 'via sse');
    await got.waitFor(1);
    assert.deepEqual(got.items, ['via sse']);
    client.close();
  } finally {
    await proxy.close();
  }
});
