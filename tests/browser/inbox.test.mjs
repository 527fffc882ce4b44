// A web app as a device: the page reads its device inbox with the browser's own EventSource
// (a device token and no channel), acknowledges with fetch from another origin (CORS preflight
// with an Authorization header), and a new EventSource without Last-Event-ID resumes from the
// acknowledged cursor the server kept.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Herald, launchBrowser, mintToken, openPage, servePage, waitInPage, WAIT_MS } from './lib/harness.mjs';
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

async function push(body) {
  const r = await herald.api('POST', '/v1/push', body);
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.id;
}

test('a browser device reads its inbox over EventSource and acks with fetch', { timeout: 6 * WAIT_MS }, async () => {
  const reg = await herald.api('POST', '/v1/devices', { platform: 'herald', id: 'web-1', tags: ['news'] });
  assert.equal(reg.status, 201, JSON.stringify(reg.body));
  const token = mintToken({ sub: 'reader', device: 'web-1' });
  // Pushed while the page is not open yet.
  const first = await push({ target: { device: 'web-1' }, data: { n: 1 } });
  await push({ target: { tags: 'news AND NOT sports' }, data: { n: 2 } });
  await push({ target: { tags: 'sports' }, data: { n: 0 } });

  const page = await openPage(browser, site.url);
  const url = `${herald.url}/v1/sse?token=${encodeURIComponent(token)}`;
  await page.evaluate((u) => window.startSse(u), url);
  await waitInPage(page, 'two pending pushes', () => window.state.messages.length >= 2);
  const got = await page.evaluate(() => window.state.messages);
  assert.deepEqual(got.map((m) => m.data.data.n).sort(), [1, 2]);
  assert.deepEqual([...new Set(got.map((m) => m.channel))].sort(), ['$app', '$device']);

  // Ack from the page, cross-origin, with the last event id as the cursor.
  const ack = await page.evaluate(async ({ base, token }) => {
    const cursor = window.state.messages[window.state.messages.length - 1].lastEventId;
    const r = await fetch(`${base}/v1/ack`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ cursor }),
    });
    return { status: r.status, body: await r.json(), cursor };
  }, { base: herald.url, token });
  assert.equal(ack.status, 200, JSON.stringify(ack.body));
  assert.equal(ack.body.cursor, ack.cursor);
  const receipt = await herald.api('GET', `/v1/push/${first}`);
  assert.equal(receipt.body.delivered, 1, JSON.stringify(receipt.body));

  // Closed, one more push, then a fresh EventSource (no Last-Event-ID): only the new one.
  await page.evaluate(() => { window.stopSse(); window.state.messages = []; });
  await push({ target: { app: true }, data: { n: 3 } });
  await page.evaluate((u) => window.startSse(u), url);
  await waitInPage(page, 'the push sent while closed', () => window.state.messages.length >= 1);
  const again = await page.evaluate(() => window.state.messages.map((m) => m.data.data.n));
  assert.deepEqual(again, [3]);
  await page.close();
});
