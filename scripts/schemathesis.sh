#!/usr/bin/env bash
# Property-based test of the HTTP API against its own OpenAPI document: schemathesis (PyPI,
# pinned) reads the document the server serves (/v1/openapi.yaml) and sends requests the document
# allows and requests it forbids; a schema-valid request refused, a schema-violating request
# accepted, a response the document does not describe or a server error fails the run.
#
# Installs schemathesis into a virtual environment under target/ (reused when it is there),
# starts the debug binary on a free loopback port with an admin key, a publisher key and a token
# secret, makes an app, registers a device and sends it a push so the routes that read them have
# data, runs the examples, coverage and fuzzing phases with a fixed seed and a bounded number of
# examples, stops the server and exits non-zero on any failure. Credentials per security scheme
# are in scripts/schemathesis.toml; the failures left out, each with its reason, in
# scripts/schemathesis_hooks.py.
#
# Usage: scripts/schemathesis.sh [BINARY]    (default target/debug/herald, built when missing)
#   HERALD_SCHEMATHESIS_EXAMPLES  examples per operation and phase (default 20)
#   HERALD_SCHEMATHESIS_SEED      the seed (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
binary="${1:-target/debug/herald}"
examples="${HERALD_SCHEMATHESIS_EXAMPLES:-20}"
seed="${HERALD_SCHEMATHESIS_SEED:-30}"
venv="target/schemathesis-venv"

if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
  echo "installing schemathesis $SCHEMATHESIS_VERSION into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi
if [ ! -x "$binary" ]; then
  CARGO_INCREMENTAL=0 cargo build -p herald
fi
binary="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"

workdir="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$workdir"
}
trap cleanup EXIT

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"
export HERALD_ST_API_KEY="hk_schemathesis_publisher_key_0123456789ab"
export HERALD_ST_ADMIN_KEY="schemathesis-admin-key-0123456789"
token_secret="schemathesis-token-secret-0123456789abcdef"

(
  cd "$workdir"
  HERALD_API_KEY="$HERALD_ST_API_KEY" HERALD_ADMIN_KEY="$HERALD_ST_ADMIN_KEY" \
    HERALD_TOKEN_SECRET="$token_secret" HERALD_LISTEN="127.0.0.1:$port" \
    exec "$binary" serve
) >"$workdir/server.log" 2>&1 &
server_pid=$!

for _ in $(seq 1 100); do
  if curl -fsS "$base/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then cat "$workdir/server.log"; exit 1; fi
  sleep 0.1
done
curl -fsS "$base/readyz" >/dev/null

# Data the routes that read something find: the app `shop` (the document's example app id), a
# device with a push, a message, and a client token. The token grants no channel the document's
# examples name and no device: a long-poll that may wait (up to 120 s) outlasts schemathesis's
# request timeout, and an SSE stream is endless, so the transports are checked up to
# authorization (their parameters are checked by crates/herald/tests/server/documented_inputs).
publisher=(-H "Authorization: Bearer $HERALD_ST_API_KEY" -H "Content-Type: application/json")
curl -fsS -H "Authorization: Bearer $HERALD_ST_ADMIN_KEY" -H "Content-Type: application/json" \
  -X POST "$base/v1/apps" -d '{"id":"shop","name":"Shop"}' >/dev/null
curl -fsS "${publisher[@]}" -X POST "$base/v1/devices" \
  -d '{"platform":"herald","id":"phone-1","user":"alice","tags":["sports"]}' >/dev/null
curl -fsS "${publisher[@]}" -X POST "$base/v1/push" \
  -d '{"target":{"device":"phone-1"},"data":{"hello":"world"}}' >/dev/null
curl -fsS "${publisher[@]}" -X POST "$base/v1/channels/news/messages" -d '{"data":{"hello":"world"}}' >/dev/null
HERALD_ST_CLIENT_TOKEN="$(curl -fsS "${publisher[@]}" -X POST "$base/v1/tokens" \
  -d '{"sub":"schemathesis","channels":["st-none"],"publish":["st-none"]}' |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')"
export HERALD_ST_CLIENT_TOKEN

# One worker: with two, Python 3.11's ast.parse (which hypothesis calls to describe filters)
# fails now and then in both threads at once ("AST constructor recursion depth mismatch").
# Run in the scratch directory: schemathesis keeps its replay cache (.schemathesis/) there.
repo="$PWD"
status=0
(cd "$workdir" && SCHEMATHESIS_HOOKS="$repo/scripts/schemathesis_hooks.py" \
  "$repo/$venv/bin/schemathesis" --config-file "$repo/scripts/schemathesis.toml" \
  run "$base/v1/openapi.yaml" \
  --phases examples,coverage,fuzzing \
  --max-examples "$examples" \
  --seed "$seed" \
  --workers 1 \
  --no-color) || status=$?

if [ "$status" -ne 0 ]; then
  echo "schemathesis found failures (exit $status); the server's log:" >&2
  tail -n 50 "$workdir/server.log" >&2
fi
exit "$status"
