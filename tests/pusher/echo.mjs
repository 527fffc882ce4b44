// Runs Laravel Echo (npm `laravel-echo`, its `pusher` broadcaster over pusher-js's Node build)
// against Herald's client protocol at /app/{key}, as a Laravel app's front end uses it, for the
// tests in crates/herald/tests/server/pusher_echo.rs. One JSON argument says how to connect:
//   {"host","port","key","appId","secret",
//    "auth"?: "endpoint" | "authorizer",      how Echo asks the app for channel authorisation:
//                                             `authEndpoint` (the default; pusher-js posts the
//                                             form socket_id & channel_name with Echo's
//                                             X-CSRF-TOKEN header) or an `authorizer` that posts
//                                             JSON with fetch, as Reverb's docs show
//    "user"?: {"id", ...},                    the signed-in user of the app: a presence
//                                             channel's member is {user_id: user.id,
//                                             user_info: user}, as Laravel's broadcaster makes it
//    "badSecret"?: true,                      the auth endpoint signs with a wrong secret
//    "broadcaster"?: "pusher" | "reverb"}     Echo's broadcaster: "reverb" is what a Reverb
//                                             app's front end names (Echo's Pusher connector
//                                             with an empty cluster); "pusher" by default
// The app's auth endpoint (Laravel's /broadcasting/auth) is a small HTTP server on loopback in
// this process: it answers 419 without Echo's CSRF token (Laravel's VerifyCsrfToken) and
// otherwise signs with the `pusher` server SDK's authorizeChannel, as Laravel's Pusher
// broadcaster does.
//
// It prints one JSON line per thing that happens:
//   {"type":"connected","socket_id":"..."}          Echo.socketId() once connected
//   {"type":"auth","channel","via","csrf"}          the auth endpoint was asked (via: "form" or
//                                                  "json"; csrf: the token was right)
//   {"type":"subscribed","name"}                    a channel's .subscribed()
//   {"type":"subscription_error","name","error"}    a channel's .error()
//   {"type":"event","name","event","data"}          a .listen(event) callback (event as given
//                                                  to listen, e.g. ".OrderShipped")
//   {"type":"whisper","name","event","data"}        a .listenForWhisper(event) callback
//   {"type":"notification","name","data"}           a .notification() callback (Laravel's
//                                                  broadcast notifications)
//   {"type":"here","name","users"}                  a presence channel's .here()
//   {"type":"joining"|"leaving","name","user"}      its .joining() / .leaving()
//   {"type":"error","error"}                        the connection's `error` events
// and reads commands, one JSON line each, from stdin:
//   {"subscribe":{"kind":"channel"|"private"|"join","name","listen"?:[...],"whispers"?:[...],
//                 "notifications"?:true}}
//       Echo.channel(name) / Echo.private(name) / Echo.join(name), with .listen for each of
//       `listen`, .listenForWhisper for each of `whispers`, .notification with `notifications`
//       (and here/joining/leaving for `join`); prints {"type":"subscribing","name"}
//   {"whisper":{"kind":"private"|"join","name","event","data"}}   prints {"type":"whispered"}
//   {"leave":"name"}                                Echo.leave(name): prints {"type":"left"}
//   {"exit":true}                                   disconnects and exits
import { createServer } from 'node:http';
import readline from 'node:readline';
import Echo from 'laravel-echo';
import Pusher from 'pusher-js';
import PusherServer from 'pusher';

const order = JSON.parse(process.argv[2]);
const print = (line) => process.stdout.write(JSON.stringify(line) + '\n');
const CSRF = 'herald-echo-test-csrf-token';

const signer = new PusherServer({
  appId: order.appId,
  key: order.key,
  secret: order.badSecret ? `${order.secret}-wrong` : order.secret,
  host: order.host,
  port: String(order.port),
  useTLS: false,
});

// The app's /broadcasting/auth.
const endpoint = createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => {
    const json = (req.headers['content-type'] ?? '').includes('application/json');
    const fields = json ? JSON.parse(body) : Object.fromEntries(new URLSearchParams(body));
    const csrf = req.headers['x-csrf-token'] === CSRF;
    print({ type: 'auth', channel: fields.channel_name, via: json ? 'json' : 'form', csrf });
    if (!csrf) {
      res.writeHead(419, { 'content-type': 'application/json' });
      res.end('{"message":"CSRF token mismatch."}');
      return;
    }
    const member = fields.channel_name.startsWith('presence-')
      ? { user_id: order.user.id, user_info: order.user }
      : undefined;
    const answer = signer.authorizeChannel(fields.socket_id, fields.channel_name, member);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer));
  });
});
await new Promise((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
const authEndpoint = `http://127.0.0.1:${endpoint.address().port}/broadcasting/auth`;

const options = {
  broadcaster: order.broadcaster ?? 'pusher',
  key: order.key,
  cluster: 'herald',
  wsHost: order.host,
  wsPort: order.port,
  forceTLS: false,
  enabledTransports: ['ws'],
  disableStats: true,
  csrfToken: CSRF,
  // No `window` in Node: Echo is given the client class, as `window.Pusher` is in a browser.
  Pusher,
};
if (order.auth === 'authorizer') {
  options.authorizer = (channel) => ({
    authorize: (socketId, callback) => {
      fetch(authEndpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': CSRF },
        body: JSON.stringify({ socket_id: socketId, channel_name: channel.name }),
      })
        .then(async (r) => {
          if (!r.ok) throw new Error(`auth endpoint answered ${r.status}`);
          callback(null, await r.json());
        })
        .catch((e) => callback(e, null));
    },
  });
} else {
  options.authEndpoint = authEndpoint;
}
const echo = new Echo(options);
const connection = echo.connector.pusher.connection;
connection.bind('error', (error) => print({ type: 'error', error }));
connection.bind('connected', () => print({ type: 'connected', socket_id: echo.socketId() }));

function channelOf(kind, name) {
  if (kind === 'private') return echo.private(name);
  if (kind === 'join') return echo.join(name);
  return echo.channel(name);
}

function subscribe({ kind, name, listen, whispers, notifications }) {
  const channel = channelOf(kind, name);
  channel.subscribed(() => print({ type: 'subscribed', name }));
  channel.error((error) => print({ type: 'subscription_error', name, error }));
  for (const event of listen ?? []) {
    channel.listen(event, (data) => print({ type: 'event', name, event, data }));
  }
  for (const event of whispers ?? []) {
    channel.listenForWhisper(event, (data) => print({ type: 'whisper', name, event, data }));
  }
  if (notifications) {
    channel.notification((data) => print({ type: 'notification', name, data }));
  }
  if (kind === 'join') {
    channel
      .here((users) => print({ type: 'here', name, users }))
      .joining((user) => print({ type: 'joining', name, user }))
      .leaving((user) => print({ type: 'leaving', name, user }));
  }
  print({ type: 'subscribing', name });
}

function exit() {
  echo.disconnect();
  endpoint.close();
  setTimeout(() => process.exit(0), 50);
}

const commands = readline.createInterface({ input: process.stdin });
commands.on('line', (line) => {
  if (!line.trim()) return;
  const command = JSON.parse(line);
  if (command.subscribe) {
    subscribe(command.subscribe);
  } else if (command.whisper) {
    const { kind, name, event, data } = command.whisper;
    channelOf(kind, name).whisper(event, data);
    print({ type: 'whispered', name, event });
  } else if (command.leave) {
    echo.leave(command.leave);
    print({ type: 'left', name: command.leave });
  } else if (command.exit) {
    exit();
  }
});
commands.on('close', exit);
