// What the README's install lines give an application: the tarball `npm pack` makes from this
// folder installs into an empty application, which imports the package by its name (package.json
// `name`, the name it will have on npm) and gets working exports and their types; the tarball holds
// what `files` says and no tests. Runs `npm` offline: the package has no runtime dependency.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const PACKAGE = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MANIFEST = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8'));

function npm(args, cwd) {
  return execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });
}

test('the packed tarball installs into an empty application, which imports it by name', () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-install-'));
  try {
    // dist/ is already built by test.sh; --ignore-scripts skips the prepack rebuild.
    const [packed] = JSON.parse(npm(['pack', '--ignore-scripts', '--json', '--pack-destination', dir], PACKAGE));
    assert.equal(packed.name, MANIFEST.name);
    assert.equal(packed.filename, `${MANIFEST.name}-${MANIFEST.version}.tgz`);
    const files = packed.files.map((f) => f.path);
    for (const wanted of ['package.json', 'README.md', 'dist/index.js', 'dist/index.d.ts']) {
      assert.ok(files.includes(wanted), `the tarball lacks ${wanted}`);
    }
    assert.deepEqual(files.filter((f) => f.startsWith('test/') || f.startsWith('node_modules/')), []);

    const app = join(dir, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    npm(['install', '--offline', '--ignore-scripts', join(dir, packed.filename)], app);
    const installed = join(app, 'node_modules', MANIFEST.name);
    assert.ok(existsSync(join(installed, MANIFEST.types)), `no ${MANIFEST.types} in the installed package`);

    writeFileSync(join(app, 'main.mjs'), `
      import { HeraldClient, HeraldPublisher, HeraldError, mintToken } from '${MANIFEST.name}';
      const token = await mintToken('0123456789abcdef0123456789abcdef', { sub: 'a' });
      const client = new HeraldClient({ url: 'http://127.0.0.1:1', token });
      console.log(JSON.stringify({
        client: typeof client.connect,
        publisher: typeof HeraldPublisher.prototype.publish,
        error: new HeraldError('not_found', 'x') instanceof Error,
        tokenParts: token.split('.').length,
      }));
    `);
    const out = execFileSync(process.execPath, ['main.mjs'], { cwd: app, encoding: 'utf8', timeout: 30_000 });
    assert.deepEqual(JSON.parse(out), { client: 'function', publisher: 'function', error: true, tokenParts: 3 });

    // Its types resolve through `exports` for a TypeScript application (Node16 resolution).
    writeFileSync(join(app, 'main.ts'), `
      import { HeraldClient, HeraldPublisher, type Message } from '${MANIFEST.name}';
      const client = new HeraldClient({ url: 'http://127.0.0.1:7070', token: async () => 'token' });
      client.subscribe<{ title: string }>('news', (m: Message<{ title: string }>) => console.log(m.data.title));
      export const publisher: HeraldPublisher = new HeraldPublisher({ url: 'http://127.0.0.1:7070', apiKey: 'k' });
    `);
    const tsc = join(PACKAGE, 'node_modules/typescript/bin/tsc');
    execFileSync(process.execPath, [tsc, '--noEmit', '--strict', '--target', 'ES2022', '--module', 'node16',
      '--moduleResolution', 'node16', '--lib', 'ES2022,DOM', 'main.ts'], { cwd: app, encoding: 'utf8', timeout: 60_000 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the README installs the package under its package.json name', () => {
  const readme = readFileSync(join(PACKAGE, 'README.md'), 'utf8');
  assert.ok(readme.includes(`${MANIFEST.name}-${MANIFEST.version}.tgz`), 'README: the tarball npm pack writes');
  assert.ok(readme.includes(`npm install ${MANIFEST.name}`), 'README: the published name');
  assert.ok(readme.includes(`from '${MANIFEST.name}'`), 'README: imports by that name');
});
