//! Client identifiers across the nodes of a cluster (issue 33, phase 3): on a cluster node
//! (a bus with [`herald_core::bus::Bus::claims`]), [`crate::session::Sessions::join_cluster`]
//! makes every connection's client identifier the cluster's claim too (`serve.rs` claims it
//! after this node's own table, `takeover.rs`), and this node the holder told when another
//! node claims one it holds ([`MqttClaims`]).
//!
//! Told of such a claim, this node does what a CONNECT here would: its connection holding the
//! identifier is taken over (DISCONNECT 0x8E, 3.1.1: closed) and its persistent session's end
//! stored; then the will the session left waiting for its delay, if any, is dropped (the
//! session resumes) or published (Clean Start ends it) [MQTT-3.1.3-9]. Only then does the
//! other node hear that the identifier is let go, read the session and send its CONNACK.
//!
//! Told that another node was lost (this node claimed it, so no other node is told), this node
//! ends that node's sessions and publishes their wills after what is left of their delay
//! ([`crate::session::Sessions::node_lost`]).
//!
//! Told that this node is fenced (the bus could not write its heartbeat for a bound safely
//! below the one after which another node claims it: bus-redis's `fence.rs`), this node
//! closes every MQTT connection of its listener (v5 DISCONNECT 0x9C Use another server, 3.1.1:
//! closed) without ending its persistent session or publishing its stored will: the node that
//! claims this one does both, once ([`crate::session::Sessions::node_lost`]), and the client
//! resumes the session on another node. 0x9C rather than 0x8B Server shutting down: the node
//! does not stop, it cannot serve for now, and the client should connect elsewhere (MQTT 5.0
//! 4.11, Server redirection). A will that is not stored (a session that ends with its
//! connection, which no other node knows of) is published here, as any connection's end
//! would. Until the bus writes the heartbeat again, a CONNECT is refused with CONNACK 0x88
//! Server unavailable (3.1.1: return code 3), and a connection that was being accepted when
//! the fence came is closed once it joins the roster (`serve.rs`). The fenced node, once it
//! reaches Redis again, ends the sessions it let go itself if no other node claimed it
//! (bus-redis's `fence::heal`) before it takes CONNECTs again.
//!
//! On one node nothing here runs: no claim leaves the process.

use std::sync::Weak;
use std::time::Duration;

use herald_core::claims::{ClaimHolder, ClaimKey};

use crate::session::store::SessionKey;
use crate::session::Sessions;

/// How long a connection that takes a client identifier over waits for the one holding it
/// (on this node or another) to let it go, its persistent session's end stored.
pub(crate) const TAKEOVER_WAIT: Duration = Duration::from_secs(5);

/// This node's MQTT sessions as the holder of their client identifiers in the cluster.
pub(crate) struct MqttClaims(pub(crate) Weak<Sessions>);

#[async_trait::async_trait]
impl ClaimHolder for MqttClaims {
    async fn taken(&self, key: &ClaimKey, fresh: bool) {
        if let Some(released) = crate::takeover::take_for_another_node(&key.app, &key.name) {
            let _ = tokio::time::timeout(TAKEOVER_WAIT, released.wait()).await;
        }
        let Some(sessions) = self.0.upgrade() else {
            return;
        };
        let session = SessionKey {
            app: key.app.clone(),
            client_id: key.name.clone(),
        };
        sessions.wills.connected(&session, fresh).await;
    }

    async fn node_lost(&self, node: u64, last_seen_ms: i64) {
        if let Some(sessions) = self.0.upgrade() {
            sessions.node_lost(node, last_seen_ms).await;
        }
    }

    async fn fenced(&self) {
        if let Some(sessions) = self.0.upgrade() {
            sessions.fence_connections();
        }
    }
}
