// The admin dashboard at /admin in a real browser: log in (a wrong key first), every page, an
// app created with a key that is then revoked, a test message published and found in the
// channel's history, a device registered, a test push sent and its receipt seen changing when
// the device acknowledges it, a webhook endpoint registered (its secret shown once), sent a
// test event to a receiver on loopback (the signature checked) and deleted, a publisher key's
// one-app view, and logging out. Each page is saved as a screenshot in
// target/test-artifacts/admin/.

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import {
  ADMIN_KEY, API_KEY, Herald, WAIT_MS, adminArgs, artifactsDir, launchBrowser, mintToken,
  openPage, waitInPage,
} from './lib/harness.mjs';

let herald;
let browser;
let page;
/** A webhook receiver on loopback: `{ url, requests, close() }`. */
let receiver;
const shots = artifactsDir('admin');

async function shot(name) {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: false });
}

async function nav(name) {
  await page.click(`nav a[data-page="${name}"]`);
  await page.waitForSelector(`main[data-page="${name}"]`);
}

async function text(selector) {
  return (await page.textContent(selector)) ?? '';
}

/** An HTTP server on 127.0.0.1 answering 204 to every request, keeping what it was sent. */
async function startReceiver() {
  const requests = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return {
    url: `http://127.0.0.1:${server.address().port}/herald/hooks`,
    requests,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** Whether `request` is signed with `secret` (Standard Webhooks: HMAC-SHA256 of id.timestamp.body). */
function signedWith(request, secret) {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const signed = `${request.headers['webhook-id']}.${request.headers['webhook-timestamp']}.${request.body}`;
  const expected = `v1,${createHmac('sha256', key).update(signed).digest('base64')}`;
  return (request.headers['webhook-signature'] || '').split(' ').includes(expected);
}

before(async () => {
  receiver = await startReceiver();
  // The webhook receiver is on loopback: the server must be allowed to reach it.
  herald = await Herald.start([...adminArgs(), '--outbound-allow', '127.0.0.0/8']);
  browser = await launchBrowser();
  page = await openPage(browser, `${herald.url}/admin`);
  await page.setViewportSize({ width: 1280, height: 800 });
  page.on('dialog', (dialog) => dialog.accept());
});

after(async () => {
  await browser?.close();
  await herald?.stop();
  await receiver?.close();
});

test('the admin dashboard, page by page', { timeout: 120_000 }, async (t) => {
  let shopKey;

  await t.test('a wrong key is refused with its code; the admin key logs in', async () => {
    await page.waitForSelector('#login-form');
    await page.fill('#key', 'hk_not_a_key_at_all');
    await page.click('#login-button');
    await page.waitForSelector('.alert.error[data-code="unauthorized"]');
    assert.match(await text('.alert.error'), /the key is not valid/);
    await shot('login');
    assert.ok(!page.url().includes('hk_'), 'no key in the URL');
    await page.fill('#key', ADMIN_KEY);
    await page.click('#login-button');
    await page.waitForSelector('main[data-page="overview"]');
    assert.ok(!page.url().includes(ADMIN_KEY), 'no key in the URL');
    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === 'herald_admin');
    assert.ok(session, 'a session cookie');
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, 'Strict');
    assert.ok(!session.value.includes(ADMIN_KEY));
  });

  await t.test('the overview charts live figures', async () => {
    // A live SSE subscriber (a connection) and some messages to chart.
    const token = mintToken({ channels: ['news'] });
    const sse = new AbortController();
    const stream = await fetch(`${herald.url}/v1/sse?channel=news&token=${token}`, { signal: sse.signal });
    assert.equal(stream.status, 200);
    try {
      for (let i = 0; i < 6; i += 1) {
        await herald.publish('news', { i });
        await new Promise((r) => setTimeout(r, 300));
      }
      await waitInPage(page, 'the overview counts the SSE connection',
        () => Number(document.querySelector('#tile-connections')?.textContent) >= 1);
      await waitInPage(page, 'the charts have lines',
        () => document.querySelectorAll('.chart path.line').length >= 4);
      await waitInPage(page, 'the apps table lists the default app',
        () => [...document.querySelectorAll('main td')].some((td) => td.textContent === 'default'));
      await shot('overview');
    } finally {
      sse.abort();
    }
  });

  await t.test('apps: create one, create a key, revoke it', async () => {
    await nav('apps');
    await page.fill('#create-app-form input[name="id"]', 'shop');
    await page.fill('#create-app-form input[name="name"]', 'Shop');
    await page.click('#create-app');
    await page.waitForSelector('#secret-box');
    shopKey = (await text('[data-secret="Publisher key"]')).trim();
    assert.match(shopKey, /^hk_[0-9a-f]{40}$/);
    await waitInPage(page, 'the list shows the new app',
      () => [...document.querySelectorAll('main td a')].some((a) => a.textContent === 'shop'));
    await shot('apps');

    await page.click('main td a[href="#/apps/shop"]');
    await page.waitForSelector('#create-key-form');
    await waitInPage(page, 'one key listed', () => document.querySelectorAll('[data-revoke]').length === 1);
    await page.fill('#create-key-form input[name="label"]', 'dashboard test');
    await page.click('#create-key');
    await page.waitForSelector('#secret-box');
    const extraKey = (await text('[data-secret="Key"]')).trim();
    assert.match(extraKey, /^hk_[0-9a-f]{40}$/);
    await waitInPage(page, 'two keys listed', () => document.querySelectorAll('[data-revoke]').length === 2);
    await shot('app-detail');
    const before = await fetch(`${herald.url}/v1/channels`, { headers: { authorization: `Bearer ${extraKey}` } });
    assert.equal(before.status, 200);
    const rows = await page.$$eval('main tr', (trs) => trs
      .filter((tr) => tr.querySelector('[data-revoke]'))
      .map((tr) => ({ id: tr.querySelector('[data-revoke]').dataset.revoke, label: tr.textContent })));
    const target = rows.find((r) => r.label.includes('dashboard test'));
    assert.ok(target, 'the new key is listed with its label');
    await page.click(`[data-revoke="${target.id}"]`);
    await waitInPage(page, 'one key left', () => document.querySelectorAll('[data-revoke]').length === 1);
    const revoked = await fetch(`${herald.url}/v1/channels`, { headers: { authorization: `Bearer ${extraKey}` } });
    assert.equal(revoked.status, 401, 'the revoked key no longer works');
    // The app picker follows the app in view; picking another app opens that app's page.
    assert.equal(await page.inputValue('#acting-app'), 'shop');
    await page.selectOption('#acting-app', 'default');
    await waitInPage(page, 'the default app\'s page', () => /App default/.test(document.querySelector('main h2')?.textContent));
  });

  await t.test('channels: publish a test message and see it in the history', async () => {
    await nav('channels');
    await waitInPage(page, 'news is listed',
      () => [...document.querySelectorAll('main td a')].some((a) => a.textContent === 'news'));
    await shot('channels');
    await page.click('main td a[href="#/channels/news?app=default"]');
    await page.waitForSelector('#publish-form');
    await page.fill('#message-data', '{"text":"hello from the browser test"}');
    await page.click('#publish-button');
    await page.waitForSelector('#publish-result');
    assert.match(await text('#publish-result'), /Stored as seq 7/);
    await waitInPage(page, 'the history shows the message',
      () => [...document.querySelectorAll('pre.data')].some((p) => p.textContent.includes('hello from the browser test')));
    await shot('channel');
    // A bad JSON body is shown as an error, not sent.
    await page.fill('#message-data', '{not json');
    await page.click('#publish-button');
    await page.waitForSelector('.alert.error[data-code="invalid_json"]');
  });

  await t.test('devices: register one, find it by tag, see its inbox', async () => {
    await nav('devices');
    await page.fill('#register-device-form input[name="id"]', 'phone-1');
    await page.fill('#register-device-form input[name="user"]', 'alice');
    await page.fill('#register-device-form input[name="tags"]', 'sports, uk');
    await page.click('#register-device');
    await page.waitForSelector('#inbox-cursor');
    await nav('devices');
    await page.fill('#list-devices-form input[name="tag"]', 'sports');
    await page.click('#list-devices-form button');
    await waitInPage(page, 'the tag search finds the device',
      () => [...document.querySelectorAll('#device-results td a')].some((a) => a.textContent === 'phone-1'));
    await shot('devices');
    await page.fill('#find-device-form input[name="id"]', 'nope');
    await page.click('#find-device-form button');
    await page.waitForSelector('.alert.error[data-code="not_found"]');
  });

  await t.test('pushes: send a test push and watch its receipt change', async () => {
    await page.goto(`${herald.url}/admin#/devices/phone-1`);
    await page.waitForSelector('#push-to-device');
    await page.click('#push-to-device');
    await page.waitForSelector('#push-form');
    assert.equal(await page.inputValue('#push-target'), 'phone-1');
    await page.click('#send-push');
    await waitInPage(page, 'the receipt shows one targeted, pending device',
      () => document.querySelector('#receipt-targeted')?.textContent === '1' &&
        document.querySelector('#receipt-pending')?.textContent === '1' &&
        document.querySelector('#receipt-delivered')?.textContent === '0');
    await shot('push-sent');
    // The device reads its inbox (long-poll with its device token), finds the push the page
    // sent, and acknowledges it: the receipt changes on the page by itself.
    const pushId = await page.getAttribute('[data-push]', 'data-push');
    const deviceToken = mintToken({ sub: 'alice', device: 'phone-1' });
    const inbox = await fetch(`${herald.url}/v1/poll?timeout=10`, {
      headers: { authorization: `Bearer ${deviceToken}` },
      signal: AbortSignal.timeout(WAIT_MS),
    });
    assert.equal(inbox.status, 200, await inbox.clone().text());
    const arrived = await inbox.json();
    const pushed = arrived.messages.find((m) => m.channel === '$device');
    assert.ok(pushed, JSON.stringify(arrived));
    assert.equal(pushed.id, pushId);
    assert.deepEqual(pushed.data.data, { test: true, from: 'dashboard' });
    const ack = await fetch(`${herald.url}/v1/ack`, {
      method: 'POST',
      headers: { authorization: `Bearer ${deviceToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ cursor: arrived.cursor }),
      signal: AbortSignal.timeout(WAIT_MS),
    });
    assert.equal(ack.status, 200, await ack.text());
    await waitInPage(page, 'the receipt shows the device delivered',
      () => document.querySelector('#receipt-delivered')?.textContent === '1' &&
        document.querySelector('#receipt-pending')?.textContent === '0');
    await shot('pushes');
    await page.goto(`${herald.url}/admin#/devices/phone-1`);
    await waitInPage(page, 'the device page shows the push acknowledged',
      () => [...document.querySelectorAll('main .badge')].some((b) => b.textContent === 'yes'));
    await shot('device');
  });

  await t.test('webhooks: register an endpoint, see its secret once, send a test, delete it', async () => {
    await nav('hooks');
    await page.waitForSelector('#create-hook-form');
    await waitInPage(page, 'no endpoints yet', () => document.querySelector('#hook-list .empty') !== null);
    // The event types are the server's list, as checkboxes.
    const offered = await page.$$eval('#hook-events input[type="checkbox"]', (boxes) => boxes.map((b) => b.value));
    for (const type of ['*', 'client.connected', 'user.online', 'user.offline', 'channel.vacated']) {
      assert.ok(offered.includes(type), `${type} is offered: ${offered}`);
    }
    await page.fill('#hook-url', receiver.url);
    await page.check('[data-event="user.online"]');
    await page.check('[data-event="user.offline"]');
    await page.fill('#hook-channels', 'rooms/*');
    await page.fill('#hook-description', 'dashboard test');
    await page.fill('#hook-offline-delay', '5000');
    await page.click('#create-hook');
    await page.waitForSelector('#secret-box');
    const secret = (await text('#hook-secret')).trim();
    assert.match(secret, /^whsec_[A-Za-z0-9+/=]{20,}$/);
    assert.match(await text('#secret-once'), /Shown only once/);
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: herald.url });
    await page.click('#copy-secret');
    await page.waitForSelector('#copy-secret[data-copied]');
    if ((await page.getAttribute('#copy-secret', 'data-copied')) === 'yes') {
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
    }
    await waitInPage(page, 'the endpoint is listed, ok',
      () => document.querySelector('#hook-list tr[data-hook] [data-state="ok"]') !== null);
    const hookId = await page.getAttribute('#hook-list tr[data-hook]', 'data-hook');
    const listed = await herald.api('GET', '/v1/apps/default/hooks');
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.body.hooks.map((h) => [h.id, h.url, h.events, h.channels, h.offline_delay_ms]),
      [[Number(hookId), receiver.url, ['user.online', 'user.offline'], ['rooms/*'], 5000]]);
    await shot('hooks');

    // Once: opening the page again shows the endpoint, never its secret.
    await page.reload();
    await page.waitForSelector('#hook-list tr[data-hook]');
    assert.equal(await page.$('#secret-box'), null, 'no secret box after a reload');
    assert.ok(!(await page.content()).includes(secret), 'the secret is nowhere on the page');

    // The endpoint's page: a signed test event, answered by the receiver on loopback.
    await page.click(`#hook-list a[href^="#/hooks/${hookId}"]`);
    await page.waitForSelector('#test-hook');
    await waitInPage(page, 'the endpoint is loaded', () => document.querySelector('#toggle-hook')?.disabled === false);
    assert.ok(!(await page.content()).includes(secret), 'the secret is not on the endpoint\'s page');
    await page.click('#test-hook');
    await page.waitForSelector('#test-answer');
    assert.equal(await page.getAttribute('#test-answer', 'data-delivered'), 'yes', await text('#test-answer'));
    assert.match(await text('#test-answer'), /Delivered\. HTTP 204 in \d+ ms\./);
    assert.equal(receiver.requests.length, 1);
    const sent = receiver.requests[0];
    assert.equal(sent.method, 'POST');
    assert.equal(JSON.parse(sent.body).events[0].type, 'hook.test');
    assert.ok(signedWith(sent, secret), `signed with the secret shown: ${JSON.stringify(sent.headers)}`);
    await shot('hook-detail');

    // A new secret, shown once; during the overlap requests are signed with both.
    await page.fill('#rotate-overlap', '1');
    await page.click('#rotate-hook');
    await page.waitForSelector('#hook-shown #secret-box');
    const rotated = (await text('#hook-secret')).trim();
    assert.match(rotated, /^whsec_/);
    assert.notEqual(rotated, secret);
    assert.match(await text('#hook-shown'), /Shown only once/);
    assert.match(await text('#hook-shown'), /previous secret signs requests too until/);
    await page.click('#test-hook');
    await waitInPage(page, 'the second test is answered', () => document.querySelector('#test-answer')?.dataset.delivered === 'yes');
    assert.equal(receiver.requests.length, 2);
    assert.ok(signedWith(receiver.requests[1], rotated), 'signed with the new secret');
    assert.ok(signedWith(receiver.requests[1], secret), 'and with the old one during the overlap');
    await shot('hook-rotated');

    // Disabled, then enabled again.
    await page.click('#toggle-hook');
    await waitInPage(page, 'the endpoint is disabled', () => document.querySelector('[data-state="disabled"]') !== null &&
      document.querySelector('#toggle-hook')?.textContent === 'Enable');
    await page.click('#toggle-hook');
    await waitInPage(page, 'the endpoint is enabled', () => document.querySelector('[data-state="ok"]') !== null);
    await waitInPage(page, 'no dead letters', () => document.querySelector('#hook-dead .empty') !== null);

    // Deleted after the confirmation (accepted by the dialog handler): back to an empty list.
    await page.click('#delete-hook');
    await page.waitForSelector('main[data-page="hooks"] #create-hook-form');
    await waitInPage(page, 'the list is empty again', () => document.querySelector('#hook-list .empty') !== null);
    const gone = await herald.api('GET', '/v1/apps/default/hooks');
    assert.deepEqual(gone.body.hooks, []);
  });

  await t.test('a publisher key sees its own app only', async () => {
    await page.click('#logout');
    await page.waitForSelector('#login-form');
    await page.fill('#key', shopKey);
    await page.click('#login-button');
    await page.waitForSelector('main[data-page="overview"]');
    assert.equal(await page.$('#acting-app'), null, 'no app picker');
    assert.match(await text('.topbar .scope'), /shop/);
    await waitInPage(page, 'the overview lists one app',
      () => document.querySelectorAll('main table')[0]?.querySelectorAll('tbody tr').length === 1);
    await shot('publisher-overview');
    await nav('apps');
    await page.waitForSelector('main .badge');
    assert.equal(await page.$('#create-key-form'), null, 'no key management');
    assert.equal(await page.$('#create-app-form'), null, 'no app creation');
    assert.match(await text('main h2'), /App shop/);
    await shot('publisher-app');
    await nav('channels');
    await waitInPage(page, 'the shop app has no channels',
      () => document.querySelector('main .empty') !== null);
  });

  await t.test('logging out ends the session in the browser', async () => {
    await page.click('#logout');
    await page.waitForSelector('#login-form');
    const status = await page.evaluate(async () => (await fetch('/admin/session', {
      headers: { 'X-Herald-Session': '1' },
    })).status);
    assert.equal(status, 401);
    const csp = page.consoleLines.filter((l) => /Content Security Policy/i.test(l));
    assert.deepEqual(csp, [], 'no Content-Security-Policy violations');
  });

  assert.ok(API_KEY);
});
