// An app's token keys through the publisher against the real server: public keys set and read
// back, an ES256 token signed here (node:crypto) accepted by a long-poll, a secret rotation, and
// the error paths (a key that is not a PEM public key, the default app's secret), and those
// actions read back from the audit log.

import assert from 'node:assert/strict';
import { createSign, generateKeyPairSync } from 'node:crypto';
import { after, before, test } from 'node:test';

import { HeraldError } from '../dist/index.js';
import { Herald } from './harness.mjs';

let herald;
before(async () => { herald = await Herald.start(); });
after(async () => { await herald?.stop(); });

async function fails(promise, code, status) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof HeraldError, `not a HeraldError: ${e}`);
    assert.equal(e.code, code, e.message);
    assert.equal(e.status, status);
    return true;
  });
}

/** An ES256 JWT, as an app's backend signs one. */
function es256(privateKey, kid, claims) {
  const part = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const input = `${part({ alg: 'ES256', typ: 'JWT', kid })}.${part(claims)}`;
  const signature = createSign('SHA256').update(input).sign({ key: privateKey, dsaEncoding: 'ieee-p1363' });
  return `${input}.${signature.toString('base64url')}`;
}

test('token keys: an ES256 key verifies tokens signed by the backend; rotation answers a new secret', async () => {
  const admin = herald.publisher({ apiKey: undefined });
  await admin.createApp({ id: 'sdk-token-keys' });
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const pem = publicKey.export({ type: 'spki', format: 'pem' });
  const set = await admin.setTokenKeys('sdk-token-keys', { keys: [{ kid: 'k1', alg: 'ES256', pem }] });
  assert.equal(set.hs256, true);
  assert.equal(set.keys[0].kid, 'k1');
  assert.deepEqual((await admin.getTokenKeys('sdk-token-keys')).keys, set.keys);

  const now = Math.floor(Date.now() / 1000);
  const token = es256(privateKey, 'k1', { sub: 'a', aud: 'sdk-token-keys', channels: ['news'], exp: now + 60 });
  const answer = await admin.poll(token, { channel: 'news', timeout: 0 });
  assert.ok(Array.isArray(answer.messages));
  const stranger = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  await fails(admin.poll(es256(stranger, 'k1', { aud: 'sdk-token-keys', channels: ['news'] }), { channel: 'news', timeout: 0 }), 'unauthorized', 401);

  const rotated = await admin.rotateTokenSecret('sdk-token-keys', { overlap: 0 });
  assert.match(rotated.token_secret, /^hs_/);
  assert.equal(rotated.previous_valid_until, null);
  await fails(admin.setTokenKeys('sdk-token-keys', { keys: [{ kid: 'k2', alg: 'ES256', pem: 'junk' }] }), 'bad_request', 400);
  await fails(admin.rotateTokenSecret('default'), 'bad_request', 400);
  await fails(admin.getTokenKeys('no-such-app'), 'not_found', 404);

  // Each of those admin actions is in the audit log, newest first, and never with a secret.
  const audit = await admin.listAuditEntries({ app: 'sdk-token-keys', limit: 10 });
  assert.deepEqual(
    audit.entries.map((e) => `${e.action} ${e.result}`),
    ['token_keys.set bad_request', 'token_secret.rotate ok', 'token_keys.set ok', 'app.create ok'],
  );
  assert.ok(!JSON.stringify(audit).includes(rotated.token_secret));
  await fails(admin.listAuditEntries({ limit: 0 }), 'bad_request', 400);
});
