// MQTT over WebSocket in headless Chromium: mqtt.js's browser bundle (the one
// scripts/install-mqtt-clients.sh puts in tests/mqtt/node_modules/mqtt/dist) on a page from
// another origin connects to herald's `/mqtt` (`mqtt.websocket = true`), subscribes at QoS 1,
// receives an HTTP publish, and publishes at QoS 1 a message the HTTP API then finds in the
// channel's history with the next seq.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Herald, launchBrowser, mintToken, openPage, servePage, waitInPage, WAIT_MS } from './lib/harness.mjs';

const BUNDLE = resolve(dirname(fileURLToPath(import.meta.url)), '../mqtt/node_modules/mqtt/dist/mqtt.min.js');

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>mqtt.js over WebSocket</title></head>
<body><script>window.state = { connack: null, suback: null, messages: [], published: null, errors: [] };</script></body>
</html>`;

let herald;
let site;
let browser;
let configDir;

before(async () => {
  assert.ok(existsSync(BUNDLE), `${BUNDLE} is missing: run scripts/install-mqtt-clients.sh`);
  configDir = mkdtempSync(join(tmpdir(), 'herald-mqtt-browser-'));
  const config = join(configDir, 'herald.toml');
  writeFileSync(config, '[mqtt]\nwebsocket = true\n');
  herald = await Herald.start(['--config', config]);
  site = await servePage(PAGE);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await site?.close();
  await herald?.stop();
  if (configDir) rmSync(configDir, { recursive: true, force: true });
});

test('mqtt.js in Chromium subscribes and publishes over ws://.../mqtt', { timeout: 4 * WAIT_MS }, async () => {
  const page = await openPage(browser, site.url);
  await page.addScriptTag({ path: BUNDLE });
  const token = mintToken({ sub: 'mqtt-browser', channels: ['news'], publish: ['news'] });
  const url = `${herald.url.replace(/^http/, 'ws')}/mqtt`;
  await page.evaluate(({ url, token }) => {
    const client = window.mqtt.connect(url, {
      protocolVersion: 5,
      username: 'default',
      password: token,
      reconnectPeriod: 0,
    });
    window.client = client;
    client.on('connect', (connack) => {
      window.state.connack = connack.reasonCode ?? 0;
      client.subscribe('news', { qos: 1 }, (err, granted) => {
        window.state.suback = err ? String(err) : granted.map((g) => g.qos);
      });
    });
    client.on('message', (topic, payload, packet) => {
      window.state.messages.push({ topic, payload: new TextDecoder().decode(payload), qos: packet.qos });
    });
    client.on('error', (e) => window.state.errors.push(e.message));
  }, { url, token });
  await waitInPage(page, 'the SUBACK', () => window.state.suback !== null);
  let state = await page.evaluate(() => window.state);
  assert.equal(state.connack, 0, 'CONNACK Success');
  assert.deepEqual(state.suback, [1], 'granted QoS 1');

  const published = await herald.publish('news', { t: 21.5 });
  assert.equal(published.seq, 1);
  await waitInPage(page, 'the HTTP publish', () => window.state.messages.length >= 1);

  await page.evaluate(() => {
    window.client.publish('news', JSON.stringify({ from: 'browser' }), { qos: 1 }, (err) => {
      window.state.published = err ? String(err) : 'acknowledged';
    });
  });
  await waitInPage(page, 'the PUBACK', () => window.state.published !== null);
  // Subscribed to the channel it publishes to, it gets its own message back.
  await waitInPage(page, 'its own message back', () => window.state.messages.length >= 2);
  state = await page.evaluate(() => window.state);
  assert.equal(state.published, 'acknowledged');
  assert.deepEqual(state.messages, [
    { topic: 'news', payload: '{"t":21.5}', qos: 1 },
    { topic: 'news', payload: '{"from":"browser"}', qos: 1 },
  ]);
  assert.deepEqual(state.errors, []);
  const history = await herald.api('GET', '/v1/channels/news/messages');
  assert.equal(history.status, 200);
  assert.deepEqual(history.body.messages.map((m) => [m.seq, m.data]), [[1, { t: 21.5 }], [2, { from: 'browser' }]]);
  await page.evaluate(() => new Promise((done) => window.client.end(false, {}, done)));
});
