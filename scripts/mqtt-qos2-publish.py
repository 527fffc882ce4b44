#!/usr/bin/env python3
"""QoS 2 publishes to an MQTT 3.1.1 server over one connection, timed.

A raw client (no library, so the client costs little): CONNECT with Clean Session 0 (a
persistent session; --clean for Clean Session 1), then --messages QoS 2 PUBLISH packets to
--topic, at most --window awaiting their PUBCOMP at once; each PUBREC is answered with PUBREL
at once. Prints one JSON line: messages, seconds, messages/s and the latency from PUBLISH to
PUBCOMP (p50, p99, ms). Used for the QoS 2 figures in docs/benchmarks/history.md (Herald's
persistent-session QoS 2 ids in its store, issue 33); start the server yourself, e.g.
`herald serve --listen 127.0.0.1:0 --mqtt 127.0.0.1:1883 --api-key KEY --data DIR`.

    scripts/mqtt-qos2-publish.py --addr 127.0.0.1:1883 --password KEY --messages 5000 --window 1
"""

import argparse
import json
import socket
import struct
import time


def varint(n):
    out = bytearray()
    while True:
        byte = n % 128
        n //= 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def utf8(s):
    b = s.encode()
    return struct.pack("!H", len(b)) + b


def packet(first, body):
    return bytes([first]) + varint(len(body)) + body


class Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def next(self):
        while True:
            if len(self.buf) >= 2:
                mult, length, i = 1, 0, 1
                while i < len(self.buf):
                    byte = self.buf[i]
                    length += (byte & 0x7F) * mult
                    mult *= 128
                    i += 1
                    if not byte & 0x80:
                        break
                else:
                    i = None
                if i is not None and len(self.buf) >= i + length:
                    first, body = self.buf[0], bytes(self.buf[i : i + length])
                    del self.buf[: i + length]
                    return first, body
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("the server closed the connection")
            self.buf += chunk


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--addr", default="127.0.0.1:1883")
    p.add_argument("--username", default="default")
    p.add_argument("--password", required=True, help="a publisher API key or client token")
    p.add_argument("--client-id", default="qos2-bench")
    p.add_argument("--topic", default="bench/qos2")
    p.add_argument("--messages", type=int, default=5000)
    p.add_argument("--window", type=int, default=1, help="PUBLISH packets awaiting PUBCOMP")
    p.add_argument("--clean", action="store_true", help="Clean Session 1")
    a = p.parse_args()
    host, port = a.addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    flags = 0x80 | 0x40 | (0x02 if a.clean else 0)
    body = utf8("MQTT") + bytes([4, flags]) + struct.pack("!H", 60)
    body += utf8(a.client_id) + utf8(a.username) + utf8(a.password)
    sock.sendall(packet(0x10, body))
    reader = Reader(sock)
    first, body = reader.next()
    if first >> 4 != 2 or body[1] != 0:
        raise SystemExit(f"CONNACK refused: {body!r}")
    payload = b'{"n":0}'
    sent_at = {}
    latencies = []
    next_id, sent, done = 1, 0, 0
    start = time.perf_counter()
    while done < a.messages:
        out = bytearray()
        while sent < a.messages and len(sent_at) < a.window:
            while next_id in sent_at:
                next_id = next_id % 65535 + 1
            pid = next_id
            next_id = next_id % 65535 + 1
            out += packet(0x34, utf8(a.topic) + struct.pack("!H", pid) + payload)
            sent_at[pid] = time.perf_counter()
            sent += 1
        if out:
            sock.sendall(out)
        first, body = reader.next()
        kind, pid = first >> 4, struct.unpack("!H", body[:2])[0]
        if kind == 5:  # PUBREC
            sock.sendall(packet(0x62, struct.pack("!H", pid)))
        elif kind == 7:  # PUBCOMP
            latencies.append(time.perf_counter() - sent_at.pop(pid))
            done += 1
        else:
            raise SystemExit(f"unexpected packet type {kind}")
    seconds = time.perf_counter() - start
    sock.sendall(packet(0xE0, b""))
    sock.close()
    latencies.sort()
    pick = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 3)
    print(
        json.dumps(
            {
                "messages": done,
                "window": a.window,
                "clean": a.clean,
                "seconds": round(seconds, 3),
                "per_second": round(done / seconds, 1),
                "p50_ms": pick(0.50),
                "p99_ms": pick(0.99),
            }
        )
    )


if __name__ == "__main__":
    main()
