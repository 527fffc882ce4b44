// An MQTT client for Herald's tests, with mqtt.js (the `mqtt` package, Node build), MQTT 5 or
// 3.1.1, over any URL mqtt.js takes: `ws://127.0.0.1:PORT/mqtt` for MQTT over WebSocket.
//
// Usage: node mqttjs_client.mjs '<JSON instructions>'
//
//   {
//     "url": "ws://127.0.0.1:8080/mqtt",
//     "version": 5 | 4,                     (protocolVersion: 4 is MQTT 3.1.1; default 5)
//     "client_id": "t1",                    (default: mqtt.js makes one)
//     "username": "default", "password": "<token or API key>",   (both optional)
//     "subscribe": [{"topic": "a/b", "qos": 1}],
//     "publish": [{"topic": "a/b", "payload": "text", "qos": 1}],
//     "expect": 2,                          (messages to receive before ending, default 0)
//     "timeout": 10                         (seconds for the whole run, default 10)
//   }
//
// It connects (no reconnecting), subscribes (waiting for the SUBACK), publishes (waiting for
// each PUBACK or PUBCOMP at QoS 1 and 2), waits for "expect" messages, then disconnects. Every
// step is one JSON line on stdout, as tests/mqtt/paho_client.py prints them:
//
//   {"event": "connack", "reason_code": 0, "session_present": false}
//   {"event": "suback", "granted": [1]}
//   {"event": "subscribed"}                (every SUBACK came: publish from elsewhere now)
//   {"event": "published", "topic": "a/b", "qos": 1}
//   {"event": "message", "topic": "a/b", "payload": "text", "qos": 1, "retain": false}
//   {"event": "done"}
//
// Exit status: 0 done; 1 bad instructions; 2 timed out ({"event": "timeout"} says while waiting
// for what); 3 the connection was refused or failed ({"event": "error"} says how).

import mqtt from "mqtt";

const say = (event, fields = {}) => console.log(JSON.stringify({ event, ...fields }));

let spec;
try {
  spec = JSON.parse(process.argv[2]);
} catch (e) {
  say("error", { message: `bad instructions: ${e.message}` });
  process.exit(1);
}

let waitingFor = "connack";
const timer = setTimeout(
  () => {
    say("timeout", { waiting_for: waitingFor });
    process.exit(2);
  },
  (spec.timeout ?? 10) * 1000,
);

const client = mqtt.connect(spec.url, {
  protocolVersion: spec.version ?? 5,
  clientId: spec.client_id,
  username: spec.username,
  password: spec.password,
  reconnectPeriod: 0,
  connectTimeout: 5000,
});

const fail = (message) => {
  say("error", { message });
  process.exit(3);
};
client.on("error", (e) => fail(e.message));
client.on("close", () => {
  if (waitingFor !== "end") fail(`closed while waiting for ${waitingFor}`);
});

const received = [];
let whenAllReceived = null;
client.on("message", (topic, payload, packet) => {
  say("message", {
    topic,
    payload: payload.toString("utf8"),
    qos: packet.qos,
    retain: packet.retain,
  });
  received.push(topic);
  if (whenAllReceived && received.length >= (spec.expect ?? 0)) whenAllReceived();
});

client.on("connect", async (connack) => {
  say("connack", {
    reason_code: connack.reasonCode ?? connack.returnCode ?? 0,
    session_present: connack.sessionPresent,
  });
  try {
    for (const s of spec.subscribe ?? []) {
      waitingFor = `suback for ${s.topic}`;
      const granted = await client.subscribeAsync(s.topic, { qos: s.qos ?? 0 });
      say("suback", { granted: granted.map((g) => g.qos) });
    }
    say("subscribed");
    for (const p of spec.publish ?? []) {
      waitingFor = `acknowledgement of a publish to ${p.topic}`;
      await client.publishAsync(p.topic, p.payload ?? "", { qos: p.qos ?? 0 });
      say("published", { topic: p.topic, qos: p.qos ?? 0 });
    }
    waitingFor = `${spec.expect ?? 0} messages`;
    if (received.length < (spec.expect ?? 0)) {
      await new Promise((resolve) => {
        whenAllReceived = resolve;
      });
    }
    waitingFor = "end";
    await client.endAsync();
    clearTimeout(timer);
    say("done");
    process.exit(0);
  } catch (e) {
    fail(e.message);
  }
});
