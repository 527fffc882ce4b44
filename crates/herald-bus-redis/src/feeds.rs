//! Apps' feeds: every message of an app, from every node, to the nodes with filter
//! subscribers of the app ([`herald_core::hub::filters`], MQTT's `+` and `#`).
//!
//! - **The feed**: one sharded Redis channel per app (`PREFIX:{feed:APP}`). While an app's
//!   feed is on, each node's sender task publishes each batch of the app's channels there too
//!   (the same bytes as on the channel's own Redis channel); a node with filter subscribers of
//!   the app follows it and hands its batches to the hub's filters only
//!   ([`herald_core::hub::Hub::deliver_filters_only`]): exact subscribers get a channel's
//!   messages from its own stream, and the hub hands each message to the filters once,
//!   whichever path brings it first.
//! - **The flag**: a sorted set `PREFIX:feeds` of `NODE:APP` members (the node in hex), each
//!   scored with its deadline (ms since the epoch). A node holding filters of an app adds its
//!   member and pushes its deadline [`HOLD_TTL`] ahead every [`REFRESH`]; members past their
//!   deadline are removed by whichever node reads the set next. A node that crashes stops
//!   refreshing, so its member lapses within [`HOLD_TTL`]: the flag cannot stay on for it.
//!   A node that stops holding an app removes its member at once and tells the others
//!   (`FeedOff`), who read the set again.
//! - **No cost while off**: every node keeps the apps whose feed is on in memory, with one
//!   word saying whether there are any: the sender pays one atomic load per batch while none
//!   is on, and nothing crosses the network. The set is read every [`REFRESH`] and on each
//!   `FeedOff`.
//! - **No miss when the first filter arrives**: the node subscribes to the feed, adds its
//!   member, then announces the app (`FeedOn`, on the cache events' sharded channel) and
//!   waits for an answer from every node alive by their presence records (at most
//!   [`ACK_WAIT`]). A node answers after it put the app in its memory, so each of its sends
//!   from then on goes to the feed as well; the subscribe is answered only after every answer
//!   ([`herald_core::hub::filters::FilterRegistry::feed_ready`]). A node starting later reads
//!   the set after subscribing to the events channel, so it sees the member or hears the
//!   announcement.
//!
//! ```text
//! u8 'f', u8 kind, u64 from node, u64 to node, u64 request, u8 app length, app
//!   kind 1 on (to 0), 2 answer (app empty), 3 off (to 0, request 0)
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use fred::prelude::{EventInterface, HashesInterface, LuaInterface, PubsubInterface};
use fred::types::Value;
use herald_core::hub::filters::FilterFeed;
use herald_core::tenant::{split_app, RESERVED};
use herald_core::ChannelName;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot, watch};

use crate::bus::Shared;
use crate::codec::Reader;
use crate::error::DecodeError;

/// The first byte of a feeds message on the events channel.
pub(crate) const MARK: u8 = b'f';

/// How often a node pushes its members' deadlines ahead and reads the set.
pub(crate) const REFRESH: Duration = Duration::from_secs(2);
/// How long a member lives without being refreshed.
pub(crate) const HOLD_TTL: Duration = Duration::from_secs(10);
/// How long a node waits for the other nodes' answers to its announcement.
pub(crate) const ACK_WAIT: Duration = Duration::from_secs(2);
/// How long one Redis step of the feeds task is awaited.
const REDIS_WAIT: Duration = Duration::from_secs(2);

/// Holds this node's members (`ARGV[3..]`) until `ARGV[2]`, drops those past `ARGV[1]` (now,
/// in ms) and answers the members left. `KEYS[1]`: the sorted set.
pub(crate) const HOLD: &str = r#"
for i = 3, #ARGV do
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
return redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')
"#;

/// Removes member `ARGV[1]` from `KEYS[1]`.
pub(crate) const DROP: &str = "return redis.call('ZREM', KEYS[1], ARGV[1])";

/// What the feeds task is asked to do.
pub(crate) enum Op {
    Gained(Box<str>),
    Lost(Box<str>),
    Refresh,
    /// A share group's first member here (`crate::shares`).
    ShareGained(crate::shares::GroupKey),
    /// A share group's last member here left.
    ShareLost(crate::shares::GroupKey),
}

/// This node's side of the feeds (see the module doc).
pub(crate) struct FeedState {
    /// Some app's feed is on: the sender's one load while none is.
    any: AtomicBool,
    /// The apps whose feed is on, each with when this node last heard it announced.
    apps: RwLock<HashMap<Box<str>, Instant>>,
    /// This node's apps with filters, each with whether its feed is ready.
    local: Mutex<HashMap<Box<str>, watch::Sender<bool>>>,
    ops: mpsc::UnboundedSender<Op>,
    ids: AtomicU64,
    /// Announcements waiting for answers, by request.
    waiting: Mutex<HashMap<u64, Waiting>>,
}

/// An announcement waiting for answers: the nodes that have not answered yet, and whom to tell
/// once all have.
type Waiting = (HashSet<u64>, Option<oneshot::Sender<()>>);

impl FeedState {
    pub(crate) fn new(ops: mpsc::UnboundedSender<Op>) -> FeedState {
        FeedState {
            any: AtomicBool::new(false),
            apps: RwLock::default(),
            local: Mutex::default(),
            ops,
            ids: AtomicU64::new(1),
            waiting: Mutex::default(),
        }
    }

    /// Whether `channel`'s messages go to its app's feed too: one load while no feed is on.
    #[inline]
    pub(crate) fn covers(&self, channel: &ChannelName) -> bool {
        self.any.load(Ordering::Acquire) && self.covers_slow(channel)
    }

    #[cold]
    fn covers_slow(&self, channel: &ChannelName) -> bool {
        let (app, local) = split_app(channel.as_str());
        !local.starts_with(RESERVED) && self.apps.read().contains_key(app)
    }

    /// Whether `app`'s feed is on as this node knows it.
    pub(crate) fn is_on(&self, app: &str) -> bool {
        self.apps.read().contains_key(app)
    }

    fn turn_on(&self, app: &str) {
        self.apps.write().insert(app.into(), Instant::now());
        self.any.store(true, Ordering::Release);
    }
}

/// The filter registry's [`FilterFeed`]: notes the changes for the feeds task.
pub(crate) struct RedisFeed(pub(crate) Weak<Shared>);

#[async_trait::async_trait]
impl FilterFeed for RedisFeed {
    fn gained(&self, app: &str) {
        if let Some(shared) = self.0.upgrade() {
            shared
                .feeds
                .local
                .lock()
                .insert(app.into(), watch::channel(false).0);
            // This node's own commits go to the feed at once (its filters hear them there).
            shared.feeds.turn_on(app);
            let _ = shared.feeds.ops.send(Op::Gained(app.into()));
        }
    }

    fn lost(&self, app: &str) {
        if let Some(shared) = self.0.upgrade() {
            shared.feeds.local.lock().remove(app);
            let _ = shared.feeds.ops.send(Op::Lost(app.into()));
        }
    }

    async fn ready(&self, app: &str) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        let ready = shared.feeds.local.lock().get(app).map(|tx| tx.subscribe());
        drop(shared);
        if let Some(mut ready) = ready {
            let wait = REDIS_WAIT * 2 + ACK_WAIT;
            let _ = tokio::time::timeout(wait, ready.wait_for(|r| *r)).await;
        }
    }
}

/// A feeds message (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FeedMessage {
    On {
        from: u64,
        request: u64,
        app: String,
    },
    Answer {
        from: u64,
        to: u64,
        request: u64,
    },
    Off {
        from: u64,
        app: String,
    },
}

impl FeedMessage {
    pub(crate) fn encode(&self) -> Bytes {
        let (kind, from, to, request, app) = match self {
            FeedMessage::On { from, request, app } => (1, *from, 0, *request, app.as_str()),
            FeedMessage::Answer { from, to, request } => (2, *from, *to, *request, ""),
            FeedMessage::Off { from, app } => (3, *from, 0, 0, app.as_str()),
        };
        let mut out = BytesMut::with_capacity(32 + app.len());
        out.put_u8(MARK);
        out.put_u8(kind);
        out.put_u64(from);
        out.put_u64(to);
        out.put_u64(request);
        out.put_u8(app.len().min(255) as u8);
        out.put_slice(&app.as_bytes()[..app.len().min(255)]);
        out.freeze()
    }

    pub(crate) fn decode(payload: &[u8]) -> Result<FeedMessage, DecodeError> {
        let mut r = Reader(Bytes::copy_from_slice(payload));
        if r.u8()? != MARK {
            return Err(DecodeError::Malformed("not a feeds message"));
        }
        let kind = r.u8()?;
        let (from, to, request) = (r.u64()?, r.u64()?, r.u64()?);
        let len = usize::from(r.u8()?);
        let app = r.string(len)?;
        match kind {
            1 => Ok(FeedMessage::On { from, request, app }),
            2 => Ok(FeedMessage::Answer { from, to, request }),
            3 => Ok(FeedMessage::Off { from, app }),
            _ => Err(DecodeError::Malformed("an unknown feeds message")),
        }
    }
}

/// Handles a feeds message from the events channel (the receiver task).
pub(crate) fn on_message(shared: &Arc<Shared>, payload: &[u8]) {
    let Ok(message) = FeedMessage::decode(payload) else {
        shared
            .counters
            .decode_errors
            .fetch_add(1, Ordering::Relaxed);
        return;
    };
    match message {
        FeedMessage::On { from, .. } | FeedMessage::Off { from, .. } if from == shared.node => {}
        FeedMessage::On { from, request, app } => {
            // In memory first: every send from now on goes to the feed too; then the answer.
            shared.feeds.turn_on(&app);
            let answer = FeedMessage::Answer {
                from: shared.node,
                to: from,
                request,
            }
            .encode();
            let shared = shared.clone();
            tokio::spawn(async move {
                let _ = shared
                    .publisher
                    .spublish::<(), _, _>(shared.names.events(), Value::Bytes(answer))
                    .await;
            });
        }
        FeedMessage::Answer { from, to, request } if to == shared.node => {
            let mut waiting = shared.feeds.waiting.lock();
            if let Some((left, done)) = waiting.get_mut(&request) {
                left.remove(&from);
                if left.is_empty() {
                    if let Some(done) = done.take() {
                        let _ = done.send(());
                    }
                    waiting.remove(&request);
                }
            }
        }
        FeedMessage::Answer { .. } => {}
        FeedMessage::Off { .. } => {
            let _ = shared.feeds.ops.send(Op::Refresh);
        }
    }
}

pub(crate) fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn member(node: u64, app: &str) -> String {
    format!("{node:016x}:{app}")
}

/// The feeds task: follows and announces this node's apps, refreshes their members, and
/// keeps the apps whose feed is on up to date.
pub(crate) async fn run(shared: Arc<Shared>, mut ops: mpsc::UnboundedReceiver<Op>) {
    let mut reconnects = shared.subscriber.reconnect_rx();
    let mut tick = tokio::time::interval(REFRESH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            op = ops.recv() => match op {
                None => return,
                Some(Op::Gained(app)) => gained(&shared, app).await,
                Some(Op::Lost(app)) => lost(&shared, &app).await,
                Some(Op::Refresh) => refresh(&shared).await,
                Some(Op::ShareGained(key)) => crate::shares::gained(&shared, key).await,
                Some(Op::ShareLost(key)) => crate::shares::lost(&shared, key).await,
            },
            _ = tick.tick() => {
                refresh(&shared).await;
                crate::shares::refresh(&shared).await;
            }
            got = reconnects.recv() => {
                if got.is_err() {
                    continue;
                }
                // Subscribed again; what the feed carried meanwhile is lost (filters are live).
                let apps: Vec<Box<str>> = shared.feeds.local.lock().keys().cloned().collect();
                for app in apps {
                    let _ = bounded(shared.subscriber.ssubscribe(shared.names.feed(&app))).await;
                }
                refresh(&shared).await;
            }
        }
    }
}

async fn bounded<T, E>(f: impl std::future::Future<Output = Result<T, E>>) -> Option<T> {
    tokio::time::timeout(REDIS_WAIT, f).await.ok()?.ok()
}

/// The hold on a node's start of an app's feed for the server's tests (debug builds): while the
/// file named by `HERALD_TEST_FEED_HOLD` exists, [`gained`] does not begin (no Redis subscribe,
/// no member, no announcement), so another node's publish lands in the window a cluster has
/// before a new filter hears every node (what a loaded machine does now and then, made certain).
#[cfg(debug_assertions)]
static TEST_HOLD: herald_core::test_hold::TestHold =
    herald_core::test_hold::TestHold::new("HERALD_TEST_FEED_HOLD");

/// `app` has filters here: follow its feed, add this node's member, announce it and, once
/// every live node answered (or [`ACK_WAIT`] passed), say the feed is ready.
async fn gained(shared: &Arc<Shared>, app: Box<str>) {
    #[cfg(debug_assertions)]
    while TEST_HOLD.is_held() {
        tokio::time::sleep(herald_core::test_hold::POLL).await;
    }
    if !shared.feeds.local.lock().contains_key(&app) {
        return; // lost again meanwhile
    }
    let _ = bounded(shared.subscriber.ssubscribe(shared.names.feed(&app))).await;
    let _ = bounded(hold(shared, std::slice::from_ref(&app))).await;
    let others = live_nodes(shared).await;
    let request = shared.feeds.ids.fetch_add(1, Ordering::Relaxed);
    let (done, answered) = oneshot::channel();
    if !others.is_empty() {
        shared
            .feeds
            .waiting
            .lock()
            .insert(request, (others, Some(done)));
    }
    let announcement = FeedMessage::On {
        from: shared.node,
        request,
        app: app.to_string(),
    }
    .encode();
    let sent = bounded(
        shared
            .publisher
            .spublish::<(), _, _>(shared.names.events(), Value::Bytes(announcement)),
    )
    .await;
    let shared = shared.clone();
    tokio::spawn(async move {
        if sent.is_some() {
            let _ = tokio::time::timeout(ACK_WAIT, answered).await;
        }
        shared.feeds.waiting.lock().remove(&request);
        if let Some(ready) = shared.feeds.local.lock().get(&app) {
            ready.send_replace(true);
        }
    });
}

/// Holds this node's members of `apps` for [`HOLD_TTL`] more, drops the lapsed ones, and
/// answers the members left.
async fn hold(shared: &Shared, apps: &[Box<str>]) -> Result<Vec<String>, fred::error::Error> {
    let now = now_millis();
    let mut args = vec![
        now.to_string(),
        (now + HOLD_TTL.as_millis() as i64).to_string(),
    ];
    args.extend(apps.iter().map(|app| member(shared.node, app)));
    shared
        .publisher
        .eval(HOLD, shared.names.feeds(), args)
        .await
}

/// The other nodes alive by their presence records.
async fn live_nodes(shared: &Shared) -> HashSet<u64> {
    let nodes: HashMap<String, i64> = bounded(shared.publisher.hgetall(shared.names.nodes()))
        .await
        .unwrap_or_default();
    let alive_since = now_millis() - (shared.options.presence_period * 3).as_millis() as i64;
    nodes
        .into_iter()
        .filter(|(_, seen)| *seen >= alive_since)
        .filter_map(|(node, _)| u64::from_str_radix(&node, 16).ok())
        .filter(|node| *node != shared.node)
        .collect()
}

/// `app` has no filter here any more: remove the member, stop following, tell the others.
async fn lost(shared: &Arc<Shared>, app: &str) {
    if shared.feeds.local.lock().contains_key(app) {
        return; // gained again meanwhile
    }
    let _ = bounded(shared.publisher.eval::<i64, _, _, _>(
        DROP,
        shared.names.feeds(),
        member(shared.node, app),
    ))
    .await;
    let _ = bounded(shared.subscriber.sunsubscribe(shared.names.feed(app))).await;
    let off = FeedMessage::Off {
        from: shared.node,
        app: app.to_owned(),
    }
    .encode();
    let _ = bounded(
        shared
            .publisher
            .spublish::<(), _, _>(shared.names.events(), Value::Bytes(off)),
    )
    .await;
    refresh(shared).await;
}

/// Pushes this node's members' deadlines ahead, drops lapsed members, and reads which apps'
/// feeds are on. An app announced after the read started is kept (its member may be newer
/// than the read), as are this node's own.
async fn refresh(shared: &Shared) {
    let started = Instant::now();
    let local: Vec<Box<str>> = shared.feeds.local.lock().keys().cloned().collect();
    let Some(members) = bounded(hold(shared, &local)).await else {
        return; // Redis away: keep what is known
    };
    let on: HashSet<&str> = members
        .iter()
        .filter_map(|m| m.split_once(':').map(|(_, app)| app))
        .chain(local.iter().map(|app| &**app))
        .collect();
    let mut apps = shared.feeds.apps.write();
    apps.retain(|app, heard| on.contains(&**app) || *heard > started);
    for app in on {
        apps.entry(app.into()).or_insert(started);
    }
    shared.feeds.any.store(!apps.is_empty(), Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feeds_messages_round_trip() {
        for message in [
            FeedMessage::On {
                from: 7,
                request: 3,
                app: "shop".into(),
            },
            FeedMessage::Answer {
                from: 9,
                to: 7,
                request: 3,
            },
            FeedMessage::Off {
                from: 7,
                app: "shop".into(),
            },
        ] {
            assert_eq!(FeedMessage::decode(&message.encode()).unwrap(), message);
        }
        assert!(FeedMessage::decode(b"f").is_err());
    }
}
