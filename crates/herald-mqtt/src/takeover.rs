//! One connection per client identifier: a CONNECT with the identifier of a client already
//! connected (in the same app) takes over, and the existing connection is sent DISCONNECT
//! 0x8E Session taken over and closed [MQTT-3.1.4-3]; in a cluster also when it is connected
//! to another node (`cluster.rs`: the claim is the cluster's too, and the node holding it
//! takes it back from its connection with [`take_for_another_node`]).
//!
//! The claims live in a process-wide table, sharded by the identifier's hash so connects do not
//! queue on one lock. A claim ([`Claim`]) is held by its connection and released when it is
//! dropped; a takeover marks the old claim taken and wakes the old connection through its
//! outbox (a keep-alive ping request, which MQTT connections otherwise ignore), whose next batch
//! ends it ([`Claim::is_taken`]). The taker gets a [`Released`] that resolves once the old
//! claim is dropped, which its connection does only after its persistent session's end was
//! stored, so the taker reads the session as the old connection left it. On a cluster node a
//! claim also holds the identifier in the cluster ([`Claim::hold_in_cluster`]); the hold is let
//! go with the claim, or kept with a will waiting for its delay (`will.rs`).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use herald_core::claims::ClusterHold;
use herald_core::outbox::Outbox;
use herald_core::tenant::AppId;
use tokio::sync::oneshot;

/// How many shards the table has.
const SHARDS: usize = 16;

type Key = (AppId, Box<str>);

/// One connected client identifier.
struct Holder {
    generation: u64,
    taken: Arc<AtomicBool>,
    outbox: Weak<Outbox>,
    /// Resolves when the holder's claim is dropped.
    released: oneshot::Receiver<()>,
}

/// Resolves once the connection a claim took the client identifier from has let it go (its
/// [`Claim`] dropped).
pub(crate) struct Released(oneshot::Receiver<()>);

impl Released {
    /// Waits for it.
    pub(crate) async fn wait(self) {
        // The sender is never sent on: its drop is the release.
        let _ = self.0.await;
    }
}

struct Table {
    hasher: RandomState,
    shards: [Mutex<HashMap<Key, Holder>>; SHARDS],
    generations: AtomicU64,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| Table {
    hasher: RandomState::new(),
    shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
    generations: AtomicU64::new(1),
});

fn shard(key: &Key) -> &'static Mutex<HashMap<Key, Holder>> {
    let at = TABLE.hasher.hash_one(key) as usize % SHARDS;
    &TABLE.shards[at]
}

/// A connection's hold on its client identifier.
pub(crate) struct Claim {
    key: Key,
    generation: u64,
    taken: Arc<AtomicBool>,
    /// The identifier held in the cluster, on a cluster node: let go with the claim (only if
    /// no other claim replaced it there), unless a waiting will took it.
    cluster: Option<ClusterHold>,
    /// Dropped with the claim: tells a taker it was released.
    _release: oneshot::Sender<()>,
}

impl Claim {
    /// Claims `client_id` in `app` for the connection writing to `outbox`, taking it over from
    /// a connection that held it (whose release is returned, to wait for).
    pub(crate) fn take(
        app: &AppId,
        client_id: &str,
        outbox: &Arc<Outbox>,
    ) -> (Claim, Option<Released>) {
        let key: Key = (app.clone(), client_id.into());
        let generation = TABLE.generations.fetch_add(1, Ordering::Relaxed);
        let taken = Arc::new(AtomicBool::new(false));
        let (release, released) = oneshot::channel();
        let holder = Holder {
            generation,
            taken: taken.clone(),
            outbox: Arc::downgrade(outbox),
            released,
        };
        let previous = shard(&key)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), holder);
        let released = previous.map(|previous| {
            previous.taken.store(true, Ordering::Release);
            if let Some(outbox) = previous.outbox.upgrade() {
                outbox.request_ping();
            }
            Released(previous.released)
        });
        let claim = Claim {
            key,
            generation,
            taken,
            cluster: None,
            _release: release,
        };
        (claim, released)
    }

    /// The client identifier held (a parked connection keeps it only here).
    pub(crate) fn client_id(&self) -> &str {
        &self.key.1
    }

    /// Whether another connection took the client identifier over.
    pub(crate) fn is_taken(&self) -> bool {
        self.taken.load(Ordering::Acquire)
    }

    /// Holds the client identifier in the cluster too, for as long as this claim (or the
    /// will it leaves waiting, [`Claim::take_cluster_hold`]).
    pub(crate) fn hold_in_cluster(&mut self, hold: ClusterHold) {
        self.cluster = Some(hold);
    }

    /// The claim's hold in the cluster, taken out (by a will waiting for its delay, which keeps
    /// the identifier the cluster's until it is published or dropped).
    pub(crate) fn take_cluster_hold(&mut self) -> Option<ClusterHold> {
        self.cluster.take()
    }
}

/// Another node claimed `client_id` in `app`: the connection of this node holding it, if any,
/// is taken over (marked taken and woken, as by a local [`Claim::take`], and its entry
/// removed, so it lets nothing go that is no longer its); its release is returned, to wait for.
pub(crate) fn take_for_another_node(app: &AppId, client_id: &str) -> Option<Released> {
    let key: Key = (app.clone(), client_id.into());
    let previous = shard(&key)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&key)?;
    previous.taken.store(true, Ordering::Release);
    if let Some(outbox) = previous.outbox.upgrade() {
        outbox.request_ping();
    }
    Some(Released(previous.released))
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut shard = shard(&self.key).lock().unwrap_or_else(|e| e.into_inner());
        if shard
            .get(&self.key)
            .is_some_and(|h| h.generation == self.generation)
        {
            shard.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use super::*;

    #[test]
    fn a_second_claim_takes_over_and_wakes_the_first_connection() {
        let app = AppId::default_app();
        let (first_box, second_box) = (Outbox::new(1024), Outbox::new(1024));
        let (first, none) = Claim::take(&app, "takeover-test", &first_box);
        assert!(!first.is_taken() && none.is_none());
        let (second, released) = Claim::take(&app, "takeover-test", &second_box);
        let mut released = Box::pin(released.expect("taken from the first").wait());
        assert!(first.is_taken(), "taken over");
        assert!(!second.is_taken());
        let waker = std::task::Waker::noop();
        assert!(
            first_box.take_lone_ping(waker),
            "the first connection was woken"
        );
        let mut cx = std::task::Context::from_waker(waker);
        assert!(
            released.as_mut().poll(&mut cx).is_pending(),
            "the first still holds it"
        );
        // The first connection leaving does not release the second's claim.
        drop(first);
        assert!(released.as_mut().poll(&mut cx).is_ready(), "released");
        let third_box = Outbox::new(1024);
        let (third, _) = Claim::take(&app, "takeover-test", &third_box);
        assert!(second.is_taken());
        drop(second);
        drop(third);
        let other = AppId::parse("other-app").unwrap();
        let (elsewhere, _) = Claim::take(&other, "takeover-test", &first_box);
        assert!(!elsewhere.is_taken(), "client ids are per app");
    }

    #[test]
    fn another_node_takes_the_connection_over_and_waits_for_its_release() {
        let app = AppId::parse("cluster-app").unwrap();
        assert!(
            take_for_another_node(&app, "remote-test").is_none(),
            "not held"
        );
        let outbox = Outbox::new(1024);
        let (held, _) = Claim::take(&app, "remote-test", &outbox);
        let mut released = Box::pin(
            take_for_another_node(&app, "remote-test")
                .expect("held here")
                .wait(),
        );
        assert!(held.is_taken());
        let waker = std::task::Waker::noop();
        assert!(outbox.take_lone_ping(waker), "the connection was woken");
        let mut cx = std::task::Context::from_waker(waker);
        assert!(released.as_mut().poll(&mut cx).is_pending());
        // A new claim on this node meanwhile is not taken by the old one's drop.
        let (again, previous) = Claim::take(&app, "remote-test", &outbox);
        assert!(previous.is_none(), "the entry went to the other node");
        drop(held);
        assert!(released.as_mut().poll(&mut cx).is_ready());
        assert!(take_for_another_node(&app, "remote-test").is_some());
        assert!(again.is_taken());
    }
}
