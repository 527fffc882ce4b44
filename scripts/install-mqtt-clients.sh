#!/usr/bin/env bash
# Installs the third-party MQTT clients the MQTT tests in crates/herald/tests/server/mqtt.rs
# run against the server, and the broker the MQTT benchmarks compare with:
#   - Debian's mosquitto-clients (mosquitto_pub, mosquitto_sub) and mosquitto (the broker,
#     only installed: nothing here starts it), when mosquitto_sub or mosquitto is missing;
#   - Python: tests/mqtt/.venv with requirements.txt (paho-mqtt from PyPI, pinned);
#   - Node: tests/mqtt/node_modules, exactly as package-lock.json pins (mqtt.js from npm).
# Idempotent and quick when nothing changed (apt runs only for a missing program; each other
# install is skipped while its pin file is the one last installed).
set -euo pipefail
cd "$(dirname "$0")/../tests/mqtt"

missing=()
command -v mosquitto_sub >/dev/null 2>&1 || missing+=(mosquitto-clients)
# The broker lives in /usr/sbin, which is not on every PATH.
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || missing+=(mosquitto)
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "install-mqtt-clients: apt-get install ${missing[*]}"
  # A fresh machine has no package lists yet: update only when the install cannot find them.
  if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "${missing[@]}" >/dev/null; then
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements-installed
if ! cmp -s requirements.txt "$stamp"; then
  echo "install-mqtt-clients: pip install -r tests/mqtt/requirements.txt"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
  cp requirements.txt "$stamp"
fi

stamp=node_modules/.herald-lock-sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "install-mqtt-clients: npm ci in tests/mqtt"
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi
echo "install-mqtt-clients: ok"
