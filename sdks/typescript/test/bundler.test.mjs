// The package works with a bundler: esbuild bundles an application that imports it by name
// (resolving the package's `exports`), and the bundle runs, with every export working.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { build } from 'esbuild';

const PACKAGE = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** The name an application installs and imports it by (package.json `name`). */
const NAME = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')).name;

test('an application bundled with esbuild imports the package by name and runs', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-bundle-'));
  try {
    // The application's own node_modules/<name>, as `npm install <the package's folder>` gives it.
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(PACKAGE, join(dir, 'node_modules', NAME), 'dir');
    const out = join(dir, 'app.bundle.mjs');
    const result = await build({
      entryPoints: [join(PACKAGE, 'test/fixtures/bundle-entry.mjs')],
      absWorkingDir: dir,
      nodePaths: [join(dir, 'node_modules')],
      bundle: true,
      format: 'esm',
      platform: 'browser',
      outfile: out,
      logLevel: 'silent',
      metafile: true,
    });
    assert.deepEqual(result.errors, []);
    const inputs = Object.keys(result.metafile.inputs);
    assert.ok(inputs.some((p) => p.includes('dist/index.js')), inputs.join('\n'));
    assert.ok(!readFileSync(out, 'utf8').includes('require('), 'the bundle needs no CommonJS');
    const bundled = await import(pathToFileURL(out).href);
    assert.equal(typeof bundled.HeraldClient, 'function');
    assert.equal(typeof bundled.HeraldPublisher.prototype.publish, 'function');
    const token = await bundled.mintToken('0123456789abcdef0123456789abcdef', { sub: 'a' });
    assert.equal(token.split('.').length, 3);
    assert.ok(new bundled.HeraldError('not_found', 'x') instanceof Error);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
