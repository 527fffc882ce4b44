// An app's webhook endpoints through the publisher against the real server (which may reach
// loopback: `outbound_allow`): create (the secret answered once), list, get, update, a signed
// test event to a receiver here, secret rotation, dead letters, delete; and the error paths (an
// unknown event type named, an endpoint that does not exist), each a HeraldError.

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';

import { HeraldError } from '../dist/index.js';
import { Herald } from './harness.mjs';

let herald;
let receiver;
let received = [];
before(async () => {
  herald = await Herald.start({}, 'outbound_allow = ["127.0.0.1"]\n');
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise((res) => receiver.listen(0, '127.0.0.1', res));
});
after(async () => {
  await herald?.stop();
  await new Promise((res) => receiver?.close(res));
});

async function fails(promise, code, status) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof HeraldError, `not a HeraldError: ${e}`);
    assert.equal(e.code, code, e.message);
    assert.equal(e.status, status);
    return true;
  });
}

/** Whether `headers` carry a Standard Webhooks signature of `body` by `secret` (`whsec_...`). */
function signedBy(secret, headers, body) {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key)
    .update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`)
    .digest('base64');
  return headers['webhook-signature'].split(' ').includes(`v1,${expected}`);
}

test('webhook endpoints: create, list, get, update, test, rotate, dead letters, delete', async () => {
  const pub = herald.publisher();
  const url = `http://127.0.0.1:${receiver.address().port}/hooks`;
  const created = await pub.createHook('default', { url, events: ['user.online', 'user.offline'] });
  assert.match(created.secret, /^whsec_/);
  const id = created.hook.id;
  assert.equal(created.hook.state, 'ok');
  assert.deepEqual((await pub.listHooks('default')).hooks.map((h) => h.id), [id]);
  const read = await pub.getHook('default', id);
  assert.equal(read.url, url);
  assert.ok(!JSON.stringify(read).includes(created.secret.slice(6)));

  const updated = await pub.updateHook('default', id, { description: 'presence', offline_delay_ms: 0 });
  assert.equal(updated.description, 'presence');
  assert.equal(updated.offline_delay_ms, 0);

  received = [];
  const tested = await pub.testHook('default', id);
  assert.equal(tested.delivered, true, JSON.stringify(tested));
  assert.equal(received.length, 1);
  const [request] = received;
  assert.ok(signedBy(created.secret, request.headers, request.body), JSON.stringify(request.headers));
  assert.equal(JSON.parse(request.body).events[0].type, 'hook.test');

  const rotated = await pub.rotateHookSecret('default', id, { overlap_seconds: 0 });
  assert.match(rotated.secret, /^whsec_/);
  assert.notEqual(rotated.secret, created.secret);
  assert.equal(rotated.previous_valid_until, null);

  assert.deepEqual(await pub.listHookDeadLetters('default', id, { limit: 10 }), { dead: [], next: null });
  await fails(pub.replayHookDeadLetter('default', id, 999999), 'not_found', 404);
  await fails(pub.dropHookDeadLetter('default', id, 999999), 'not_found', 404);

  await pub.deleteHook('default', id);
  await fails(pub.getHook('default', id), 'not_found', 404);
  await fails(pub.deleteHook('default', id), 'not_found', 404);
  await fails(pub.testHook('default', id), 'not_found', 404);
});

test('webhook endpoints: an unknown event type is refused, named, and nothing is stored', async () => {
  const pub = herald.publisher();
  await assert.rejects(pub.createHook('default', { url: 'http://127.0.0.1:9/hooks', events: ['user.vanished'] }), (e) => {
    assert.ok(e instanceof HeraldError, `not a HeraldError: ${e}`);
    assert.equal(e.code, 'bad_request');
    assert.equal(e.status, 400);
    assert.ok(e.message.includes('"user.vanished"'), e.message);
    return true;
  });
  assert.deepEqual((await pub.listHooks('default')).hooks, []);
});
