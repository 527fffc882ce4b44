// An app's Pusher credentials and Pusher-format webhook endpoints in the admin dashboard, in a
// real browser: credentials created on the app's page (the secret shown once, with a Copy
// button, and accepted by Pusher's HTTP API), rotated with an overlap (the API then accepts both
// secrets and says until when), a pusher-format webhook endpoint registered from the event types
// Pusher's webhooks have and sent a test request signed with the app's Pusher secret, the
// credentials deleted after a confirmation (the API then has none), and an import refused by the
// API (a key another app has) shown with its code before one with the values given is kept.
// Screenshots go to target/test-artifacts/admin-pusher/.

import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import {
  ADMIN_KEY, Herald, WAIT_MS, adminArgs, artifactsDir, launchBrowser, openPage, waitInPage,
} from './lib/harness.mjs';

let herald;
let browser;
let page;
/** A webhook receiver on loopback: `{ url, requests, close() }`. */
let receiver;
/** What the page answered to each confirmation it asked, in order. */
const confirmations = [];
const shots = artifactsDir('admin-pusher');

/** A screenshot of the window, scrolled to the element `selector` finds (below the top bar). */
async function shot(name, selector) {
  if (selector) {
    await page.evaluate((sel) => {
      const bar = document.querySelector('.topbar')?.offsetHeight ?? 0;
      window.scrollTo(0, document.querySelector(sel).getBoundingClientRect().top + window.scrollY - bar - 8);
    }, selector);
  }
  await page.screenshot({ path: join(shots, `${name}.png`) });
}

async function text(selector) {
  return ((await page.textContent(selector)) ?? '').trim();
}

/** A request to the API with the admin key acting for `app`; returns `{ status, body }`. */
async function api(method, path, body, app = 'default') {
  const r = await fetch(`${herald.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json', 'x-herald-app': app },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(WAIT_MS),
  });
  const raw = await r.text();
  return { status: r.status, body: raw ? JSON.parse(raw) : null };
}

/**
 * A trigger of Pusher's HTTP API (`POST /apps/{appId}/events`) signed as Pusher's server SDKs
 * sign it, with `key` and `secret`; returns the HTTP status.
 */
async function trigger(appId, key, secret) {
  const body = JSON.stringify({ name: 'ping', channels: ['orders'], data: '{}' });
  const params = {
    auth_key: key,
    auth_timestamp: String(Math.floor(Date.now() / 1000)),
    auth_version: '1.0',
    body_md5: createHash('md5').update(body).digest('hex'),
  };
  const query = Object.keys(params).sort().map((k) => `${k}=${params[k]}`).join('&');
  const path = `/apps/${appId}/events`;
  const signature = createHmac('sha256', secret).update(`POST\n${path}\n${query}`).digest('hex');
  const r = await fetch(`${herald.url}${path}?${query}&auth_signature=${signature}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    signal: AbortSignal.timeout(WAIT_MS),
  });
  await r.text();
  return r.status;
}

/** An HTTP server on 127.0.0.1 answering 200 to every request, keeping what it was sent. */
async function startReceiver() {
  const requests = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      res.writeHead(200);
      res.end();
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return {
    url: `http://127.0.0.1:${server.address().port}/pusher/webhooks`,
    requests,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

before(async () => {
  receiver = await startReceiver();
  // The webhook receiver is on loopback: the server must be allowed to reach it.
  herald = await Herald.start([...adminArgs(), '--outbound-allow', '127.0.0.0/8']);
  browser = await launchBrowser();
  page = await openPage(browser, `${herald.url}/admin`);
  await page.setViewportSize({ width: 1280, height: 800 });
  page.on('dialog', (dialog) => {
    confirmations.push(dialog.message());
    dialog.accept();
  });
  await page.waitForSelector('#login-form');
  await page.fill('#key', ADMIN_KEY);
  await page.click('#login-button');
  await page.waitForSelector('main[data-page="overview"]');
});

after(async () => {
  await browser?.close();
  await herald?.stop();
  await receiver?.close();
});

test('Pusher credentials and Pusher-format webhooks in the dashboard', { timeout: 120_000 }, async (t) => {
  /** The default app's credentials as the page showed them. */
  let appId;
  let key;
  let secret;

  await t.test('an app without credentials says so; Create draws them and shows the secret once', async () => {
    assert.equal((await api('GET', '/v1/apps/default/pusher')).status, 404);
    await page.goto(`${herald.url}/admin#/apps/default`);
    await page.waitForSelector('#pusher-none');
    assert.match(await text('#pusher-none'), /no Pusher credentials/);
    await page.click('#pusher-create');
    await page.waitForSelector('#pusher-secret-box');
    secret = await text('#pusher-secret');
    assert.match(secret, /^[0-9a-f]{20}$/);
    assert.match(await text('#pusher-secret-once'), /Shown only once/);
    await page.waitForSelector('#pusher-key');
    appId = await text('#pusher-app-id');
    key = await text('#pusher-key');
    assert.match(appId, /^[0-9]{7}$/);
    assert.match(key, /^[0-9a-f]{20}$/);
    // The API has them now, as the page shows them, and never shows the secret again.
    const shown = await api('GET', '/v1/apps/default/pusher');
    assert.equal(shown.status, 200);
    assert.equal(shown.body.app_id, appId);
    assert.equal(shown.body.key, key);
    assert.equal(shown.body.previous_secret_valid_until, null);
    assert.ok(!JSON.stringify(shown.body).includes(secret));
    // The secret shown is the one Pusher's HTTP API checks signatures with.
    assert.equal(await trigger(appId, key, secret), 200);
    assert.equal(await trigger(appId, key, 'not-the-secret'), 401);
    // What pusher-js needs to reach this server: the key, this host and port.
    const hint = await text('#pusher-client-hint');
    assert.ok(hint.includes(`new Pusher('${key}'`), hint);
    assert.ok(hint.includes(`wsPort: ${herald.port},`), hint);
    assert.ok(hint.includes("wsHost: '127.0.0.1',"), hint);
    assert.ok((await text('#pusher-server-hint')).includes(`appId: '${appId}'`));
    await page.click('#pusher-copy-secret');
    await page.waitForSelector('#pusher-copy-secret[data-copied]');
    await shot('created', '#app-pusher');
  });

  await t.test('Rotate makes a new secret; the previous one is accepted for the overlap given', async () => {
    await page.fill('#pusher-overlap', '2');
    const asked = Date.now();
    await page.click('#pusher-rotate');
    await waitInPage(page, 'a new secret is shown',
      (old) => {
        const shown = document.querySelector('#pusher-secret')?.textContent;
        return shown && shown !== old;
      }, secret);
    const rotated = await text('#pusher-secret');
    assert.match(rotated, /^[0-9a-f]{20}$/);
    assert.match(confirmations.at(-1), /new Pusher secret\? The previous one is accepted too for 2 h/);
    assert.match(await text('#pusher-shown'), /previous secret is accepted too until/);
    await page.waitForSelector('#pusher-overlap-until');
    const shown = await api('GET', '/v1/apps/default/pusher');
    assert.equal(shown.body.key, key, 'a rotation keeps the key');
    const until = Date.parse(shown.body.previous_secret_valid_until);
    assert.ok(Math.abs(until - (asked + 2 * 3600 * 1000)) < 60_000,
      `the previous secret is accepted until about 2 h from now: ${shown.body.previous_secret_valid_until}`);
    assert.equal(await trigger(appId, key, rotated), 200);
    assert.equal(await trigger(appId, key, secret), 200, 'the previous secret during the overlap');
    secret = rotated;
    await shot('rotated', '#app-pusher');
    // Once: opening the page again shows the credentials, never the secret.
    await page.reload();
    await page.waitForSelector('#pusher-key');
    assert.equal(await page.$('#pusher-secret-box'), null, 'no secret box after a reload');
    assert.ok(!(await page.content()).includes(secret), 'the secret is nowhere on the page');
    // On a phone the panel (its hints and forms) fits the screen.
    await page.setViewportSize({ width: 390, height: 800 });
    await waitInPage(page, 'the app page fits 390 px',
      () => document.documentElement.scrollWidth <= window.innerWidth);
    await shot('phone', '#app-pusher');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  await t.test('a pusher-format webhook endpoint, offered Pusher\'s event types, signed with the Pusher secret', async () => {
    await page.click('nav a[data-page="hooks"]');
    await page.waitForSelector('#create-hook-form');
    await page.selectOption('#hook-format', 'pusher');
    await page.waitForSelector('#hook-events[data-format="pusher"]');
    const offered = await page.$$eval('#hook-events input[type="checkbox"]', (boxes) => boxes.map((b) => b.value));
    assert.deepEqual(offered, ['*', 'channel.occupied', 'channel.vacated', 'presence.member_added',
      'presence.member_removed', 'subscription_count', 'pusher.client_event', 'pusher.cache_miss']);
    assert.match(await text('#hook-events'), /channel_occupied/);
    assert.equal(await page.isVisible('#hook-offline-delay'), false, 'a Pusher endpoint has no user.offline');
    await page.fill('#hook-url', receiver.url);
    await page.check('#hook-events input[data-event="channel.occupied"]');
    await page.check('#hook-events input[data-event="presence.member_added"]');
    await shot('hook-form-pusher', '#create-hook-form');
    await page.click('#create-hook');
    await page.waitForSelector('#hook-pusher-registered');
    assert.equal(await page.$('#secret-box'), null, 'no signing secret of its own is shown');
    await page.waitForSelector('#hook-list tr[data-hook] [data-format="pusher"]');
    const listed = await api('GET', '/v1/apps/default/hooks');
    assert.deepEqual(listed.body.hooks.map((h) => [h.url, h.format, h.events]),
      [[receiver.url, 'pusher', ['channel.occupied', 'presence.member_added']]]);
    // The form is back to Herald's format and events for the next endpoint.
    await page.waitForSelector('#hook-events[data-format="standard"]');
    await shot('hooks');

    const hookId = listed.body.hooks[0].id;
    await page.click(`#hook-list a[href^="#/hooks/${hookId}"]`);
    await page.waitForSelector('#hook-pusher-signing');
    assert.equal(await page.$('#rotate-hook'), null, 'no secret of its own to rotate');
    assert.match(await text('main'), /Format\s*pusher/);
    assert.doesNotMatch(await text('main'), /Offline delay/, 'a Pusher endpoint has no user.offline');
    await page.click('#test-hook');
    await page.waitForSelector('#test-answer[data-delivered="yes"]');
    const sent = receiver.requests.at(-1);
    assert.ok(sent, 'the receiver got the test request');
    assert.equal(sent.headers['x-pusher-key'], key);
    assert.equal(sent.headers['x-pusher-signature'],
      createHmac('sha256', secret).update(sent.body).digest('hex'), 'signed with the secret the page showed');
    await shot('hook-detail');
  });

  await t.test('Delete, after a confirmation, leaves the app without credentials', async () => {
    await page.goto(`${herald.url}/admin#/apps/default`);
    await page.waitForSelector('#pusher-delete');
    await page.click('#pusher-delete');
    await page.waitForSelector('#pusher-none');
    assert.match(confirmations.at(-1), new RegExp(`Delete app default's Pusher credentials \\(key ${key}\\)`));
    assert.equal((await api('GET', '/v1/apps/default/pusher')).status, 404);
    assert.equal(await trigger(appId, key, secret), 401, 'the key stopped working');
  });

  await t.test('an import the API refuses shows its error; one it takes keeps the values given', async () => {
    assert.equal((await api('POST', '/v1/apps', { id: 'shop' })).status, 201);
    assert.equal((await api('POST', '/v1/apps/default/pusher', { key: 'taken-key' })).status, 201);
    await page.goto(`${herald.url}/admin#/apps/shop`);
    await page.waitForSelector('#pusher-import-form');
    await page.fill('#pusher-import-app-id', 'shop-id');
    await page.fill('#pusher-import-key', 'taken-key');
    await page.fill('#pusher-import-secret', 'shop-secret');
    await page.click('#pusher-import');
    await page.waitForSelector('#app-pusher .alert.error[data-code="conflict"]');
    assert.match(await text('#app-pusher .alert.error'), /taken-key/);
    assert.equal((await api('GET', '/v1/apps/shop/pusher', undefined, 'shop')).status, 404);
    await shot('import-refused', '#app-pusher');

    await page.fill('#pusher-import-key', 'shop-key');
    await page.click('#pusher-import');
    await page.waitForSelector('#pusher-key');
    assert.equal(await page.$('#app-pusher .alert.error'), null, 'the error is gone');
    assert.equal(await text('#pusher-secret'), 'shop-secret');
    const shown = await api('GET', '/v1/apps/shop/pusher', undefined, 'shop');
    assert.deepEqual([shown.body.app_id, shown.body.key], ['shop-id', 'shop-key']);
    assert.equal(await trigger('shop-id', 'shop-key', 'shop-secret'), 200);
    await shot('imported', '#app-pusher');
  });
});
