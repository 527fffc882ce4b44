// Replays herald-proto's golden vectors (read from the repository, never copied).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';

import {
  HeraldError, SERVER_ERROR_STATUS, SseParser, RawJson, decodeCursor, decodeInboxCursor, decodeServerFrame,
  encodeCommand, encodeCursor, encodeInboxCursor, errorFromBody, isServerErrorCode, mintToken, readTokenClaims,
} from '../dist/index.js';
import { ROOT } from './harness.mjs';

const VECTORS = resolve(ROOT, 'crates/herald-proto/tests/vectors');
const load = (name) => JSON.parse(readFileSync(join(VECTORS, name), 'utf8'));

test('commands.json: every command encodes canonically', () => {
  const { valid } = load('commands.json');
  assert.ok(valid.length > 0);
  for (const c of valid) {
    const { id, command, body } = c.meaning;
    let encodedBody = body;
    if (command === 'publish' && !c.encoded.includes(`"data":${JSON.stringify(body.data)}`)) {
      // The vector keeps the publisher's bytes inside `data`: send them as RawJson.
      const start = c.encoded.indexOf('"data":') + '"data":'.length;
      const end = body.id === undefined ? c.encoded.length - 2 : c.encoded.lastIndexOf(',"id":');
      encodedBody = { ...body, data: new RawJson(c.encoded.slice(start, end)) };
    }
    assert.equal(encodeCommand(id, command, encodedBody), c.encoded, c.name);
  }
});

test('frames.json: every WebSocket frame decodes to its meaning; invalid ones are refused', () => {
  const { valid, invalid } = load('frames.json');
  for (const c of valid.filter((c) => c.transport === 'ws')) {
    const frame = decodeServerFrame(c.wire);
    assert.deepEqual({ id: frame.id, frame: frame.frame, body: frame.body }, c.meaning, c.name);
  }
  for (const c of invalid) {
    assert.throws(() => decodeServerFrame(c.wire), (e) => e instanceof HeraldError && e.code === c.error, c.name);
  }
});

test('frames.json: SSE events parse to their meaning, poll and history bodies to theirs', () => {
  const { valid } = load('frames.json');
  const sse = valid.filter((c) => c.transport === 'sse');
  assert.ok(sse.length > 0);
  for (const c of sse) {
    const parser = new SseParser();
    const events = parser.push(c.wire);
    assert.equal(events.length, 1, c.name);
    const [e] = events;
    assert.deepEqual({ event: e.event, id: e.id, body: JSON.parse(e.data) }, c.meaning, c.name);
  }
  // The same events fed one character at a time, with CRLF line ends.
  const parser = new SseParser();
  const all = [];
  for (const ch of sse.map((c) => c.wire.replace(/\n/g, '\r\n')).join('')) all.push(...parser.push(ch));
  assert.deepEqual(all.map((e) => JSON.parse(e.data)), sse.map((c) => c.meaning.body));
  for (const c of valid.filter((c) => c.transport === 'poll' || c.transport === 'http')) {
    assert.deepEqual(JSON.parse(c.wire), c.meaning.body, c.name);
  }
});

test('cursors.json: cursor strings decode, encode, and invalid ones are refused', () => {
  const { valid, invalid } = load('cursors.json');
  for (const c of valid) {
    assert.deepEqual(decodeCursor(c.wire, c.channels), c.meaning, c.name);
    if (c.encoded === null) continue;
    // Seqs are JavaScript numbers: exact up to 2^53-1 (the 2^64-1 case decodes, see above).
    if (c.meaning.some((p) => !Number.isSafeInteger(p.seq))) continue;
    assert.equal(encodeCursor(c.meaning), c.encoded, c.name);
  }
  for (const c of invalid) {
    assert.throws(() => decodeCursor(c.wire, c.channels), (e) => e instanceof HeraldError && e.code === c.error, c.name);
  }
});

test('inbox_cursors.json: inbox cursors decode leniently and encode', () => {
  const v = load('inbox_cursors.json');
  for (const c of [...v.valid, ...v.lenient]) {
    assert.deepEqual(decodeInboxCursor(c.wire), c.meaning, c.name);
    assert.equal(encodeInboxCursor(c.meaning), c.encoded, c.name);
  }
});

test('tokens.json: minted tokens are byte for byte the vectors; claims read back', async () => {
  const { valid } = load('tokens.json');
  for (const c of valid) {
    assert.equal(await mintToken(c.secret, c.claims, c.app), c.token, c.name);
    const claims = readTokenClaims(c.token);
    assert.deepEqual(claims, c.claims, c.name);
  }
});

test('errors.json: every error body and frame maps to a typed error; non-codes do not', () => {
  const { valid, invalid } = load('errors.json');
  assert.deepEqual(valid.map((c) => c.code), Object.keys(SERVER_ERROR_STATUS));
  for (const c of valid) {
    assert.equal(SERVER_ERROR_STATUS[c.code], c.status, c.code);
    const http = errorFromBody(JSON.parse(c.http_body), { status: c.status });
    assert.ok(http instanceof HeraldError);
    assert.deepEqual([http.code, http.message, http.status], [c.code, c.message, c.status]);
    const frame = decodeServerFrame(c.ws_frame);
    assert.deepEqual([frame.frame, frame.id, frame.body.code, frame.body.message], ['error', 1, c.code, c.message]);
  }
  for (const c of invalid) {
    assert.equal(isServerErrorCode(c.wire), false, c.name);
    const e = errorFromBody({ error: { code: c.wire, message: 'm' } });
    assert.equal(e.code, 'protocol', c.name);
  }
});
