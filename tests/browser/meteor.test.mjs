// Meteor's browser modes in headless Chromium, served by Herald's Meteor port: a page loaded from
// the document root receives messages through the `iframe` mode (the streamed page calls
// parent.Meteor.register, then p(id, channel, text) per message, as meteor.js expects) and the
// `xhrinteractive` mode (the same lines read from a streaming XMLHttpRequest), resumes with
// `.r<id>`, and cannot read outside the document root.
//
// The page's client is written here (Meteor's own meteor.js is not part of Herald); it makes the
// same calls meteor.js makes: register(frame) sets frame.p, frame.ch and frame.eof.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Herald, launchBrowser, openPage, waitInPage, WAIT_MS } from './lib/harness.mjs';

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>meteor modes</title></head><body>
<script>
window.state = { registered: 0, iframe: [], iframeInfo: [], xhr: {}, errors: [] };
window.Meteor = {
  register(frame) {
    state.registered += 1;
    frame.p = (id, channel, text) => { if (id !== -1) state.iframe.push({ id, channel, text }); };
    frame.ch = (channel, id) => state.iframeInfo.push({ channel, id });
    frame.eof = () => { state.iframeEof = true; };
  },
  reset() {},
};
window.startIframe = (path) => {
  const frame = document.createElement('iframe');
  frame.src = path;
  document.body.appendChild(frame);
};
// Reads the p(...) and ch(...) script lines of an xhrinteractive response as they arrive.
window.startXhr = (name, path) => {
  const got = { info: [], messages: [] };
  state.xhr[name] = got;
  const x = new XMLHttpRequest();
  x.onprogress = () => {
    got.info = [];
    got.messages = [];
    for (const m of x.responseText.matchAll(/<script>(ch|p)\\((.*?)\\);<\\/script>/g)) {
      try {
        const args = JSON.parse('[' + m[2] + ']');
        if (m[1] === 'ch') got.info.push({ channel: args[0], id: args[1] });
        else if (args[0] !== -1) got.messages.push({ id: args[0], channel: args[1], text: args[2] });
      } catch (e) { state.errors.push(String(e) + ' in ' + m[0]); }
    }
  };
  x.open('GET', path);
  x.send();
};
</script>
</body></html>
`;

let herald;
let browser;
let root;

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'herald-meteor-root-'));
  writeFileSync(join(root, 'index.html'), PAGE);
  herald = await Herald.start(['--meteor', '127.0.0.1:0', '--meteor-document-root', root]);
  assert.ok(herald.meteorUrl, 'herald printed its Meteor address');
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await herald?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

test('iframe and xhrinteractive modes deliver, and .r resumes', { timeout: 4 * WAIT_MS }, async () => {
  const page = await openPage(browser, `${herald.meteorUrl}/`);

  await page.evaluate(() => window.startIframe('/push/browser1/iframe/news'));
  await waitInPage(page, 'the iframe should register with parent.Meteor and report its channel',
    () => window.state.registered === 1 && window.state.iframeInfo.length === 1);
  await page.evaluate(() => window.startXhr('live', '/push/browser2/xhrinteractive/news'));
  await waitInPage(page, 'the streaming XHR should get its channel-info line',
    () => window.state.xhr.live && window.state.xhr.live.info.length === 1);

  await herald.publish('news', 'hello');
  await herald.publish('news', 'second message');
  await waitInPage(page, 'both modes should receive both messages',
    () => window.state.iframe.length === 2 && window.state.xhr.live.messages.length === 2);

  const state = await page.evaluate(() => window.state);
  const expected = [
    { id: 1, channel: 'news', text: 'hello' },
    { id: 2, channel: 'news', text: 'second message' },
  ];
  assert.deepEqual(state.iframeInfo, [{ channel: 'news', id: 0 }]);
  assert.deepEqual(state.iframe, expected);
  assert.deepEqual(state.xhr.live.messages, expected);
  assert.deepEqual(state.errors, []);

  // meteor.js reconnects asking for the message after the last one it saw.
  await page.evaluate(() => window.startXhr('resumed', '/push/browser2/xhrinteractive/news.r2'));
  await waitInPage(page, 'the resumed XHR should replay message 2 only',
    () => window.state.xhr.resumed && window.state.xhr.resumed.messages.length === 1);
  const resumed = await page.evaluate(() => window.state.xhr.resumed);
  assert.deepEqual(resumed.info, [{ channel: 'news', id: 2 }]);
  assert.deepEqual(resumed.messages, [expected[1]]);
});

test('the document root serves its files and nothing outside it', { timeout: 2 * WAIT_MS }, async () => {
  const page = await openPage(browser, `${herald.meteorUrl}/index.html`);
  const statuses = await page.evaluate(async () => {
    const out = {};
    for (const path of ['/index.html', '/%2e%2e/%2e%2e/etc/passwd', '/..%2f..%2fetc%2fpasswd', '/missing.js']) {
      out[path] = (await fetch(path)).status;
    }
    return out;
  });
  assert.deepEqual(statuses, {
    '/index.html': 200,
    '/%2e%2e/%2e%2e/etc/passwd': 404,
    '/..%2f..%2fetc%2fpasswd': 404,
    '/missing.js': 404,
  });
});
