#!/usr/bin/env bash
# Builds a release of the herald binary and packs it for operators:
#   target/dist/herald-<version>-<target>.tar.gz         the binary, herald.example.toml, the
#                                                        systemd unit and its sysusers file,
#                                                        LICENSE, README.md, CHANGELOG.md, docs/
#   target/dist/herald-<version>-<target>.tar.gz.sha256  its checksum (`sha256sum -c` reads it)
#
# Usage: scripts/release.sh [--binary PATH] [--target TRIPLE] [--out DIR]
#   (no option)      cargo build --release --locked -p herald, then pack target/release/herald.
#                    The release profile links with fat LTO: about 8 minutes on 2 cores.
#   --binary PATH    pack this binary instead of building one (scripts/check-packaging.sh packs
#                    target/debug/herald this way to test the packing in seconds).
#   --target TRIPLE  the name's target part (default: the host's, from `rustc -vV`); with
#                    --binary only, since the build is for the host.
#   --out DIR        where the tarball and checksum go (default target/dist).
#
# The version is what the binary says (`herald --version`), checked against Cargo.toml's. The
# tarball is reproducible: files in name order, owned by 0:0, dated at the commit (or
# SOURCE_DATE_EPOCH), gzip without a timestamp, so the same binary packs to the same bytes.
# RELEASE_GZIP_LEVEL (1-9, default 9) trades size for time; the packing check uses 1.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=""
target=""
out="target/dist"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="${2:?--binary needs a path}"; shift 2 ;;
    --target) target="${2:?--target needs a triple}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (usage: scripts/release.sh [--binary PATH] [--target TRIPLE] [--out DIR])" >&2; exit 2 ;;
  esac
done

host="$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')"
if [ -z "$binary" ]; then
  if [ -n "$target" ] && [ "$target" != "$host" ]; then
    echo "--target $target needs --binary: this script builds for the host ($host) only" >&2
    exit 2
  fi
  echo "building the release binary (fat LTO: about 8 minutes on 2 cores)..."
  cargo build --release --locked -p herald
  binary="${CARGO_TARGET_DIR:-target}/release/herald"
fi
target="${target:-$host}"
if [ -z "$target" ]; then
  echo "cannot tell the target triple (no rustc on PATH): pass --target" >&2
  exit 2
fi
if [ ! -x "$binary" ]; then
  echo "not an executable file: $binary" >&2
  exit 1
fi

# `herald 0.1.0 (abc1234 2026-11-29)`: the version is the second word.
version_line="$("$binary" --version)"
version="$(printf '%s\n' "$version_line" | awk '{print $2}')"
cargo_version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
if [ "$version" != "$cargo_version" ]; then
  echo "$binary says '$version_line', but Cargo.toml's version is $cargo_version: rebuild it" >&2
  exit 1
fi

name="herald-$version-$target"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/$name"
mkdir -p "$root/systemd"
install -m 0755 "$binary" "$root/herald"
install -m 0644 herald.example.toml LICENSE README.md CHANGELOG.md "$root/"
install -m 0644 packaging/systemd/herald.service packaging/systemd/herald.sysusers "$root/systemd/"
# The documents README.md links to: the committed ones where this is a git checkout (not a
# scratch file beside them), else the folder as it is.
if git rev-parse --git-dir >/dev/null 2>&1; then
  git ls-files -z docs | while IFS= read -r -d '' file; do
    [ -f "$file" ] && install -D -m 0644 "$file" "$root/$file"
  done
else
  cp -R docs "$root/docs"
fi

epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
tarball="$out/$name.tar.gz"
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  -cf - "$name" | gzip "-${RELEASE_GZIP_LEVEL:-9}" -n > "$tarball"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")

echo "$version_line"
echo "tarball:  $tarball"
echo "checksum: $tarball.sha256 ($(cut -d' ' -f1 "$tarball.sha256"))"
