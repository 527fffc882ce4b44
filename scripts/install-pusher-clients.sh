#!/usr/bin/env bash
# Installs Pusher's official server SDKs, pusher-js and Laravel Echo that the Pusher tests in
# tests/pusher run (the integration tests in crates/herald/tests/server/pusher_*.rs start them;
# tests/browser/pusher.test.mjs loads pusher-js's browser build from here), pinned:
#   - Python: tests/pusher/.venv with requirements.txt (pusher from PyPI);
#   - Node: tests/pusher/node_modules, exactly as package-lock.json pins (pusher, pusher-js and
#     laravel-echo from npm).
# Idempotent and quick when nothing changed (each install is skipped while its pin file is the
# one last installed).
set -euo pipefail
cd "$(dirname "$0")/../tests/pusher"

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements-installed
if ! cmp -s requirements.txt "$stamp"; then
  echo "install-pusher-clients: pip install -r tests/pusher/requirements.txt"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
  cp requirements.txt "$stamp"
fi

stamp=node_modules/.herald-lock-sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "install-pusher-clients: npm ci in tests/pusher"
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi
echo "install-pusher-clients: ok"
