// The package itself: its version is the workspace version, src/generated/openapi.ts is what the
// pinned generator makes from docs/openapi.yaml today, the publisher has a method for every route,
// and dist/ imports nothing but its own files (so it loads in a browser without a bundler).

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';

import { HeraldClient, HeraldPublisher } from '../dist/index.js';
import { ROOT } from './harness.mjs';

const PACKAGE = resolve(ROOT, 'sdks/typescript');

test('the package version is the workspace version', () => {
  const cargo = readFileSync(join(ROOT, 'Cargo.toml'), 'utf8');
  const section = cargo.slice(cargo.indexOf('[workspace.package]'));
  const version = /^version\s*=\s*"([^"]+)"/m.exec(section)[1];
  const pkg = JSON.parse(readFileSync(resolve(ROOT, 'sdks/typescript/package.json'), 'utf8'));
  assert.equal(pkg.version, version);
});

test('src/generated/openapi.ts is up to date with docs/openapi.yaml', () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-openapi-'));
  try {
    const out = join(dir, 'openapi.ts');
    execFileSync(process.execPath, [resolve(ROOT, 'sdks/typescript/scripts/generate-openapi-types.mjs'), out]);
    const committed = readFileSync(resolve(ROOT, 'sdks/typescript/src/generated/openapi.ts'), 'utf8');
    assert.ok(readFileSync(out, 'utf8') === committed, 'regenerate with `npm run generate` and commit src/generated/openapi.ts');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Routes the publisher does not cover, and why. */
const NOT_PUBLISHER = {
  websocket: 'HeraldClient (the WebSocket transport)',
  sse: 'HeraldClient (the SSE transport)',
  postToChannelPath: 'an error route: POST to a channel path without /messages always answers 404',
  startSession: 'the admin dashboard\'s browser login (a cookie session), not an API client\'s',
  currentSession: 'the admin dashboard\'s browser login (a cookie session), not an API client\'s',
  endSession: 'the admin dashboard\'s browser login (a cookie session), not an API client\'s',
  tailHooks: 'an operator\'s live text/event-stream of one node\'s webhook events (`herald hooks tail`), not an API call',
  getPusherCredentials: 'an operator\'s setup of Pusher credentials (`herald pusher`), for Pusher\'s own SDKs',
  createPusherCredentials: 'an operator\'s setup of Pusher credentials (`herald pusher`), for Pusher\'s own SDKs',
  deletePusherCredentials: 'an operator\'s setup of Pusher credentials (`herald pusher`), for Pusher\'s own SDKs',
  rotatePusherSecret: 'an operator\'s setup of Pusher credentials (`herald pusher`), for Pusher\'s own SDKs',
};
/** operationId -> method, where the names differ. */
const RENAMED = { getHistory: 'history', patchDevice: 'updateDevice', getChannelPresence: 'presence' };

test('the publisher has a method for every operation of docs/openapi.yaml', () => {
  const generated = readFileSync(join(PACKAGE, 'src/generated/openapi.ts'), 'utf8');
  const operations = [...generated.matchAll(/operations\["(\w+)"\]/g)].map((m) => m[1]);
  assert.ok(operations.length > 40, `${operations.length} operations`);
  for (const op of new Set(operations)) {
    if (NOT_PUBLISHER[op]) continue;
    const method = RENAMED[op] ?? op;
    assert.equal(typeof HeraldPublisher.prototype[method], 'function', `no publisher method for ${op}`);
  }
  assert.equal(typeof HeraldClient.prototype.subscribe, 'function');
});

test('dist/ imports only its own files (loads unbundled in a browser)', () => {
  const walk = (dir) => readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.js') ? [join(dir, e.name)] : []);
  for (const file of walk(join(PACKAGE, 'dist'))) {
    for (const m of readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)[^'"]*from\s+['"]([^'"]+)['"]/gm)) {
      assert.ok(m[1].startsWith('./') || m[1].startsWith('../'), `${file} imports ${m[1]}`);
      assert.ok(m[1].endsWith('.js'), `${file} imports ${m[1]} without .js`);
    }
  }
});

test('keys and tokens never show in console.log or JSON', async () => {
  const { inspect } = await import('node:util');
  const publisher = new HeraldPublisher({ url: 'http://127.0.0.1:1', apiKey: 'hk_secret_value', adminKey: 'adm_secret_value' });
  const client = new HeraldClient({ url: 'http://127.0.0.1:1', token: 'eyJ.secret.token' });
  for (const text of [inspect(publisher), JSON.stringify(publisher), inspect(client)]) {
    assert.ok(!/secret/.test(text), text);
  }
});
