#!/usr/bin/env bash
# Server CPU per long-poll naming 1,000 channels no one has named before: one connection sends
# REQUESTS long-polls (`GET /v1/poll?timeout=0&channel=...` x 1,000, each answered before the
# next), after 50 to warm up, and the server's CPU time from /proc is divided by REQUESTS. Each
# request subscribes 1,000 new channels and unsubscribes them once answered, so this is the
# subscribe/unsubscribe path of a new-channel storm without the storm's scatter. Loopback only.
# Usage: scripts/poll-new-channels.sh [REQUESTS=400]
# HERALD_BIN=path runs that herald binary (for A/B); POLL_PORT=P serves on P (default 7191).
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-400}
if [ -z "${HERALD_BIN:-}" ]; then
  cargo build --release -q -p herald --bin herald
fi
bin=${HERALD_BIN:-target/release/herald}
port=${POLL_PORT:-7191}
secret=poll-new-channels-secret-0123
work=$(mktemp -d)
"$bin" serve --listen 127.0.0.1:$port --data "$work/data" --token-secret $secret >"$work/serve.log" 2>&1 &
herald=$!
trap 'kill $herald 2>/dev/null; rm -rf "$work"' EXIT
sleep 1
token=$("$bin" token --sub poll-bench --channel '**' --token-secret $secret)
python3 - "$token" $herald $port "$requests" <<'PY'
import socket, sys, time
token, pid, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def cpu():
    f = open(f"/proc/{pid}/stat").read().split()
    return (int(f[13]) + int(f[14])) / 100
conn = socket.create_connection(("127.0.0.1", port))
def poll(i):
    names = "&".join(f"channel=bench%2Fpoll%2F{i}%2F{j}" for j in range(1000))
    conn.sendall(f"GET /v1/poll?token={token}&timeout=0&{names} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += conn.recv(65536)
    head, _, body = buf.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length"))
    while len(body) < length:
        body += conn.recv(65536)
for i in range(50):
    poll(i)
c0, t0 = cpu(), time.perf_counter()
for i in range(50, 50 + n):
    poll(i)
c1, t1 = cpu(), time.perf_counter()
print(f"{n} long-polls of 1,000 new channels: server CPU {(c1 - c0) / n * 1000:.2f} ms each, "
      f"{(t1 - t0) / n * 1000:.2f} ms wall each")
PY
