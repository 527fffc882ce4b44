// Runs Pusher's official Node server SDK (npm `pusher`) against Herald, for the tests in
// crates/herald/tests/server/pusher_api.rs. One JSON argument says what to do:
//   {"host","port","appId","key","secret",
//    "trigger": {"channels": [...], "event", "data", "socket_id"?, "info"?}
//    | "batch": [{"channel","name","data","socket_id"?}, ...]
//    | "get": {"path": "/channels[/NAME[/users]]", "params"?: {...}}   a query (pusher.get),
//    | "sendToUser": {"userId", "event", "data"}       pusher.sendToUser
//    | "terminateUser": "<user id>"                    pusher.terminateUserConnections
//    "clock_offset_ms"?: shifts the SDK's clock (an old auth_timestamp),
//    "encryptionMasterKeyBase64"?: seals the data of private-encrypted- channels}
// and one JSON line is printed: {"status": <HTTP status>, "body": "<the answer's text>"}.
import Pusher from 'pusher';

const order = JSON.parse(process.argv[2]);
if (order.clock_offset_ms) {
  const now = Date.now.bind(Date);
  Date.now = () => now() + order.clock_offset_ms;
}
const pusher = new Pusher({
  appId: order.appId,
  key: order.key,
  secret: order.secret,
  encryptionMasterKeyBase64: order.encryptionMasterKeyBase64,
  host: order.host,
  port: String(order.port),
  useTLS: false,
});

let answer;
try {
  let response;
  if (order.trigger) {
    const t = order.trigger;
    const params = {};
    if (t.socket_id) params.socket_id = t.socket_id;
    if (t.info) params.info = t.info;
    response = await pusher.trigger(t.channels, t.event, t.data, params);
  } else if (order.sendToUser) {
    const u = order.sendToUser;
    response = await pusher.sendToUser(u.userId, u.event, u.data);
  } else if (order.terminateUser) {
    response = await pusher.terminateUserConnections(order.terminateUser);
  } else if (order.get) {
    response = await pusher.get({ path: order.get.path, params: order.get.params ?? {} });
  } else {
    response = await pusher.triggerBatch(order.batch);
  }
  answer = { status: response.status, body: await response.text() };
} catch (e) {
  // The SDK's RequestError carries the answer's status and body.
  if (e.status === undefined) throw e;
  answer = { status: e.status, body: e.body ?? '' };
}
console.log(JSON.stringify(answer));
