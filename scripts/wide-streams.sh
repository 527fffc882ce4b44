#!/usr/bin/env bash
# Server CPU per message written to streams that each name many channels (a dashboard following
# every room): STREAMS SSE streams (or STREAMS long-polls, one after another) name the same
# CHANNELS channels, and MESSAGES messages go to random ones of them through POST /v1/batch. An
# SSE event's `id:` is the stream's whole cursor string (one position per channel), so this
# measures what a message costs on such a stream. Every channel gets a message first, so the
# cursors carry epochs. Prints server CPU (from /proc) per delivery (SSE) or per message
# answered (long-poll). Loopback only; needs python3.
# Usage: scripts/wide-streams.sh [sse|poll] [STREAMS=10] [CHANNELS=1000] [MESSAGES=4000]
# HERALD_BIN=path runs that herald binary (for A/B); WIDE_PORT=P serves on P (default 7193).
set -euo pipefail
cd "$(dirname "$0")/.."
transport=${1:-sse}
streams=${2:-10}
channels=${3:-1000}
messages=${4:-4000}
case $transport in sse | poll) ;; *) echo "transport must be sse or poll" >&2; exit 2 ;; esac
if [ -z "${HERALD_BIN:-}" ]; then
  cargo build --release -q -p herald --bin herald
fi
bin=${HERALD_BIN:-target/release/herald}
port=${WIDE_PORT:-7193}
secret=wide-streams-secret-0123456789
key=wide-streams-key-0123456789
work=$(mktemp -d)
HERALD_LIMITS_PUBLISH=off "$bin" serve --listen 127.0.0.1:$port --data "$work/data" --api-key $key \
  --token-secret $secret >"$work/serve.log" 2>&1 &
herald=$!
trap 'kill $herald 2>/dev/null; rm -rf "$work"' EXIT
sleep 1
token=$("$bin" token --sub wide-streams --channel '**' --token-secret $secret)
python3 - "$token" $herald $port "$transport" "$streams" "$channels" "$messages" $key <<'PY'
import json, random, selectors, socket, sys, time
token, pid, port, transport = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
streams, channels, messages, key = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), sys.argv[8]

def cpu():
    f = open(f"/proc/{pid}/stat").read().split()
    return (int(f[13]) + int(f[14])) / 100

def answer(conn):
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += conn.recv(1 << 20)
    head, _, body = buf.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:300]
    length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n")
                  if l.lower().startswith(b"content-length"))
    while len(body) < length:
        body += conn.recv(1 << 20)
    return json.loads(body)

def publish(n, rng):
    conn = socket.create_connection(("127.0.0.1", port))
    for start in range(0, n, 100):
        items = [{"channel": f"wide/{rng.randrange(channels) if n != channels else start + i}",
                  "data": {"i": start + i}} for i in range(min(100, n - start))]
        body = json.dumps({"messages": items}).encode()
        conn.sendall(b"POST /v1/batch HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer " + key.encode()
                     + b"\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        answer(conn)
    conn.close()

names = "&".join(f"channel=wide%2F{j}" for j in range(channels))
rng = random.Random(1)
publish(channels, rng)
if transport == "sse":
    sel = selectors.DefaultSelector()
    seen = {}
    for _ in range(streams):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET /v1/sse?token={token}&{names} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        seen[s] = [0, b""]
    def read_until(count, marker):
        deadline = time.time() + 120
        while any(n < count for n, _ in seen.values()):
            assert time.time() < deadline, "the streams did not get everything in 120 s"
            for k, _ in sel.select(0.5):
                try:
                    data = k.fileobj.recv(1 << 20)
                except BlockingIOError:
                    continue
                assert data, "a stream closed"
                state = seen[k.fileobj]
                data = state[1] + data
                # The carried tail is shorter than the marker, so a marker is counted once:
                # in the read it ends in.
                state[0] += data.count(marker)
                state[1] = data[-(len(marker) - 1):]
    read_until(channels, b"event: subscribed")
    for state in seen.values():
        state[0] = 0
    c0 = cpu()
    publish(messages, rng)
    read_until(messages, b"\nid: ")
    c1 = cpu()
    print(f"SSE, {streams} streams of {channels} channels, {messages} messages: "
          f"server CPU {(c1 - c0) / (streams * messages) * 1e6:.2f} us per delivery")
else:
    conn = socket.create_connection(("127.0.0.1", port))
    def poll(since):
        conn.sendall(f"GET /v1/poll?token={token}&timeout=0&limit=1000&since={since}&{names} "
                     "HTTP/1.1\r\nHost: h\r\n\r\n".encode())
        return answer(conn)
    start = poll("")["cursor"]
    publish(messages, rng)
    c0, answered = cpu(), 0
    for _ in range(streams):
        answered += len(poll(start)["messages"])
    c1 = cpu()
    print(f"long-poll, {streams} polls of {channels} channels answering {answered} messages: "
          f"server CPU {(c1 - c0) / answered * 1e6:.2f} us per message answered")
PY
