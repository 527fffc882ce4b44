// A plain EventSource in headless Chromium, on a page from another origin than herald's,
// receives exactly the messages published over the HTTP API, in order, with their data.

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

test('cross-origin EventSource receives published messages in order', { timeout: 4 * WAIT_MS }, async (t) => {
  assert.notEqual(new URL(site.url).origin, new URL(herald.url).origin, 'page and herald must be different origins');
  const page = await openPage(browser, site.url);
  const token = mintToken({ sub: 'sse-browser', channels: ['news'] });
  const sseUrl = `${herald.url}/v1/sse?channel=news&token=${encodeURIComponent(token)}`;

  await page.evaluate((url) => window.startSse(url), sseUrl);
  await waitInPage(page,
    'the EventSource should open and get its `subscribed` event (a cross-origin failure here usually means ' +
    'herald sent no Access-Control-Allow-Origin header)',
    () => window.state.subscribed.length === 1);
  const [subscribed] = await page.evaluate(() => window.state.subscribed);
  assert.equal(subscribed.channel, 'news');
  assert.equal(typeof subscribed.epoch, 'string');
  assert.equal(subscribed.recovered, false);
  const firstSeq = subscribed.seq + 1;

  const sent = [
    { n: 1, text: 'hello' },
    { n: 2, text: 'héllo wörld ✓ — 世界 🎉', nested: { list: [1, 2, 3], flag: true, none: null } },
    { n: 3, text: 'line\nbreak and "quotes" and \\ backslash' },
  ];
  const published = [];
  for (const data of sent) published.push(await herald.publish('news', data));
  assert.deepEqual(published.map((p) => p.seq), [firstSeq, firstSeq + 1, firstSeq + 2]);

  await waitInPage(page, 'the page should receive the 3 published messages',
    (n) => window.state.messages.length >= n, sent.length);
  // Anything extra (a duplicate, a stray event) would arrive right behind them.
  await sleep(300);
  const state = await page.evaluate(() => window.state);
  t.diagnostic(`page ${site.origin} got ${state.messages.length} messages from ${herald.url}`);

  assert.deepEqual(state.badFrames, [], 'every event carries JSON');
  assert.deepEqual(state.disconnects, []);
  assert.equal(state.messages.length, sent.length, 'exactly the published messages, no more');
  state.messages.forEach((m, i) => {
    assert.equal(m.channel, 'news');
    assert.equal(m.seq, published[i].seq, `message ${i} seq`);
    assert.equal(m.id, published[i].id, `message ${i} id`);
    assert.equal(m.time, published[i].time, `message ${i} time`);
    assert.deepEqual(m.data, sent[i], `message ${i} data`);
    assert.equal(m.origin, herald.url, 'MessageEvent.origin is herald');
    assert.ok(m.lastEventId.length > 0, 'every message has an id: (the resume cursor)');
  });
  assert.equal(new Set(state.messages.map((m) => m.lastEventId)).size, sent.length, 'cursors differ');
  assert.equal(state.opens, 1, 'one connection, no reconnects');
  await page.evaluate(() => window.stopSse());
});
