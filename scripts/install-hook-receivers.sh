#!/usr/bin/env bash
# Installs what the webhook receivers in tests/hooks need (the end-to-end webhook tests in
# crates/herald/tests/server/hooks_e2e start them): Standard Webhooks' own verifiers, pinned:
#   - Python: tests/hooks/.venv with requirements.txt (standardwebhooks from PyPI);
#   - Node: tests/hooks/node_modules, exactly as package-lock.json pins (standardwebhooks
#     from npm).
# Idempotent and quick when nothing changed (each install is skipped while its pin file is the
# one last installed).
set -euo pipefail
cd "$(dirname "$0")/../tests/hooks"

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements-installed
if ! cmp -s requirements.txt "$stamp"; then
  echo "install-hook-receivers: pip install -r tests/hooks/requirements.txt"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
  cp requirements.txt "$stamp"
fi

stamp=node_modules/.herald-lock-sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "install-hook-receivers: npm ci in tests/hooks"
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi
echo "install-hook-receivers: ok"
