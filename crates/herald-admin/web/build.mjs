// Bundles the dashboard (src/main.js and src/style.css) with esbuild into content-hashed files
// and writes index.html naming them. Usage: node build.mjs OUTDIR. The output depends only on
// the sources and the pinned esbuild, so scripts/build-admin.sh --check can compare it byte for
// byte with the committed assets.

import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] || join(here, '..', 'assets'));

mkdirSync(out, { recursive: true });
for (const name of readdirSync(out)) rmSync(join(out, name), { recursive: true, force: true });

const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: { admin: 'src/main.js', style: 'src/style.css' },
  bundle: true,
  format: 'esm',
  target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
  minify: true,
  sourcemap: false,
  legalComments: 'none',
  charset: 'utf8',
  entryNames: '[name]-[hash]',
  outdir: out,
  metafile: true,
  logLevel: 'warning',
});

const outputs = Object.keys(result.metafile.outputs).map((p) => basename(p));
const js = outputs.find((n) => n.startsWith('admin-') && n.endsWith('.js'));
const css = outputs.find((n) => n.startsWith('style-') && n.endsWith('.css'));
if (!js || !css) throw new Error(`unexpected build outputs: ${outputs.join(', ')}`);
const html = readFileSync(join(here, 'index.html'), 'utf8')
  .replace('{{JS}}', js)
  .replace('{{CSS}}', css);
writeFileSync(join(out, 'index.html'), html);
console.log(`built ${js}, ${css}, index.html into ${out}`);
