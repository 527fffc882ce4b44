//! [`MqttSessionStore`], the storage trait a store implements for MQTT persistent sessions
//! (herald-store: SQLite on one node, PostgreSQL for a cluster, in the same database as the
//! channels), and the values it stores.
//!
//! A session is kept per app and client identifier: its subscriptions (the filters as the
//! client sent them, with their options), the acknowledged position of each channel it is
//! subscribed to, the packet identifiers of its outbound QoS 1 and QoS 2 messages awaiting
//! acknowledgement (so a restart, or another node, resends one with its original id), the
//! packet identifiers of its inbound QoS 2 messages stored and awaiting PUBREL
//! ([`StoredHeldQoS2`], written by the message's own append: so a resend of one after a
//! restart, or on another node, is not stored twice), its Session Expiry Interval and, once its connection ended, when, the cluster node that holds
//! (or last held) its connection, and its connection's will ([`StoredWill`]), from the CONNECT
//! until it is published or discarded, so a will waiting for its delay survives a crash of the
//! node ([`MqttSessionStore::take_mqtt_will`] takes it once, [`MqttSessionStore::mqtt_wills_waiting`]
//! lists those a restarted node publishes, [`MqttSessionStore::end_mqtt_node`] those of a
//! cluster node found lost). Deleting an app deletes its sessions.
//!
//! Every change is a [`SessionWrite`]; a batch of them is applied in one transaction, in
//! order, by [`MqttSessionStore::write_mqtt_sessions`]: the session service gathers the
//! positions many connections acknowledged meanwhile into one batch (group commit: a PUBACK
//! costs no transaction or fsync of its own; `super::flusher`).

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use serde::{Deserialize, Serialize};

/// One subscription of a stored session: the filter as the client sent it and its options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSubscription {
    /// The topic filter, as the client sent it.
    pub filter: String,
    /// The QoS granted (0, 1 or 2).
    pub qos: u8,
    /// v5 No Local.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_local: bool,
    /// v5 Retain As Published.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retain_as_published: bool,
    /// v5 Retain Handling (0, 1 or 2).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retain_handling: u8,
    /// v5 Subscription Identifier, if the SUBSCRIBE had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_identifier: Option<u32>,
    /// A wildcard filter's: when it was first made (Unix ms). A channel it matches that the
    /// session holds no position in replays, on resume, its messages stored from then on
    /// (herald-mqtt's `session/missed.rs`). Absent in sessions stored before it was kept:
    /// those replay from when their connection ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<i64>,
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

/// Where a session stands in one channel: every message up to `seq` of `epoch` was
/// acknowledged (or sent at QoS 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPosition {
    /// The channel's name in its app (its public name).
    pub channel: String,
    /// The channel's epoch.
    pub epoch: String,
    /// The last seq acknowledged.
    pub seq: u64,
}

/// An outbound QoS 1 or QoS 2 message of a session awaiting acknowledgement: a QoS 2 one from
/// before its PUBLISH was sent until its PUBCOMP, a QoS 1 one from soon after its PUBLISH was
/// sent (group-committed) until its PUBACK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredInflight {
    /// The packet identifier it was (or is about to be) sent with.
    pub packet_id: u16,
    /// The QoS it was sent with: 1 or 2.
    pub qos: u8,
    /// The channel's name in its app.
    pub channel: String,
    /// The channel's epoch.
    pub epoch: String,
    /// The message's seq.
    pub seq: u64,
    /// PUBREC came and PUBREL was sent: only PUBCOMP is awaited (a reconnect sends PUBREL
    /// again, not the message).
    pub released: bool,
    /// Whether it went with RETAIN set (a retained message sent at SUBSCRIBE, or Retain As
    /// Published), so a resend goes as the first send did; `None` for a row written before
    /// the store kept it (SQLite migration 17, PostgreSQL 15), whose RETAIN a resumed session
    /// works out (herald-mqtt's `session/resend.rs`).
    pub retain: Option<bool>,
}

/// An inbound QoS 2 message of a session stored and answered with PUBREC, whose PUBREL has
/// not come: its packet identifier and the `n` of the idempotency key it was stored with
/// (`mqtt:{client id}:{packet id}:{n}`: a resend is stored with the same key, so the channel's
/// log keeps one copy). Written by the message's append in its transaction (core's
/// `SessionHold`); deleted after its PUBREL by the session's next append, which carries the
/// release, or by a [`SessionWrite::ReleasedQoS2`] (herald-mqtt's `session/flusher.rs`).
pub type StoredHeldQoS2 = herald_core::HeldPacket;

/// A stored session, as [`MqttSessionStore::mqtt_session`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// Its Session Expiry Interval, in milliseconds.
    pub expiry_ms: i64,
    /// When its last connection ended (Unix ms); `None` while a connection holds it.
    pub disconnected_ms: Option<i64>,
    /// Its subscriptions, in the order they were made.
    pub subscriptions: Vec<StoredSubscription>,
    /// Its position in each channel, by channel name.
    pub positions: Vec<StoredPosition>,
    /// Its outbound QoS 2 messages awaiting PUBREC or PUBCOMP, by packet identifier.
    pub inflight: Vec<StoredInflight>,
    /// Its inbound QoS 2 messages awaiting PUBREL, by packet identifier.
    pub held_qos2: Vec<StoredHeldQoS2>,
}

impl StoredSession {
    /// Whether the session has expired at `now_ms`: its connection ended longer than its
    /// expiry interval ago.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.disconnected_ms
            .is_some_and(|at| at.saturating_add(self.expiry_ms) <= now_ms)
    }
}

/// A session's will, stored with it while its connection may still leave it (from the
/// CONNECT) and while it waits for its Will Delay Interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredWill {
    /// The will as herald-mqtt encodes it (opaque to the store).
    pub will: Vec<u8>,
    /// Its Will Delay Interval, ms.
    pub delay_ms: i64,
}

/// A stored will of a session no connection holds (its connection ended, or its server
/// stopped without saying so), as [`MqttSessionStore::mqtt_wills_waiting`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingWill {
    /// Its session.
    pub key: SessionKey,
    /// The will.
    pub will: StoredWill,
    /// When it is due, Unix ms: its session's end plus its delay, or plus the session's expiry
    /// interval if that is shorter [MQTT-3.1.3-9]; 0 when its session is gone.
    pub due_ms: i64,
}

impl WaitingWill {
    /// The will of the session `key`, due as its session's end (`disconnected_ms`) and expiry
    /// interval (`expiry_ms`, `None` when the session is gone) say.
    pub fn due(
        key: SessionKey,
        will: StoredWill,
        disconnected_ms: i64,
        expiry_ms: Option<i64>,
    ) -> WaitingWill {
        let due_ms = match expiry_ms {
            Some(expiry_ms) => disconnected_ms.saturating_add(will.delay_ms.min(expiry_ms)),
            None => 0,
        };
        WaitingWill { key, will, due_ms }
    }
}

/// Which session a write is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    /// Its app.
    pub app: AppId,
    /// Its client identifier.
    pub client_id: String,
}

/// One change to the stored sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionWrite {
    /// A new session, held by a connection: replaces whatever was stored for the key
    /// (subscriptions, positions and in-flight messages gone), with this expiry interval.
    Start {
        /// The session.
        key: SessionKey,
        /// Its Session Expiry Interval, ms.
        expiry_ms: i64,
        /// The cluster node holding its connection (`None` on one node).
        node: Option<u64>,
    },
    /// A stored session held by a connection again, with this expiry interval.
    Resume {
        /// The session.
        key: SessionKey,
        /// Its Session Expiry Interval, ms.
        expiry_ms: i64,
        /// The cluster node holding its connection (`None` on one node).
        node: Option<u64>,
    },
    /// The session's subscriptions now.
    Subscriptions {
        /// The session.
        key: SessionKey,
        /// Every subscription it holds.
        subscriptions: Vec<StoredSubscription>,
    },
    /// The session's position in a channel.
    Position {
        /// The session.
        key: SessionKey,
        /// The position.
        position: StoredPosition,
    },
    /// The session no longer follows a channel: its position is forgotten.
    Unfollowed {
        /// The session.
        key: SessionKey,
        /// The channel's name in its app.
        channel: String,
    },
    /// An outbound QoS 1 or 2 message awaiting acknowledgement (new; a QoS 2 one released).
    Inflight {
        /// The session.
        key: SessionKey,
        /// The message and its packet identifier.
        inflight: StoredInflight,
    },
    /// An outbound message acknowledged (QoS 1 PUBACK, QoS 2 PUBCOMP): its packet identifier
    /// is free.
    Completed {
        /// The session.
        key: SessionKey,
        /// The packet identifier.
        packet_id: u16,
    },
    /// An inbound QoS 2 message released (PUBREL): its hold is deleted if it is still the one
    /// of that message (a hold of the same packet identifier with another `n` is a later
    /// message's, written by its append before this write committed, and stays). Holds are
    /// written by the message's append, in its transaction (core's `SessionHold`), and most
    /// releases ride the session's next append there too; this write is for those no append
    /// took in time.
    ReleasedQoS2 {
        /// The session.
        key: SessionKey,
        /// The packet identifier and the `n` of the released message's key.
        held: StoredHeldQoS2,
    },
    /// The session's connection ended at `at_ms`; it expires `expiry_ms` later.
    Ended {
        /// The session.
        key: SessionKey,
        /// When, Unix ms.
        at_ms: i64,
        /// Its Session Expiry Interval then (a v5 DISCONNECT may change it), ms.
        expiry_ms: i64,
    },
    /// The will of the session's connection (replacing any stored before), kept until it is
    /// published ([`MqttSessionStore::take_mqtt_will`]) or discarded ([`SessionWrite::WillDiscarded`]).
    Will {
        /// The session.
        key: SessionKey,
        /// The will.
        will: StoredWill,
    },
    /// The session's will is discarded (a DISCONNECT 0x00, an ended credential).
    WillDiscarded {
        /// The session.
        key: SessionKey,
    },
    /// The session is gone (Clean Start, an expiry interval of 0 ended), and its will.
    Delete {
        /// The session.
        key: SessionKey,
    },
    /// Every session no connection holds now is counted as disconnected since `at_ms` (at
    /// start, for sessions whose server stopped without saying their connections ended).
    AllDisconnected {
        /// When, Unix ms.
        at_ms: i64,
    },
    /// Deletes every session expired at `now_ms` (not their wills: an expired session's will
    /// is due, [`MqttSessionStore::mqtt_wills_waiting`]).
    Sweep {
        /// The time, Unix ms.
        now_ms: i64,
    },
}

/// Where MQTT sessions are kept.
#[async_trait]
pub trait MqttSessionStore: Send + Sync {
    /// The stored session of `client_id` in `app`, expired or not.
    async fn mqtt_session(
        &self,
        app: &AppId,
        client_id: &str,
    ) -> Result<Option<StoredSession>, StoreError>;

    /// Applies `writes` in order, in one transaction (all or none), durably (as the store's
    /// `sync` makes its commits) before it returns.
    async fn write_mqtt_sessions(&self, writes: Vec<SessionWrite>) -> Result<(), StoreError>;

    /// Takes the stored will of the session `key`: deletes it and returns it, in one atomic
    /// operation, so of the nodes (or tasks) that take it only one gets it and publishes it.
    async fn take_mqtt_will(&self, key: &SessionKey) -> Result<Option<StoredWill>, StoreError>;

    /// The stored wills of sessions no connection holds (their end recorded, or the session
    /// gone), with when each is due.
    async fn mqtt_wills_waiting(&self) -> Result<Vec<WaitingWill>, StoreError>;

    /// Cluster node `node` was found lost: every session whose connection it held is counted
    /// as disconnected since `at_ms` (its expiry runs from then), in one atomic step, so a
    /// session resumed elsewhere meanwhile is left alone. Answers the stored wills of the
    /// sessions `node` held last that no connection holds now (those just ended, and those
    /// whose wills waited there for their delay), with when each is due.
    async fn end_mqtt_node(&self, node: u64, at_ms: i64) -> Result<Vec<WaitingWill>, StoreError>;
}

/// How a cluster node's id is stored (`mqtt_sessions.node`): 16 hex digits, as the Redis bus
/// names nodes.
pub fn node_name(node: u64) -> String {
    format!("{node:016x}")
}
