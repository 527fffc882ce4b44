#!/usr/bin/env bash
# Herald's publish rate against the raw HTTP floor of this machine, measured in one run: wrk
# (64 connections, one thread) drives, for SECONDS each and ROUNDS times in turn,
#   1. the `http_floor` example: a framework-free responder on two tokio workers,
#   2. `herald serve`'s GET /healthz (hyper, no store),
#   3. `herald serve`'s POST /v1/channels/bench/messages (one message per request, sync = batch),
# and prints requests/s, server CPU microseconds per request, and each rate as a ratio to the
# floor of the same round. Needs wrk (Debian: apt-get install wrk). Loopback only. The server
# runs with its publish rate limit off (its default, 10,000/s per app, would answer most of
# wrk's requests `429`); a round whose publishes were not all answered 2xx says so.
# HTTP_FLOOR_CEILING=1 adds, in each round, what bounds a durable publish: publishes to a second
# server with sync = off (no fsync, port P+2), then the floor and the durable server again with
# 256 connections (each compared with the floor at 256).
# Usage: scripts/http-floor.sh [SECONDS=4] [ROUNDS=3]
# HERALD_BIN=path runs that herald binary instead of building target/release/herald (for A/B);
# HTTP_FLOOR_PORT=P serves herald on P and the floor on P+101 (default 7171, 7272).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-4}
rounds=${2:-3}
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }
if [ -n "${HERALD_BIN:-}" ]; then
  cargo build --release -q -p herald --example http_floor
else
  cargo build --release -q -p herald --bin herald --example http_floor
fi
herald_bin=${HERALD_BIN:-target/release/herald}
port=${HTTP_FLOOR_PORT:-7171}
floor_port=$((port + 101))
work=$(mktemp -d)
key=http-floor-key-0123456789
cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"data":{"t":"hello"}}'
wrk.headers["Authorization"] = "Bearer $key"
wrk.headers["Content-Type"] = "application/json"
LUA
target/release/examples/http_floor 127.0.0.1:$floor_port 2>/dev/null &
floor=$!
HERALD_LIMITS_PUBLISH=off "$herald_bin" serve --listen 127.0.0.1:$port --data "$work/data" --api-key "$key" \
  --token-secret http-floor-secret-0123456789 >"$work/serve.log" 2>&1 &
herald=$!
unsynced=
if [ "${HTTP_FLOOR_CEILING:-0}" = 1 ]; then
  HERALD_LIMITS_PUBLISH=off "$herald_bin" serve --sync off --listen 127.0.0.1:$((port + 2)) \
    --data "$work/data-off" --api-key "$key" --token-secret http-floor-secret-0123456789 \
    >"$work/serve-off.log" 2>&1 &
  unsynced=$!
fi
trap 'kill $floor $herald $unsynced 2>/dev/null; rm -rf "$work"' EXIT
sleep 1
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# run PID URL [wrk args...]: prints "rate us_per_request" (CONNECTIONS in flight, default 64)
run() {
  local pid=$1 url=$2; shift 2
  local c0 c1 rate out
  c0=$(ticks "$pid")
  out=$(wrk -t1 -c"${CONNECTIONS:-64}" -d"${seconds}s" "$@" "$url")
  c1=$(ticks "$pid")
  rate=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  echo "$out" | awk '/Non-2xx/ {print "  (" $NF " answers were not 2xx)"}' >&2
  awk -v r="$rate" -v t=$((c1 - c0)) -v hz="$hz" -v s="$seconds" \
    'BEGIN {printf "%.0f %.1f\n", r, t / hz * 1e6 / (r * s)}'
}
# row ROUND TARGET RATE US FLOOR: one line, the rate as a ratio to FLOOR
row() {
  printf '%-5s %-34s %10s %14s %9.2f\n' "$1" "$2" "$3" "$4" "$(awk -v a="$3" -v b="$5" 'BEGIN {print a / b}')"
}
printf '%-5s %-34s %10s %14s %9s\n' round target "req/s" "us_cpu_per_req" vs_floor
for round in $(seq "$rounds"); do
  read -r f fc < <(run $floor http://127.0.0.1:$floor_port/v1/channels/bench/messages -s "$work/post.lua")
  read -r h hc < <(run $herald http://127.0.0.1:$port/healthz)
  read -r p pc < <(run $herald http://127.0.0.1:$port/v1/channels/bench/messages -s "$work/post.lua")
  row "$round" "raw floor (http_floor example)" "$f" "$fc" "$f"
  row "$round" "herald GET /healthz" "$h" "$hc" "$f"
  row "$round" "herald publish, 1 message/request" "$p" "$pc" "$f"
  if [ -n "$unsynced" ]; then
    read -r o oc < <(run $unsynced http://127.0.0.1:$((port + 2))/v1/channels/bench/messages -s "$work/post.lua")
    read -r f2 f2c < <(CONNECTIONS=256 run $floor http://127.0.0.1:$floor_port/v1/channels/bench/messages -s "$work/post.lua")
    read -r p2 p2c < <(CONNECTIONS=256 run $herald http://127.0.0.1:$port/v1/channels/bench/messages -s "$work/post.lua")
    row "$round" "herald publish, sync = off" "$o" "$oc" "$f"
    row "$round" "raw floor, 256 connections" "$f2" "$f2c" "$f2"
    row "$round" "herald publish, 256 connections" "$p2" "$p2c" "$f2"
  fi
done
stored=$(curl -s -H "Authorization: Bearer $key" http://127.0.0.1:$port/v1/channels/bench | sed -n 's/.*"seq":\([0-9]*\).*/\1/p')
echo "messages stored in the run: ${stored:-?}"
