#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target into fuzz/corpus/<target>/ (named by content
hash, as libFuzzer names its own): the protocol's golden vectors, the examples of the tests and
docs, and one or two hand-made inputs per parser. Run once when adding a target; the fuzzer then
adds what it finds, and `cargo fuzz cmin` keeps the corpus small (scripts/fuzz.sh --cmin)."""
import hashlib, json, os, struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
VECTORS = os.path.join(ROOT, "crates/herald-proto/tests/vectors")


def vectors(name, *lists):
    data = json.load(open(os.path.join(VECTORS, name)))
    return [case for key in lists for case in data.get(key, [])]


def masked(payload, opcode=0x1, fin=True, mask=b"\x11\x22\x33\x44"):
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def ws():
    limit_split = b"\xff\x80"
    out = []
    for case in vectors("commands.json", "valid")[:6]:
        out.append(limit_split + masked(case["wire"].encode()))
    out.append(limit_split + masked(b'{"id":1,"sub', fin=False) + masked(b"", opcode=0x9)
               + masked(b'scribe":{"channel":"a"}}', opcode=0x0))
    out.append(limit_split + masked(b"hi", opcode=0x9) + masked(struct.pack(">H", 1000) + b"bye", opcode=0x8))
    out.append(limit_split + masked(b"x" * 300) + masked(b"\x00\x01", opcode=0x2))
    out.append(b"\x01\x40" + masked("é€😀".encode()) + masked(b"\xff\xfe"))
    return out


def sse():
    base = b"GET /v1/sse?channel=a&channel=b&token=t HTTP/1.1\r\nHost: x\r\nLast-Event-ID: e1:4,:0\r\n\r\n"
    return [base, base.replace(b"HTTP/1.1", b"HTTP/1.0"), base[:40],
            b"GET /v1/sse HTTP/1.1\r\nAuthorization: Bearer abc\r\nContent-Length: 0\r\n\r\n",
            b"GET /v1/sse HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            b"POST /v1/publish HTTP/1.1\r\nHost: x\r\n\r\n", b"GET /v1/ssex HTTP/1.1\r\n\r\n"]


def conf(path):
    return [open(os.path.join(ROOT, path), "rb").read()]


def mqtt_frame(first, body):
    head, n = bytes([first]), len(body)
    while True:
        byte, n = n % 128, n // 128
        head += bytes([byte | (0x80 if n else 0)])
        if not n:
            return head + body


def mqtt_str(text):
    return struct.pack(">H", len(text)) + text


def mqtt():
    """Byte 0: 0 before CONNECT, 1 after a 3.1.1 CONNECT, 2 after a v5 one (high bit: a small
    Maximum Packet Size); byte 1: where the stream is split; then packets a client sends."""
    v5_connect = mqtt_frame(0x10, mqtt_str(b"MQTT") + b"\x05\xee\x00\x3c"
                            + b"\x0b\x11\x00\x00\x00\x78\x21\x00\x0a\x22\x00\x05" + mqtt_str(b"dev-1")
                            + b"\x05\x18\x00\x00\x00\x0a" + mqtt_str(b"status/dev-1") + mqtt_str(b"gone")
                            + mqtt_str(b"app") + mqtt_str(b"token"))
    v5_session = (mqtt_frame(0x32, mqtt_str(b"chat/room-1") + b"\x00\x01" + b"\x0c\x01\x01\x23\x00\x01"
                             + b"\x26" + mqtt_str(b"k") + mqtt_str(b"v") + "héllo".encode())
                  + mqtt_frame(0x30, mqtt_str(b"") + b"\x03\x23\x00\x01" + b"again")
                  + mqtt_frame(0x82, b"\x00\x02\x02\x0b\x05" + mqtt_str(b"$share/g/sport/+") + b"\x01"
                               + mqtt_str(b"a/#") + b"\x2e")
                  + mqtt_frame(0xa2, b"\x00\x03\x00" + mqtt_str(b"a/#"))
                  + mqtt_frame(0x40, b"\x00\x07") + mqtt_frame(0x50, b"\x00\x08\x10")
                  + mqtt_frame(0x62, b"\x00\x08") + mqtt_frame(0xc0, b"")
                  + mqtt_frame(0xf0, b"\x18\x08\x15" + mqtt_str(b"SCRAM"))
                  + mqtt_frame(0xe0, b"\x04\x05\x1f" + mqtt_str(b"by")))
    v311_connect = mqtt_frame(0x10, mqtt_str(b"MQTT") + b"\x04\xf6\x00\x3c" + mqtt_str(b"c")
                              + mqtt_str(b"will") + mqtt_str(b"bye") + mqtt_str(b"u") + mqtt_str(b"p"))
    v311_session = (mqtt_frame(0x34, mqtt_str(b"/a//b ") + b"\x00\x09" + b"payload")
                    + mqtt_frame(0x62, b"\x00\x09") + mqtt_frame(0x82, b"\x00\x01" + mqtt_str(b"+/x/#") + b"\x02")
                    + mqtt_frame(0xc0, b"") + mqtt_frame(0xe0, b""))
    return [b"\x00\x80" + v5_connect + v5_session, b"\x02\x40" + v5_session,
            b"\x00\x10" + v311_connect + v311_session, b"\x01\xc0" + v311_session,
            b"\x02\x00" + mqtt_frame(0x20, b"\x01\x00\x03\x21\x00\x0a") + mqtt_frame(0x90, b"\x00\x02\x00\x01\x87")
            + mqtt_frame(0xb0, b"\x00\x03\x00\x11") + mqtt_frame(0xd0, b""),
            b"\x01\x00" + mqtt_frame(0x20, b"\x00\x00") + mqtt_frame(0x90, b"\x00\x02\x00\x80") + mqtt_frame(0xb0, b"\x00\x03"),
            b"\x00\x00" + mqtt_frame(0x10, mqtt_str(b"MQIsdp") + b"\x03\x02\x00\x3c" + mqtt_str(b"old")),
            b"\x02\x00" + mqtt_frame(0x36, mqtt_str(b"t") + b"\x00\x01\x00"),
            b"\x02\x00\x30\xff\xff\xff\xff\x01", b"\x82\x00" + mqtt_frame(0x30, mqtt_str(b"t") + b"\x00" + b"x" * 300)]


SEEDS = {
    "ws_frames": ws,
    "sse_head": sse,
    "command_json": lambda: [c["wire"].encode() for c in vectors("commands.json", "valid", "invalid")],
    "cursor_strings": lambda: [c["wire"].encode() for c in vectors("cursors.json", "valid", "invalid")
                               + vectors("inbox_cursors.json", "valid", "lenient")],
    "tag_expr": lambda: [s.encode() for s in [
        "sports AND (uk OR ie) AND NOT muted", "a OR b AND c", "NOT NOT a", "((a))",
        "b AND a OR b AND NOT c", "sports AND OR uk", "a AND NOT", "user:42 OR lang/en-GB"]],
    "meteor_request": lambda: [s.encode() for s in [
        "GET /push/host1/longpoll/news.r5/chat%2Froom-1.b3/x.h/y HTTP/1.1",
        "GET /push/1234/stream/a/a.r2/?nc=99 HTTP/1.0", "GET /disconnect/abc HTTP/1.1",
        "GET /meteor.js?v=1 HTTP/1.1", "GET /push/a/b/c.r99999999999999999999999 HTTP/1.1",
        "GET /push/a/b/c%2 HTTP/1.1", "POST /push/a/b/c HTTP/1.1"]],
    "meteor_command": lambda: [s.encode() for s in [
        "ADDMESSAGE news hello world", "ADDMESSAGE chat/room-1 {\"x\": 1} & text", "ADDMESSAGE news ",
        "COUNTSUBSCRIBERS room", "LISTCHANNELS", "SHOWSTATS", "QUIT", "AUTH secret", "ADDMESSAGE\tnews\tx"]],
    "meteord_conf": lambda: conf("crates/herald-meteor/src/builtin-modes.conf")
        + conf("docs/examples/meteord-deacon.conf")
        + [b"[a]\nTextEscape javascript\nMessageTemplate p(\"~text~\")\nPersist maybe\n"],
    "mqtt_packets": mqtt,
    "pusher_frames": lambda: [s.encode() for s in [
        '{"event":"pusher:ping","data":{}}', '{"event":"pusher:pong","data":{}}',
        '{"event":"pusher:subscribe","data":{"auth":"278d425bdf160c739803:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4","channel":"private-foobar"}}',
        '{"event":"pusher:subscribe","data":"{\\"channel\\":\\"news\\"}"}',
        '{"event":"pusher:unsubscribe","data":{"channel":"a,b"}}',
        '{"event":"client-typing","channel":"private-chat","data":{"who":1}}',
        '{"event":"client-x","channel":"private-chat","data":"as sent"}',
        '{"event":"pusher:signin","data":{"auth":"k:s","user_data":"{}"}}',
        '{"event":"pusher:subscribe"}', '{"data":{}}', '[1]', '{']],
    "config_file": lambda: conf("herald.example.toml") + [
        b'listen = "127.0.0.1:0"\nmeteor = "4670"\nmeteor_channels = ["public/*"]\n[history]\nsize = 5\nage = "1h"\n'
        b'[[namespaces]]\nprefix = "chat/"\nsize = 10\n',
        b'sync = "batch"\nmax_frame_bytes = 1024\nbus = "local"\nstore = "sqlite"\n'],
    "provider_answers": lambda: [struct.pack(">H", status - 100) + bytes([len(ra)]) + ra + bytes([len(aid)]) + aid + body
        for status, ra, aid, body in [
            (200, b"", b"5b5a7a4e-0000-0000-0000-000000000000", b""),
            (400, b"", b"", b'{"reason":"BadDeviceToken"}'),
            (410, b"", b"", b'{"reason":"Unregistered","timestamp":1700000000123}'),
            (403, b"", b"", b'{"reason":"ExpiredProviderToken"}'),
            (429, b"120", b"", b'{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}]}}'),
            (400, b"", b"", b'{"error":{"message":"bad","status":"INVALID_ARGUMENT","details":[{"errorCode":"INVALID_ARGUMENT","fieldViolations":[{"field":"message.token","description":"x"}]}]}}'),
            (201, b"", b"", b""),
            (503, b"Wed, 21 Oct 2015 07:28:00 GMT", b"", b"down")]],
}

for target, make in SEEDS.items():
    folder = os.path.join(ROOT, "fuzz/corpus", target)
    os.makedirs(folder, exist_ok=True)
    for data in make():
        with open(os.path.join(folder, hashlib.sha1(data).hexdigest()), "wb") as f:
            f.write(data)
