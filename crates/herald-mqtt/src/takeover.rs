//! One connection per client identifier: a CONNECT with the identifier of a client already
//! connected (in the same app, on this node) takes over, and the existing connection is sent
//! DISCONNECT 0x8E Session taken over and closed [MQTT-3.1.4-3]. Phase 1 only; across the
//! nodes of a cluster this is phase 3 (sessions moving between nodes).
//!
//! The claims live in a process-wide table, sharded by the identifier's hash so connects do not
//! queue on one lock. A claim ([`Claim`]) is held by its connection and released when it is
//! dropped; a takeover marks the old claim taken and wakes the old connection through its
//! outbox (a keep-alive ping request, which MQTT connections otherwise ignore), whose next batch
//! ends it ([`Claim::is_taken`]).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use herald_core::outbox::Outbox;
use herald_core::tenant::AppId;

/// How many shards the table has.
const SHARDS: usize = 16;

type Key = (AppId, Box<str>);

/// One connected client identifier.
struct Holder {
    generation: u64,
    taken: Arc<AtomicBool>,
    outbox: Weak<Outbox>,
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
}

impl Claim {
    /// Claims `client_id` in `app` for the connection writing to `outbox`, taking it over from
    /// a connection that held it.
    pub(crate) fn take(app: &AppId, client_id: &str, outbox: &Arc<Outbox>) -> Claim {
        let key: Key = (app.clone(), client_id.into());
        let generation = TABLE.generations.fetch_add(1, Ordering::Relaxed);
        let taken = Arc::new(AtomicBool::new(false));
        let holder = Holder {
            generation,
            taken: taken.clone(),
            outbox: Arc::downgrade(outbox),
        };
        let previous = shard(&key)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), holder);
        if let Some(previous) = previous {
            previous.taken.store(true, Ordering::Release);
            if let Some(outbox) = previous.outbox.upgrade() {
                outbox.request_ping();
            }
        }
        Claim {
            key,
            generation,
            taken,
        }
    }

    /// Whether another connection took the client identifier over.
    pub(crate) fn is_taken(&self) -> bool {
        self.taken.load(Ordering::Acquire)
    }
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
    use super::*;

    #[test]
    fn a_second_claim_takes_over_and_wakes_the_first_connection() {
        let app = AppId::default_app();
        let (first_box, second_box) = (Outbox::new(1024), Outbox::new(1024));
        let first = Claim::take(&app, "takeover-test", &first_box);
        assert!(!first.is_taken());
        let second = Claim::take(&app, "takeover-test", &second_box);
        assert!(first.is_taken(), "taken over");
        assert!(!second.is_taken());
        let waker = std::task::Waker::noop();
        assert!(
            first_box.take_lone_ping(waker),
            "the first connection was woken"
        );
        // The first connection leaving does not release the second's claim.
        drop(first);
        let third_box = Outbox::new(1024);
        let third = Claim::take(&app, "takeover-test", &third_box);
        assert!(second.is_taken());
        drop(second);
        drop(third);
        let other = AppId::parse("other-app").unwrap();
        let elsewhere = Claim::take(&other, "takeover-test", &first_box);
        assert!(!elsewhere.is_taken(), "client ids are per app");
    }
}
