//! What the parent and its worker processes say to each other: one JSON object per line, commands
//! on the worker's stdin and events on its stdout. Every command gets exactly one reply event;
//! `progress` events may come in between.

use serde::{Deserialize, Serialize};

/// Client transports the bench speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// WebSocket at /v1/ws.
    Ws,
    /// Server-Sent Events at /v1/sse.
    Sse,
    /// Long-poll at /v1/poll.
    Poll,
    /// Meteor's subscriber protocol as Deacon speaks it (its own port; `--meteor-mode`).
    Meteor,
    /// MQTT 3.1.1 or 5.0 on the server's MQTT listener (`--mqtt-version`, `--mqtt-qos`); also
    /// what `--peer mosquitto` speaks.
    Mqtt,
    /// The Pusher Channels protocol 7 at `/app/{key}` (the app's Pusher key, `--pusher-key`).
    Pusher,
    /// NATS's text protocol, against `nats-server` (`--peer nats`; not a `--transport` value).
    #[value(skip)]
    Nats,
}

impl Transport {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Ws => "ws",
            Transport::Sse => "sse",
            Transport::Poll => "poll",
            Transport::Meteor => "meteor",
            Transport::Mqtt => "mqtt",
            Transport::Pusher => "pusher",
            Transport::Nats => "nats",
        }
    }
}

/// The first line a worker reads: where to connect and as whom.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerConfig {
    /// Worker number, from 0.
    pub index: usize,
    /// Transport of the subscriber connections.
    pub transport: Transport,
    /// Server address.
    pub addr: std::net::SocketAddr,
    /// Value of the `Host` header.
    pub host: String,
    /// Client token (query `?token=`), if any.
    pub token: Option<String>,
    /// Publisher API key, for HTTP publishes from the worker.
    pub api_key: Option<String>,
    /// Token secret, to mint a device token per connection ([`Plan::Inbox`]).
    #[serde(default)]
    pub token_secret: Option<String>,
    /// Local address the worker's sockets bind to before connecting (spreads ephemeral ports).
    pub source_ip: Option<std::net::IpAddr>,
    /// The Meteor subscriber port, for `--transport meteor`.
    #[serde(default)]
    pub meteor_addr: Option<std::net::SocketAddr>,
    /// The Meteor mode subscribers ask for.
    #[serde(default)]
    pub meteor_mode: String,
    /// `SO_RCVBUF` of the subscriber connections (`--rcvbuf`); the kernel's autotuning if none.
    #[serde(default)]
    pub rcvbuf: Option<u32>,
    /// Every node's address, the first node first (a [`Plan::Failover`] client that loses its
    /// node reconnects to another).
    #[serde(default)]
    pub nodes: Vec<std::net::SocketAddr>,
    /// Where and how `--transport mqtt` connections connect (this worker's node's MQTT
    /// listener, or Mosquitto).
    #[serde(default)]
    pub mqtt: Option<crate::mqtt::MqttConfig>,
    /// The app's Pusher key, for `--transport pusher`.
    #[serde(default)]
    pub pusher_key: Option<String>,
}

/// Which channels the connections of an `open` subscribe to.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Plan {
    /// Every connection subscribes to this one channel.
    Shared {
        /// Channel name.
        channel: String,
    },
    /// Connection number `i` subscribes to `{prefix}{i}`.
    Own {
        /// Name prefix.
        prefix: String,
    },
    /// Every connection subscribes to `{prefix}0` .. `{prefix}{count-1}`.
    Set {
        /// Name prefix.
        prefix: String,
        /// Channels per connection.
        count: u64,
    },
    /// Connect only; subscriptions come later with a `fire`.
    Connect,
    /// Connection number `i` is device `{prefix}{i}` coming back online: it connects (TCP
    /// only) and is ready; at the next `fire` it opens its inbox with a device token it mints
    /// (WebSocket upgrade, SSE or long-poll request naming no channel) and counts the messages
    /// that arrive. Once it has `pending` of them it is caught up, which counts as one
    /// acknowledgement whose latency is the time from its request to its last pending message.
    ///
    /// With `ack` (WebSocket only) the connection acknowledges every inbox message with an
    /// `ack` command instead: it counts one acknowledgement once both logs of its inbox are
    /// open (timed from its request), then one per `ack` the server answered (timed from the
    /// acknowledged message's send time), and `pending` is not used.
    Inbox {
        /// Device id prefix.
        prefix: String,
        /// Messages waiting for each device.
        pending: u64,
        /// Acknowledge every inbox message as it arrives.
        #[serde(default)]
        ack: bool,
    },
    /// Connection number `i` is a resuming subscriber (`herald bench failover`, WebSocket): it
    /// subscribes to `{prefix}{i}/0` .. `{prefix}{i}/{channels-1}` and keeps each channel's
    /// position and ledger ([`crate::ledger`]). When its connection is lost it waits for an
    /// [`Action::Resume`] fire, then reconnects to another node (round-robin over the nodes
    /// other than the one it lost) and resubscribes every channel from its position, as the
    /// SDK does. [`Command::Account`] reports what these connections received.
    Failover {
        /// Channel name prefix.
        prefix: String,
        /// Channels per connection.
        channels: u64,
    },
}

/// What every connection does when a `fire` goes off.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Nothing: only (re)start the round clock.
    Mark,
    /// [`Plan::Failover`] connections that lost their node may reconnect (from now on).
    Resume,
    /// Every connection publishes one message to `channel`.
    PublishOnce {
        /// Channel name.
        channel: String,
    },
    /// Every connection subscribes to `subjects` channels at once.
    Subscribe {
        /// Name prefix.
        prefix: String,
        /// Channels per connection.
        subjects: u64,
        /// Channels are `{prefix}{user}/{j}` (one set per user) instead of `{prefix}{j}`.
        distinct: bool,
        /// Send each subscribe only once the previous one is acknowledged (WebSocket).
        #[serde(default)]
        one_at_a_time: bool,
        /// NATS: one `PING` after all the `SUB`s, its `PONG` acknowledging every one.
        #[serde(default)]
        one_ping: bool,
        /// WebSocket: subscribes per WebSocket message (a batch when more than 1).
        #[serde(default = "one_per_message")]
        batch: u64,
    },
}

/// The default of [`Action::Subscribe`]'s `batch`: one subscribe a message.
fn one_per_message() -> u64 {
    1
}

/// A command from the parent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    /// Open `count` connections numbered from `first`, subscribed as `plan` says, at most
    /// `concurrency` handshakes at a time. Replies `opened` once every one is ready or failed.
    Open {
        /// Number of the first connection (global across workers).
        first: u64,
        /// How many.
        count: u64,
        /// Channels.
        plan: Plan,
        /// Handshakes in flight.
        concurrency: usize,
    },
    /// Starts a new round whose clock starts at `at_ns` (unix nanos); at that moment every
    /// connection performs `action`. Replies `fired` at once.
    Fire {
        /// When.
        at_ns: u64,
        /// Width of the round's time buckets, in milliseconds.
        bucket_ms: u64,
        /// What.
        action: Action,
    },
    /// Waits until the round has seen `per_conn_messages` deliveries and `per_conn_acks`
    /// acknowledgements for every open connection (or `timeout_ms` passed), then replies
    /// `collected` and starts a new round.
    Collect {
        /// Deliveries expected per connection.
        per_conn_messages: u64,
        /// Acknowledgements expected per connection.
        per_conn_acks: u64,
        /// Give up after this long.
        timeout_ms: u64,
    },
    /// Waits until every [`Plan::Failover`] connection of the worker is connected and has
    /// received seqs 1 to `expected` of each of its channels (or `timeout_ms` passed), sending
    /// `progress` (connections caught up) meanwhile, then replies `accounted`.
    Account {
        /// Messages published to each channel.
        expected: u64,
        /// Give up after this long.
        timeout_ms: u64,
    },
    /// Closes every connection and exits.
    Close,
}

/// One time bucket of a round.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Bucket {
    /// Deliveries in the bucket.
    pub messages: u64,
    /// Acknowledgements in the bucket.
    pub acks: u64,
    /// Errors in the bucket.
    #[serde(default)]
    pub errors: u64,
    /// Latency histogram of the bucket's deliveries (base64 V2), empty when none.
    pub hist: String,
}

/// What a round saw.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RoundReport {
    /// Messages delivered (carrying a send time).
    pub messages: u64,
    /// Subscriptions acknowledged (for [`Plan::Inbox`]: devices caught up).
    pub acks: u64,
    /// Publishes acknowledged.
    pub published: u64,
    /// Error replies and failed requests.
    pub errors: u64,
    /// Connections that closed during the round.
    pub disconnected: u64,
    /// Connections alive at the end.
    pub alive: u64,
    /// Delivery latency histogram (base64 V2).
    pub msg_hist: String,
    /// Acknowledgement latency histogram (base64 V2).
    pub ack_hist: String,
    /// Unix nanos of the first and last delivery or acknowledgement (0 when none).
    pub first_ns: u64,
    /// See `first_ns`.
    pub last_ns: u64,
    /// Start of the round's clock.
    pub start_ns: u64,
    /// Time buckets from `start_ns`.
    pub buckets: Vec<Bucket>,
    /// A few error messages, for the report.
    pub error_samples: Vec<String>,
}

/// An event from a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Event {
    /// Connections ready so far in the current `open` (and failed).
    Progress {
        /// Ready.
        done: u64,
        /// Failed.
        failed: u64,
    },
    /// Reply to `open`.
    Opened {
        /// Ready.
        ok: u64,
        /// Failed.
        failed: u64,
        /// A few error messages.
        errors: Vec<String>,
    },
    /// Reply to `fire`.
    Fired,
    /// Reply to `collect`.
    Collected(RoundReport),
    /// Reply to `account`.
    Accounted(crate::ledger::Tally),
    /// Reply to `close`, or a command the worker could not carry out.
    Closed,
    /// The worker failed.
    Error {
        /// Why.
        message: String,
    },
}
