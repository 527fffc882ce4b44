//! Lifecycle events across nodes: the [`Relay`] this bus sets on the hub's lifecycle registry
//! ([`herald_core::lifecycle`]), and the task that keeps the cluster's records in Redis so that
//! each channel transition, and each departure of a lost node's connections, is delivered
//! once in the cluster, to the listeners of one node. The contract is
//! [`herald_core::bus::Bus`]'s; how it is kept:
//!
//! - **Channels.** A node's first subscriber of a channel adds the node to the channel's set
//!   of nodes in Redis, its last one leaving removes it (`scripts.rs`, Lua, atomic). The call
//!   that makes the set non-empty reports `channel.occupied`, the one that empties it
//!   `channel.vacated`, to the listeners of the node that made it. Adding and removing a node
//!   are idempotent, so a retried change cannot count twice.
//! - **Users.** The same for each user (an app's token `sub`): a node's first connection of
//!   the user adds the node to the user's set, its last removes it; `user.online` and
//!   `user.offline` are the crossings.
//! - **Connections.** Connected and disconnected are facts of the node holding the connection
//!   and are delivered there at once; the node also records each live connection in Redis.
//! - **A lost node.** Each node refreshes a heartbeat key every [`BEAT_PERIOD`] that expires
//!   after [`TTL`]; every [`BEAT_PERIOD`] each node claims, in one script, every node whose
//!   heartbeat expired: it removes the lost node from its channels and users (reporting
//!   `vacated` and `user.offline` for those it left empty) and takes its connection records (reporting each `disconnected`,
//!   reason `node_lost`). One script call claims a node, so one node reports it. A lost node's
//!   departures are therefore delivered within [`NODE_LOST_BOUND`] of its last heartbeat.
//! - **A node cut off.** A node whose heartbeat expired while it was alive (cut off from Redis
//!   longer than [`TTL`]) was claimed: its changes are refused (fenced) until it writes its
//!   whole state again (`SYNC`), which reports its channels occupied again where the claim
//!   vacated them. The same happens after Redis lost its data.
//! - **A node that stops** removes itself (its channels vacated where it was the last) after
//!   the changes it queued, so nothing of it is claimed as lost later.
//!
//! All of this runs only once a listener joined the node's lifecycle registry: without one
//! the relay is never called and the task never touches Redis.

mod record;
mod scripts;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::Client;
use herald_core::lifecycle::{
    Connection, ConnectionId, DisconnectReason, Lifecycle, LifecycleEvent, Relay, Relayed,
};
use herald_core::tenant::AppId;
use herald_core::ChannelName;
use tokio::sync::{mpsc, oneshot};

use scripts::{Applied, Change, Keys};

/// How long a node's heartbeat lives without being refreshed.
pub const TTL: Duration = Duration::from_secs(5);

/// How often a node refreshes its heartbeat and claims the nodes whose heartbeat expired.
pub const BEAT_PERIOD: Duration = Duration::from_secs(1);

/// Within how long of a node's last heartbeat the other nodes report its connections'
/// departures and its channels' vacancies (plus a Redis round trip).
pub const NODE_LOST_BOUND: Duration = Duration::from_secs(TTL.as_secs() + BEAT_PERIOD.as_secs());

/// Most changes sent to Redis in one script call.
const MAX_BATCH: usize = 512;

/// What a node holds that the cluster counts across nodes: a channel (its subscribers) or a
/// user (its connections).
#[derive(Clone)]
pub(crate) enum Held {
    Channel(ChannelName),
    User(AppId, Box<str>),
}

/// Where a user's name starts in Redis: no channel name can (a channel's full name starts
/// with its app or its own first character, never `~`).
const USER: &str = "~user/";

impl Held {
    /// Its name in Redis: a channel's full name, or `~user/APP/SUB`.
    fn name(&self) -> String {
        match self {
            Held::Channel(channel) => channel.as_str().to_owned(),
            Held::User(app, sub) => format!("{USER}{}/{sub}", app.as_str()),
        }
    }

    /// What a name in Redis stands for.
    fn parse(name: &str) -> Option<Held> {
        match name.strip_prefix(USER) {
            Some(user) => {
                let (app, sub) = user.split_once('/')?;
                Some(Held::User(AppId::parse(app).ok()?, sub.into()))
            }
            None => herald_core::tenant::parse_full(name)
                .ok()
                .map(Held::Channel),
        }
    }

    /// The event of its cluster-wide count crossing 0/1 (`up`: from 0).
    fn event(self, up: bool) -> LifecycleEvent {
        match (self, up) {
            (Held::Channel(channel), true) => LifecycleEvent::ChannelOccupied { channel },
            (Held::Channel(channel), false) => LifecycleEvent::ChannelVacated { channel },
            (Held::User(app, sub), true) => LifecycleEvent::UserOnline { app, sub },
            (Held::User(app, sub), false) => LifecycleEvent::UserOffline { app, sub },
        }
    }
}

/// One change of this node's lifecycle state, queued for the task.
pub(crate) enum Op {
    /// This node holds it now (a channel's first subscriber here, a user's first connection).
    Occupied(Held),
    /// This node no longer holds it.
    Vacated(Held),
    Connected(Arc<Connection>),
    Disconnected(ConnectionId),
    /// Apply what is queued, remove this node, answer.
    Stop(oneshot::Sender<()>),
}

/// The relay set on the hub's lifecycle registry: channel transitions are held (the task
/// delivers the cluster's), connections delivered at once and recorded.
pub(crate) struct RedisRelay(pub(crate) mpsc::UnboundedSender<Op>);

impl Relay for RedisRelay {
    fn relay(&self, event: &LifecycleEvent) -> Relayed {
        let (op, relayed) = match event {
            LifecycleEvent::ChannelOccupied { channel } => {
                (Op::Occupied(Held::Channel(channel.clone())), Relayed::Held)
            }
            LifecycleEvent::ChannelVacated { channel } => {
                (Op::Vacated(Held::Channel(channel.clone())), Relayed::Held)
            }
            LifecycleEvent::UserOnline { app, sub } => (
                Op::Occupied(Held::User(app.clone(), sub.clone())),
                Relayed::Held,
            ),
            LifecycleEvent::UserOffline { app, sub } => (
                Op::Vacated(Held::User(app.clone(), sub.clone())),
                Relayed::Held,
            ),
            LifecycleEvent::Connected { connection } => {
                (Op::Connected(connection.clone()), Relayed::Deliver)
            }
            LifecycleEvent::Disconnected { connection, .. } => {
                (Op::Disconnected(connection.id), Relayed::Deliver)
            }
            // Member events are the cluster's already: the presence relay (`crate::members`)
            // delivers each once, bypassing this relay.
            LifecycleEvent::MemberAdded { .. } | LifecycleEvent::MemberRemoved { .. } => {
                return Relayed::Deliver
            }
            _ => return Relayed::Deliver,
        };
        let _ = self.0.send(op);
        relayed
    }
}

/// The task's view of this node and of Redis.
struct State {
    lifecycle: Arc<Lifecycle>,
    redis: Client,
    keys: Keys,
    /// The channels this node has subscribers for and the users it has connections of, by
    /// their names in Redis.
    channels: HashMap<String, Held>,
    /// This node's live connections.
    connections: HashMap<ConnectionId, Arc<Connection>>,
    /// Whether Redis holds this node's state as of the last change (else the next beat writes
    /// it whole).
    synced: bool,
    /// Whether this node ever wrote its state (and so has records to remove as it stops).
    joined: bool,
}

/// Runs the relay's task for node `node` of the bus with key prefix `prefix`
/// ([`crate::names::Names::lifecycle`]).
pub(crate) async fn run(
    redis: Client,
    prefix: String,
    node: u64,
    lifecycle: Arc<Lifecycle>,
    mut ops: mpsc::UnboundedReceiver<Op>,
) {
    let mut state = State {
        lifecycle,
        redis,
        keys: Keys {
            prefix,
            node: format!("{node:016x}"),
        },
        channels: HashMap::new(),
        connections: HashMap::new(),
        synced: false,
        joined: false,
    };
    let mut tick = tokio::time::interval(BEAT_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            op = ops.recv() => {
                let Some(op) = op else { return };
                let mut batch = vec![op];
                while batch.len() < MAX_BATCH {
                    match ops.try_recv() {
                        Ok(op) => batch.push(op),
                        Err(_) => break,
                    }
                }
                if let Some(stopped) = state.apply(batch).await {
                    state.leave().await;
                    let _ = stopped.send(());
                    return;
                }
            }
            _ = tick.tick() => {
                if state.lifecycle.is_active() {
                    state.beat().await;
                }
            }
        }
    }
}

impl State {
    /// Delivers the crossing of what `name` stands for (`up`: it was occupied).
    fn deliver_channel(&self, name: &str, up: bool) {
        let held = self
            .channels
            .get(name)
            .cloned()
            .or_else(|| Held::parse(name));
        if let Some(held) = held {
            self.lifecycle.deliver(&held.event(up));
        }
    }

    /// Applies a batch of changes here and in Redis; the stop request, if the batch ends with
    /// one.
    async fn apply(&mut self, ops: Vec<Op>) -> Option<oneshot::Sender<()>> {
        // Redis first holds the state from before these changes, so that each of them is
        // applied (and reported) one by one: a channel occupied and vacated in one batch is
        // two transitions, not none.
        if !self.synced && !ops.iter().all(|op| matches!(op, Op::Stop(_))) {
            self.sync().await;
        }
        let mut changes = Vec::with_capacity(ops.len());
        // Per change: what it is about and whether it was occupied, for a crossing's event.
        let mut channels: Vec<Option<(Held, bool)>> = Vec::with_capacity(ops.len());
        let mut stop = None;
        for op in ops {
            match op {
                Op::Occupied(held) => {
                    let name = held.name();
                    self.channels.insert(name.clone(), held.clone());
                    changes.push(Change::Occupied(name));
                    channels.push(Some((held, true)));
                }
                Op::Vacated(held) => {
                    let name = held.name();
                    self.channels.remove(&name);
                    changes.push(Change::Vacated(name));
                    channels.push(Some((held, false)));
                }
                Op::Connected(connection) => {
                    changes.push(Change::Connected {
                        id: record::id(&connection.id),
                        record: record::encode(&connection),
                    });
                    self.connections.insert(connection.id, connection);
                    channels.push(None);
                }
                Op::Disconnected(id) => {
                    self.connections.remove(&id);
                    changes.push(Change::Disconnected(record::id(&id)));
                    channels.push(None);
                }
                Op::Stop(stopped) => stop = Some(stopped),
            }
        }
        if changes.is_empty() || !self.synced {
            // Unsynced (Redis unreachable): the next beat writes the state whole.
            return stop;
        }
        match scripts::apply(&self.redis, &self.keys, &changes).await {
            Ok(Applied::Crossed(crossed)) => {
                for (held, crossed) in channels.into_iter().zip(crossed) {
                    if let (Some((held, up)), true) = (held, crossed) {
                        self.lifecycle.deliver(&held.event(up));
                    }
                }
            }
            Ok(Applied::Fenced) => {
                tracing::warn!(
                    "another node took this node for lost (no heartbeat within {TTL:?}); \
                     writing its connections and channels to Redis again"
                );
                self.synced = false;
                self.sync().await;
            }
            Err(error) => {
                let error = crate::error::in_words(&error);
                tracing::debug!(%error, "lifecycle changes not written to Redis yet");
                self.synced = false;
            }
        }
        stop
    }

    /// Writes this node's whole state to Redis (joining, or after a fence or an error) and
    /// delivers the crossings that made.
    async fn sync(&mut self) {
        let channels = self.channels.keys().cloned().collect();
        let connections = self
            .connections
            .values()
            .map(|c| (record::id(&c.id), record::encode(c)))
            .collect();
        let ttl = TTL.as_millis() as u64;
        match scripts::sync(&self.redis, &self.keys, ttl, channels, connections).await {
            Ok((occupied, vacated)) => {
                self.synced = true;
                self.joined = true;
                for name in &vacated {
                    self.deliver_channel(name, false);
                }
                for name in &occupied {
                    self.deliver_channel(name, true);
                }
            }
            Err(error) => {
                let error = crate::error::in_words(&error);
                tracing::debug!(%error, "lifecycle state not written to Redis yet");
            }
        }
    }

    /// The heartbeat, then the claim of the nodes whose heartbeat expired.
    async fn beat(&mut self) {
        if !self.synced {
            self.sync().await;
        } else {
            match scripts::beat(&self.redis, &self.keys, TTL.as_millis() as u64).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(
                        "another node took this node for lost; writing its state to Redis again"
                    );
                    self.synced = false;
                    self.sync().await;
                }
                Err(_) => self.synced = false,
            }
        }
        if !self.synced {
            return;
        }
        let claimed = match scripts::claim(&self.redis, &self.keys).await {
            Ok(claimed) => claimed,
            Err(_) => return,
        };
        for lost in claimed {
            for record in &lost.records {
                let Some(connection) = record::decode(record) else {
                    continue;
                };
                self.lifecycle.deliver(&LifecycleEvent::Disconnected {
                    connection: Arc::new(connection),
                    reason: DisconnectReason::NodeLost,
                });
            }
            for name in &lost.vacated {
                self.deliver_channel(name, false);
            }
        }
    }

    /// Removes this node from Redis as it stops (if it ever joined).
    async fn leave(&mut self) {
        if !self.joined {
            return;
        }
        if let Ok(vacated) = scripts::leave(&self.redis, &self.keys).await {
            for name in &vacated {
                self.deliver_channel(name, false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_node_holds_reads_back_from_its_name_in_redis() {
        let shop = AppId::parse("shop").unwrap();
        let channel = shop.parse_channel("chat/room-1").unwrap();
        let user = Held::User(shop.clone(), "a/b~c".into());
        for held in [Held::Channel(channel.clone()), user] {
            let back = Held::parse(&held.name()).map(|h| h.event(true));
            assert_eq!(back, Some(held.event(true)));
        }
        assert!(Held::parse("~user/nope").is_none());
        assert_eq!(
            Held::parse(channel.as_str()).map(|h| h.event(false)),
            Some(LifecycleEvent::ChannelVacated { channel })
        );
    }
}
