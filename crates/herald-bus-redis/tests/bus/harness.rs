//! Nodes for the tests: each with its own engine (hub, fan-out), caches and `RedisBus`, over
//! one shared in-memory log and tenancy standing for the cluster's PostgreSQL. A node's
//! appends go to the shared log and their commits to that node's bus only, as each node's store
//! sees only its own commits.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use herald_bus_redis::{BusOptions, RedisBus};
use herald_core::caches::Caches;
use herald_core::engine::SubscribeRequest;
use herald_core::hub::Hub;
use herald_core::log::{
    Appended, ChannelLog, ChannelState, CommitSink, LogSlice, ReadFrom, Retention, StoreError,
};
use herald_core::message::{Epoch, NewMessage, SharedMessage, StoredMessage};
use herald_core::namespace::{NamespaceOptions, Namespaces};
use herald_core::outbox::{OutFrame, Outbox};
use herald_core::revoked::TokenRevocation;
use herald_core::tenancy::{App, AppLimits, KeyInfo, Tenancy, Usage};
use herald_core::tenant::AppId;
use herald_core::{ChannelName, Engine};
use herald_testkit::Redis;
use parking_lot::Mutex;

/// The cluster's durable log, shared by every node. It reads the states of a batch of
/// channels in one call; made [`SharedLog::like_postgres`], each read takes a round trip and
/// the engine gathers its subscribers' state reads into batches.
#[derive(Default)]
pub struct SharedLog {
    channels: Mutex<HashMap<ChannelName, Vec<SharedMessage>>>,
    /// Reads made (of messages, of one state, of a batch of states): what each would cost a
    /// query on PostgreSQL.
    reads: AtomicUsize,
    /// Channels those reads were about (a batch of states counts each of its channels): what
    /// each would cost PostgreSQL a lookup of the channel's row.
    channels_read: AtomicUsize,
    /// How long each read takes, standing for a database round trip; with one, the log says
    /// it [`ChannelLog::batches_states`].
    round_trip: Option<Duration>,
}

impl SharedLog {
    /// A log whose every read takes `round_trip` and whose batched state reads are worth
    /// gathering, as PostgreSQL's.
    pub fn like_postgres(round_trip: Duration) -> SharedLog {
        SharedLog {
            round_trip: Some(round_trip),
            ..SharedLog::default()
        }
    }

    /// Reads made so far.
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::Relaxed)
    }

    /// Channels read so far.
    pub fn channels_read(&self) -> usize {
        self.channels_read.load(Ordering::Relaxed)
    }

    async fn read_made(&self, channels: usize) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.channels_read.fetch_add(channels, Ordering::Relaxed);
        if let Some(round_trip) = self.round_trip {
            tokio::time::sleep(round_trip).await;
        }
    }
}

/// Nodes A and B ([`Node::start`]) over `redis` and a log whose every read takes 2 ms, a
/// round trip, and whose batched state reads are one ([`SharedLog::like_postgres`]: the engine
/// asks the bus's head source for batches of subscribes), once Redis vouches for the heads
/// each node is told; and that log.
pub async fn vouched_pair(redis: &Redis) -> (Node, Node, Arc<SharedLog>) {
    let log = Arc::new(SharedLog::like_postgres(Duration::from_millis(2)));
    let tenancy = Arc::default();
    let a = Node::start(&[redis.url()], &log, &tenancy).await;
    let b = Node::start(&[redis.url()], &log, &tenancy).await;
    eventually("Redis to vouch for the heads on both nodes", || {
        a.bus.heads_vouched() && b.bus.heads_vouched()
    })
    .await;
    (a, b, log)
}

/// One node's view of the shared log: its commits go to its own sink.
pub struct NodeLog {
    shared: Arc<SharedLog>,
    sink: Arc<dyn CommitSink>,
}

fn state(name: &ChannelName, messages: &[SharedMessage]) -> ChannelState {
    ChannelState {
        name: name.clone(),
        epoch: Epoch::new("e1"),
        last_seq: messages.len() as u64,
        first_seq: 1,
    }
}

#[async_trait]
impl ChannelLog for NodeLog {
    async fn append(
        &self,
        channel: &ChannelName,
        messages: Vec<NewMessage>,
        _retention: Retention,
    ) -> Result<Vec<Appended>, StoreError> {
        let stored: Vec<SharedMessage> = {
            let mut channels = self.shared.channels.lock();
            let log = channels.entry(channel.clone()).or_default();
            messages
                .into_iter()
                .map(|m| {
                    let message = Arc::new(StoredMessage::new(
                        channel.clone(),
                        Epoch::new("e1"),
                        log.len() as u64 + 1,
                        m.id,
                        0,
                        m.data,
                    ));
                    log.push(message.clone());
                    message
                })
                .collect()
        };
        // After the commit, outside the log's lock: another node's later commit may reach
        // its bus first, as with a real database.
        self.sink.committed(&stored);
        Ok(stored
            .into_iter()
            .map(|message| Appended {
                message,
                duplicate: false,
            })
            .collect())
    }

    async fn read(
        &self,
        channel: &ChannelName,
        from: ReadFrom,
        limit: usize,
    ) -> Result<LogSlice, StoreError> {
        self.shared.read_made(1).await;
        let channels = self.shared.channels.lock();
        let log = channels.get(channel).map(Vec::as_slice).unwrap_or(&[]);
        let start = match from {
            ReadFrom::After(seq) => (seq as usize).min(log.len()),
            ReadFrom::Tail(n) => log.len().saturating_sub(n as usize),
        };
        Ok(LogSlice {
            state: state(channel, log),
            messages: log[start..].iter().take(limit).cloned().collect(),
        })
    }

    async fn state(&self, channel: &ChannelName) -> Result<ChannelState, StoreError> {
        self.shared.read_made(1).await;
        let channels = self.shared.channels.lock();
        Ok(state(
            channel,
            channels.get(channel).map(Vec::as_slice).unwrap_or(&[]),
        ))
    }

    async fn states(&self, names: &[ChannelName]) -> Result<Vec<ChannelState>, StoreError> {
        self.shared.read_made(names.len()).await;
        let channels = self.shared.channels.lock();
        Ok(names
            .iter()
            .map(|name| state(name, channels.get(name).map(Vec::as_slice).unwrap_or(&[])))
            .collect())
    }

    fn batches_states(&self) -> bool {
        self.shared.round_trip.is_some()
    }

    async fn list(&self, _: Option<&str>, _: usize) -> Result<Vec<ChannelState>, StoreError> {
        Ok(Vec::new())
    }

    async fn close(&self) {}
}

/// The cluster's apps and keys.
#[derive(Default)]
pub struct SharedTenancy {
    pub apps: Mutex<Vec<App>>,
    pub keys: Mutex<Vec<KeyInfo>>,
    pub revocations: Mutex<Vec<TokenRevocation>>,
}

#[async_trait]
impl Tenancy for SharedTenancy {
    async fn create_app(&self, app: &App) -> Result<bool, StoreError> {
        self.apps.lock().push(app.clone());
        Ok(true)
    }
    async fn apps(&self) -> Result<Vec<App>, StoreError> {
        Ok(self.apps.lock().clone())
    }
    async fn app(&self, id: &AppId) -> Result<Option<App>, StoreError> {
        Ok(self.apps.lock().iter().find(|a| &a.id == id).cloned())
    }
    async fn set_limits(&self, id: &AppId, limits: AppLimits) -> Result<bool, StoreError> {
        let mut apps = self.apps.lock();
        let app = apps.iter_mut().find(|a| &a.id == id);
        Ok(app.map(|a| a.limits = limits).is_some())
    }
    async fn delete_app(&self, id: &AppId) -> Result<bool, StoreError> {
        self.apps.lock().retain(|a| &a.id != id);
        self.keys.lock().retain(|k| &k.app != id);
        Ok(true)
    }
    async fn add_key(&self, key: &KeyInfo) -> Result<(), StoreError> {
        self.keys.lock().push(key.clone());
        Ok(())
    }
    async fn remove_key(&self, app: &AppId, key_id: &str) -> Result<bool, StoreError> {
        self.keys
            .lock()
            .retain(|k| !(&k.app == app && k.id == key_id));
        Ok(true)
    }
    async fn keys(&self) -> Result<Vec<KeyInfo>, StoreError> {
        Ok(self.keys.lock().clone())
    }
    async fn add_usage(&self, _: &AppId, _: Usage) -> Result<(), StoreError> {
        Ok(())
    }
    async fn usage(&self, _: &AppId) -> Result<Usage, StoreError> {
        Ok(Usage::default())
    }
    async fn revoke_tokens(&self, revocation: &TokenRevocation) -> Result<(), StoreError> {
        self.revocations.lock().push(revocation.clone());
        Ok(())
    }
    async fn token_revocations(&self) -> Result<Vec<TokenRevocation>, StoreError> {
        Ok(self.revocations.lock().clone())
    }
}

/// One Herald node of the test cluster.
pub struct Node {
    pub engine: Engine,
    pub bus: Arc<RedisBus>,
    pub caches: Arc<Caches>,
    /// The engine's hub, for tests that register subscribers below the engine.
    pub hub: Arc<Hub>,
}

impl Node {
    /// A node over Redis at `urls` and the shared stores.
    pub async fn start(
        urls: &[String],
        log: &Arc<SharedLog>,
        tenancy: &Arc<SharedTenancy>,
    ) -> Node {
        let options = BusOptions {
            presence_period: Duration::from_millis(100),
            ..BusOptions::default()
        };
        Node::start_with(urls, log, tenancy, options).await
    }

    /// [`Node::start`] with these bus options.
    pub async fn start_with(
        urls: &[String],
        log: &Arc<SharedLog>,
        tenancy: &Arc<SharedTenancy>,
        options: BusOptions,
    ) -> Node {
        let caches = Caches::new(b"default-secret");
        let connected = RedisBus::connect(urls, caches.clone(), options)
            .await
            .expect("the bus connects");
        let shared = log.clone();
        let mut hub = None;
        let (engine, bus, node_log) = Engine::open_with_bus(
            Namespaces::new(NamespaceOptions::default(), vec![]),
            |fan_out| {
                hub = Some(fan_out.hub().clone());
                connected.start(fan_out)
            },
            |sink| Ok::<_, Infallible>(Arc::new(NodeLog { shared, sink })),
        )
        .expect("the engine opens");
        bus.attach(node_log, tenancy.clone());
        Node {
            engine,
            bus,
            caches,
            hub: hub.expect("the engine opened with the bus"),
        }
    }

    /// Publishes message 1 to every `every`th of the channels `{prefix}/0` to
    /// `{prefix}/{channels - 1}`, then waits until its batches, and with them those channels'
    /// heads, are in Redis.
    pub async fn publish_to_every(&self, prefix: &str, channels: usize, every: usize) {
        let mut published = 0u64;
        for i in (0..channels).step_by(every) {
            self.publish(&format!("{prefix}/{i}"), 1).await;
            published += 1;
        }
        eventually("the publishing node's batches (and heads) in Redis", || {
            self.bus.stats().published_batches >= published
        })
        .await;
    }

    /// A storm of subscribes to the channels `{prefix}/0` to `{prefix}/{channels - 1}`, new to
    /// this node, all at once ([`Node::subscribe_at_head`]); answered once the node listens to
    /// every channel and has started each (none left to repair). The outboxes and heads in
    /// channel order.
    pub async fn subscribe_storm(&self, prefix: &str, channels: usize) -> Vec<(Arc<Outbox>, u64)> {
        let names: Vec<String> = (0..channels).map(|i| format!("{prefix}/{i}")).collect();
        let subscribers =
            futures_util::future::join_all(names.iter().map(|name| self.subscribe_at_head(name)))
                .await;
        eventually("the node to listen to every channel and start it", || {
            self.bus.listening_channels() == channels && self.bus.unrepaired_channels() == 0
        })
        .await;
        subscribers
    }

    /// A live subscriber to `channel` (no cursor).
    pub async fn subscribe(&self, channel: &str) -> Arc<Outbox> {
        self.subscribe_with(channel, 1 << 26).await.0
    }

    /// [`Node::subscribe`], and the channel's head the subscriber was given.
    pub async fn subscribe_at_head(&self, channel: &str) -> (Arc<Outbox>, u64) {
        self.subscribe_with(channel, 1 << 20).await
    }

    /// A live subscriber to `channel` (no cursor) with an outbox of `capacity` bytes, and the
    /// channel's head it was given.
    async fn subscribe_with(&self, channel: &str, capacity: usize) -> (Arc<Outbox>, u64) {
        let outbox = Outbox::new(capacity);
        let channel = ChannelName::parse(channel).unwrap();
        let catchup = self
            .engine
            .subscribe(&channel, &outbox, &SubscribeRequest::default())
            .await
            .expect("subscribed");
        let head = catchup.outcome.seq;
        catchup.go_live(None);
        (outbox, head)
    }

    /// Publishes one message whose data is `"n"`.
    pub async fn publish(&self, channel: &str, n: u64) -> u64 {
        let channel = ChannelName::parse(channel).unwrap();
        let appended = self
            .engine
            .publish(
                &channel,
                vec![NewMessage {
                    id: None,
                    data: Bytes::from(n.to_string()),
                    retain: Default::default(),
                    hold: None,
                }],
            )
            .await
            .expect("published");
        appended[0].message.seq
    }
}

/// Waits (bounded) until `outbox` has delivered `n` messages; answers their seqs and data.
pub async fn receive(outbox: &Outbox, n: usize) -> Vec<(u64, String)> {
    let mut got = Vec::new();
    let collect = async {
        while got.len() < n {
            let (frames, closed) = outbox.next_batch().await;
            for frame in frames {
                if let OutFrame::Message(m) | OutFrame::Replayed(m) = frame {
                    got.push((m.seq, String::from_utf8_lossy(&m.data).into_owned()));
                }
            }
            assert!(closed.is_none(), "the subscriber was closed: {closed:?}");
        }
    };
    if tokio::time::timeout(Duration::from_secs(20), collect)
        .await
        .is_err()
    {
        panic!(
            "timed out with {} of {n} messages: {:?}",
            got.len(),
            got.iter().map(|g| g.0).collect::<Vec<_>>()
        );
    }
    got
}

/// Asserts `got` is exactly seqs 1..=n.
pub fn assert_exact(got: &[(u64, String)], n: u64) {
    let seqs: Vec<u64> = got.iter().map(|g| g.0).collect();
    assert_eq!(
        seqs,
        (1..=n).collect::<Vec<_>>(),
        "seqs in order, no gap, no duplicate"
    );
}

/// Polls `check` until it holds (bounded): for state with no signal to await (caches).
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
