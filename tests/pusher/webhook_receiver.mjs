// A receiver of Herald's Pusher-format webhooks for Herald's tests: checks every request with
// the `pusher` Node SDK's own `webhook(request)` (`isValid()`, `getEvents()`, `getTime()`) and
// records what it accepted. The same contract as webhook_receiver.py:
//
//     node webhook_receiver.mjs --dir DIR
//
// DIR holds `credentials` (`{"app_id","key","secret"}`, read at every request; until it exists
// requests are answered 503), `status` (the status to answer a valid request, read at every
// request; missing or empty: 200), and the files written: `events.jsonl` (one line per event of
// every request that was valid and answered 2xx: `{"time_ms", "event"}`) and `requests.jsonl`
// (one line per request: `{"status", "valid", "events", "error"}`).
//
// Prints `listening on PORT` once it accepts connections. Runs until killed.

import { appendFileSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { parseArgs } from "node:util";

import Pusher from "pusher";

const { values: args } = parseArgs({ options: { dir: { type: "string" } } });
if (!args.dir) {
  console.error("usage: node webhook_receiver.mjs --dir DIR");
  process.exit(2);
}

const read = (name) => {
  try {
    return readFileSync(join(args.dir, name), "utf8").trim();
  } catch {
    return "";
  }
};
const append = (name, record) => appendFileSync(join(args.dir, name), JSON.stringify(record) + "\n");

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const rawBody = Buffer.concat(chunks).toString("utf8");
    const credentials = read("credentials");
    let status;
    let valid = false;
    let error = null;
    let events = [];
    let timeMs = null;
    if (!credentials) {
      status = 503;
      error = "unready: no credentials yet";
    } else {
      const { app_id: appId, key, secret } = JSON.parse(credentials);
      const pusher = new Pusher({ appId, key, secret });
      const webhook = pusher.webhook({ headers: req.headers, rawBody });
      valid = webhook.isValid();
      if (valid) {
        events = webhook.getEvents();
        timeMs = webhook.getTime().getTime();
        status = Number.parseInt(read("status") || "200", 10);
      } else {
        status = 401;
        error = "the pusher SDK's isValid() refused the request";
      }
    }
    append("requests.jsonl", { status, valid, events: events.length, error, time_ms: timeMs });
    if (valid && status >= 200 && status < 300) {
      for (const event of events) {
        append("events.jsonl", { time_ms: timeMs, event });
      }
    }
    res.writeHead(status, { "content-type": "application/json" });
    res.end("{}");
  });
});

server.listen(0, "127.0.0.1", () => {
  console.log(`listening on ${server.address().port}`);
});
