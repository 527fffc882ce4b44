//! Command-line flags of `herald bench`: the ones every scenario shares ([`Common`]) and each
//! scenario's own. docs/benchmarks.md documents them.

use std::path::PathBuf;

use crate::proto::Transport;

/// Flags every scenario takes.
// The field docs are `--help` text, where `<placeholder>` is plain text, not HTML.
#[allow(rustdoc::invalid_html_tags)]
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Client transport.
    #[arg(long, value_enum, default_value = "ws")]
    pub transport: Transport,
    /// Measure a server that is already running at this URL (http://HOST:PORT), or the nodes
    /// of a cluster at several URLs separated by commas (clients spread round-robin over them);
    /// nats://HOST:PORT measures a NATS server (as --peer nats), mqtt://HOST:PORT an MQTT broker
    /// such as Mosquitto (as --peer mosquitto).
    #[arg(long, value_name = "URL[,URL...]")]
    pub target: Option<String>,
    /// The server under test: herald, nats (`nats-server`, spoken to in NATS's own protocol,
    /// for fanout, subscribe-storm and connections; --spawn starts `nats-server` from PATH or
    /// --server-bin), or mosquitto (MQTT subscribers and publishers, for fanout,
    /// subscribers, subscribe-storm and connections; --spawn starts `mosquitto` from PATH, /usr/sbin or --server-bin with
    /// allow_anonymous on a free loopback port), or sockudo (Pusher protocol subscribers and
    /// signed `POST /apps/{id}/events` publishers, for fanout, subscribers, subscribe-storm and
    /// connections; --spawn starts `sockudo` from --server-bin, $HERALD_BENCH_SOCKUDO or PATH
    /// with a generated config on a free loopback port).
    #[arg(long, value_enum, default_value = "herald")]
    pub peer: Peer,
    /// Start a server for the run (full report, including its CPU time and memory).
    #[arg(long)]
    pub spawn: bool,
    /// Start PostgreSQL, Redis and N `herald serve` nodes over them for the run, spread the
    /// clients over the nodes, and report each node's, PostgreSQL's and Redis's CPU.
    #[arg(long, value_name = "N")]
    pub spawn_cluster: Option<usize>,
    /// With --spawn-cluster: run the cluster's PostgreSQL with `fsync` and `full_page_writes`
    /// on, as a production server runs, so each commit waits for the disk [default: off, as
    /// the tests run it].
    #[arg(long, requires = "spawn_cluster")]
    pub cluster_fsync: bool,
    /// With --spawn-cluster: each node's `workers` (and so its HTTP runtime's too), for nodes
    /// that share this machine's cores [default: the nodes' own, one per CPU each].
    #[arg(long, value_name = "N", requires = "spawn_cluster", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub node_workers: Option<u16>,
    /// The herald binary --spawn starts [default: this binary when the bench runs in
    /// `herald`, else `herald` beside it, else target/release/herald]; with --peer nats, the
    /// nats-server binary [default: `nats-server` on PATH, else /usr/sbin/nats-server]; with
    /// --peer mosquitto, the mosquitto binary [default: on PATH, else /usr/sbin/mosquitto];
    /// with --peer sockudo, the sockudo binary [default: $HERALD_BENCH_SOCKUDO, else on PATH].
    #[arg(long, value_name = "PATH")]
    pub server_bin: Option<PathBuf>,
    /// Store durability of the spawned server (always, batch, off) [default: the server's].
    #[arg(long, value_name = "MODE")]
    pub sync: Option<String>,
    /// Pid of the --target server, to report its CPU time and memory (one per --target URL,
    /// comma-separated, in the same order).
    #[arg(long, value_name = "PID[,PID...]", value_delimiter = ',')]
    pub server_pid: Vec<u32>,
    /// Publisher API key of the --target server.
    #[arg(
        long,
        env = "HERALD_API_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,
    /// Token secret of the --target server (to mint client tokens that may publish).
    #[arg(
        long,
        env = "HERALD_TOKEN_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub token_secret: Option<String>,
    /// A client token for the --target server (instead of --token-secret).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Allow a --target that is not on this machine.
    #[arg(long)]
    pub allow_remote: bool,
    /// Write CSV, summary.json and an SVG chart into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Skip the quick baseline run before the scenario.
    #[arg(long)]
    pub no_baseline: bool,
    /// Most connections one worker process holds (one process may hold 20,000 files).
    #[arg(long, default_value_t = 15_000, value_name = "N")]
    pub per_worker: u64,
    /// Worker processes [default: enough for the connections, at least 1].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// SO_RCVBUF of every subscriber connection, in bytes (the kernel doubles it) [default: the
    /// kernel's autotuning, up to tcp_rmem's maximum]. Changes what is measured: a small buffer
    /// makes a client that reads late push back on the server instead of queueing in its socket.
    #[arg(long, value_name = "BYTES")]
    pub rcvbuf: Option<u32>,
    /// Meteor subscriber port of the --target server (IP:PORT), for --transport meteor.
    #[arg(long, value_name = "ADDR")]
    pub meteor_target: Option<std::net::SocketAddr>,
    /// Meteor mode --transport meteor subscribes with: longpoll (Deacon: one message per
    /// connection, then it reconnects with .r<next id>) or deaconstream (the same lines on a
    /// connection that stays open). A spawned server gets docs/examples/meteord-deacon.conf.
    #[arg(long, default_value = "longpoll", value_name = "MODE")]
    pub meteor_mode: String,
    /// MQTT listener of each --target node (IP:PORT, comma-separated in the --target order),
    /// for --transport mqtt. A spawned server gets one on a free port.
    #[arg(long, value_name = "ADDR[,ADDR...]", value_delimiter = ',')]
    pub mqtt_target: Vec<std::net::SocketAddr>,
    /// MQTT version of the --transport mqtt and --peer mosquitto connections.
    #[arg(long, value_enum, default_value = "3.1.1", value_name = "VERSION")]
    pub mqtt_version: crate::mqtt::Version,
    /// QoS the MQTT subscribers ask for (0 or 1; a QoS 1 delivery is acknowledged with a
    /// PUBACK). MQTT publishers always publish at QoS 1 and wait for the PUBACK.
    #[arg(long, default_value_t = 0, value_name = "QOS", value_parser = clap::value_parser!(u8).range(0..=1))]
    pub mqtt_qos: u8,
    /// MQTT subscribers hold persistent sessions: they connect with Clean Start 0 and this
    /// Session Expiry Interval in seconds (3.1.1: Clean Session 0, whose session does not
    /// expire), each with a client identifier new to the server [default: Clean Start 1].
    /// With --mqtt-qos 1, each QoS 1 delivery moves the session's stored position once its
    /// PUBACK is read. Publishers always connect with Clean Start 1.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u32).range(1..))]
    pub mqtt_session_expiry: Option<u32>,
    /// The app's Pusher key, for --transport pusher against a --target server [default for
    /// --spawn: credentials created for the app through `POST /v1/apps/default/pusher`].
    #[arg(long, value_name = "KEY")]
    pub pusher_key: Option<String>,
    /// The app's Pusher app id, for the publishers of --transport pusher (with --pusher-key and
    /// --pusher-secret they publish through `POST /apps/{app_id}/events`, signed) against a
    /// --target server, or the app id a spawned Sockudo gets [default for --spawn: the
    /// credentials created for the server's app].
    #[arg(long, value_name = "ID")]
    pub pusher_app_id: Option<String>,
    /// The app's Pusher secret (see --pusher-app-id).
    #[arg(
        long,
        env = "HERALD_BENCH_PUSHER_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub pusher_secret: Option<String>,
    /// Stop the run after this many seconds whatever else it would still do.
    #[arg(long, default_value_t = 600, value_name = "SECS")]
    pub time_limit: u64,
}

/// The servers the bench measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Peer {
    /// Herald.
    Herald,
    /// `nats-server`, with the bench's NATS client ([`crate::nats`]).
    Nats,
    /// `mosquitto`, with the bench's MQTT client ([`crate::mqtt`]).
    Mosquitto,
    /// `sockudo`, a Pusher-protocol server, with the bench's Pusher clients and publishers.
    Sockudo,
}

impl Common {
    /// The server under test: NATS for `--peer nats` or a `nats://` `--target`, Mosquitto for
    /// `--peer mosquitto` or an `mqtt://` `--target`.
    pub fn peer(&self) -> Peer {
        match &self.target {
            Some(t) if t.trim_start().starts_with("nats://") => Peer::Nats,
            Some(t) if t.trim_start().starts_with("mqtt://") => Peer::Mosquitto,
            _ => self.peer,
        }
    }

    /// Whether the server under test is NATS.
    pub fn is_nats(&self) -> bool {
        self.peer() == Peer::Nats
    }

    /// Whether the server under test is Mosquitto.
    pub fn is_mosquitto(&self) -> bool {
        self.peer() == Peer::Mosquitto
    }

    /// Whether the server under test is Sockudo.
    pub fn is_sockudo(&self) -> bool {
        self.peer() == Peer::Sockudo
    }

    /// Whether the clients speak the Pusher protocol: `--transport pusher`, or Sockudo as the
    /// server.
    pub fn is_pusher(&self) -> bool {
        self.transport == Transport::Pusher || self.is_sockudo()
    }

    /// Whether the clients speak MQTT: `--transport mqtt`, or Mosquitto as the server.
    pub fn is_mqtt(&self) -> bool {
        self.transport == Transport::Mqtt || self.is_mosquitto()
    }

    /// Whether subscribers reconnect after every message (Deacon's long-poll), so that a
    /// step's samples wait for them to be back before publishing the next one.
    pub fn reconnects_per_message(&self) -> bool {
        self.transport == Transport::Meteor && self.meteor_mode == "longpoll"
    }
}

/// `herald bench baseline`.
#[derive(Debug, Clone, clap::Args)]
pub struct BaselineArgs {
    /// Seconds each floor is measured for.
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    pub seconds: f64,
    /// Where to measure fsync [default: the system's temporary directory].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Write CSV, summary.json and an SVG chart into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `herald bench subscribers` and `herald bench channels`.
#[derive(Debug, Clone, clap::Args)]
pub struct StepArgs {
    /// Flags every scenario takes.
    #[command(flatten)]
    pub common: Common,
    /// Subscribers added per step.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub step: u64,
    /// Stop after this many subscribers.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_subscribers: u64,
    /// Stop once a step's worst-case latency exceeds this (e.g. 1s, 500ms).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub max_latency: std::time::Duration,
    /// Messages published after each step (one after the other).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub samples: u64,
}

/// `herald bench all-to-all`.
#[derive(Debug, Clone, clap::Args)]
pub struct AllToAllArgs {
    /// Flags every scenario takes.
    #[command(flatten)]
    pub common: Common,
    /// Subscribers, each of which publishes once.
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub subscribers: u64,
}

/// `herald bench subscribe-storm`.
#[derive(Debug, Clone, clap::Args)]
pub struct StormArgs {
    /// Flags every scenario takes.
    #[command(flatten)]
    pub common: Common,
    /// Client connections.
    #[arg(long, default_value_t = 100, value_name = "U")]
    pub users: u64,
    /// Channels each user subscribes to at once.
    #[arg(long, default_value_t = 1000, value_name = "S")]
    pub subjects: u64,
    /// Give every user its own channels (U x S channels) instead of the same S channels.
    #[arg(long)]
    pub distinct: bool,
    /// Publish one message to every channel before the storm, so the channels exist in the
    /// store with a history (otherwise they are new and empty).
    #[arg(long)]
    pub prepublish: bool,
    /// Each user sends its next subscribe only once the previous one is acknowledged, instead
    /// of all S at once (WebSocket, MQTT and --peer nats; SSE and long-poll name all S in one
    /// request).
    #[arg(long)]
    pub one_at_a_time: bool,
    /// With --peer nats: one `PING` after a user's S `SUB`s, whose `PONG` acknowledges all S
    /// (as a NATS client's flush after S subscribe calls), instead of a `PING` after each.
    #[arg(long, conflicts_with = "one_at_a_time")]
    pub nats_one_ping: bool,
    /// WebSocket: send B subscribes in each WebSocket message (a batch: a JSON array of
    /// commands, each still answered on its own) instead of one a message; at most 1,000.
    #[arg(long, default_value_t = 1, value_name = "B", conflicts_with = "one_at_a_time",
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub batch: u64,
}

/// `herald bench fanout`.
#[derive(Debug, Clone, clap::Args)]
pub struct FanoutArgs {
    /// Flags every scenario takes.
    #[command(flatten)]
    pub common: Common,
    /// Concurrent publishers (HTTP keep-alive connections, each waiting for its answer).
    #[arg(long, default_value_t = 4, value_name = "P")]
    pub publishers: u64,
    /// Messages published in total.
    #[arg(long, default_value_t = 2000, value_name = "M")]
    pub messages: u64,
    /// Subscribers of the channel (with --channels, of every channel).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub subscribers: u64,
    /// Channels to publish to: publisher number `p` publishes to channel `p` mod C, and every
    /// subscriber subscribes to all C, so each still receives every message. 1 puts every
    /// publisher on one channel.
    #[arg(long, default_value_t = 1, value_name = "C", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub channels: u64,
    /// Messages per second across publishers [default: as fast as they can].
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Messages per publish request: more than 1 publishes through `POST /v1/batch` (at most
    /// 1,000), each message still stored and fsynced before the answer.
    #[arg(long, default_value_t = 1, value_name = "B", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub batch: u64,
    /// With --peer nats: publishes each publisher keeps unconfirmed (each a `PUB` and a `PING`,
    /// confirmed by its `PONG`). 1 waits for every answer, as Herald's HTTP publishers do; more
    /// lets the server read many publishes at once, as a NATS client that publishes without
    /// flushing (nats.go's `Publish`) makes it.
    #[arg(long, default_value_t = 1, value_name = "W", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub nats_window: u64,
}

/// `herald bench connections`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConnectionsArgs {
    /// Flags every scenario takes.
    #[command(flatten)]
    pub common: Common,
    /// Connections to open.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub connections: u64,
    /// Channels each connection subscribes to (the same K channels for every connection).
    #[arg(long, default_value_t = 1, value_name = "K")]
    pub channels: u64,
    /// Seconds to stay idle while the server's CPU is measured.
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    pub idle_seconds: f64,
}

/// `herald bench broadcast`.
#[derive(Debug, Clone, clap::Args)]
pub struct BroadcastArgs {
    /// Flags every scenario takes.
    #[command(flatten)]
    pub common: Common,
    /// Devices to register through `POST /v1/devices/batch`.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub devices: u64,
    /// Broadcast pushes (target: the whole app) sent one after the other.
    #[arg(long, default_value_t = 20, value_name = "M")]
    pub messages: u64,
    /// Devices per registration request (the server takes at most 1,000).
    #[arg(long, default_value_t = 1000, value_name = "B")]
    pub batch: u64,
    /// Registration requests in flight.
    #[arg(long, default_value_t = 4, value_name = "C")]
    pub concurrency: u64,
    /// Register `apns` devices instead and send ONE provider push to all of them through a
    /// mock provider the bench starts (`herald mock apns`); needs --spawn.
    #[arg(long, value_enum, value_name = "PROVIDER")]
    pub provider: Option<Provider>,
    /// With --provider: the spawned server's `provider_batch` (sends run at once).
    #[arg(long, value_name = "N", requires = "provider")]
    pub provider_batch: Option<u64>,
    /// With --provider: the spawned server's `provider_connections` (per provider and app).
    #[arg(long, value_name = "N", requires = "provider")]
    pub provider_connections: Option<u64>,
}

/// Mock providers a scenario can send through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Provider {
    /// `herald mock apns` (TLS, HTTP/2, ES256 provider tokens).
    Apns,
}

/// `herald bench auto`.
#[derive(Debug, Clone, clap::Args)]
pub struct AutoArgs {
    /// Flags every scenario takes.
    #[command(flatten)]
    pub common: Common,
    /// `apns` devices, each holding its inbox open over a WebSocket and acking what it gets.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub devices: u64,
    /// The push's `ack_window` in seconds (devices that do not ack within it get a provider
    /// push).
    #[arg(long, default_value_t = 5, value_name = "SECS")]
    pub ack_window: u64,
}

/// `herald bench reconnect-storm`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReconnectArgs {
    /// Flags every scenario takes.
    #[command(flatten)]
    pub common: Common,
    /// Devices: registered, then connected all at once with a device token each.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub devices: u64,
    /// Broadcast pushes stored while the devices are offline: each device has this many
    /// pending messages when it reconnects.
    #[arg(long, default_value_t = 100, value_name = "P")]
    pub pending: u64,
    /// Of the pending messages, this many are pushed to each device by id instead of broadcast
    /// (N x D device-targeted pushes; the rest, P - D, are broadcasts).
    #[arg(long, default_value_t = 0, value_name = "D")]
    pub direct: u64,
}

/// `herald bench soak`.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// Flags every scenario takes (`--time-limit` is raised to cover `--duration`).
    #[command(flatten)]
    pub common: Common,
    /// How long the load runs (at most 24h), e.g. 10m, 2h.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub duration: std::time::Duration,
    /// How often figures are recorded and printed (at least 1s), e.g. 1m, 5s.
    #[arg(long, default_value = "1m", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub interval: std::time::Duration,
    /// Messages published per second in total (HTTP, one message per request).
    #[arg(long, default_value_t = 50.0, value_name = "R")]
    pub rate: f64,
    /// Publishing connections sharing `--rate`.
    #[arg(long, default_value_t = 2, value_name = "P")]
    pub publishers: u64,
    /// Channels the messages go to, round robin.
    #[arg(long, default_value_t = 10, value_name = "C")]
    pub channels: u64,
    /// WebSocket subscribers, subscriber `i` on channel `i % C`.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub subscribers: u64,
    /// Mean life of a subscriber's connection (each lives 0.5 to 1.5 times this, then
    /// disconnects and reconnects, resuming after the last message it received), e.g. 30s.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub churn: std::time::Duration,
    /// Devices (platform `herald`, offline) that receive the pushes, round robin.
    #[arg(long, default_value_t = 20, value_name = "D")]
    pub devices: u64,
    /// Device pushes per second (`POST /v1/push` to one device each).
    #[arg(long, default_value_t = 5.0, value_name = "R")]
    pub push_rate: f64,
}

/// `herald bench hooks`.
#[derive(Debug, Clone, clap::Args)]
pub struct HooksArgs {
    /// Flags every scenario takes (`--transport` is WebSocket only here).
    #[command(flatten)]
    pub common: Common,
    /// Clients, each with a token of its own (its own `sub`) and a channel of its own.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub clients: u64,
    /// Rounds: in each, every client connects, subscribes, and disconnects.
    #[arg(long, default_value_t = 3, value_name = "R")]
    pub rounds: u64,
    /// Clients in their cycle at a time (each holds one socket only during its cycle; at most
    /// 15,000, one process may hold 20,000 files). Hundreds of simultaneous connects overflow
    /// the server's accept queue now and then, and a dropped SYN costs its connection 1 s (see
    /// the cycle time's p99).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub concurrency: usize,
    /// The spawned server's `hooks.batch_max` (HERALD_HOOKS_BATCH_MAX) [default: the
    /// server's, 100].
    #[arg(long, value_name = "N")]
    pub batch_max: Option<u64>,
    /// The spawned server's `hooks.batch_delay` (HERALD_HOOKS_BATCH_DELAY), e.g. 250ms
    /// [default: the server's, 1s].
    #[arg(long, value_name = "DURATION")]
    pub batch_delay: Option<String>,
    /// The endpoint's `offline_delay_ms`: how long a user.offline waits for a reconnect.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub offline_delay_ms: u64,
    /// Longest wait, after the last client disconnected, for every expected event.
    #[arg(long, default_value_t = 60, value_name = "SECS")]
    pub wait: u64,
    /// The app whose endpoint is created (`POST /v1/apps/{app}/hooks`).
    #[arg(long, default_value = "default", value_name = "APP")]
    pub app: String,
    /// The same churn with no endpoint at all: the baseline of the A/B comparison.
    #[arg(long, conflicts_with = "hooks_matching_nothing")]
    pub no_hooks: bool,
    /// An endpoint that wants only channel events for a channel pattern no client uses: the
    /// server tracks lifecycle events and matches them, and nothing may be sent.
    #[arg(long)]
    pub hooks_matching_nothing: bool,
}

/// `herald bench failover`.
#[derive(Debug, Clone, clap::Args)]
pub struct FailoverArgs {
    /// Flags every scenario takes (`--transport` is WebSocket only here; a cluster is needed:
    /// `--spawn-cluster N`, or `--target URL,URL,...` with `--server-pid` for the node killed).
    #[command(flatten)]
    pub common: Common,
    /// Clients on each node, each subscribed over the WebSocket to channels of its own.
    #[arg(long, default_value_t = 6000, value_name = "N")]
    pub clients_per_node: u64,
    /// Channels of its own each client subscribes to.
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub channels: u64,
    /// Messages published to every channel before the kill; every client receives them first.
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub received: u64,
    /// Messages published to every channel after the kill, through the surviving nodes: the
    /// killed node's clients have them pending when they resume.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub pending: u64,
    /// The node killed with SIGKILL, from 1 [default: the last].
    #[arg(long, value_name = "NODE")]
    pub kill: Option<usize>,
    /// Let the killed node's clients reconnect as soon as they see the loss, racing the
    /// publishes of the pending messages, instead of once those are stored.
    #[arg(long)]
    pub reconnect_at_once: bool,
    /// Longest wait, from the kill, for every client to be resumed and caught up; past it the
    /// run reports what it has and fails.
    #[arg(long, default_value_t = 120, value_name = "SECS")]
    pub resume_timeout: u64,
}
