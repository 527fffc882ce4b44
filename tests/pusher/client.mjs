// Runs pusher-js (its Node build, npm `pusher-js`) against Herald's client protocol at
// /app/{key}, for the tests in crates/herald/tests/server/pusher_client.rs. One JSON argument
// says how to connect:
//   {"host","port","key","appId","secret",
//    "channels": ["news", "private-chat", ...],   subscribed at once
//    "badSecret"?: true,                            private channels signed with a wrong secret
//    "user"?: {"user_id", "user_info"?},            the presence channels' member data
//    "signin"?: {"id", "user_info"?, ...},          pusher.signin() at once, the user's data
//                                                   signed by a userAuthentication
//                                                   customHandler with the server SDK's
//                                                   authenticateUser (with badSecret, wrong)
//    "encryptionMasterKeyBase64"?: "...",           the auth endpoint's key for
//                                                   private-encrypted- channels (pusher-js
//                                                   decrypts their events with the
//                                                   shared_secret it answers)
//    "heraldResume"?: true}                         Herald's exact resume (herald-resume.mjs)
//                                                   installed on the connection
// Private and presence channels are authorised by a channelAuthorization customHandler that
// signs with the `pusher` server SDK's authorizeChannel (what an app's auth endpoint does),
// a presence channel with `user` as its channel_data.
//
// It prints one JSON line per thing that happens:
//   {"type":"connected","socket_id":"..."}
//   {"type":"event","channel","event","data"}     every event of a subscribed channel
//                                                 (pusher:subscription_succeeded and
//                                                 pusher:subscription_error included; a
//                                                 presence channel's members object as
//                                                 data, {members, count, myID, me})
//   {"type":"error","error":...}                  the connection's `error` events
//   {"type":"state","current":"..."}              connection state changes
//   {"type":"signin_done","user_data"}            pusher.user's sign-in ended (user_data
//                                                 null when it failed)
//   {"type":"user_event","event","data"}          an event of the server-to-user channel
//                                                 (pusher.user.bind_global)
//   {"type":"user_frame","channel","event"}       any frame of a `#` channel the connection
//                                                 is sent (whichever user's)
//   {"type":"watchlist","name","user_ids"}        a watchlist event (pusher.user.watchlist's
//                                                 `online` and `offline`; the watchlist is
//                                                 `signin.watchlist`)
//   {"type":"position","channel","epoch","seq"}   a position herald-resume.mjs kept (with
//                                                 heraldResume), once the channel's listeners
//                                                 have had its event
// and reads commands, one JSON line each, from stdin:
//   {"trigger":{"channel","event","data"}}        a client event: prints {"type":"triggered","ok"}
//   {"subscribe":"name"} / {"unsubscribe":"name"}
//   {"listen":{"channel","event"}}                prints {"type":"listening"}, then that event
//                                                 each time with what pusher-js gives
//                                                 its listeners beside the data:
//                                                 {"type":"listened","channel","event","data",
//                                                  "user_id"}
//   {"exit":true}                                 disconnects and exits
import readline from 'node:readline';
import Pusher from 'pusher-js';
import PusherServer from 'pusher';
import { heraldResume } from './herald-resume.mjs';

const order = JSON.parse(process.argv[2]);
const print = (line) => process.stdout.write(JSON.stringify(line) + '\n');

const signer = new PusherServer({
  appId: order.appId,
  key: order.key,
  secret: order.badSecret ? `${order.secret}-wrong` : order.secret,
  encryptionMasterKeyBase64: order.encryptionMasterKeyBase64,
  host: order.host,
  port: String(order.port),
  useTLS: false,
});

const pusher = new Pusher(order.key, {
  cluster: 'herald',
  wsHost: order.host,
  wsPort: order.port,
  forceTLS: false,
  enabledTransports: ['ws'],
  disableStats: true,
  userAuthentication: {
    customHandler: (params, callback) => {
      try {
        callback(null, signer.authenticateUser(params.socketId, order.signin));
      } catch (e) {
        callback(e, null);
      }
    },
  },
  channelAuthorization: {
    customHandler: (params, callback) => {
      try {
        const presence = params.channelName.startsWith('presence-') ? order.user : undefined;
        callback(null, signer.authorizeChannel(params.socketId, params.channelName, presence));
      } catch (e) {
        callback(e, null);
      }
    },
  },
});

if (order.heraldResume) {
  heraldResume(pusher);
  pusher.connection.bind('message', (m) => {
    if (m.event === 'pusher_internal:herald_position') {
      print({ type: 'position', channel: m.channel, epoch: m.data.epoch, seq: m.data.seq });
    }
  });
}

pusher.connection.bind('state_change', (states) => print({ type: 'state', current: states.current }));
pusher.connection.bind('error', (error) => print({ type: 'error', error }));
pusher.connection.bind('connected', () => {
  print({ type: 'connected', socket_id: pusher.connection.socket_id });
});

if (order.signin) {
  pusher.user.bind_global((event, data) => print({ type: 'user_event', event, data }));
  for (const name of ['online', 'offline']) {
    pusher.user.watchlist.bind(name, (event) =>
      print({ type: 'watchlist', name: event.name, user_ids: event.user_ids }),
    );
  }
  pusher.connection.bind('message', (m) => {
    if (typeof m.channel === 'string' && m.channel.startsWith('#')) {
      print({ type: 'user_frame', channel: m.channel, event: m.event });
    }
  });
  pusher.signin();
  pusher.user.signinDonePromise.then(() =>
    print({ type: 'signin_done', user_data: pusher.user.user_data }),
  );
}

const channels = new Map();
function subscribe(name) {
  const channel = pusher.subscribe(name);
  channel.bind_global((event, data) => print({ type: 'event', channel: name, event, data }));
  channels.set(name, channel);
}
for (const name of order.channels ?? []) subscribe(name);

const commands = readline.createInterface({ input: process.stdin });
commands.on('line', (line) => {
  if (!line.trim()) return;
  const command = JSON.parse(line);
  if (command.trigger) {
    const { channel, event, data } = command.trigger;
    const ok = pusher.channel(channel).trigger(event, data);
    print({ type: 'triggered', ok });
  } else if (command.listen) {
    const { channel, event } = command.listen;
    pusher.channel(channel).bind(event, (data, metadata) =>
      print({ type: 'listened', channel, event, data, user_id: metadata?.user_id ?? null }),
    );
    print({ type: 'listening', channel, event });
  } else if (command.subscribe) {
    subscribe(command.subscribe);
  } else if (command.unsubscribe) {
    pusher.unsubscribe(command.unsubscribe);
    channels.delete(command.unsubscribe);
    print({ type: 'unsubscribed', channel: command.unsubscribe });
  } else if (command.exit) {
    pusher.disconnect();
    setTimeout(() => process.exit(0), 50);
  }
});
commands.on('close', () => {
  pusher.disconnect();
  setTimeout(() => process.exit(0), 50);
});
