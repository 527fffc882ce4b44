// Subscribes in batches: a reconnect resubscribes many channels in a few WebSocket messages (JSON
// arrays of commands), each resuming exactly; a server that predates batches (a mock answering an
// array as the old server did) gets the same commands again, one a message.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import WebSocket, { WebSocketServer } from 'ws';

import { HeraldClient } from '../dist/index.js';
import { Herald, collector, nextEvent, withTimeout } from './harness.mjs';

let herald;
before(async () => { herald = await Herald.start(); });
after(async () => { await herald?.stop(); });

/** A `ws` WebSocket that records every message it sends, one list per connection. */
function countingWebSocket() {
  const connections = [];
  class CountingWebSocket extends WebSocket {
    constructor(url) {
      super(url);
      this.sentMessages = [];
      connections.push(this.sentMessages);
    }

    send(data) {
      this.sentMessages.push(data);
      super.send(data);
    }
  }
  return { CountingWebSocket, connections };
}

/** The subscribe commands in the messages of one connection, and how many messages held them. */
function subscribesIn(messages) {
  const commands = [];
  let carrying = 0;
  for (const text of messages) {
    const parsed = JSON.parse(text);
    const found = (Array.isArray(parsed) ? parsed : [parsed]).filter((c) => c.subscribe);
    if (found.length > 0) carrying += 1;
    commands.push(...found);
  }
  return { commands, carrying };
}

test('a reconnect resubscribes 250 channels in 3 messages, each resuming exactly', async () => {
  const CHANNELS = 250;
  const names = Array.from({ length: CHANNELS }, (_, i) => `batch/c${i}`);
  const { CountingWebSocket, connections } = countingWebSocket();
  let gate = null;
  const client = herald.client({
    WebSocket: CountingWebSocket,
    token: async () => { if (gate) await gate.promise; return herald.token(); },
  });
  const got = collector();
  const unrecovered = [];
  const errors = [];
  client.on('unrecovered', (e) => unrecovered.push(e));
  client.on('error', (e) => errors.push(e));
  const subs = names.map((name) => client.subscribe(name, (m) => got.push([m.channel, m.data.n])));
  await withTimeout(client.connect(), 'connect');
  await withTimeout(Promise.all(subs.map((s) => s.ready)), 'every subscribe');
  const publishRound = (n) => herald.publisher().publishBatch({ messages: names.map((channel) => ({ channel, data: { n } })) });
  await publishRound(1);
  await got.waitFor(CHANNELS);

  gate = (() => { let resolve; const promise = new Promise((r) => { resolve = r; }); return { promise, resolve }; })();
  const disconnected = nextEvent(client, 'disconnected');
  await herald.kill9();
  await disconnected;
  await herald.startAgain();
  await publishRound(2);
  await publishRound(3);
  const back = nextEvent(client, 'connected');
  gate.resolve();
  gate = null;
  await back;
  await publishRound(4);
  await got.waitFor(4 * CHANNELS, 'every message of the four rounds');

  const byChannel = new Map(names.map((name) => [name, []]));
  for (const [channel, n] of got.items) byChannel.get(channel).push(n);
  for (const [channel, ns] of byChannel) assert.deepEqual(ns, [1, 2, 3, 4], `${channel}: each message once, in order`);
  assert.equal(got.items.length, 4 * CHANNELS);
  assert.deepEqual(unrecovered, []);
  assert.deepEqual(errors, []);

  assert.equal(connections.length, 2, 'one reconnect');
  for (const [i, messages] of connections.entries()) {
    const { commands, carrying } = subscribesIn(messages);
    assert.equal(commands.length, CHANNELS, `connection ${i + 1}: a subscribe per channel`);
    assert.equal(carrying, 3, `connection ${i + 1}: ${CHANNELS} subscribes in batches of at most 100`);
    assert.ok(carrying < CHANNELS, `connection ${i + 1}: fewer messages than channels`);
  }
  const resubscribes = subscribesIn(connections[1]).commands;
  assert.equal(new Set(resubscribes.map((c) => c.id)).size, CHANNELS, 'each command with its own id');
  for (const c of resubscribes) assert.equal(c.subscribe.since?.seq, 1, `${c.subscribe.channel} resumes after 1`);
  client.close();
});

/**
 * A WebSocket server answering as Herald did before batches: an array is one `bad_request` error
 * without an id (`frame is not a JSON object`); `connect`, `subscribe` and `ping` are answered.
 */
async function oldServer() {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((resolve) => server.once('listening', resolve));
  const seen = { arrays: 0, subscribes: [] };
  server.on('connection', (socket) => {
    socket.on('message', (data) => {
      const text = data.toString();
      if (text.startsWith('[')) {
        seen.arrays += 1;
        const message = 'frame is not a JSON object: invalid type: sequence, expected a map at line 1 column 0';
        socket.send(JSON.stringify({ error: { code: 'bad_request', message } }));
        return;
      }
      const command = JSON.parse(text);
      if (command.connect) socket.send(JSON.stringify({ id: command.id, connect: { sub: 'old' } }));
      if (command.ping) socket.send(JSON.stringify({ id: command.id, pong: {} }));
      if (command.subscribe) {
        seen.subscribes.push(command.subscribe.channel);
        const reply = { channel: command.subscribe.channel, seq: 0, epoch: '', recovered: false };
        socket.send(JSON.stringify({ id: command.id, subscribe: reply }));
      }
    });
  });
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    seen,
    close: () => new Promise((resolve) => {
      for (const socket of server.clients) socket.terminate();
      server.close(() => resolve());
    }),
  };
}

test('a server that predates batches: the refused batches are sent again one command a message', async () => {
  const old = await oldServer();
  const { CountingWebSocket, connections } = countingWebSocket();
  const client = new HeraldClient({ url: old.url, token: 't', WebSocket: CountingWebSocket, requestTimeoutMs: 5000 });
  const errors = [];
  client.on('error', (e) => errors.push(e));
  try {
    const names = Array.from({ length: 150 }, (_, i) => `old/c${i}`);
    const subs = names.map((name) => client.subscribe(name, () => {}));
    await withTimeout(client.connect(), 'connect');
    const replies = await withTimeout(Promise.all(subs.map((s) => s.ready)), 'every subscribe');
    assert.deepEqual(replies.map((r) => r.channel), names);
    assert.equal(old.seen.arrays, 2, 'two batches tried (100 and 50), each refused');
    assert.deepEqual(old.seen.subscribes, names, 'then each subscribe once, alone, in order');
    assert.deepEqual(errors, [], 'the refusals are not reported');
    // The connection now sends one command a message.
    const late = [client.subscribe('old/late-1', () => {}), client.subscribe('old/late-2', () => {})];
    await withTimeout(Promise.all(late.map((s) => s.ready)), 'later subscribes');
    assert.equal(old.seen.arrays, 2);
    assert.deepEqual(old.seen.subscribes.slice(-2), ['old/late-1', 'old/late-2']);
    assert.equal(connections.length, 1, 'no reconnect');
  } finally {
    client.close();
    await old.close();
  }
});

test('subscribe calls made in one go share a message; a server with batches answers each', async () => {
  const { CountingWebSocket, connections } = countingWebSocket();
  const client = herald.client({ WebSocket: CountingWebSocket });
  await withTimeout(client.connect(), 'connect');
  const subs = Array.from({ length: 5 }, (_, i) => client.subscribe(`together/c${i}`, () => {}));
  const replies = await withTimeout(Promise.all(subs.map((s) => s.ready)), 'every subscribe');
  assert.deepEqual(replies.map((r) => r.channel), ['together/c0', 'together/c1', 'together/c2', 'together/c3', 'together/c4']);
  const { commands, carrying } = subscribesIn(connections[0]);
  assert.equal(commands.length, 5);
  assert.equal(carrying, 1, 'five subscribes in one message');
  // Alone, a subscribe is a message of its own, as before.
  await withTimeout(client.subscribe('together/alone', () => {}).ready, 'one more');
  assert.equal(connections[0].at(-1), JSON.stringify({ id: JSON.parse(connections[0].at(-1)).id, subscribe: { channel: 'together/alone' } }));
  client.close();
});
