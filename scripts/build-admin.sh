#!/usr/bin/env bash
# Builds the admin dashboard's assets: installs crates/herald-admin/web's npm packages exactly as
# package-lock.json pins them (esbuild) and bundles web/ into crates/herald-admin/assets, which
# are committed and embedded in the binary at compile time (so `cargo build` needs no Node).
# Usage:
#   scripts/build-admin.sh           rebuild crates/herald-admin/assets (commit the result)
#   scripts/build-admin.sh --check   build into a temporary folder and fail if its bytes differ
#                                    from the committed assets (the build is reproducible)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
web="$root/crates/herald-admin/web"
assets="$root/crates/herald-admin/assets"

check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

command -v node >/dev/null 2>&1 || { echo "build-admin: node is needed (Node.js 20 or later)" >&2; exit 1; }

cd "$web"
npm ci --no-audit --no-fund --loglevel=error

if ! $check; then
  node build.mjs "$assets"
  exit 0
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
node build.mjs "$out/assets" >/dev/null
if diff -r "$assets" "$out/assets" >/dev/null; then
  echo "build-admin: the committed assets are exactly what the sources build"
else
  echo "build-admin: crates/herald-admin/assets differ from a fresh build of crates/herald-admin/web:" >&2
  diff -rq "$assets" "$out/assets" >&2 || true
  echo "build-admin: run scripts/build-admin.sh and commit crates/herald-admin/assets" >&2
  exit 1
fi
