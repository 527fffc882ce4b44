"""A webhook receiver for Herald's tests: verifies every request with the `standardwebhooks`
library from PyPI (Standard Webhooks' own verifier) and records what it accepted.

    receiver.py --dir DIR [--port 0]

DIR holds the files the test and the receiver share:

- `secret`: the endpoint's signing secret (`whsec_...`), read at every request (the test writes
  it once Herald answered the endpoint's creation). Until it exists every request is refused
  with 503 and recorded as `unready`.
- `status`: the HTTP status to answer (e.g. `503` while the test wants the endpoint down); read
  at every request. Missing or empty: 204.
- `events.jsonl` (written): one line per event of every request that verified and was answered
  2xx: `{"webhook_id": ..., "event": {...}}`. Requests answered otherwise are not recorded
  there: Herald must send them again.
- `requests.jsonl` (written): one line per request: `{"webhook_id", "status", "events",
  "verified", "error"}` (`error`: why it did not verify).

Prints `listening on PORT` once it accepts connections. Runs until killed.
"""

import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

LOCK = threading.Lock()


def read(path, default=""):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except FileNotFoundError:
        return default


def append(path, record):
    line = json.dumps(record, separators=(",", ":")) + "\n"
    with LOCK, open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    directory = "."

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        headers = {k.lower(): v for k, v in self.headers.items()}
        webhook_id = headers.get("webhook-id")
        secret = read(os.path.join(self.directory, "secret"))
        verified, error, events = False, None, []
        if not secret:
            status, error = 503, "unready: no secret yet"
        else:
            try:
                payload = Webhook(secret).verify(body, headers)
                verified = True
                events = payload.get("events") or []
                status = int(read(os.path.join(self.directory, "status"), "204") or "204")
            except (WebhookVerificationError, ValueError) as e:
                status, error = 400, f"{type(e).__name__}: {e}"
        append(
            os.path.join(self.directory, "requests.jsonl"),
            {
                "webhook_id": webhook_id,
                "status": status,
                "events": len(events),
                "verified": verified,
                "error": error,
                "user_agent": headers.get("user-agent"),
                "content_type": headers.get("content-type"),
            },
        )
        if verified and 200 <= status < 300:
            for event in events:
                append(
                    os.path.join(self.directory, "events.jsonl"),
                    {"webhook_id": webhook_id, "event": event},
                )
        self.send_response(status)
        answer = b"" if status == 204 else json.dumps({"status": status}).encode()
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    Handler.directory = args.dir
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
