// A webhook receiver for Herald's tests: verifies every request with the `standardwebhooks`
// package from npm (Standard Webhooks' own verifier) and records what it accepted. The same
// contract as receiver.py:
//
//     node receiver.mjs --dir DIR [--port 0]
//
// DIR holds `secret` (the endpoint's `whsec_...`, read at every request; until it exists
// requests are answered 503), `status` (the status to answer, read at every request; missing or
// empty: 204), and the files written: `events.jsonl` (one line per event of every request that
// verified and was answered 2xx: `{"webhook_id", "event"}`) and `requests.jsonl` (one line per
// request: `{"webhook_id", "status", "events", "verified", "error"}`).
//
// Prints `listening on PORT` once it accepts connections. Runs until killed.

import { appendFileSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { parseArgs } from "node:util";

import { Webhook } from "standardwebhooks";

const { values: args } = parseArgs({
  options: { dir: { type: "string" }, port: { type: "string", default: "0" } },
});
if (!args.dir) {
  console.error("usage: node receiver.mjs --dir DIR [--port PORT]");
  process.exit(2);
}

const read = (name, fallback = "") => {
  try {
    return readFileSync(join(args.dir, name), "utf8").trim();
  } catch {
    return fallback;
  }
};
const append = (name, record) => appendFileSync(join(args.dir, name), JSON.stringify(record) + "\n");

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    const webhookId = req.headers["webhook-id"] ?? null;
    const secret = read("secret");
    let status;
    let verified = false;
    let error = null;
    let events = [];
    if (!secret) {
      status = 503;
      error = "unready: no secret yet";
    } else {
      try {
        const payload = new Webhook(secret).verify(body.toString("utf8"), req.headers);
        verified = true;
        events = payload?.events ?? [];
        status = Number.parseInt(read("status", "204") || "204", 10);
      } catch (e) {
        status = 400;
        error = `${e.name}: ${e.message}`;
      }
    }
    append("requests.jsonl", {
      webhook_id: webhookId,
      status,
      events: events.length,
      verified,
      error,
      user_agent: req.headers["user-agent"] ?? null,
      content_type: req.headers["content-type"] ?? null,
    });
    if (verified && status >= 200 && status < 300) {
      for (const event of events) {
        append("events.jsonl", { webhook_id: webhookId, event });
      }
    }
    const answer = status === 204 ? "" : JSON.stringify({ status });
    res.writeHead(status, { "content-length": Buffer.byteLength(answer) });
    res.end(answer);
  });
});

server.listen(Number.parseInt(args.port, 10), "127.0.0.1", () => {
  console.log(`listening on ${server.address().port}`);
});
