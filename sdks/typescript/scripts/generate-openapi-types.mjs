// Regenerates src/generated/openapi.ts from docs/openapi.yaml with the pinned openapi-typescript
// (fields with a default stay optional in request bodies: `--default-non-nullable=false`).
// `node scripts/generate-openapi-types.mjs [output]` (default: the committed file). The test
// suite runs it into a temporary file and compares the bytes with the committed one.

import { execFileSync } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const spec = resolve(root, '../../docs/openapi.yaml');
const output = resolve(process.argv[2] ?? resolve(root, 'src/generated/openapi.ts'));
const cli = resolve(root, 'node_modules/openapi-typescript/bin/cli.js');

execFileSync(process.execPath, [cli, spec, '--default-non-nullable=false', '--output', output], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
