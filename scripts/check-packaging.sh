#!/usr/bin/env bash
# Checks what operators install, in seconds (scripts/test.sh runs it after the Rust tests):
# 1. the systemd unit (packaging/systemd/herald.service): `systemd-analyze verify` with no
#    warning at all, its offline security exposure at most 2.5 (`systemd-analyze security`),
#    the hardening settings docs/operations.md promises, and every system call the server
#    makes (traced with strace while it serves) inside the unit's SystemCallFilter;
# 2. the release tarball: scripts/release.sh packs an existing binary (--binary; the release
#    build itself takes minutes and is not run here), and the tarball holds what it should, its
#    checksum verifies, and the binary in it runs;
# 3. crates/herald/build.rs names the commit from git, from HERALD_BUILD_COMMIT, and says
#    `unknown` without git (a tarball build), compiled and run on its own.
# Usage: scripts/check-packaging.sh [BINARY]   (default target/debug/herald; built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."

binary="${1:-target/debug/herald}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "check-packaging: $*" >&2; exit 1; }

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "installing systemd-analyze (Debian's systemd package)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd; } >/dev/null
fi
if [ ! -x "$binary" ]; then
  cargo build -p herald
fi
# A copy, so a build running meanwhile in the same target folder cannot change it mid-check.
install -m 0755 "$binary" "$work/herald"
binary="$work/herald"

# --- 1. the systemd unit --------------------------------------------------------------------
unit=packaging/systemd/herald.service
for setting in '^User=herald$' '^ProtectSystem=strict$' '^ReadWritePaths=/var/lib/herald$' \
  '^NoNewPrivileges=yes$' '^LimitNOFILE=[0-9]+$' '^ExecReload=/bin/kill -HUP \$MAINPID$' \
  '^PrivateTmp=yes$' '^ProtectHome=yes$' '^CapabilityBoundingSet=$' '^Environment=HERALD_DATA=/var/lib/herald$'; do
  grep -Eq "$setting" "$unit" || fail "$unit lacks a line matching $setting"
done
# verify checks that ExecStart's program exists: the same unit, pointing at a copy.
mkdir -p "$work/unit"
install -m 0755 "$binary" "$work/unit/herald"
sed "s#/usr/local/bin/herald#$work/unit/herald#" "$unit" > "$work/unit/herald.service"
# systemd-analyze verify exits 0 on unknown keys and unparsable values: any output fails.
verify_out="$(systemd-analyze verify --man=no "$work/unit/herald.service" 2>&1)" \
  || fail "systemd-analyze verify failed: $verify_out"
[ -z "$verify_out" ] || fail "systemd-analyze verify warns about $unit: $verify_out"
security_out="$(systemd-analyze security --offline=true --threshold=25 "$work/unit/herald.service" 2>&1)" \
  || fail "the unit's exposure is above 2.5: $(printf '%s\n' "$security_out" | grep -E '^✗|Overall')"
echo "systemd unit: verified; $(printf '%s\n' "$security_out" | grep -o 'Overall exposure level.*')"

# The unit's system-call filter (@system-service without @privileged; a call outside it fails
# with EPERM, SystemCallErrorNumber) must let the server do its work: run it under strace as a user other than root
# (as the unit does; SQLite calls fchown only as root), start, publish, subscribe over SSE and
# WebSocket, SIGHUP, SIGTERM, and compare every call made with the filter.
if ! command -v strace >/dev/null 2>&1; then
  echo "installing strace (Debian's package)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends strace; } >/dev/null
fi
filter_set() { # GROUP: the calls of a systemd-analyze syscall-filter group, nested groups expanded
  systemd-analyze syscall-filter "$1" | awk 'NR > 1 && /^[^ ]/ { exit } NR > 1 { print $1 }' |
    grep -v '^#' | while read -r name; do
      case "$name" in @*) filter_set "$name" ;; ?*) echo "$name" ;; esac
    done
}
# The filter as the unit writes it: SystemCallFilter= lines add calls, ~ lines take them away.
: > "$work/allowed"; : > "$work/denied"
while IFS= read -r value; do
  list="$work/allowed"
  case "$value" in "~"*) list="$work/denied"; value="${value#\~}" ;; esac
  for item in $value; do
    case "$item" in @*) filter_set "$item" ;; *) echo "$item" ;; esac
  done >> "$list"
done < <(sed -n 's/^SystemCallFilter=//p' "$unit")
[ -s "$work/allowed" ] || fail "$unit has no SystemCallFilter allow-list"
comm -23 <(sort -u "$work/allowed") <(sort -u "$work/denied") > "$work/filter"
mkdir -p "$work/traced/data"
as_user=()
if [ "$(id -u)" = 0 ]; then
  chmod 0755 "$work"
  chown -R nobody "$work/traced"
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi
port=$(( 20000 + RANDOM % 20000 ))
key=hk_packaging_check_0123456789
strace -f -qq -o "$work/traced/trace" "${as_user[@]}" "$binary" serve --listen "127.0.0.1:$port" \
  --data "$work/traced/data" --api-key "$key" > "$work/traced/log" 2>&1 &
traced=$!
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$work/traced/log"; fail "the traced server never got ready"; }
token="$(HERALD_TOKEN_SECRET="$(cat "$work/traced/data/token-secret")" "$binary" token --sub check --channel news --ttl 1m)"
timeout 3 curl -fsS -N "http://127.0.0.1:$port/v1/sse?channel=news&since=0&token=$token" > "$work/traced/sse" 2>/dev/null &
HERALD_URL="http://127.0.0.1:$port" HERALD_TOKEN="$token" timeout 3 "$binary" subscribe news > "$work/traced/ws" 2>/dev/null &
sleep 1
curl -fsS -H "Authorization: Bearer $key" -d '{"data":{"n":1}}' "http://127.0.0.1:$port/v1/channels/news/messages" >/dev/null
curl -fsS "http://127.0.0.1:$port/metrics" >/dev/null
sleep 2.5
# strace's child is the server (setpriv executes it in its place).
server_pid="$(pgrep -P "$traced" | head -1)"
kill -HUP "$server_pid"; sleep 0.5; kill -TERM "$server_pid"; wait "$traced" || true
grep -q '"n":1' "$work/traced/sse" || fail "the traced server's SSE subscriber got nothing"
grep -q '"n":1' "$work/traced/ws" || fail "the traced server's WebSocket subscriber got nothing"
# The server's calls: those after setpriv (when root) executed the binary; its own execve is
# the unit's exec, made before the filter applies.
awk -v exec="execve(\"$binary\"" 'started { print; next } index($0, exec) { started = 1 }' "$work/traced/trace" |
  sed -E 's/^[0-9]+ +//' | grep -oE '^[a-z_0-9]+\(' | tr -d '(' | sort -u > "$work/used"
[ -s "$work/used" ] || fail "strace recorded no call of the server"
outside="$(comm -23 "$work/used" "$work/filter" | tr '\n' ' ')"
[ -z "${outside// /}" ] || fail "the server makes system calls the unit's SystemCallFilter refuses: $outside"
echo "system calls: the $(wc -l < "$work/used") calls of a start, publish, subscribes, SIGHUP and SIGTERM are all in the unit's filter"

# --- 2. the release tarball -----------------------------------------------------------------
# One date for both packings below, whatever is committed meanwhile.
SOURCE_DATE_EPOCH="$(git log -1 --format=%ct 2>/dev/null || date +%s)"
export SOURCE_DATE_EPOCH
RELEASE_GZIP_LEVEL=1 scripts/release.sh --binary "$binary" --out "$work/dist" > "$work/release.log" \
  || { cat "$work/release.log"; fail "scripts/release.sh --binary $binary failed"; }
version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
host="$(rustc -vV | sed -n 's/^host: //p')"
name="herald-$version-$host"
[ -f "$work/dist/$name.tar.gz" ] || fail "no $name.tar.gz in $(ls "$work/dist")"
grep -q "^tarball:  $work/dist/$name.tar.gz$" "$work/release.log" || fail "release.sh did not say where the tarball is"
(cd "$work/dist" && sha256sum --quiet -c "$name.tar.gz.sha256") || fail "the checksum does not verify"
tar -tzf "$work/dist/$name.tar.gz" | grep -v "^$name/docs/." | sort > "$work/listing"
printf '%s\n' "$name/" "$name/CHANGELOG.md" "$name/LICENSE" "$name/README.md" "$name/docs/" \
  "$name/herald" "$name/herald.example.toml" "$name/systemd/" "$name/systemd/herald.service" \
  "$name/systemd/herald.sysusers" | sort > "$work/expected"
diff -u "$work/expected" "$work/listing" || fail "the tarball holds other files than these"
for doc in operations.md config.md cluster.md security.md openapi.yaml; do
  tar -tzf "$work/dist/$name.tar.gz" "$name/docs/$doc" >/dev/null 2>&1 || fail "the tarball lacks docs/$doc"
done
mkdir -p "$work/unpacked"
tar -C "$work/unpacked" -xzf "$work/dist/$name.tar.gz"
unpacked_version="$("$work/unpacked/$name/herald" --version)"
[ "$unpacked_version" = "$("$binary" --version)" ] || fail "the packed binary says $unpacked_version"
[ "$(stat -c %a "$work/unpacked/$name/herald")" = 755 ] || fail "the packed binary is not mode 0755"
"$work/unpacked/$name/herald" config check --config "$work/unpacked/$name/herald.example.toml" >/dev/null \
  || fail "the packed herald.example.toml does not pass config check"
# The same binary packs to the same bytes.
RELEASE_GZIP_LEVEL=1 scripts/release.sh --binary "$binary" --out "$work/again" > /dev/null
cmp -s "$work/dist/$name.tar.gz" "$work/again/$name.tar.gz" || fail "packing twice gave two tarballs"
echo "release tarball: $name.tar.gz packed, checksum verified, contents and binary checked"

# --- 3. the build script's commit -----------------------------------------------------------
rustc --edition 2021 -O -o "$work/build-script" crates/herald/build.rs 2>"$work/rustc.log" \
  || { cat "$work/rustc.log"; fail "crates/herald/build.rs does not compile alone"; }
build_script() { # DIR [VAR=VALUE...]: runs the script as cargo would for a crate in DIR
  local dir="$1"; shift
  env -u HERALD_BUILD_COMMIT CARGO_MANIFEST_DIR="$dir" CARGO_PKG_VERSION=9.8.7 "$@" "$work/build-script"
}
line() { sed -n 's/^cargo:rustc-env=HERALD_VERSION_LINE=//p'; }
mkdir -p "$work/tarball-tree"
# A tree without .git (a tarball): `unknown`, and only build.rs and the variable watched.
out="$(build_script "$work/tarball-tree" GIT_CEILING_DIRECTORIES="$work")"
[ "$(printf '%s\n' "$out" | line)" = "9.8.7 (unknown)" ] || fail "outside git, build.rs said: $out"
[ "$(printf '%s\n' "$out" | grep -c '^cargo:rerun-if-changed=')" = 1 ] \
  || fail "outside git, build.rs watches more than itself: $out"
# No git program at all.
out="$(build_script "$PWD/crates/herald" PATH=/nonexistent)"
[ "$(printf '%s\n' "$out" | line)" = "9.8.7 (unknown)" ] || fail "without git, build.rs said: $out"
# In this checkout (when it is one): the commit, and HEAD watched.
if git rev-parse --git-dir >/dev/null 2>&1; then
  out="$(build_script "$PWD/crates/herald")"
  commit="$(printf '%s\n' "$out" | line | sed 's/^9\.8\.7 (\(.*\))$/\1/')"
  printf '%s\n' "$commit" | grep -Eq '^[0-9a-f]{7,40} [0-9]{4}-[0-9]{2}-[0-9]{2}$' \
    || fail "in git, build.rs said: $out"
  git cat-file -e "${commit%% *}^{commit}" || fail "build.rs named ${commit%% *}, not a commit here"
  printf '%s\n' "$out" | grep -q '^cargo:rerun-if-changed=.*HEAD$' || fail "build.rs does not watch HEAD: $out"
fi
# Given by the builder (the container build passes it).
out="$(build_script "$work/tarball-tree" HERALD_BUILD_COMMIT='abc1234 2026-11-29')"
[ "$(printf '%s\n' "$out" | line)" = "9.8.7 (abc1234 2026-11-29)" ] || fail "HERALD_BUILD_COMMIT ignored: $out"
echo "build.rs: commit from git, from HERALD_BUILD_COMMIT, and unknown without git"
echo "packaging checks passed"
