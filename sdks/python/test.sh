#!/usr/bin/env bash
# Runs the Python SDK's test suite against a real Herald server ($HERALD_BIN, default
# ../../target/debug/herald). Installs the pinned test requirements into .venv (idempotently)
# and the package itself from this directory, then runs pytest (every test has a timeout).
set -euo pipefail
cd "$(dirname "$0")"

PYTHON="${PYTHON:-python3}"
export HERALD_BIN="${HERALD_BIN:-../../target/debug/herald}"
if [ ! -x "$HERALD_BIN" ]; then
  echo "sdks/python: herald binary not found at $HERALD_BIN (build it or set HERALD_BIN)" >&2
  exit 1
fi
HERALD_BIN="$(cd "$(dirname "$HERALD_BIN")" && pwd)/$(basename "$HERALD_BIN")"

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# Reinstall only when the pinned list changed since the last successful install.
stamp=.venv/.requirements-installed
if ! cmp -s requirements-test.txt "$stamp"; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
  cp requirements-test.txt "$stamp"
fi
# The package itself, built from this directory with the pinned backend (no network needed).
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall .

timeout 600 .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
