// Reconnect delays: full jitter under a cap that doubles from `initialMs` to `maxMs`.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Backoff } from '../dist/index.js';

test('the cap doubles up to maxMs, the delay is uniform below it, reset starts again', () => {
  const top = new Backoff({ initialMs: 100, maxMs: 1000 }, () => 0.999999);
  assert.deepEqual([1, 2, 3, 4, 5, 6].map(() => top.next()), [99, 199, 399, 799, 999, 999]);
  top.reset();
  assert.equal(top.next(), 99);
  const bottom = new Backoff({ initialMs: 100, maxMs: 1000 }, () => 0);
  assert.deepEqual([1, 2, 3].map(() => bottom.next()), [0, 0, 0]);
  const defaults = new Backoff();
  for (let i = 0; i < 50; i++) {
    const d = defaults.next();
    assert.ok(d >= 0 && d < 30_000, String(d));
  }
});
