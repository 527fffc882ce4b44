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
}
