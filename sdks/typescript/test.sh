#!/usr/bin/env bash
# The TypeScript SDK's suite: installs the pinned devDependencies (npm ci, only when the lock file
# changed), builds dist/ with tsc, type-checks the usage examples, and runs every test file with
# `node --test` against the real server ($HERALD_BIN, default ../../target/debug/herald) and, for
# the browser tests, headless Chromium at /usr/bin/chromium ($CHROMIUM_BIN). Never downloads a
# browser.
set -euo pipefail
cd "$(dirname "$0")"

HERALD_BIN="${HERALD_BIN:-../../target/debug/herald}"
case "$HERALD_BIN" in /*) ;; *) HERALD_BIN="$PWD/$HERALD_BIN" ;; esac
export HERALD_BIN
if [ ! -x "$HERALD_BIN" ]; then
  echo "sdks/typescript: herald binary not found at $HERALD_BIN (build it or set HERALD_BIN)" >&2
  exit 1
fi

# Install exactly what package-lock.json pins; skipped when it is already installed.
stamp=node_modules/.herald-lock-sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "sdks/typescript: npm ci"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi

echo "sdks/typescript: build (tsc)"
npx --no-install tsc -p tsconfig.json
npx --no-install tsc -p test/tsconfig.json

echo "sdks/typescript: tests"
timeout 600 node --test --test-concurrency=2 --test-timeout=120000 --test-reporter=spec test/
