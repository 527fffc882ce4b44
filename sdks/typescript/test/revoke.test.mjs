// Revocation against the real server: the publisher's `revoke` (each kind, with its error paths)
// and a subscriber whose token is revoked by its `jti`: it gets a `disconnected` event with code
// `revoked`, stops, and never connects again with that token (WebSocket and SSE).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import WebSocket from 'ws';

import { HeraldError, HeraldPublisher } from '../dist/index.js';
import { Herald, nextEvent, withTimeout } from './harness.mjs';

let herald;
before(async () => { herald = await Herald.start(); });
after(async () => { await herald?.stop(); });

/** Asserts that `promise` rejects with a HeraldError of `code` and `status`. */
async function fails(promise, code, status) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof HeraldError, `not a HeraldError: ${e}`);
    assert.equal(e.code, code, e.message);
    assert.equal(e.status, status);
    return true;
  });
}

test('publisher revoke: each kind answers closed; a bad body, an unknown app and a bad key are typed errors', async () => {
  const pub = herald.publisher();
  assert.deepEqual(await pub.revoke('default', { all: true }), { closed: 0 });
  assert.deepEqual(await pub.revoke('default', { sub: 'nobody' }), { closed: 0 });
  assert.deepEqual(await pub.revoke('default', { device: 'no-device' }), { closed: 0 });
  assert.deepEqual(await pub.revoke('default', { jti: 'never-used', expires: Math.floor(Date.now() / 1000) + 60 }), { closed: 0 });
  // Only the admin key here: the publisher key is also allowed.
  const admin = herald.publisher({ apiKey: undefined });
  assert.deepEqual(await admin.revoke('default', { jti: 'never-used-2' }), { closed: 0 });

  await fails(pub.revoke('default', { sub: 'a', device: 'b' }), 'bad_request', 400);
  await fails(pub.revoke('default', {}), 'bad_request', 400);
  await fails(pub.revoke('no-such-app', { all: true }), 'not_found', 404);
  const badKey = new HeraldPublisher({ url: herald.url, apiKey: 'hk_wrong_key_wrong_key' });
  await fails(badKey.revoke('default', { all: true }), 'unauthorized', 401);
});

test('a token minted with a jti (server and local) can be revoked; issued_before refuses older tokens', async () => {
  const pub = herald.publisher();
  const minted = await pub.mintToken({ sub: 'jti-user', channels: ['**'], jti: 'server-jti-1', ttl: 60 });
  const [, payload] = minted.token.split('.');
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  assert.equal(claims.jti, 'server-jti-1');
  assert.equal(typeof claims.iat, 'number');
  await pub.revoke('default', { jti: 'server-jti-1', expires: minted.expires });
  await fails(pub.poll(minted.token, { channel: 'x' }), 'unauthorized', 401);

  // `issued_before` is stored for the whole app (and refuses tokens without `iat`): its own server.
  // A local token issued an hour ago is refused after `issued_before` = now; one issued now is not.
  const other = await Herald.start();
  try {
    const now = Math.floor(Date.now() / 1000);
    const old = await other.token({ iat: now - 3600, jti: 'old-local' });
    const fresh = await other.token({ iat: now, jti: 'fresh-local' });
    await other.publisher().revoke('default', { issued_before: now });
    await fails(other.publisher().poll(old, { channel: 'x', timeout: 0 }), 'unauthorized', 401);
    const answer = await other.publisher().poll(fresh, { channel: 'x', timeout: 0 });
    assert.ok(Array.isArray(answer.messages));
  } finally {
    await other.stop();
  }
});

for (const transport of ['websocket', 'sse']) {
  test(`${transport}: a revoked jti ends the connection with code revoked; the client stops and does not reconnect`, async () => {
    const jti = `revoke-me-${transport}`;
    const sockets = [];
    class RecordingWebSocket extends WebSocket {
      constructor(...args) { super(...args); sockets.push(this); }
    }
    let tokenCalls = 0;
    // A callback returning a token with the same jti: the client must not loop on it.
    const client = herald.client({
      transport,
      WebSocket: RecordingWebSocket,
      token: () => { tokenCalls += 1; return herald.token({ jti, channels: ['revoke/**'] }); },
    });
    const events = [];
    client.on('disconnected', (e) => events.push(e));
    const sub = client.subscribe(`revoke/${transport}`, () => {});
    await withTimeout(client.connect(), 'connect');
    await withTimeout(sub.ready, 'subscribe');

    const disconnected = nextEvent(client, 'disconnected');
    const answer = await herald.publisher().revoke('default', { jti, expires: Math.floor(Date.now() / 1000) + 600 });
    assert.equal(answer.closed, 1);
    const event = await disconnected;
    assert.equal(event.code, 'revoked');
    assert.equal(event.willReconnect, false);
    assert.ok(event.reason.length > 0);
    if (transport === 'websocket') assert.equal(event.closeCode, 4003);

    // The client is closed: connect() refuses, and the server holds no connection of the app
    // (read after the revocation, so a reconnect would have had to race a full round trip).
    await assert.rejects(client.connect(), (e) => e instanceof HeraldError && e.code === 'not_connected');
    const overview = await herald.publisher().overview();
    assert.equal(overview.apps.find((a) => a.app === 'default').connections, 0);
    assert.equal(tokenCalls, 1);
    assert.equal(sockets.length, transport === 'websocket' ? 1 : 0);
    assert.deepEqual(events.map((e) => e.code), ['revoked']);
  });
}

test('long-poll: a waiting poll whose sub is revoked answers at once with a revoked disconnect', async () => {
  const token = await herald.token({ sub: 'poll-revoked' });
  const pub = herald.publisher();
  const answer = pub.poll(token, { channel: 'revoke/poll', timeout: 5 }); // seconds
  // Revoke until the server has the waiting poll (it answers how many connections it closed).
  await withTimeout((async () => {
    while ((await pub.revoke('default', { sub: 'poll-revoked' })).closed === 0) { /* the poll is not registered yet */ }
  })(), 'the poll to be revoked');
  const got = await withTimeout(answer, 'the poll answer');
  assert.equal(got.disconnect?.code, 'revoked');
  assert.ok(got.disconnect.message.length > 0);
});

test('a disconnect-only revocation (sub) also stops the client; a new client may connect again', async () => {
  const client = herald.client({ token: () => herald.token({ sub: 'revoked-sub' }) });
  await withTimeout(client.connect(), 'connect');
  const disconnected = nextEvent(client, 'disconnected');
  assert.equal((await herald.publisher().revoke('default', { sub: 'revoked-sub' })).closed, 1);
  const event = await disconnected;
  assert.deepEqual([event.code, event.willReconnect], ['revoked', false]);
  // Nothing was stored: the same sub connects again with a new client.
  const again = herald.client({ token: () => herald.token({ sub: 'revoked-sub' }) });
  await withTimeout(again.connect(), 'connect again');
  again.close();
});
