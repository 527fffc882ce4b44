// Presence on the subscriber client against the real server (a `room-` presence namespace): two
// users see each other join and leave (`presence` events, `onPresence`, `members(channel)`), the
// member list is the server's again after a kill -9 and restart, and SSE carries the same.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Herald, nextEvent, withTimeout } from './harness.mjs';

let herald;
before(async () => { herald = await Herald.start({}, '[[namespaces]]\nprefix = "room-"\npresence = true\n'); });
after(async () => { await herald?.stop(); });

const users = (list) => (list ?? []).map((m) => m.user);

test('two users see each other join and leave; the member list is right after a restart', async () => {
  // Ada's token carries her data; Bob's has none, so his subscribe's member is his data.
  const ada = herald.client({ token: () => herald.token({ sub: 'ada', user_info: { name: 'Ada' } }) });
  const adaEvents = [];
  const adaListed = nextEvent(ada, 'presence', (e) => e.event === 'members');
  const sub = ada.subscribe('room-1', () => {}, { presence: true, onPresence: (e) => adaEvents.push(e) });
  assert.equal(ada.members('room-1'), undefined, 'nothing listed before the server answers');
  await withTimeout(ada.connect(), 'ada connects');
  const listed = await adaListed;
  assert.deepEqual(listed, { channel: 'room-1', event: 'members', members: [{ user: 'ada', data: { name: 'Ada' } }] });
  assert.deepEqual(sub.members, [{ user: 'ada', data: { name: 'Ada' } }]);

  const bob = herald.client({ token: () => herald.token({ sub: 'bob' }) });
  const bobListed = nextEvent(bob, 'presence', (e) => e.event === 'members');
  const adaSeesBob = nextEvent(ada, 'presence', (e) => e.event === 'join');
  bob.subscribe('room-1', () => {}, { presence: true, member: { name: 'Bob' } });
  await withTimeout(bob.connect(), 'bob connects');
  assert.deepEqual(users((await bobListed).members), ['ada', 'bob']);
  const joined = await adaSeesBob;
  assert.deepEqual(joined.member, { user: 'bob', data: { name: 'Bob' } });
  assert.deepEqual(ada.members('room-1'), [{ user: 'ada', data: { name: 'Ada' } }, { user: 'bob', data: { name: 'Bob' } }]);
  assert.deepEqual(adaEvents.map((e) => e.event), ['members', 'join'], 'onPresence saw the same');

  // The server dies and Bob is gone when it is back: no leave reaches Ada, yet her list is the
  // one her resubscribe lists.
  const lost = nextEvent(ada, 'disconnected');
  await herald.kill9();
  await lost;
  bob.close();
  const relisted = nextEvent(ada, 'presence', (e) => e.event === 'members');
  await herald.startAgain();
  assert.deepEqual(users((await relisted).members), ['ada']);
  assert.deepEqual(users(ada.members('room-1')), ['ada']);

  // Bob comes back, then leaves.
  const bobAgain = herald.client({ token: () => herald.token({ sub: 'bob' }) });
  const rejoined = nextEvent(ada, 'presence', (e) => e.event === 'join');
  bobAgain.subscribe('room-1', () => {}, { presence: true, member: { name: 'Bob' } });
  await withTimeout(bobAgain.connect(), 'bob connects again');
  await rejoined;
  assert.deepEqual(users(ada.members('room-1')), ['ada', 'bob']);
  const left = nextEvent(ada, 'presence', (e) => e.event === 'leave');
  bobAgain.close();
  assert.deepEqual(await left, { channel: 'room-1', event: 'leave', user: 'bob', members: [{ user: 'ada', data: { name: 'Ada' } }] });
  assert.deepEqual(users(ada.members('room-1')), ['ada']);

  // Unsubscribing forgets the list; a channel without presence has none.
  ada.subscribe('room-2', () => {});
  await ada.unsubscribe('room-1');
  assert.equal(ada.members('room-1'), undefined);
  assert.equal(ada.members('room-2'), undefined);
  ada.close();
});

test('over SSE: the members, then a join and a leave', async () => {
  const ada = herald.client({ transport: 'sse', token: () => herald.token({ sub: 'ada-sse' }) });
  const listed = nextEvent(ada, 'presence', (e) => e.event === 'members');
  ada.subscribe('room-sse', () => {}, { presence: true, member: { name: 'Ada' } });
  ada.subscribe('news/plain', () => {});
  await withTimeout(ada.connect(), 'connect over SSE');
  assert.equal(ada.transport, 'sse');
  assert.deepEqual((await listed).members, [{ user: 'ada-sse', data: { name: 'Ada' } }]);

  const bob = herald.client({ token: () => herald.token({ sub: 'bob-sse' }) });
  const joined = nextEvent(ada, 'presence', (e) => e.event === 'join');
  bob.subscribe('room-sse', () => {}, { presence: true });
  await withTimeout(bob.connect(), 'bob connects');
  assert.deepEqual((await joined).member, { user: 'bob-sse', data: {} });
  const left = nextEvent(ada, 'presence', (e) => e.event === 'leave');
  bob.close();
  assert.equal((await left).user, 'bob-sse');
  assert.deepEqual(users(ada.members('room-sse')), ['ada-sse']);
  assert.equal(ada.members('news/plain'), undefined);
  ada.close();
});

test('a client closed while its token is fetched opens nothing: no join flashes on the channel', async () => {
  const ada = herald.client({ token: () => herald.token({ sub: 'ada-watch' }) });
  const listed = nextEvent(ada, 'presence', (e) => e.event === 'members');
  ada.subscribe('room-ghost', () => {}, { presence: true });
  await withTimeout(ada.connect(), 'ada connects');
  await listed;
  const joins = [];
  ada.on('presence', (e) => { if (e.event === 'join') joins.push(e.user); });

  // The ghost is closed while its token callback is still running; it then gets its token.
  let release;
  const gate = new Promise((resolve) => { release = resolve; });
  const ghost = herald.client({ transport: 'sse', token: async () => { await gate; return herald.token({ sub: 'ghost' }); } });
  ghost.subscribe('room-ghost', () => {}, { presence: true });
  const ended = ghost.connect().catch((e) => e);
  ghost.close();
  release();
  assert.equal((await withTimeout(ended, 'the ghost to end')).code, 'not_connected');

  // Carol joins after the ghost ended: the first join Ada sees is Carol's.
  const carol = herald.client({ token: () => herald.token({ sub: 'carol' }) });
  const carolJoined = nextEvent(ada, 'presence', (e) => e.event === 'join' && e.user === 'carol');
  carol.subscribe('room-ghost', () => {}, { presence: true });
  await withTimeout(carol.connect(), 'carol connects');
  await carolJoined;
  assert.deepEqual(joins, ['carol']);
  carol.close();
  ada.close();
});
