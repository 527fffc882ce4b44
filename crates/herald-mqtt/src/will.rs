//! Will messages (MQTT 5.0 3.1.2.5 and 3.1.3.2, 3.1.1 3.1.2.5): the message a CONNECT leaves
//! with the server, published when the connection closes without a DISCONNECT that discards
//! it.
//!
//! - **When** ([`published_after`]): a connection that ends any way other than the client's
//!   DISCONNECT 0x00 publishes its will [MQTT-3.1.2-8]: the socket closed or failed, keep-alive
//!   timeout, a protocol error or malformed packet, a slow consumer cut off, a takeover by a
//!   connection with the same client identifier, the server shutting down, and a v5 DISCONNECT
//!   with any other reason code (0x04 Disconnect with Will Message among them). A DISCONNECT
//!   0x00 (every 3.1.1 DISCONNECT) discards it [MQTT-3.1.2-10]. A connection closed because
//!   its credential ended (expired or revoked token, a deleted app) publishes none: the will
//!   is published with the permissions checked at CONNECT, which no longer hold.
//! - **Will Delay Interval** ([`PendingWills`]): a will with a delay, of a session that
//!   outlives its connection, waits for the delay or the session's expiry, whichever comes
//!   first [MQTT-3.1.3-9]; a CONNECT with the same client identifier meanwhile either resumes
//!   the session (Clean Start 0: the will is dropped, never published) or ends it (Clean
//!   Start 1: the will is published then, before the new CONNACK). A will without a delay,
//!   or of a session that ends with its connection, is published at once, before the client
//!   identifier is let go (so a connection that takes it over finds the will stored).
//! - **In a cluster**: a CONNECT on another node reaches the will waiting here too. The
//!   session's client identifier stays claimed in the cluster by this node while its will
//!   waits ([`PendingWills::hold_while_waiting`]), so the other node's claim is a takeover
//!   this node is told of (`cluster.rs`), which deals with the will as a CONNECT here would
//!   (dropped, or published on Clean Start) before the other node's CONNACK.
//! - **Durable** (`stored.rs`): the will of a persistent session's connection is stored with
//!   the session ([`crate::session::store::StoredWill`]) in the batch that opens the session,
//!   before the CONNACK, and discarded with a DISCONNECT 0x00 (or an ended credential). A will
//!   is published only by whoever takes it from the store ([`PendingWills::publish_once`]: one
//!   atomic `DELETE .. RETURNING`), so a waiting will is published once across a cluster's
//!   nodes and never after a new connection of its session took (dropped) it. A crash loses
//!   nothing: a node starting ([`PendingWills::recover`]) waits out what is left of the delay
//!   of every stored will of a session no connection holds (on one node: every session, the
//!   crash cut them; on nodes sharing a store: those whose end was stored, their node crashed
//!   while the will waited) and publishes it unless its client came back first. In a cluster,
//!   the one node that claims a crashed node (`crate::cluster`) does the same with the wills
//!   of the sessions the crashed node held, counted from when it was last seen alive
//!   ([`PendingWills::wait_all`]).
//! - **Shutdown**: a server shutting down publishes every will still waiting, those of the
//!   connections it closes included, before its store closes (a delay cannot be honoured by a
//!   server that is gone, and a will never published is the larger breach of [MQTT-3.1.2-8];
//!   a client that reconnects within the delay after a restart will have had its will
//!   published).
//! - **How**: as a normal publish ([`publish`]) through the publisher every transport uses, so it
//!   reaches WebSocket, SSE, long-poll, Pusher and MQTT subscribers with the next seq: its QoS
//!   and RETAIN as set in CONNECT, its v5 properties in the `$mqtt` envelope (its Message Expiry
//!   Interval counted from when it is published), its key saying the client and QoS
//!   ([`crate::origin`]).

mod stored;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use herald_core::claims::ClusterHold;
use herald_core::outbox::CloseReason;
use herald_core::tenant::AppId;
use herald_edge::driver::Ended;
use herald_edge::Edge;
use tokio::sync::oneshot;

use crate::packet::{PayloadFormat, ProtocolVersion, Will};
use crate::payload::{self, MessageProps};
use crate::session::store::{MqttSessionStore, SessionKey};
use crate::wire::{now_ms, End, MqttWire};

pub(crate) use stored::stored;

/// A will due to be published: what it is, whose, and where.
pub(crate) struct DueWill {
    pub(crate) edge: Arc<Edge>,
    pub(crate) app: AppId,
    pub(crate) client_id: Box<str>,
    pub(crate) version: ProtocolVersion,
    /// Its idempotency key ([`crate::origin::key`]).
    pub(crate) key: String,
    pub(crate) will: Will,
}

impl MqttWire {
    /// The connection's will, if how it ended calls for it (taken: asked once).
    pub(crate) fn due_will(&mut self) -> Option<DueWill> {
        let will = self.will.take()?;
        if !self.will_due {
            return None;
        }
        // None after a revocation, like every publish of the connection.
        let app = self.session.client().ok()?.app.clone();
        let key = crate::origin::key(self.claim.client_id(), will.qos, self.qos2.next_n());
        Some(DueWill {
            edge: self.session.edge().clone(),
            app,
            client_id: self.claim.client_id().into(),
            version: self.version,
            key,
            will: *will,
        })
    }
}

/// Whether a connection that ended as `ended` publishes its will.
pub(crate) fn published_after(ended: &Ended<End>) -> bool {
    match ended {
        Ended::Wire(End::ClientDisconnected(code)) => code.value() != 0x00,
        Ended::Wire(End::Closed(reason)) => !matches!(
            reason,
            CloseReason::TokenExpired
                | CloseReason::Revoked
                | CloseReason::AppDeleted
                | CloseReason::SecretChanged
                | CloseReason::DeviceRevoked
        ),
        // Fenced: due, but a persistent session's stored will is the claiming node's to
        // publish (`session/connection.rs`).
        Ended::Wire(End::Disconnect(..) | End::Fenced) | Ended::Cut(_) | Ended::Gone => true,
    }
}

/// Publishes `due` now; a failure (the topic's channel gone over a limit, the store down) is
/// logged: nobody is left to tell.
pub(crate) async fn publish(due: DueWill) {
    let DueWill {
        edge,
        app,
        client_id,
        version,
        key,
        will,
    } = due;
    let channel = match crate::topic_map::topic_to_channel(&app, will.topic.as_str()) {
        Ok(channel) => channel,
        Err(e) => {
            tracing::debug!(client_id = &*client_id, error = %e.reason, "MQTT will not published");
            return;
        }
    };
    let (data, retain) = data_of(&will, version);
    let publisher = &edge.publisher;
    // Will Retain 1: the topic's retained message, as a PUBLISH's [MQTT-3.1.2-17].
    let stored = match publisher.message_retaining(&app, Some(key), &data, retain) {
        Ok(message) => publisher.publish(&app, &channel, vec![message]).await,
        Err(e) => Err(e),
    };
    match stored {
        Ok(_) => tracing::debug!(client_id = &*client_id, "MQTT will published"),
        Err(e) => tracing::warn!(
            client_id = &*client_id,
            error = %e.message,
            "MQTT: a will could not be published"
        ),
    }
}

/// The will's message data, as a PUBLISH with its payload, RETAIN and properties would be
/// stored, and what it does to the topic's retained message; its expiry counts from now.
fn data_of(will: &Will, version: ProtocolVersion) -> (bytes::Bytes, herald_core::Retain) {
    let props = &will.properties;
    let message_props = MessageProps {
        content_type: props.content_type.clone(),
        payload_format: match version {
            ProtocolVersion::V5 if props.payload_format == PayloadFormat::Utf8 => {
                Some(payload::PayloadFormat::Utf8)
            }
            _ => None,
        },
        expiry_at_ms: props
            .message_expiry_interval
            .map(|secs| now_ms() + u64::from(secs) * 1000),
        response_topic: props.response_topic.as_ref().map(|t| t.as_str().to_owned()),
        correlation_data: props.correlation_data.clone(),
        user_properties: props.user_properties.clone(),
    };
    (
        payload::to_data(&will.payload, will.retain, &message_props),
        payload::retain_of(&will.payload, will.retain, &message_props),
    )
}

/// The wills waiting for their delay, per session (app and client identifier), in this
/// process. Each has a task in the edge's connection tracker (so shutdown waits for it) that
/// publishes it when its time comes or the server shuts down, unless a new connection of the
/// session took it first (here, or from the store on another node).
pub(crate) struct PendingWills {
    waiting: Mutex<HashMap<SessionKey, Waiting>>,
    generations: AtomicU64,
    /// Where the sessions' wills are stored (`stored.rs`).
    store: Arc<dyn MqttSessionStore>,
    /// The server's transports, to publish a will taken from the store (set by
    /// [`PendingWills::recover`]).
    edge: OnceLock<Arc<Edge>>,
}

struct Waiting {
    generation: u64,
    due: DueWill,
    /// On a cluster node, the session's client identifier held in the cluster while the will
    /// waits (so a CONNECT on another node is told here); let go with the entry.
    cluster: Option<ClusterHold>,
    /// Dropped with the entry: wakes the task, which then finds it gone.
    _wake: oneshot::Sender<()>,
}

impl PendingWills {
    /// No will waiting yet; the sessions' wills are stored in `store`.
    pub(crate) fn new(store: Arc<dyn MqttSessionStore>) -> PendingWills {
        PendingWills {
            waiting: Mutex::default(),
            generations: AtomicU64::new(0),
            store,
            edge: OnceLock::new(),
        }
    }

    /// Keeps `due` for the session `key` until `wait` passed (or shutdown), then publishes it
    /// if it can still take it from the store ([`PendingWills::publish_once`]).
    pub(crate) fn wait(self: &Arc<Self>, key: SessionKey, due: DueWill, wait: Duration) {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let edge = due.edge.clone();
        let (wake, woken) = oneshot::channel();
        let waiting = Waiting {
            generation,
            due,
            cluster: None,
            _wake: wake,
        };
        // A will left by an earlier connection of the session and still waiting is replaced
        // (its connection ended first; this one is the session's will now).
        self.lock().insert(key.clone(), waiting);
        let wills = self.clone();
        let shutdown = edge.shutdown.clone();
        edge.connections.spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.cancelled() => {}
                _ = woken => return,
            }
            let due = {
                let mut waiting = wills.lock();
                match waiting.get(&key) {
                    Some(w) if w.generation == generation => waiting.remove(&key),
                    _ => None,
                }
            };
            if let Some(w) = due {
                wills.publish_once(&key, w.due).await;
            }
        });
    }

    /// Publishes `due`, the will of the persistent session `key`, if this takes it from the
    /// store: not when another node, or a new connection of the session, took it first. A
    /// store that cannot answer does not keep it back (a will never published is the larger
    /// breach).
    pub(crate) async fn publish_once(&self, key: &SessionKey, due: DueWill) {
        match self.store.take_mqtt_will(key).await {
            Ok(Some(_)) => publish(due).await,
            Ok(None) => tracing::debug!(
                client_id = key.client_id.as_str(),
                "MQTT will taken elsewhere; not published here"
            ),
            Err(e) => {
                tracing::warn!(
                    client_id = key.client_id.as_str(),
                    error = %e,
                    "MQTT: a will could not be taken from the store; published"
                );
                publish(due).await;
            }
        }
    }

    /// A CONNECT for the session `key`: its waiting will, if any (here or in the store, left
    /// by a connection a crash cut), is dropped when the session resumes (`clean_start`
    /// false) [MQTT-3.1.3-9], published now when it ends. Either way it is taken from the
    /// store, so no other node publishes it.
    pub(crate) async fn connected(&self, key: &SessionKey, clean_start: bool) {
        let waiting = self.lock().remove(key);
        let taken = self.store.take_mqtt_will(key).await;
        if !clean_start {
            return;
        }
        let due = match (waiting, taken) {
            // Another node (or a connection on it) took it first.
            (Some(_), Ok(None)) => None,
            (Some(waiting), _) => Some(waiting.due),
            (None, Ok(Some(will))) => self.edge.get().and_then(|edge| {
                stored::due_from(edge, &key.app, &key.client_id, &will.will, now_ms())
            }),
            (None, _) => None,
        };
        if let Some(due) = due {
            publish(due).await;
        }
    }

    /// The server's transports, once [`PendingWills::recover`] gave them.
    pub(crate) fn edge(&self) -> Option<&Arc<Edge>> {
        self.edge.get()
    }

    /// Keeps `hold` (the client identifier held in the cluster by a connection that just
    /// ended) with the will of its session, if one waits; drops it (letting the identifier
    /// go) otherwise.
    pub(crate) fn hold_while_waiting(&self, hold: ClusterHold) {
        let key = SessionKey {
            app: hold.key().app.clone(),
            client_id: hold.key().name.clone(),
        };
        let mut waiting = self.lock();
        if let Some(w) = waiting.get_mut(&key) {
            // One replaced (a will's earlier hold) is let go here; the newer claim stays.
            w.cluster = Some(hold);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionKey, Waiting>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::ReasonCode;

    #[test]
    fn only_a_normal_disconnect_and_an_ended_credential_keep_the_will() {
        let client = |code| Ended::Wire(End::ClientDisconnected(code));
        assert!(!published_after(&client(ReasonCode::NormalDisconnection)));
        assert!(!published_after(&client(ReasonCode::Success)));
        assert!(published_after(&client(
            ReasonCode::DisconnectWithWillMessage
        )));
        assert!(published_after(&client(ReasonCode::UnspecifiedError)));
        assert!(published_after(&Ended::Gone));
        assert!(published_after(&Ended::Cut(Vec::new())));
        let why = "x".into();
        assert!(published_after(&Ended::Wire(End::Disconnect(
            ReasonCode::KeepAliveTimeout,
            why
        ))));
        assert!(published_after(&Ended::Wire(End::Closed(
            CloseReason::Shutdown
        ))));
        assert!(!published_after(&Ended::Wire(End::Closed(
            CloseReason::Revoked
        ))));
    }
}
