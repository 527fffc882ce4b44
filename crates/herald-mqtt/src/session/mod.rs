//! Persistent sessions (issue 33, phase 2; docs/design/mqtt.md, "Persistent sessions"): a
//! session that outlives its connection, kept per app and client identifier in the store
//! ([`store::MqttSessionStore`], herald-store's SQLite and PostgreSQL tables).
//!
//! - **Which sessions persist**: a v5 client with a Session Expiry Interval above 0, or a
//!   3.1.1 client with Clean Session 0 (whose session never expires by the standard), each
//!   held to `mqtt.max_session_expiry` (v5 is told a lower interval in its CONNACK). Clean
//!   Start 1 (3.1.1: Clean Session 1) discards the stored session [MQTT-3.1.2-4]; Clean Start
//!   0 resumes it, CONNACK Session Present 1 [MQTT-3.2.2-2], unless it expired.
//! - **What is kept**: the subscriptions (the filters as sent, with their options), the
//!   acknowledged position of every channel they follow (`positions.rs`), and the packet
//!   identifiers of outbound QoS 2 messages, written before the PUBLISH is sent so a restart
//!   resends it with its original identifier. Positions are group-committed (`flusher.rs`): a
//!   PUBACK costs no fsync of its own. QoS 1 packet identifiers are group-committed too,
//!   after the PUBLISH is sent (a PUBACK that comes before the batch goes cancels the write
//!   in memory: `flusher.rs`), and kept in memory for the session's next connection in the
//!   process: a session resumed after a restart, or on another node, resends its
//!   unacknowledged QoS 1 messages with their original identifiers and DUP [MQTT-4.4.0-1],
//!   except those sent within the last batch before a crash (sent again with new ones).
//!   The packet identifiers of inbound QoS 2 messages stored and awaiting PUBREL, with the
//!   key each message was stored with, are stored too: written by the message's append in
//!   its transaction (core's `SessionHold`), committed before the PUBREC, their release
//!   deferred before the PUBCOMP (`crate::inbound`) to the session's next append, which
//!   writes it in its transaction, or to the next batch (`flusher.rs`), so the client's resend
//!   of one (DUP set) after reconnecting, after a restart or on another node, is not stored
//!   twice [MQTT-4.3.3-10] (it is stored again with its key, which the channel's log keeps
//!   once), and a PUBLISH without DUP on an id whose release a crash lost is a new message.
//!   The connection's will is stored with the session from the CONNECT (`crate::will`), so a
//!   will waiting for its delay survives a crash ([`Sessions::recover_wills`]).
//! - **Resuming** (`connection.rs`): each stored subscription is made again within the
//!   client's current permissions and resumes from its channel's stored position (Herald's
//!   exact resume and paged catch-up), so what was published while the client was away, and
//!   what it had not acknowledged, is sent, as far back as the channel's history keeps. A
//!   wildcard filter's channels are followed from the first message it delivers, and on resume
//!   what the filter missed is replayed from them, and from channels it had no message of yet
//!   (`missed.rs`). An unacknowledged message the replay does not bring again (a retained
//!   message sent at SUBSCRIBE, or one of a channel unsubscribed before the replay reached
//!   it) goes again first, with its packet identifier and DUP (`resend.rs`). A SUBSCRIBE's
//!   retained message is told apart from the replay of its channel (`retained_apart.rs`).
//! - **Expiry**: a session's connection ending records when; it expires that long after.
//!   Expired sessions are deleted by a sweep once a minute (and one found expired at CONNECT
//!   is not resumed). At start, a server that is the store's only one (SQLite) counts the
//!   sessions whose connections a stopped server cut as disconnected from then. In a cluster
//!   each session stores the node holding its connection; a node found lost (bus-redis's
//!   `lost_nodes.rs`) has its sessions counted as disconnected since it was last seen alive,
//!   by the one node that claimed it (`Sessions::node_lost`), which also publishes their
//!   wills after what is left of their delay.
//! - **Between nodes**: nodes sharing a store share the sessions; on a cluster node
//!   ([`Sessions::join_cluster`]) a CONNECT takes the client identifier over from a
//!   connection on another node as from one on this node, so the session moves with its
//!   state stored (`crate::cluster`), the unacknowledged QoS 1 messages' packet identifiers
//!   with it.

mod connection;
mod flusher;
mod missed;
mod positions;
mod resend;
mod retained_apart;
pub mod store;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use herald_core::claims::ClusterClaims;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_edge::Edge;

pub(crate) use connection::PersistentSession;
use flusher::Flusher;
use store::{MqttSessionStore, SessionKey, SessionWrite, StoredSession, StoredWill};

use crate::inflight::Sent;
use crate::settings::MqttSettings;
use crate::sys::{Render, SysTree};
use crate::will::PendingWills;

/// How often expired sessions are deleted.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The MQTT listener's persistent sessions: the store, the writer that group-commits their
/// changes, and (in memory) the QoS 1 packet identifiers each ended connection left
/// unacknowledged (`Carried`).
pub struct Sessions {
    store: Arc<dyn MqttSessionStore>,
    flusher: Arc<Flusher>,
    /// `mqtt.max_session_expiry`, in milliseconds.
    max_expiry_ms: i64,
    unacked: Mutex<HashMap<SessionKey, Carried>>,
    /// The wills waiting for their delay (in memory, and stored with their sessions:
    /// `crate::will`).
    pub(crate) wills: Arc<PendingWills>,
    /// The listener's `$SYS/` tree ([`crate::sys`]), published once [`Sessions::start_sys`]
    /// gives it the metrics.
    pub(crate) sys: Arc<SysTree>,
    /// The cluster's claims of client identifiers, on a cluster node (`crate::cluster`).
    cluster: OnceLock<Arc<dyn ClusterClaims>>,
    /// The listener's settings, as [`Sessions::start`] was given them: a parked connection
    /// with the same settings takes them back from here on revival (`crate::wire::ParkedWire`)
    /// rather than keep a pointer of its own.
    pub(crate) settings: Arc<MqttSettings>,
}

/// What a persistent session's connection leaves in memory for the session's next connection
/// in this process.
#[derive(Default)]
pub(crate) struct Carried {
    /// The QoS 1 messages sent and not acknowledged.
    pub(crate) unacked: Vec<Sent>,
}

/// What CONNECT found and decided about a client's session.
pub(crate) struct Opened {
    /// CONNACK's Session Present.
    pub(crate) present: bool,
    /// The session the connection holds, if it outlives the connection (or resumes one).
    pub(crate) session: Option<Box<PersistentSession>>,
    /// The stored session resumed.
    pub(crate) resumed: Option<StoredSession>,
}

impl Sessions {
    /// The sessions kept in `store`, held to `settings.max_session_expiry`; starts the
    /// writer and the sweeper on the current runtime, which first sweep and, unless the store
    /// is `shared` with other nodes, count every session as disconnected from now (their
    /// connections ended with the last server).
    pub fn start(
        store: Arc<dyn MqttSessionStore>,
        settings: &MqttSettings,
        shared: bool,
    ) -> Arc<Sessions> {
        let flusher = Flusher::start(store.clone());
        let now = now_ms();
        if !shared {
            flusher.push(SessionWrite::AllDisconnected { at_ms: now });
        }
        flusher.push(SessionWrite::Sweep { now_ms: now });
        let sessions = Arc::new(Sessions {
            store: store.clone(),
            flusher,
            max_expiry_ms: i64::from(settings.max_session_expiry) * 1000,
            unacked: Mutex::new(HashMap::new()),
            wills: Arc::new(PendingWills::new(store.clone())),
            sys: Arc::new(SysTree::new(settings.sys_interval)),
            cluster: OnceLock::new(),
            settings: Arc::new(settings.clone()),
        });
        let weak = Arc::downgrade(&sessions);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(SWEEP_EVERY);
            every.tick().await;
            loop {
                every.tick().await;
                let Some(sessions) = weak.upgrade() else {
                    return;
                };
                sessions
                    .flusher
                    .push(SessionWrite::Sweep { now_ms: now_ms() });
            }
        });
        sessions
    }

    /// Starts, on the current runtime, the wait of every stored will of a session no
    /// connection holds (`crate::will`: left by connections a crash or a stop cut), once the
    /// writes [`Sessions::start`] queued committed; each is published through `edge` after
    /// what is left of its delay, unless its client comes back first. Call it once, before
    /// serving.
    pub fn recover_wills(self: &Arc<Self>, edge: Arc<Edge>) {
        let sessions = self.clone();
        tokio::spawn(async move {
            // After `AllDisconnected`: on one node every session is one no connection holds.
            if let Err(e) = sessions.flusher.write(Vec::new()).await {
                tracing::warn!(error = %e, "MQTT: the sessions could not be marked disconnected");
            }
            sessions.wills.recover(edge).await;
        });
    }

    /// Makes client identifiers the cluster's (a cluster node's bus offers `claims`,
    /// [`herald_core::bus::Bus::claims`]): a CONNECT takes its identifier over from a
    /// connection on any node, and this node is told when another node takes one of its own.
    /// Call it once, before serving; later calls are ignored.
    pub fn join_cluster(self: &Arc<Self>, claims: Arc<dyn ClusterClaims>) {
        claims.set_holder(Arc::new(crate::cluster::MqttClaims(Arc::downgrade(self))));
        let _ = self.cluster.set(claims);
    }

    /// The cluster's claims, on a cluster node.
    pub(crate) fn cluster(&self) -> Option<&Arc<dyn ClusterClaims>> {
        self.cluster.get()
    }

    /// Whether this node is fenced (`crate::cluster`): it takes no CONNECT until it is not.
    pub(crate) fn fenced(&self) -> bool {
        self.cluster.get().is_some_and(|claims| claims.fenced())
    }

    /// This node was fenced (`crate::cluster`): every MQTT connection of this listener (those
    /// on the server's keep-alive roster) ends with DISCONNECT 0x9C, its persistent session
    /// left as it is in the store. A connection not on the roster yet looks at the fence
    /// once it joins (`serve.rs`).
    pub(crate) fn fence_connections(&self) {
        let Some(edge) = self.wills.edge() else {
            return;
        };
        let mut ours = std::collections::HashSet::new();
        edge.keepalive.for_each(|outbox| {
            ours.insert(outbox as *const _ as usize);
        });
        let fenced =
            crate::takeover::fence_where(|outbox| ours.contains(&(outbox as *const _ as usize)));
        tracing::warn!(
            connections = fenced,
            "MQTT: this node is fenced; its connections end"
        );
    }

    /// This node's id in the cluster, stored with the sessions whose connections it holds;
    /// `None` on one node.
    fn node(&self) -> Option<u64> {
        self.cluster.get().map(|claims| claims.node())
    }

    /// Cluster node `node` was found lost, last seen alive at `at_ms`, and this node is the
    /// one told (`crate::cluster`): the sessions whose connections it held are counted as
    /// ended then (their expiry runs from then), and the stored wills of the sessions it held
    /// last wait here for what is left of their delay, each published unless its client
    /// comes back first (`crate::will`).
    pub(crate) async fn node_lost(&self, node: u64, at_ms: i64) {
        match self.store.end_mqtt_node(node, at_ms).await {
            Ok(wills) => {
                tracing::info!(
                    node = store::node_name(node),
                    wills = wills.len(),
                    "MQTT: the sessions of a lost cluster node are ended here"
                );
                self.wills.wait_all(wills);
            }
            Err(e) => tracing::warn!(
                node = store::node_name(node),
                error = %e,
                "MQTT: the sessions of a lost cluster node could not be ended"
            ),
        }
    }

    /// The listener's settings, one `Arc` for every connection of the listener (TCP and
    /// `/mqtt`), so a parked connection finds its own here by pointer.
    pub fn settings(&self) -> &Arc<MqttSettings> {
        &self.settings
    }

    /// Starts the `$SYS/` tree ([`crate::sys`]) on the current runtime: its values read from
    /// `render` (the process's metrics as Prometheus text) every `mqtt.sys_interval` seconds,
    /// none when that is 0. Call it once.
    pub fn start_sys(&self, render: Render) {
        self.sys.start(render);
    }

    /// The expiry interval a client asking for `requested` seconds (`u32::MAX`: never) is
    /// held to, in seconds.
    pub(crate) fn granted_expiry(&self, requested: u32) -> u32 {
        u32::try_from(self.max_expiry_ms / 1000)
            .unwrap_or(u32::MAX)
            .min(requested)
    }

    /// Opens the session of `client_id` in `app` for a CONNECT with `clean_start` asking for
    /// an expiry interval of `expiry_secs` (already held to the maximum) and leaving `will`
    /// (as stored, `crate::will::stored`): discards a stored one on Clean Start (or an expired
    /// one), resumes it otherwise, and starts a new one if it is to outlive the connection,
    /// its will stored with it. Written before it returns.
    pub(crate) async fn open(
        self: &Arc<Self>,
        app: &AppId,
        client_id: &str,
        clean_start: bool,
        expiry_secs: u32,
        will: Option<StoredWill>,
    ) -> Result<Opened, StoreError> {
        let key = SessionKey {
            app: app.clone(),
            client_id: client_id.to_owned(),
        };
        let expiry_ms = i64::from(expiry_secs) * 1000;
        // A will waiting for its delay: dropped if the session resumes, published now if it
        // ends.
        self.wills.connected(&key, clean_start).await;
        // The last connection of this client identifier stored its end (and, before it, its
        // positions) before it let the identifier go (`serve.rs`), so this reads it all.
        let stored = self.store.mqtt_session(app, client_id).await?;
        let had_row = stored.is_some();
        let will_write = will.map(|will| SessionWrite::Will {
            key: key.clone(),
            will,
        });
        let live = stored.filter(|s| !s.expired(now_ms()));
        let mut writes = Vec::new();
        let opened = match live {
            Some(stored) if !clean_start => {
                writes.push(SessionWrite::Resume {
                    key: key.clone(),
                    expiry_ms,
                    node: self.node(),
                });
                let carried = self.take_carried(&key);
                Opened {
                    present: true,
                    session: Some(Box::new(PersistentSession::new(
                        self.clone(),
                        key,
                        expiry_ms,
                        &stored,
                        carried,
                    ))),
                    resumed: Some(stored),
                }
            }
            _ => {
                self.take_carried(&key);
                // A stored row, expired or not, is replaced or deleted.
                if had_row {
                    writes.push(SessionWrite::Delete { key: key.clone() });
                }
                let session = (expiry_ms > 0).then(|| {
                    writes.push(SessionWrite::Start {
                        key: key.clone(),
                        expiry_ms,
                        node: self.node(),
                    });
                    Box::new(PersistentSession::fresh(self.clone(), key, expiry_ms))
                });
                Opened {
                    present: false,
                    session,
                    resumed: None,
                }
            }
        };
        if let (Some(will), Some(_)) = (will_write, &opened.session) {
            // Stored before the CONNACK: a crash from now on does not lose it.
            writes.push(will);
        }
        if !writes.is_empty() {
            self.flusher.write(writes).await?;
        }
        Ok(opened)
    }

    fn take_carried(&self, key: &SessionKey) -> Carried {
        self.unacked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key)
            .unwrap_or_default()
    }

    /// Keeps `carried` for the session's next connection in this process.
    fn keep_carried(&self, key: SessionKey, carried: Carried) {
        let mut kept = self.unacked.lock().unwrap_or_else(|e| e.into_inner());
        if carried.unacked.is_empty() {
            kept.remove(&key);
        } else {
            kept.insert(key, carried);
        }
    }
}

/// The time in Unix milliseconds.
fn now_ms() -> i64 {
    i64::try_from(crate::wire::now_ms()).unwrap_or(i64::MAX)
}
