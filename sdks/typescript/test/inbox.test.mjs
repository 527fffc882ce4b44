// The device inbox against the real server: pushes reach the inbox handler over WebSocket and
// SSE; with automatic acks a new connection gets nothing again, with manual acks only what was
// not acknowledged comes again; a reconnect of the same client never repeats a push.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { HeraldError } from '../dist/index.js';
import { Herald, collector, nextEvent, withTimeout } from './harness.mjs';

let herald;
let publisher;
before(async () => {
  herald = await Herald.start();
  publisher = herald.publisher();
});
after(async () => { await herald?.stop(); });

async function device(id) {
  await publisher.registerDevice({ id, platform: 'herald' });
  const minted = await publisher.mintToken({ sub: id, device: id, ttl: 3600 });
  return minted.token;
}

const push = (id, n) => publisher.push({ target: { device: id }, data: { n } });

/** Opens a client on the inbox, collects pushes, and closes after `n` (or on timeout). */
async function readInbox(token, n, options = {}, clientOptions = {}) {
  const client = herald.client({ token: () => token, ...clientOptions });
  const got = collector();
  client.inbox(async (m) => {
    got.push(m);
    if (options.onMessage) await options.onMessage(m);
  }, { ack: options.ack ?? 'auto' });
  await withTimeout(client.connect(), 'connect');
  return { client, got };
}

for (const transport of ['websocket', 'sse']) {
  test(`${transport}: automatic ack after the handler; a new connection gets nothing again`, async () => {
    const id = `auto-${transport}`;
    const token = await device(id);
    for (let n = 1; n <= 3; n++) await push(id, n);
    const { client, got } = await readInbox(token, 3, {}, { transport });
    await got.waitFor(3);
    assert.deepEqual(got.items.map((m) => [m.channel, m.data.data.n]), [['$device', 1], ['$device', 2], ['$device', 3]]);
    // Acks are sent after each handler; a live push is delivered and acked too.
    await push(id, 4);
    await got.waitFor(4);
    await withTimeout(waitForAckedSeq(token, 4), 'the automatic acks to land');
    client.close();

    await push(id, 5);
    const again = await readInbox(token, 1, {}, { transport });
    await again.got.waitFor(1);
    assert.deepEqual(again.got.items.map((m) => m.data.data.n), [5]);
    again.client.close();
  });

  test(`${transport}: manual ack; unacknowledged pushes come again on a new connection`, async () => {
    const id = `manual-${transport}`;
    const token = await device(id);
    for (let n = 1; n <= 3; n++) await push(id, n);
    const first = await readInbox(token, 3, { ack: 'manual', onMessage: (m) => (m.data.data.n === 1 ? m.ack() : undefined) }, { transport });
    await first.got.waitFor(3);
    await withTimeout(waitForAckedSeq(token, 1), 'the manual ack to land');
    first.client.close();
    const second = await readInbox(token, 2, { ack: 'manual' }, { transport });
    await second.got.waitFor(2);
    assert.deepEqual(second.got.items.map((m) => m.data.data.n), [2, 3]);
    await second.got.items[1].ack();
    second.client.close();
    await push(id, 4);
    const third = await readInbox(token, 1, { ack: 'manual' }, { transport });
    await third.got.waitFor(1);
    assert.deepEqual(third.got.items.map((m) => m.data.data.n), [4]);
    third.client.close();
  });
}

test('the same client across a server restart: unacknowledged pushes are not handed over twice', async () => {
  const id = 'restart-dev';
  const token = await device(id);
  await push(id, 1);
  const { client, got } = await readInbox(token, 1, { ack: 'manual' });
  await got.waitFor(1);
  const disconnected = nextEvent(client, 'disconnected');
  await herald.kill9();
  await disconnected;
  await herald.startAgain();
  publisher = herald.publisher();
  await push(id, 2);
  await got.waitFor(2);
  assert.deepEqual(got.items.map((m) => m.data.data.n), [1, 2]);
  client.close();
});

test('an ack error reaches the caller typed: ack on a token without a device', async () => {
  const client = herald.client();
  await client.connect();
  await assert.rejects(client.ack('$device', 1), (e) => e instanceof HeraldError && e.code === 'forbidden');
  client.close();
});

/** Polls the device's acknowledged cursor (an ack of seq 0 changes nothing and answers it). */
async function waitForAckedSeq(token, seq) {
  for (;;) {
    const answer = await publisher.ack(token, { channel: '$device', seq: 0 });
    if (answer.device.seq >= seq) return answer;
    await new Promise((r) => setTimeout(r, 50));
  }
}
