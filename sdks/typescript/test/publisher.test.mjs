// The publisher client against the real server: every route of docs/openapi.yaml at least once,
// with its error path (a bad key, something that does not exist, a refused body), each error a
// HeraldError with the server's code, message and status.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';

import { HeraldError, HeraldPublisher } from '../dist/index.js';
import { Herald } from './harness.mjs';

let herald;
let pub;
let badKey;
before(async () => {
  herald = await Herald.start();
  pub = herald.publisher();
  badKey = new HeraldPublisher({ url: herald.url, apiKey: 'hk_wrong_key_wrong_key', adminKey: 'adm_wrong_key_wrong_key_00' });
});
after(async () => { await herald?.stop(); });

/** Asserts that `promise` rejects with a HeraldError of `code` and `status`. */
async function fails(promise, code, status) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof HeraldError, `not a HeraldError: ${e}`);
    assert.equal(e.code, code, e.message);
    assert.equal(e.status, status);
    assert.ok(e.message.length > 0);
    return true;
  });
}

test('channels: publish, batch, history, channel state, channel list, poll', async () => {
  const first = await pub.publish('pub/a', { n: 1 }, { id: 'key-1' });
  assert.equal(first.seq, 1);
  const again = await pub.publish('pub/a', { n: 1 }, { id: 'key-1' });
  assert.equal(again.duplicate, true);
  const batch = await pub.publishBatch({ messages: [{ channel: 'pub/a', data: 2 }, { channel: 'pub/b', data: 3 }] });
  assert.equal(batch.results.length, 2);
  const history = await pub.history('pub/a', { since: 0 });
  assert.deepEqual(history.messages.map((m) => m.seq), [1, 2]);
  const state = await pub.getChannel('pub/a');
  assert.equal(state.seq, 2);
  const list = await pub.listChannels({ limit: 100 });
  assert.ok(list.channels.some((c) => c.channel === 'pub/b'));
  const token = await herald.token();
  const polled = await pub.poll(token, { channel: ['pub/a'], since: '0', timeout: 0 });
  assert.equal(polled.messages.length, 2);

  await fails(badKey.publish('pub/a', 1), 'unauthorized', 401);
  await fails(pub.publish('bad//name', 1), 'channel_invalid', 400);
  await fails(badKey.history('pub/a'), 'unauthorized', 401);
  await fails(pub.history('pub/a', { limit: 0 }), 'bad_request', 400);
  await fails(badKey.getChannel('pub/a'), 'unauthorized', 401);
  await fails(badKey.listChannels(), 'unauthorized', 401);
  await fails(pub.publishBatch({ messages: [{ channel: '/x', data: 1 }] }), 'channel_invalid', 400);
  await fails(pub.poll('not.a.jwt', { channel: 'pub/a', timeout: 0 }), 'unauthorized', 401);
});

test('presence: a presence channel\'s members, and a refusal for any other channel', async () => {
  const rooms = await Herald.start({}, '[[namespaces]]\nprefix = "rooms/"\npresence = true\n');
  try {
    const p = rooms.publisher();
    const token = await rooms.token({ sub: 'ada', user_info: { name: 'Ada' } });
    // A poll's user stays a member for a while after the poll answered.
    const polled = await p.poll(token, { channel: 'rooms/1', presence: 'true', timeout: 0 });
    assert.equal(polled.presence[0].event, 'members');
    const members = await p.presence('rooms/1');
    assert.deepEqual(members, { channel: 'rooms/1', members: [{ user: 'ada', data: { name: 'Ada' } }], count: 1 });
    await fails(p.presence('news'), 'not_found', 404);
    await fails(new HeraldPublisher({ url: rooms.url, apiKey: 'hk_wrong_key_wrong_key' }).presence('rooms/1'), 'unauthorized', 401);
  } finally {
    await rooms.stop();
  }
});

test('server: health, metrics, openapi', async () => {
  assert.equal(typeof (await pub.health()), 'object');
  assert.equal((await pub.ready()).status, 'ready');
  assert.match(await pub.metrics(), /herald_/);
  assert.match(await pub.openapi(), /^openapi: /m);
  const overview = await pub.overview();
  assert.ok(Array.isArray(overview.apps) && overview.apps.length >= 1, JSON.stringify(overview));
  await fails(new HeraldPublisher({ url: herald.url.replace(/:\d+$/, ':1') }).health(), 'network', undefined);
});

test('apps and keys: create, get, update, stats, keys, delete; admin errors', async () => {
  const created = await pub.createApp({ id: 'shop', name: 'Shop' });
  assert.equal(created.app.id, 'shop');
  const shop = new HeraldPublisher({ url: herald.url, apiKey: created.key });
  assert.ok((await pub.listApps()).apps.some((a) => a.id === 'shop'));
  assert.equal((await shop.getApp('shop')).id, 'shop');
  const updated = await pub.updateApp('shop', { limits: { max_devices: 1 } });
  assert.equal(updated.limits.max_devices, 1);
  assert.equal((await shop.appStats('shop')).app, 'shop');
  const key = await pub.addKey('shop', { label: 'second' });
  assert.ok((await pub.listKeys('shop')).keys.some((k) => k.id === key.key_id));
  await pub.deleteKey('shop', key.key_id);
  await fails(pub.deleteKey('shop', key.key_id), 'not_found', 404);

  // A limit: the second device of an app limited to one is refused with 429.
  await shop.registerDevice({ id: 'one', platform: 'herald' });
  await fails(shop.registerDevice({ id: 'two', platform: 'herald' }), 'limit_exceeded', 429);

  await fails(pub.createApp({ id: 'shop' }), 'conflict', 409);
  await fails(badKey.listApps(), 'unauthorized', 401);
  await fails(badKey.createApp({ id: 'x' }), 'unauthorized', 401);
  await fails(pub.getApp('nosuchapp'), 'not_found', 404);
  await fails(pub.updateApp('nosuchapp', { limits: {} }), 'not_found', 404);
  await fails(pub.updateApp('shop', { name: 'x' }), 'bad_request', 400);
  await fails(pub.appStats('nosuchapp'), 'not_found', 404);
  await fails(pub.listKeys('nosuchapp'), 'not_found', 404);
  await fails(pub.addKey('nosuchapp'), 'not_found', 404);
  await fails(pub.deleteApp('default'), 'forbidden', 403);
  await pub.deleteApp('shop');
  await fails(pub.deleteApp('shop'), 'not_found', 404);
  await fails(shop.getApp('shop'), 'unauthorized', 401);
});

test('providers: set (Web Push, generated VAPID key), get, list, VAPID public key, delete', async () => {
  const set = await pub.setProvider('default', 'webpush', { subject: 'mailto:ops@example.com', generate: true });
  assert.equal(set.provider, 'webpush');
  assert.equal((await pub.getProvider('default', 'webpush')).provider, 'webpush');
  assert.ok((await pub.listProviders('default')).providers.some((p) => p.provider === 'webpush'));
  const vapid = await pub.vapidPublicKey('default');
  assert.equal(typeof vapid.public_key, 'string');
  await pub.deleteProvider('default', 'webpush');
  await fails(pub.getProvider('default', 'webpush'), 'not_found', 404);
  await fails(pub.deleteProvider('default', 'webpush'), 'not_found', 404);
  await fails(pub.vapidPublicKey('default'), 'not_found', 404);
  await fails(pub.setProvider('default', 'apns', {}), 'bad_request', 400);
  await fails(badKey.listProviders('default'), 'unauthorized', 401);
});

test('jobs: stats, dead letters (list, replay and drop of a missing one)', async () => {
  assert.equal(typeof (await pub.jobStats()), 'object');
  assert.ok(Array.isArray((await pub.listDeadLetters({ limit: 10 })).jobs));
  await fails(pub.replayDeadLetter(999999), 'not_found', 404);
  await fails(pub.dropDeadLetter(999999), 'not_found', 404);
  await fails(badKey.jobStats(), 'unauthorized', 401);
  await fails(badKey.listDeadLetters(), 'unauthorized', 401);
});

test('devices, tokens, pushes, receipts and ack', async () => {
  const registered = await pub.registerDevice({ id: 'dev-1', platform: 'herald', user: 'ann', tags: ['a'] });
  assert.equal(registered.id, 'dev-1');
  const batch = await pub.registerDevices({ devices: [{ id: 'dev-2', platform: 'herald', tags: ['a'] }] });
  assert.deepEqual(batch.ids, ['dev-2']);
  assert.equal((await pub.getDevice('dev-1')).user, 'ann');
  const inbox = await pub.deviceInbox('dev-1');
  assert.equal(inbox.device, 'dev-1');
  assert.ok(Array.isArray(inbox.recent));
  assert.deepEqual((await pub.updateDevice('dev-1', { add_tags: ['b'] })).tags.sort(), ['a', 'b']);
  assert.ok((await pub.listDevices({ tag: 'a' })).devices.length >= 2);
  assert.equal((await pub.deactivateDevice('dev-2')).active, false);
  await fails(pub.push({ target: { device: 'dev-2' }, data: 1 }), 'conflict', 409);
  assert.equal((await pub.activateDevice('dev-2')).active, true);

  const minted = await pub.mintToken({ sub: 'dev-1', device: 'dev-1', ttl: 60 });
  const accepted = await pub.push({ target: { device: 'dev-1' }, data: { hi: 1 } }, { idempotencyKey: 'push-1' });
  const receipt = await pub.getReceipt(accepted.id);
  assert.equal(receipt.id, accepted.id);
  const acked = await pub.ack(minted.token, { channel: '$device', seq: 1 });
  assert.equal(acked.device.seq, 1);
  await pub.deleteDevice('dev-2');

  await fails(pub.getDevice('nope'), 'not_found', 404);
  await fails(pub.deviceInbox('nope'), 'not_found', 404);
  await fails(pub.updateDevice('nope', { user: 'x' }), 'not_found', 404);
  await fails(pub.deleteDevice('nope'), 'not_found', 404);
  await fails(pub.activateDevice('nope'), 'not_found', 404);
  await fails(pub.deactivateDevice('nope'), 'not_found', 404);
  await fails(pub.registerDevice({ id: 'bad id!', platform: 'herald' }), 'device_invalid', 400);
  await fails(pub.registerDevices({ devices: [{ id: 'x', platform: 'apns', token: 'zz' }] }), 'device_invalid', 400);
  await fails(badKey.listDevices(), 'unauthorized', 401);
  await fails(pub.mintToken({ device: 'nope', ttl: 60 }), 'not_found', 404);
  await fails(pub.push({ target: { tags: 'a AND' }, data: 1 }), 'tag_expression_invalid', 400);
  await fails(pub.getReceipt('p-nope'), 'not_found', 404);
  await fails(pub.ack(minted.token, { channel: '$device', seq: 99 }), 'bad_request', 400);
  await fails(pub.ack('not.a.jwt', { channel: '$device', seq: 1 }), 'unauthorized', 401);
});

test('Retry-After on a 503 answer is exposed as retryAfter', async () => {
  // A stand-in for an overloaded node (Herald sends this with store_unavailable).
  const server = createServer((req, res) => {
    res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '7' });
    res.end('{"error":{"code":"store_unavailable","message":"the store cannot be reached"}}');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const p = new HeraldPublisher({ url: `http://127.0.0.1:${server.address().port}`, apiKey: 'k' });
    await assert.rejects(p.publish('a', 1), (e) => e instanceof HeraldError && e.code === 'store_unavailable' && e.status === 503 && e.retryAfter === 7 && e.retryable);
  } finally {
    server.close();
  }
});
