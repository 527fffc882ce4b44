// `ready()` (GET /readyz) against the real server: a node whose store is full (a file-size limit)
// rejects with a NotReadyError naming the failing check while `health()` stays fine; a 503 that is
// not a readiness body (a proxy's page, a Herald error body) stays the error it describes.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { HeraldError, HeraldPublisher, NotReadyError } from '../dist/index.js';
import { Herald, withTimeout } from './harness.mjs';

test('ready() names a full store (insufficient_storage) while health() stays ok', async () => {
  // Under a 3 MiB file-size limit, publishes fill the store until it refuses them.
  const herald = await Herald.start({ HERALD_HISTORY_SIZE: '100000' }, '', ['prlimit', `--fsize=${3 << 20}:`]);
  try {
    const pub = herald.publisher();
    const blob = 'x'.repeat(16 * 1024);
    let notReady;
    // A background write (the usage counters) may find room again after a checkpoint emptied the
    // write-ahead log and clear the fault: fill again then.
    for (let round = 0; round < 20 && notReady === undefined; round++) {
      let refused;
      for (let i = 0; i < 2000 && refused === undefined; i++) {
        try {
          await withTimeout(pub.publish('fill', { i, blob }), 'publish');
        } catch (e) {
          refused = e;
        }
      }
      assert.ok(refused, '2000 publishes of 16 KiB fitted under 3 MiB');
      assert.ok(refused instanceof HeraldError, String(refused));
      assert.deepEqual([refused.code, refused.status], ['insufficient_storage', 507], refused.message);
      try {
        await withTimeout(pub.ready(), 'ready');
      } catch (e) {
        notReady = e;
      }
    }
    assert.ok(notReady !== undefined, 'ready() never reported the full store');
    assert.ok(notReady instanceof NotReadyError, `not a NotReadyError: ${notReady}`);
    assert.ok(notReady instanceof HeraldError);
    assert.equal(notReady.name, 'NotReadyError');
    assert.deepEqual([notReady.code, notReady.status], ['not_ready', 503]);
    assert.match(notReady.message, /^store: insufficient_storage: /);
    assert.match(notReady.message, /File too large/);
    const { readiness } = notReady;
    assert.equal(notReady.message, `store: insufficient_storage: ${readiness.checks.store.error?.message}`);
    assert.equal(readiness.status, 'not_ready');
    assert.equal(readiness.checks.store.status, 'failing');
    assert.equal(readiness.checks.store.error?.code, 'insufficient_storage');
    assert.deepEqual([readiness.checks.bus.status, readiness.checks.bus.link, readiness.checks.draining], ['ok', 'local', false]);
    assert.deepEqual(notReady.failing.map((f) => [f.check, f.code]), [['store', 'insufficient_storage']]);
    assert.equal(notReady.failing[0].message, readiness.checks.store.error?.message);
    assert.equal((await withTimeout(pub.health(), 'health')).status, 'ok');
  } finally {
    await herald.stop();
  }
});

/** A publisher whose every request is answered 503 with `body`. */
function answering503(body, contentType) {
  const fetch = async () => new Response(body, { status: 503, headers: { 'content-type': contentType } });
  return new HeraldPublisher({ url: 'http://127.0.0.1:1', fetch });
}

test('ready(): a 503 without a readiness body stays the error it describes', async () => {
  await assert.rejects(answering503('<html><body>503 Service Unavailable</body></html>', 'text/html').ready(), (e) => {
    assert.ok(e instanceof HeraldError && !(e instanceof NotReadyError), String(e));
    assert.deepEqual([e.code, e.status], ['protocol', 503]);
    assert.match(e.message, /Service Unavailable/);
    return true;
  });
  const shuttingDown = JSON.stringify({ error: { code: 'shutting_down', message: 'the server is shutting down' } });
  await assert.rejects(answering503(shuttingDown, 'application/json').ready(), (e) => {
    assert.ok(e instanceof HeraldError && !(e instanceof NotReadyError), String(e));
    assert.deepEqual([e.code, e.status, e.message], ['shutting_down', 503, 'the server is shutting down']);
    return true;
  });
});

test('ready(): every failing check is named, draining as shutting_down', async () => {
  const body = {
    status: 'not_ready',
    checks: {
      store: { status: 'failing', error: { code: 'store_unavailable', message: 'connection refused' } },
      bus: { status: 'failing', link: 'disconnected', error: { code: 'bus_unavailable', message: 'redis is down' } },
      draining: true,
    },
  };
  await assert.rejects(answering503(JSON.stringify(body), 'application/json').ready(), (e) => {
    assert.ok(e instanceof NotReadyError, String(e));
    assert.equal(e.message,
      'store: store_unavailable: connection refused; bus: bus_unavailable: redis is down; draining: shutting_down: the server is shutting down');
    assert.deepEqual(e.failing.map((f) => f.check), ['store', 'bus', 'draining']);
    assert.deepEqual(e.readiness, body);
    return true;
  });
});
