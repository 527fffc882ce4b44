// The browser's own EventSource reconnect resumes exactly: herald is killed with SIGKILL and
// started again on the same data directory and port while the page stays open; the browser
// reconnects by itself (the server sent `retry: 1000`) with Last-Event-ID, and the page ends with
// every message exactly once, in order.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Herald, launchBrowser, mintToken, openPage, servePage, sleep, waitInPage, WAIT_MS } from './lib/harness.mjs';
import { SSE_PAGE } from './lib/pages.mjs';

let herald;
let site;
let browser;

before(async () => {
  herald = await Herald.start();
  site = await servePage(SSE_PAGE);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await site?.close();
  await herald?.stop();
});

/**
 * The SSE requests the page makes, with the Last-Event-ID each carried (`null` if none). Await
 * `settled(requests)` before reading them.
 */
function recordSseRequests(page) {
  const requests = [];
  page.on('request', (req) => {
    if (!req.url().includes('/v1/sse')) return;
    const entry = { lastEventId: undefined };
    entry.read = req.allHeaders()
      .then((h) => { entry.lastEventId = h['last-event-id'] ?? null; })
      .catch(() => { entry.lastEventId = req.headers()['last-event-id'] ?? null; });
    requests.push(entry);
  });
  return requests;
}

const settled = (requests) => Promise.all(requests.map((r) => r.read));

test('EventSource resumes by itself after herald is killed and restarted', { timeout: 8 * WAIT_MS }, async (t) => {
  const page = await openPage(browser, site.url);
  const requests = recordSseRequests(page);
  const token = mintToken({ sub: 'sse-resume', channels: ['news'] });
  const port = herald.port;
  await page.evaluate((url) => window.startSse(url),
    `${herald.url}/v1/sse?channel=news&token=${encodeURIComponent(token)}`);
  await waitInPage(page, 'first subscribe', () => window.state.subscribed.length === 1);

  const published = [];
  const publish = async (n) => {
    for (let i = 0; i < n; i++) {
      published.push(await herald.publish('news', { n: published.length + 1 }));
    }
  };
  const received = (n) => waitInPage(page, `the page should hold ${n} messages`,
    (k) => window.state.messages.length >= k, n);

  // Live, before any crash.
  await publish(3);
  await received(3);

  // Crash 1: hold the browser's reconnect (whatever it sends while herald is down, and the first
  // attempt after) until herald is back and has new messages the page has not seen, so those can
  // only arrive through the Last-Event-ID resume.
  let release;
  const gate = new Promise((r) => { release = r; });
  let held = 0;
  await page.route(/\/v1\/sse/, async (route) => {
    held += 1;
    await gate;
    await route.continue();
  });
  await herald.kill9();
  await waitInPage(page, 'the browser should notice the dead connection',
    () => window.state.errors.length >= 1);
  await herald.restartSamePort();
  assert.equal(herald.port, port, 'restarted on the same port');
  await publish(2); // 4, 5: published while the browser is reconnecting
  release();
  await waitInPage(page, 'the browser should reconnect by itself', () => window.state.opens >= 2);
  await received(5);
  await page.unroute(/\/v1\/sse/);
  await publish(2); // 6, 7: live on the resumed connection
  await received(7);
  t.diagnostic(`crash 1: ${held} reconnect request(s) held while herald restarted`);

  // Crash 2: no interception at all, the plain browser against a restarting server; publish as
  // soon as herald is back, racing the browser's own retry.
  const opensBefore = await page.evaluate(() => window.state.opens);
  const cursorBeforeCrash2 = await page.evaluate(() => window.state.messages.at(-1).lastEventId);
  const requestsBeforeCrash2 = requests.length;
  await herald.kill9();
  await herald.restartSamePort();
  await publish(2); // 8, 9
  await waitInPage(page, 'the browser should reconnect by itself again',
    (n) => window.state.opens > n, opensBefore);
  await publish(1); // 10
  await received(10);

  await sleep(300); // a duplicate would arrive right behind
  const state = await page.evaluate(() => window.state);
  await settled(requests);
  t.diagnostic(`opens=${state.opens} errors=${state.errors.length} sse requests=${requests.length} ` +
    `last-event-ids=${JSON.stringify(requests.map((r) => r.lastEventId))}`);
  t.diagnostic(`subscribed events: ${JSON.stringify(state.subscribed)}`);

  assert.deepEqual(state.badFrames, []);
  assert.deepEqual(
    state.messages.map((m) => m.seq),
    published.map((p) => p.seq),
    'every message exactly once, in order (no gap, no duplicate)');
  assert.deepEqual(state.messages.map((m) => m.id), published.map((p) => p.id));
  assert.deepEqual(state.messages.map((m) => m.data.n), published.map((_, i) => i + 1));
  const epochs = new Set(published.map((p) => p.epoch));
  assert.equal(epochs.size, 1, 'the channel kept its epoch across kill -9 (the log survived)');

  // Crash 1: the held reconnect reached herald only after messages 4 and 5 were published, so the
  // resumed subscription starts at seq 5 and 4, 5 reached the page only because the browser sent
  // Last-Event-ID. (Chromium hides that header from request interception, so it is not read here.)
  assert.equal(state.subscribed[1].seq, published[4].seq,
    'the first reconnect subscribed after messages 4 and 5 were published');
  // Crash 2 (no interception): the reconnect carried the cursor of the last message the page had.
  assert.equal(requests[0].lastEventId, null, 'the first request has no Last-Event-ID');
  const crash2Ids = requests.slice(requestsBeforeCrash2).map((r) => r.lastEventId);
  assert.ok(crash2Ids.length >= 1, 'the browser reconnected after crash 2');
  assert.ok(crash2Ids.every((id) => id === cursorBeforeCrash2),
    `reconnects after crash 2 sent Last-Event-ID ${cursorBeforeCrash2}; sent ${JSON.stringify(crash2Ids)}`);

  // Each successful (re)connection opened with a `subscribed` event; the resumed ones say so.
  assert.equal(state.subscribed.length, state.opens);
  for (const s of state.subscribed.slice(1)) {
    assert.equal(s.recovered, true, `resumed subscription reports recovered: ${JSON.stringify(s)}`);
  }
  await page.evaluate(() => window.stopSse());
});
