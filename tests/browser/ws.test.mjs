// A WebSocket in headless Chromium, on a page from another origin than herald's: subscribes and
// receives live messages; closes; misses some; reconnects with `since` (the last seq it saw and
// the epoch herald told it) and gets exactly the missed messages, then live ones.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Herald, launchBrowser, mintToken, openPage, servePage, sleep, waitInPage, WAIT_MS } from './lib/harness.mjs';
import { WS_PAGE } from './lib/pages.mjs';

let herald;
let site;
let browser;

before(async () => {
  herald = await Herald.start();
  site = await servePage(WS_PAGE);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await site?.close();
  await herald?.stop();
});

const framesOf = (state, conn) => state.frames.filter((f) => f.conn === conn);
const messagesOf = (state, conn) => framesOf(state, conn).filter((f) => f.message).map((f) => f.message);

/** Sends `{id, subscribe}` and waits for the frame answering `id`. */
async function subscribe(page, id, subscribe) {
  await page.evaluate((cmd) => window.wsSend(cmd), { id, subscribe });
  await waitInPage(page, `reply to subscribe ${JSON.stringify(subscribe)}`,
    (i) => window.state.frames.some((f) => f.id === i), id);
  const reply = await page.evaluate((i) => window.state.frames.find((f) => f.id === i), id);
  assert.ok(reply.subscribe, `subscribe succeeded: ${JSON.stringify(reply)}`);
  return reply.subscribe;
}

test('WebSocket subscribes, then resumes with since after being closed', { timeout: 6 * WAIT_MS }, async (t) => {
  const page = await openPage(browser, site.url);
  const token = mintToken({ sub: 'ws-browser', channels: ['news'] });
  const wsUrl = `${herald.url.replace(/^http/, 'ws')}/v1/ws?token=${encodeURIComponent(token)}`;
  const published = [];
  const publish = async (n) => {
    for (let i = 0; i < n; i++) {
      published.push(await herald.publish('news', { n: published.length + 1, text: `message ${published.length + 1} ✓` }));
    }
  };
  const assertMessages = (got, want, what) => {
    assert.deepEqual(got.map((m) => m.seq), want.map((p) => p.seq), `${what}: seqs`);
    assert.deepEqual(got.map((m) => m.id), want.map((p) => p.id), `${what}: ids`);
    assert.deepEqual(got.map((m) => m.channel), want.map(() => 'news'), `${what}: channels`);
    assert.deepEqual(got.map((m) => m.data.n), want.map((p) => published.indexOf(p) + 1), `${what}: data`);
  };

  // Connection 1: live messages.
  const conn1 = await page.evaluate((url) => window.wsOpen(url), wsUrl);
  const first = await subscribe(page, 1, { channel: 'news' });
  t.diagnostic(`first subscribe reply: ${JSON.stringify(first)}`);
  assert.equal(first.channel, 'news');
  assert.equal(first.recovered, false);
  await publish(3);
  await waitInPage(page, 'three live messages on connection 1',
    (c) => window.state.frames.filter((f) => f.conn === c && f.message).length >= 3, conn1);

  let state = await page.evaluate(() => window.state);
  const live1 = messagesOf(state, conn1);
  assertMessages(live1, published.slice(0, 3), 'connection 1');
  // What the page knows to resume from: the last seq it saw, and the epoch of its subscription.
  // Message frames carry no epoch, so a client only has the subscribe reply's.
  const since = { seq: live1.at(-1).seq, epoch: first.epoch };

  await page.evaluate(() => window.wsClose());
  await publish(3); // missed while closed: 4, 5, 6

  // Connection 2: resume, then live.
  const conn2 = await page.evaluate((url) => window.wsOpen(url), wsUrl);
  const resumed = await subscribe(page, 2, { channel: 'news', since });
  t.diagnostic(`resume with since ${JSON.stringify(since)}: ${JSON.stringify(resumed)}`);
  await waitInPage(page, 'the 3 missed messages on connection 2',
    (c) => window.state.frames.filter((f) => f.conn === c && f.message).length >= 3, conn2);
  await publish(2); // live: 7, 8
  await waitInPage(page, 'missed + live messages on connection 2',
    (c) => window.state.frames.filter((f) => f.conn === c && f.message).length >= 5, conn2);
  await sleep(300); // a duplicate would arrive right behind

  state = await page.evaluate(() => window.state);
  assert.deepEqual(state.badFrames, []);
  assert.equal(state.errors, 0, 'no WebSocket errors');
  assert.deepEqual(state.closes.map((c) => [c.conn, c.code, c.wasClean]), [[conn1, 1000, true]],
    'connection 1 closed cleanly, connection 2 still open');
  assert.deepEqual(framesOf(state, conn1).filter((f) => f.error), [], 'no error frames');
  assert.deepEqual(framesOf(state, conn2).filter((f) => f.error), [], 'no error frames');
  assert.equal(resumed.recovered, true, `resume from ${JSON.stringify(since)} recovered`);
  assert.equal(resumed.epoch, published[0].epoch);
  assertMessages(messagesOf(state, conn2), published.slice(3), 'connection 2 (missed, then live)');
  // The reply comes before the replayed messages, so the client knows the epoch before applying them.
  const order = framesOf(state, conn2).map((f) => (f.message ? `m${f.message.seq}` : `r${f.id}`));
  assert.deepEqual(order, ['r2', 'm4', 'm5', 'm6', 'm7', 'm8'], 'frame order on connection 2');
  await page.evaluate(() => window.wsClose());
});
