//! Cluster-wide claims: a name of an app (an MQTT client identifier, `herald-mqtt`) held by one
//! node of the cluster at a time, and taken over by the node that claims it next. A bus that
//! spans nodes offers them ([`crate::bus::Bus::claims`]); on one node there is no other node to
//! take a name from, and the process's own table (herald-mqtt's `takeover.rs`) is the whole
//! story.
//!
//! A node claims a key with [`ClusterHold::claim`]. If another node held it, that node's
//! [`ClaimHolder`] is told ([`ClaimHolder::taken`]): it ends what it holds under the key (the
//! connection, a will waiting for its delay), stores what that leaves, and only then answers,
//! so the claimer reads the key's state as the holder left it. The claimer waits for that
//! answer for a bounded time (a holder that crashed never answers). Dropping the
//! [`ClusterHold`] lets the key go, unless another node claimed it meanwhile.
//!
//! A node that crashes holds its keys until they are claimed again; what it held beyond them
//! (sessions whose connections it had) is ended by one node alive, the one that claims the lost
//! node ([`ClaimHolder::node_lost`]).
//!
//! A node cut off from the bus while the others still reach it is **fenced** before they take
//! it for lost ([`ClaimHolder::fenced`], [`ClusterClaims::fenced`]): it lets go of what it
//! holds without ending it, so only the node that claims it ends it, once, and it takes no new
//! name until the bus answers again.

use std::sync::Arc;
use std::time::Duration;

use crate::tenant::AppId;

/// A name held in an app.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClaimKey {
    /// The app the name belongs to (names are per app).
    pub app: AppId,
    /// The name (an MQTT client identifier).
    pub name: String,
}

/// This node's side of its keys being claimed by another node (one per node, set with
/// [`ClusterClaims::set_holder`]).
#[async_trait::async_trait]
pub trait ClaimHolder: Send + Sync {
    /// Another node claimed `key`, which this node may hold: whatever this node holds under it
    /// is ended and stored, then this returns. `fresh`: the claimer starts afresh and
    /// discards what is left (MQTT's Clean Start), which the holder may act on (a waiting
    /// will is published rather than dropped).
    async fn taken(&self, key: &ClaimKey, fresh: bool);

    /// Node `node` of the cluster was found lost (its liveness lapsed; it was last seen alive
    /// at `last_seen_ms`, Unix ms), and this node claimed it: of the nodes alive, only this
    /// one is told, so what the lost node held (MQTT sessions and their wills) is this node's
    /// to end. Nothing by default.
    async fn node_lost(&self, node: u64, last_seen_ms: i64) {
        let _ = (node, last_seen_ms);
    }

    /// This node is fenced: it could not tell the cluster it is alive for long enough that the
    /// other nodes are about to take it for lost (a bound the bus states, safely below the
    /// one after which they do). What it holds under its keys is ended here without being
    /// ended for the cluster (MQTT: the connections closed, their sessions and wills left for
    /// the node that claims this one), and nothing new is taken until
    /// [`ClusterClaims::fenced`] says otherwise. Nothing by default.
    async fn fenced(&self) {}
}

/// The cluster's claims, as a networked bus keeps them ([`crate::bus::Bus::claims`]).
#[async_trait::async_trait]
pub trait ClusterClaims: Send + Sync {
    /// Sets the holder told when another node claims a key this node holds; the first one set
    /// stays.
    fn set_holder(&self, holder: Arc<dyn ClaimHolder>);

    /// This node's id in the cluster, as [`ClaimHolder::node_lost`] names a lost node (random
    /// at each start: a node that restarts is a new node, and its last life is found lost).
    fn node(&self) -> u64;

    /// Claims `key` for this node. If another node held it, tells that node's holder and
    /// returns once it answered it let the key go, or after `wait` without an answer (or the
    /// bus not reachable). Returns the claim's id, for [`ClusterClaims::release`].
    async fn claim(&self, key: &ClaimKey, fresh: bool, wait: Duration) -> u64;

    /// Lets `key` go if this node's claim `id` still holds it (not waited for).
    fn release(&self, key: &ClaimKey, id: u64);

    /// Whether this node is fenced now ([`ClaimHolder::fenced`]): cut off from the cluster
    /// for long enough that another node may take it for lost at any moment; it holds
    /// nothing new until it is not. Read without a round trip. `false` by default.
    fn fenced(&self) -> bool {
        false
    }
}

/// A key this node holds in the cluster; dropping it lets the key go.
pub struct ClusterHold {
    claims: Arc<dyn ClusterClaims>,
    key: ClaimKey,
    id: u64,
}

impl ClusterHold {
    /// Claims `key` through `claims` ([`ClusterClaims::claim`]) and holds it.
    pub async fn claim(
        claims: Arc<dyn ClusterClaims>,
        key: ClaimKey,
        fresh: bool,
        wait: Duration,
    ) -> ClusterHold {
        let id = claims.claim(&key, fresh, wait).await;
        ClusterHold { claims, key, id }
    }

    /// The key held.
    pub fn key(&self) -> &ClaimKey {
        &self.key
    }
}

impl Drop for ClusterHold {
    fn drop(&mut self) {
        self.claims.release(&self.key, self.id);
    }
}

impl std::fmt::Debug for ClusterHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterHold")
            .field("key", &self.key)
            .field("id", &self.id)
            .finish()
    }
}
