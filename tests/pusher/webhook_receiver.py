"""A receiver of Herald's Pusher-format webhooks for Herald's tests: checks every request with
the `pusher` Python SDK's own `validate_webhook(key, signature, body)` and records what it
accepted. The same contract as webhook_receiver.mjs:

    python webhook_receiver.py --dir DIR

DIR holds `credentials` (`{"app_id","key","secret"}`, read at every request; until it exists
requests are answered 503), `status` (the status to answer a valid request; missing or empty:
200), and the files written: `events.jsonl` (one line per event of every request that was valid
and answered 2xx: `{"time_ms", "event"}`) and `requests.jsonl` (one line per request:
`{"status", "valid", "events", "error"}`).

Prints `listening on PORT` once it accepts connections. Runs until killed.
"""

import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pusher

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
args = parser.parse_args()


def read(name):
    try:
        with open(os.path.join(args.dir, name), encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


def append(name, record):
    with open(os.path.join(args.dir, name), "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0"))).decode("utf-8")
        credentials = read("credentials")
        valid, error, events, time_ms = False, None, [], None
        if not credentials:
            status, error = 503, "unready: no credentials yet"
        else:
            c = json.loads(credentials)
            client = pusher.Pusher(app_id=c["app_id"], key=c["key"], secret=c["secret"])
            data = client.validate_webhook(
                key=self.headers.get("X-Pusher-Key", ""),
                signature=self.headers.get("X-Pusher-Signature", ""),
                body=body,
            )
            if data is None:
                status, error = 401, "the pusher SDK's validate_webhook refused the request"
            else:
                valid, events, time_ms = True, data["events"], data["time_ms"]
                status = int(read("status") or "200")
        append("requests.jsonl", {"status": status, "valid": valid, "events": len(events),
                                  "error": error, "time_ms": time_ms})
        if valid and 200 <= status < 300:
            for event in events:
                append("events.jsonl", {"time_ms": time_ms, "event": event})
        answer = b"{}"
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening on {server.server_address[1]}", flush=True)
server.serve_forever()
