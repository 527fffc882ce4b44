//! [`RedisBus`]: the [`Bus`] of a node in a cluster. Its own commits go to its fan-out at once
//! (through the channel's [`crate::sequencer::Sequencer`], with no Redis round trip) and to a
//! sender task that publishes them (`SPUBLISH`); what other nodes publish arrives on the
//! channels this node follows and goes through the same sequencers. Cache events are applied
//! here at once and published to every node.
//!
//! Built in three steps because the log's commit sink is the bus itself:
//! [`RedisBus::connect`] (async: reaches Redis, fails clearly if it cannot), then
//! [`Connected::start`] inside [`herald_core::Engine::open_with_bus`]'s `make_bus` (sync: starts
//! the tasks over the engine's fan-out), then [`RedisBus::attach`] with the opened log and
//! tenancy (gap repairs and cache reloads read them).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use fred::prelude::{
    Builder, Client, ClientLike, ClientState, Config, EventInterface, PubsubInterface,
    ReconnectPolicy, Server, ServerConfig,
};
use fred::types::Message;
use futures_util::future::BoxFuture;
use herald_core::bus::{Bus, BusLink, ChannelQuery, OccupiedChannels};
use herald_core::caches::{CacheEvent, Caches};
use herald_core::claims::ClusterClaims;
use herald_core::fanout::FanOut;
use herald_core::head::HeadSource;
use herald_core::hub::InterestHook;
use herald_core::log::{ChannelLog, CommitSink};
use herald_core::message::{Epoch, SharedMessage};
use herald_core::tenancy::Tenancy;
use herald_core::ChannelName;
use parking_lot::Mutex;
use tokio::sync::{broadcast, mpsc, Notify};
use tokio::task::JoinHandle;

use crate::error::{in_words, redact, BusError};
use crate::followed::{Followed, InterestQueue};
use crate::link_log::LinkLog;
use crate::names::Names;

/// How the bus behaves; the defaults suit a LAN.
#[derive(Debug, Clone)]
pub struct BusOptions {
    /// Prefix of every Redis name the bus uses (clusters sharing one Redis use different ones).
    pub prefix: String,
    /// How long a missing seq is awaited from Redis before it is read from the log.
    pub gap_wait: Duration,
    /// Committed batches waiting for the sender task; when full, publishes are dropped (local
    /// delivery is unaffected) and a head notice tells other nodes to read them from the log.
    pub send_queue: usize,
    /// Longest wait between reconnection attempts.
    pub max_reconnect_delay: Duration,
    /// Treat the URLs as a Redis Cluster (also implied by several URLs).
    pub cluster: bool,
    /// How often this node writes its presence counts ([`crate::presence`]).
    pub presence_period: Duration,
    /// Extra CA certificates (PEM, any number) trusted besides the public web roots when the
    /// URLs are `rediss://` (TLS); unused with `redis://` URLs.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// This node serves presence channels (a presence namespace is configured): it takes part
    /// in the cluster's presence records from the start, so it claims a lost node's members
    /// even before it holds any itself (`crate::members`). Without it, only once it has.
    pub presence_members: bool,
    /// Slots of each of the subscriber connection's notification channels: the burst of
    /// Redis messages the receiver task may fall behind by before it lags (every followed
    /// channel is then read from the log and the caches reloaded from the store).
    pub subscriber_notifications: usize,
}

impl Default for BusOptions {
    fn default() -> Self {
        BusOptions {
            prefix: "herald".into(),
            gap_wait: Duration::from_millis(30),
            send_queue: 16 * 1024,
            max_reconnect_delay: Duration::from_secs(2),
            cluster: false,
            presence_period: crate::presence::DEFAULT_PERIOD,
            tls_ca_pem: None,
            presence_members: false,
            subscriber_notifications: SUBSCRIBER_NOTIFICATIONS,
        }
    }
}

/// What the bus has counted since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BusStats {
    /// Batches published to Redis.
    pub published_batches: u64,
    /// Batches (and head notices) received from other nodes for channels this node follows.
    pub received_batches: u64,
    /// Batches received for channels this node does not follow (a subscription being dropped).
    pub received_unfollowed: u64,
    /// Publishes dropped (queue full or Redis unreachable) and owed as head notices.
    pub dropped_publishes: u64,
    /// Log reads made to fill gaps or to catch up after (re)subscribing.
    pub repairs: u64,
    /// Batched reads of channel heads made to tell whether a channel newly followed (or
    /// subscribed again) missed anything; only those that did are then read ([`Self::repairs`]).
    pub head_checks: u64,
    /// Channels those checks looked at (a channel newly followed is checked once, after Redis
    /// confirmed its subscription, unless Redis was away when it started).
    pub checked_channels: u64,
    /// Channels the repair task looked at, summed over its rounds: a few per channel followed
    /// (followed, its head known, listening, its check done), plus one per round while a gap
    /// is awaited.
    pub repair_looks: u64,
    /// Channels whose local subscriber count the presence task took, summed over its rounds:
    /// those whose count changed since the last round, as the hub told it (every followed
    /// channel, read from the hub, after a reconnect or a failed write).
    pub presence_counts_read: u64,
    /// Batches of channel heads read from Redis (for the engine's subscribes to channels new
    /// to this node, and for the checks of [`Self::head_checks`]) instead of the log.
    pub heads_from_redis: u64,
    /// Batches of channel heads Redis could not vouch for (not answering, or not holding every
    /// channel's head), read from the log instead.
    pub heads_not_vouched: u64,
    /// Payloads that could not be parsed.
    pub decode_errors: u64,
    /// Times the subscriber connection came back after a loss.
    pub reconnects: u64,
    /// Times the receiver task fell more than [`BusOptions::subscriber_notifications`] behind
    /// Redis: each time every followed channel was read from the log and the caches reloaded.
    pub lags: u64,
    /// Batches this node also published on their app's feed (an app with filter subscribers
    /// on some node, `crate::feeds`).
    pub feed_published: u64,
    /// Batches received on the feeds this node follows and handed to its filters.
    pub feed_received: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) published_batches: AtomicU64,
    pub(crate) received_batches: AtomicU64,
    pub(crate) received_unfollowed: AtomicU64,
    pub(crate) dropped_publishes: AtomicU64,
    pub(crate) repairs: AtomicU64,
    pub(crate) head_checks: AtomicU64,
    pub(crate) checked_channels: AtomicU64,
    pub(crate) repair_looks: AtomicU64,
    pub(crate) presence_counts_read: AtomicU64,
    pub(crate) heads_from_redis: AtomicU64,
    pub(crate) heads_not_vouched: AtomicU64,
    pub(crate) decode_errors: AtomicU64,
    pub(crate) reconnects: AtomicU64,
    pub(crate) lags: AtomicU64,
    pub(crate) feed_published: AtomicU64,
    pub(crate) feed_received: AtomicU64,
}

/// How long [`RedisBus::shutdown`] waits for the sender task's last round.
const SHUTDOWN_SEND_WAIT: Duration = Duration::from_secs(2);

/// Slots of each of the subscriber client's notification channels (its pub/sub messages
/// among them) by default: room for a burst of messages while the receiver task is busy, at
/// a memory cost `RedisBus::connect` states.
const SUBSCRIBER_NOTIFICATIONS: usize = 8192;

/// A bus whose Redis connections are up, not started yet (see the module documentation).
pub struct Connected {
    publisher: Client,
    subscriber: Client,
    /// Taken before subscribing, so nothing sent after `connect` returns is missed.
    messages: broadcast::Receiver<Message>,
    reconnects: broadcast::Receiver<Server>,
    caches: Arc<Caches>,
    options: BusOptions,
    /// How the log names Redis (`Redis at host:port`).
    redis: String,
}

/// What the tasks share.
pub(crate) struct Shared {
    pub(crate) node: u64,
    pub(crate) names: Names,
    pub(crate) options: BusOptions,
    pub(crate) fan_out: Arc<FanOut>,
    pub(crate) caches: Arc<Caches>,
    pub(crate) log: OnceLock<Arc<dyn ChannelLog>>,
    pub(crate) tenancy: OnceLock<Arc<dyn Tenancy>>,
    pub(crate) attached: Notify,
    pub(crate) followed: Followed,
    pub(crate) interest: InterestQueue,
    pub(crate) interest_changed: Notify,
    /// Channels whose local subscriber count changed since the presence task last wrote,
    /// each with the last count the hub told (`crate::presence`).
    pub(crate) counts_changed: Mutex<crate::followed::ChannelMap<usize>>,
    /// Tells the sender task to send what is queued, once more, and stop ([`RedisBus::shutdown`]).
    pub(crate) stopping: Notify,
    pub(crate) outgoing: mpsc::Sender<Vec<SharedMessage>>,
    pub(crate) events_out: mpsc::UnboundedSender<CacheEvent>,
    /// Head notices owed for channels whose publish was dropped: the newest seq of each, with
    /// its epoch.
    pub(crate) owed: Mutex<HashMap<ChannelName, (u64, Epoch)>>,
    pub(crate) counters: Counters,
    pub(crate) publisher: Client,
    pub(crate) subscriber: Client,
    /// This node found Redis vouching for the channels' heads, or made it (`crate::heads`).
    pub(crate) heads_vouched: std::sync::atomic::AtomicBool,
    /// Says losing Redis and getting it back in the log.
    pub(crate) link_log: LinkLog,
    /// This node's lifecycle changes, for the lifecycle task ([`crate::lifecycle`]).
    pub(crate) lifecycle_ops: mpsc::UnboundedSender<crate::lifecycle::Op>,
    /// This node's presence holds, for the members task ([`crate::members`]).
    pub(crate) members_ops: mpsc::UnboundedSender<crate::members::Op>,
    /// The cluster's claims: this node's holder and its claims waiting for an answer
    /// (`crate::claims`).
    pub(crate) claims: crate::claims::ClaimState,
    /// This node's heartbeat as Redis last took it, and whether it is fenced
    /// (`crate::fence`).
    pub(crate) fence: crate::fence::Fence,
    /// The apps' feeds: which are on, and this node's (`crate::feeds`).
    pub(crate) feeds: crate::feeds::FeedState,
    /// The share groups this node has members of, and their holders (`crate::shares`).
    pub(crate) shares: crate::shares::ShareState,
}

/// The Redis bus of one node (see the module documentation).
pub struct RedisBus {
    pub(crate) shared: Arc<Shared>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

fn server_of(url: &str) -> Result<Server, BusError> {
    let config =
        Config::from_url_centralized(&crate::tls::plain_url(url)).map_err(|e| BusError::Url {
            url: redact(url),
            reason: e.details().to_string(),
        })?;
    match config.server {
        ServerConfig::Centralized { server } => Ok(server),
        _ => Err(BusError::Url {
            url: redact(url),
            reason: "not a single server".into(),
        }),
    }
}

/// How the log names the Redis of `urls`: `Redis at host:port`, or `Redis Cluster at host:port,
/// ...` (never a password).
fn describe(urls: &[String], cluster: bool) -> String {
    let servers: Vec<String> = urls
        .iter()
        .map(|url| server_of(url).map_or_else(|_| redact(url), |server| server.to_string()))
        .collect();
    if cluster || urls.len() > 1 {
        format!("Redis Cluster at {}", servers.join(", "))
    } else {
        format!("Redis at {}", servers.join(", "))
    }
}

impl RedisBus {
    /// Connects to Redis at `urls` (one URL for a single server; several, or
    /// [`BusOptions::cluster`], for a Redis Cluster: any of its nodes, the others are
    /// discovered) with a publishing and a subscribing connection, and subscribes to the
    /// cache events. `rediss://` URLs (all of them or none) connect over TLS, verifying the
    /// server's certificate against the web roots and [`BusOptions::tls_ca_pem`]. Fails if
    /// Redis cannot be reached now, or its certificate does not verify; once started, the bus
    /// reconnects by itself. `caches` are this node's, which events from other nodes update:
    /// the node hears every event published after this returns, so load the caches from the
    /// store after it.
    pub async fn connect(
        urls: &[String],
        caches: Arc<Caches>,
        options: BusOptions,
    ) -> Result<Connected, BusError> {
        let first = urls.first().ok_or(BusError::NoUrl)?;
        let tls = crate::tls::wants_tls(urls)?;
        let mut config =
            Config::from_url(&crate::tls::plain_url(first)).map_err(|e| BusError::Url {
                url: redact(first),
                reason: e.details().to_string(),
            })?;
        if tls {
            config.tls = Some(crate::tls::config(options.tls_ca_pem.as_deref())?);
        }
        if urls.len() > 1 || options.cluster {
            let hosts = urls
                .iter()
                .map(|u| server_of(u))
                .collect::<Result<Vec<_>, _>>()?;
            config.server = ServerConfig::Clustered {
                hosts,
                policy: Default::default(),
            };
        }
        let max_delay = options
            .max_reconnect_delay
            .as_millis()
            .min(u32::MAX as u128) as u32;
        let mut builder = Builder::from_config(config);
        builder
            .set_policy(ReconnectPolicy::new_exponential(
                0,
                50,
                max_delay.max(50),
                2,
            ))
            .with_connection_config(|conn| {
                conn.connection_timeout = Duration::from_secs(5);
                conn.internal_command_timeout = Duration::from_secs(5);
                // Commands interrupted by a lost connection are not replayed: the log repairs.
                conn.max_command_attempts = 1;
            });
        let connect_error = |e: fred::error::Error| BusError::Connect {
            url: redact(first),
            reason: in_words(&e),
        };
        // The publisher receives no pub/sub messages: fred's default notification channels
        // (a few slots each) are enough for its errors and reconnections.
        let publisher = builder.build().map_err(connect_error)?;
        // The subscriber's messages arrive in bursts the receiver task may fall behind on
        // (a lag re-reads every followed channel from the log and reloads the caches). fred
        // sizes all nine of a client's notification channels alike and tokio fills each slot
        // up front: about 80 bytes nine times over per slot, 5.6 MB of a node's idle memory
        // at the default 8,192 (45 MB at 65,536), the subscriber's alone.
        builder.with_performance_config(|perf| {
            perf.broadcast_channel_capacity = options.subscriber_notifications.max(1);
        });
        // A plain client, not fred's `SubscriberClient`: that one keeps a sorted set of every
        // channel subscribed (a `BTreeSet` insert per channel, string compares all the way
        // down) for resubscribing after a reconnect, which the subscription task does itself.
        let subscriber = builder.build().map_err(connect_error)?;
        tokio::time::timeout(Duration::from_secs(10), async {
            publisher.init().await?;
            subscriber.init().await?;
            Ok::<_, fred::error::Error>(())
        })
        .await
        .map_err(|_| BusError::Connect {
            url: redact(first),
            reason: "no answer within 10 s".into(),
        })?
        .map_err(connect_error)?;
        let messages = subscriber.message_rx();
        let reconnects = subscriber.reconnect_rx();
        // Events first: a node that has connected hears every event published afterwards.
        subscriber
            .ssubscribe(Names::new(&options.prefix).events())
            .await
            .map_err(connect_error)?;
        let redis = describe(urls, options.cluster);
        Ok(Connected {
            publisher,
            subscriber,
            messages,
            reconnects,
            caches,
            options,
            redis,
        })
    }

    /// Hands the bus the store it repairs gaps from and reloads caches from. Until then, gaps
    /// wait and newly followed channels are not started.
    ///
    /// Also has Redis vouch for the channels' heads if the log has no channel yet
    /// (`crate::heads`); call it inside a tokio runtime.
    pub fn attach(&self, log: Arc<dyn ChannelLog>, tenancy: Arc<dyn Tenancy>) {
        let _ = self.shared.log.set(log.clone());
        let _ = self.shared.tenancy.set(tenancy);
        self.shared.attached.notify_waiters();
        let shared = self.shared.clone();
        self.tasks.lock().push(tokio::spawn(async move {
            crate::heads::vouch_when_log_is_empty(&shared, log.as_ref()).await;
        }));
    }

    /// This node's id on the bus (random per start).
    pub fn node_id(&self) -> u64 {
        self.shared.node
    }

    /// How often this node writes its presence counts: another node's share of a cluster-wide
    /// count is at most about this old ([`crate::presence`]).
    pub fn presence_period(&self) -> std::time::Duration {
        self.shared.options.presence_period
    }

    /// What the bus counted so far.
    pub fn stats(&self) -> BusStats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        BusStats {
            published_batches: get(&c.published_batches),
            received_batches: get(&c.received_batches),
            received_unfollowed: get(&c.received_unfollowed),
            dropped_publishes: get(&c.dropped_publishes),
            repairs: get(&c.repairs),
            head_checks: get(&c.head_checks),
            checked_channels: get(&c.checked_channels),
            repair_looks: get(&c.repair_looks),
            presence_counts_read: get(&c.presence_counts_read),
            heads_from_redis: get(&c.heads_from_redis),
            heads_not_vouched: get(&c.heads_not_vouched),
            decode_errors: get(&c.decode_errors),
            reconnects: get(&c.reconnects),
            lags: get(&c.lags),
            feed_published: get(&c.feed_published),
            feed_received: get(&c.feed_received),
        }
    }

    /// Whether this node sends `app`'s messages to the app's feed too: some node has filter
    /// subscribers of the app, as this node last learned (`crate::feeds`).
    pub fn feeds_app(&self, app: &herald_core::tenant::AppId) -> bool {
        self.shared.feeds.is_on(app.as_str())
    }

    /// Whether this node found Redis holding the head of every channel that has a log (or
    /// made it so, over a log without channels), at start: the heads of channels new to the
    /// node are then read from Redis, not the log, for as long as Redis keeps vouching.
    pub fn heads_vouched(&self) -> bool {
        self.shared.heads_vouched.load(Ordering::Relaxed)
    }

    /// How many channels this node follows on Redis.
    pub fn followed_channels(&self) -> usize {
        self.shared.followed.all().len()
    }

    /// How many of them Redis has confirmed the subscription of (since the last reconnect).
    pub fn listening_channels(&self) -> usize {
        self.shared.followed.listening()
    }

    /// How many followed channels are not repaired yet: not started, being read from the log,
    /// or owing a read of what they may have missed before Redis confirmed them.
    pub fn unrepaired_channels(&self) -> usize {
        self.shared.followed.unrepaired()
    }

    /// Stops every task at once, with no goodbye, as a crashed node's would stop (its
    /// heartbeat with them): for tests of what the other nodes do about a lost node. The bus
    /// delivers nothing afterwards.
    #[doc(hidden)]
    pub fn halt(&self) {
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
    }

    /// Stops the presence members task (it removes this node's members from the cluster's,
    /// `crate::members`), then the lifecycle task (if it runs): it writes the departures
    /// queued and removes this node from the cluster's records, delivering the transitions
    /// that makes (channels this node was the last to hold vacated, users offline) to this
    /// node's listeners before it answers (within `SHUTDOWN_SEND_WAIT` each). Call it once this node's connections are gone and
    /// before its listeners stop taking events; [`RedisBus::shutdown`] calls it too (then it
    /// does nothing).
    pub async fn stop_lifecycle(&self) {
        // The presence task first: the members it removes are told to this node's listeners.
        let (stopped, stopped_rx) = tokio::sync::oneshot::channel();
        if self
            .shared
            .members_ops
            .send(crate::members::Op::Stop(stopped))
            .is_ok()
        {
            let _ = tokio::time::timeout(SHUTDOWN_SEND_WAIT, stopped_rx).await;
        }
        let (stopped, stopped_rx) = tokio::sync::oneshot::channel();
        if self
            .shared
            .lifecycle_ops
            .send(crate::lifecycle::Op::Stop(stopped))
            .is_ok()
        {
            let _ = tokio::time::timeout(SHUTDOWN_SEND_WAIT, stopped_rx).await;
        }
    }

    /// Stops the tasks and closes the connections. The sender first publishes what this node
    /// committed and has not sent yet (for `SHUTDOWN_SEND_WAIT` at most: other nodes would
    /// otherwise not hear of those messages until the channel's next publish), so call this
    /// after the store's last commits.
    pub async fn shutdown(&self) {
        // The lifecycle task first: it writes the departures queued and removes this node, so
        // no other node reports its connections as lost later.
        self.stop_lifecycle().await;
        let tasks: Vec<JoinHandle<()>> = self.tasks.lock().drain(..).collect();
        let mut tasks = tasks.into_iter();
        if let Some(sender) = tasks.next() {
            self.shared.stopping.notify_one();
            let abort = sender.abort_handle();
            if tokio::time::timeout(SHUTDOWN_SEND_WAIT, sender)
                .await
                .is_err()
            {
                tracing::warn!("the Redis bus could not send its last commits before stopping");
                abort.abort();
            }
        }
        for task in tasks {
            task.abort();
        }
        let _ = self.shared.subscriber.quit().await;
        let _ = self.shared.publisher.quit().await;
    }
}

impl Connected {
    /// Starts the bus over this node's fan-out (call it from `make_bus` of
    /// [`herald_core::Engine::open_with_bus`], inside a tokio runtime): sets the hub's interest
    /// hook and spawns the sender, receiver, subscription and repair tasks.
    pub fn start(self, fan_out: Arc<FanOut>) -> Arc<RedisBus> {
        let (outgoing, outgoing_rx) = mpsc::channel(self.options.send_queue.max(1));
        let (events_out, events_rx) = mpsc::unbounded_channel();
        let (lifecycle_ops, lifecycle_rx) = mpsc::unbounded_channel();
        let (members_ops, members_rx) = mpsc::unbounded_channel();
        let (feed_ops, feed_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            node: rand::random::<u64>() | 1,
            names: Names::new(&self.options.prefix),
            options: self.options,
            fan_out,
            caches: self.caches,
            log: OnceLock::new(),
            tenancy: OnceLock::new(),
            attached: Notify::new(),
            followed: Followed::new(),
            interest: InterestQueue::default(),
            interest_changed: Notify::new(),
            counts_changed: Mutex::default(),
            stopping: Notify::new(),
            outgoing,
            events_out,
            owed: Mutex::default(),
            counters: Counters::default(),
            publisher: self.publisher,
            subscriber: self.subscriber,
            heads_vouched: Default::default(),
            link_log: LinkLog::new(self.redis),
            lifecycle_ops,
            members_ops,
            claims: Default::default(),
            fence: crate::fence::Fence::new(),
            feeds: crate::feeds::FeedState::new(feed_ops.clone()),
            shares: crate::shares::ShareState::new(feed_ops),
        });
        // Filters hear every node's messages of their apps through the apps' feeds.
        shared
            .fan_out
            .hub()
            .filters()
            .set_feed(Arc::new(crate::feeds::RedisFeed(Arc::downgrade(&shared))));
        // Share groups: each message to one member in the cluster.
        shared
            .fan_out
            .hub()
            .filters()
            .set_share_cluster(Arc::new(crate::shares::RedisShares(Arc::downgrade(
                &shared,
            ))));
        shared
            .fan_out
            .hub()
            .set_interest_hook(Arc::new(Hook(Arc::downgrade(&shared))));
        // Lifecycle events cross nodes through this bus: the live clients share the hub's
        // registry, and the relay stands between this node's transitions and its listeners.
        let lifecycle = shared.fan_out.hub().lifecycle().clone();
        shared.caches.live.set_lifecycle(lifecycle.clone());
        lifecycle.set_relay(Arc::new(crate::lifecycle::RedisRelay(
            shared.lifecycle_ops.clone(),
        )));
        // Presence channels' members likewise: one member per user in the cluster.
        shared
            .fan_out
            .hub()
            .presence()
            .set_relay(Arc::new(crate::members::RedisPresence {
                ops: shared.members_ops.clone(),
                redis: shared.publisher.clone(),
                names: shared.names.clone(),
            }));
        // The sender first: shutdown lets it finish its last round.
        let tasks = vec![
            tokio::spawn(crate::sender::run(shared.clone(), outgoing_rx, events_rx)),
            tokio::spawn(crate::receiver::run(shared.clone(), self.messages)),
            tokio::spawn(crate::subscriptions::run(shared.clone(), self.reconnects)),
            tokio::spawn(crate::repair::run(shared.clone())),
            tokio::spawn(crate::presence::run(shared.clone())),
            tokio::spawn(crate::lost_nodes::run(shared.clone())),
            tokio::spawn(crate::fence::run(shared.clone())),
            tokio::spawn(crate::link_log::watch(shared.clone())),
            tokio::spawn(crate::lifecycle::run(
                shared.publisher.clone(),
                shared.names.lifecycle(),
                shared.node,
                lifecycle.clone(),
                lifecycle_rx,
            )),
            tokio::spawn(crate::feeds::run(shared.clone(), feed_rx)),
            tokio::spawn(crate::members::run(
                shared.publisher.clone(),
                shared.names.clone(),
                shared.node,
                shared.options.presence_members,
                lifecycle,
                members_rx,
            )),
        ];
        Arc::new(RedisBus {
            shared,
            tasks: Mutex::new(tasks),
        })
    }
}

impl Drop for RedisBus {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().drain(..) {
            task.abort();
        }
    }
}

/// The hub's interest hook: queues the change for the subscription task.
struct Hook(std::sync::Weak<Shared>);

impl InterestHook for Hook {
    fn gained(&self, channel: &ChannelName) {
        if let Some(shared) = self.0.upgrade() {
            shared.interest.push(channel, true);
            shared.interest_changed.notify_one();
        }
    }

    fn lost(&self, channel: &ChannelName) {
        if let Some(shared) = self.0.upgrade() {
            shared.interest.push(channel, false);
            shared.interest_changed.notify_one();
        }
    }

    fn subscribers_changed(&self, channel: &ChannelName, count: usize) {
        if let Some(shared) = self.0.upgrade() {
            shared.counts_changed.lock().insert(channel.clone(), count);
        }
    }

    fn head_known(&self, channel: &ChannelName, floor: u64) {
        // A followed channel waiting for its floor starts at it in the repair task's next
        // round, without asking the hub again.
        if let Some(shared) = self.0.upgrade() {
            shared.followed.attend_at(channel, floor);
        }
    }
}

impl CommitSink for RedisBus {
    fn committed(&self, messages: &[SharedMessage]) {
        let shared = &self.shared;
        // Local delivery first, through each followed channel's sequencer, at once.
        for run in messages.chunk_by(|a, b| a.channel == b.channel) {
            shared.followed.with(
                &run[0].channel,
                |follow, now, ready| {
                    for message in run {
                        follow.sequencer.offer(message.clone(), now, ready);
                    }
                },
                |ready| shared.fan_out.committed(ready),
            );
        }
        // Then to the sender task, without waiting.
        if let Err(e) = shared.outgoing.try_send(messages.to_vec()) {
            let dropped = match e {
                mpsc::error::TrySendError::Full(m) | mpsc::error::TrySendError::Closed(m) => m,
            };
            shared
                .counters
                .dropped_publishes
                .fetch_add(1, Ordering::Relaxed);
            let mut owed = shared.owed.lock();
            for message in dropped {
                owe(
                    &mut owed,
                    message.channel.clone(),
                    message.seq,
                    message.epoch.clone(),
                );
            }
        }
    }
}

impl Bus for RedisBus {
    fn publish(&self, event: CacheEvent) {
        self.shared.caches.apply(&event);
        let _ = self.shared.events_out.send(event);
    }

    /// Connected while both Redis connections are (the publishing one and the subscribing
    /// one, as the client library keeps their state: no round trip).
    /// A fenced node (`crate::fence`) is not connected either, whatever its connections say.
    fn link(&self) -> BusLink {
        let link = link_of(
            self.shared.publisher.state(),
            self.shared.subscriber.state(),
        );
        match link {
            BusLink::Connected if self.shared.fence.is_fenced() => BusLink::Disconnected {
                reason: fenced_reason(self.shared.fence.silent_for()),
            },
            link => link,
        }
    }

    /// The heads Redis keeps beside each channel's messages (`crate::heads`).
    fn head_source(&self) -> Option<Arc<dyn HeadSource>> {
        Some(Arc::new(crate::head_reads::RedisHeads(Arc::downgrade(
            &self.shared,
        ))))
    }

    /// Claims kept in Redis, takeovers carried on the events channel (`crate::claims`).
    fn claims(&self) -> Option<Arc<dyn ClusterClaims>> {
        Some(Arc::new(crate::claims::RedisClaims(Arc::downgrade(
            &self.shared,
        ))))
    }

    /// The cluster's, from every node's presence hash ([`crate::presence`]); this node's when
    /// Redis does not answer within half a second.
    fn occupied_channels(&self, query: ChannelQuery) -> BoxFuture<'_, OccupiedChannels> {
        Box::pin(crate::presence::occupied_channels(self, query))
    }
}

/// Owes `channel`'s head notice up to `head` (of `epoch`), if not owed beyond already.
pub(crate) fn owe(
    owed: &mut HashMap<ChannelName, (u64, Epoch)>,
    channel: ChannelName,
    head: u64,
    epoch: Epoch,
) {
    let entry = owed.entry(channel).or_insert((0, Epoch::default()));
    if head > entry.0 {
        *entry = (head, epoch);
    }
}

/// Why a fenced node is not ready, `silent` after its last heartbeat.
fn fenced_reason(silent: Duration) -> String {
    format!(
        "this node has not written its heartbeat to Redis for {} s (fenced): the other nodes \
         take it for lost, so it serves no MQTT client until Redis takes its heartbeat again",
        silent.as_secs()
    )
}

/// The bus's link given its two connections' states.
pub(crate) fn link_of(publishing: ClientState, subscribing: ClientState) -> BusLink {
    if publishing == ClientState::Connected && subscribing == ClientState::Connected {
        return BusLink::Connected;
    }
    let word = |state: ClientState| match state {
        ClientState::Connected => "connected",
        ClientState::Connecting => "reconnecting",
        ClientState::Disconnecting => "closing",
        ClientState::Disconnected => "disconnected",
    };
    BusLink::Disconnected {
        reason: format!(
            "Redis is not reachable (publishing connection {}, subscribing connection {}); \
             the bus reconnects by itself, and other nodes hear of this node's messages once \
             it is back",
            word(publishing),
            word(subscribing)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_names_redis_without_the_password() {
        let one = ["redis://:s3cret@cache.example:6380".to_owned()];
        assert_eq!(describe(&one, false), "Redis at cache.example:6380");
        let nodes = ["redis://a:7000".to_owned(), "redis://b:7001".to_owned()];
        assert_eq!(describe(&nodes, false), "Redis Cluster at a:7000, b:7001");
    }

    #[test]
    fn the_bus_is_connected_only_while_both_connections_are() {
        use ClientState::*;
        assert_eq!(link_of(Connected, Connected), BusLink::Connected);
        for (publishing, subscribing) in [
            (Connecting, Connected),
            (Connected, Disconnected),
            (Disconnecting, Disconnecting),
        ] {
            let BusLink::Disconnected { reason } = link_of(publishing, subscribing) else {
                panic!("connected with a connection down");
            };
            assert!(reason.starts_with("Redis is not reachable"), "{reason}");
        }
        let BusLink::Disconnected { reason } = link_of(Connecting, Connected) else {
            unreachable!()
        };
        assert!(
            reason.contains("publishing connection reconnecting, subscribing connection connected"),
            "{reason}"
        );
    }
}
