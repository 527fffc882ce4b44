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
//!
//! A claim is held from CONNECT to the connection's end, parked or not, so the claims also
//! keep `herald_connections{transport="mqtt"}`.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use hashbrown::HashTable;
use herald_core::claims::ClusterHold;
use herald_core::outbox::Outbox;
use herald_core::telemetry::telemetry;
use herald_core::tenant::AppId;
use tokio::sync::Notify;

/// How many shards the table has.
const SHARDS: usize = 16;

/// How many bytes of the app's id and the client identifier a holder keeps inline: an app id
/// of up to 8 bytes (`default` is 7) and the 23 bytes every MQTT 3.1.1 server must accept for
/// a client identifier [MQTT-3.1.3-5]. Longer keys are boxed.
const INLINE_KEY: usize = 31;

/// The app's id and then the client identifier.
enum Key {
    /// Most keys: in the holder itself (its length is [`Holder::key_len`]).
    Inline([u8; INLINE_KEY]),
    /// A key longer than [`INLINE_KEY`].
    Boxed(Box<str>),
}

/// One connected client identifier: the table's entry and its connection's [`Claim`] share
/// it, one 64-byte allocation per connection with the key inline.
struct Holder {
    /// The app's id and then the client identifier (the app's id was an `AppId` of its own
    /// and the key a `Box<str>` of its own: two allocations more).
    key: Key,
    /// The inline key's length.
    key_len: u8,
    /// Where the client identifier starts in `key` (app ids are at most 32 bytes).
    app_len: u8,
    /// Another connection took the identifier over, or the node was fenced (`fenced`).
    taken: AtomicBool,
    /// The node was fenced (`crate::cluster`): the connection ends without ending its
    /// session here.
    fenced: AtomicBool,
    /// The claim was dropped (its connection let the identifier go); its shard's `released`
    /// wakes a taker waiting for it.
    released: AtomicBool,
    /// The claim holds the identifier in the cluster too: its hold is in [`CLUSTER_HOLDS`].
    clustered: AtomicBool,
    outbox: Weak<Outbox>,
}

impl Holder {
    fn new(app: &AppId, client_id: &str, outbox: &Arc<Outbox>) -> Holder {
        let app = app.as_str();
        let len = app.len() + client_id.len();
        let (key, key_len) = match u8::try_from(len) {
            Ok(key_len) if len <= INLINE_KEY => {
                let mut inline = [0; INLINE_KEY];
                inline[..app.len()].copy_from_slice(app.as_bytes());
                inline[app.len()..len].copy_from_slice(client_id.as_bytes());
                (Key::Inline(inline), key_len)
            }
            _ => (Key::Boxed([app, client_id].concat().into_boxed_str()), 0),
        };
        Holder {
            key,
            key_len,
            // App ids are at most 32 bytes (`AppId::parse`).
            app_len: u8::try_from(app.len()).unwrap_or(u8::MAX),
            taken: AtomicBool::new(false),
            fenced: AtomicBool::new(false),
            released: AtomicBool::new(false),
            clustered: AtomicBool::new(false),
            outbox: Arc::downgrade(outbox),
        }
    }

    /// The app's id and then the client identifier.
    fn key(&self) -> &str {
        match &self.key {
            // Two `str`s copied whole: always UTF-8, so the fallback is not reached.
            Key::Inline(inline) => {
                std::str::from_utf8(&inline[..usize::from(self.key_len)]).unwrap_or_default()
            }
            Key::Boxed(key) => key,
        }
    }

    /// The app's id and the client identifier.
    fn parts(&self) -> (&str, &str) {
        let key = self.key();
        key.split_at_checked(usize::from(self.app_len))
            .unwrap_or((key, ""))
    }

    fn hash(&self) -> u64 {
        let (app, client_id) = self.parts();
        TABLE.hasher.hash_one((app, client_id))
    }

    fn is(&self, app: &AppId, client_id: &str) -> bool {
        self.parts() == (app.as_str(), client_id)
    }

    /// Marks it taken and wakes its connection (a keep-alive ping request, which MQTT
    /// connections otherwise ignore).
    fn take_over(&self) {
        self.taken.store(true, Ordering::Release);
        if let Some(outbox) = self.outbox.upgrade() {
            outbox.request_ping();
        }
    }

    /// Marks it fenced (and taken, so every path that ends a taken connection ends it) and
    /// wakes its connection.
    fn fence(&self) {
        self.fenced.store(true, Ordering::Release);
        self.take_over();
    }
}

/// Resolves once the connection a claim took the client identifier from has let it go (its
/// [`Claim`] dropped).
pub(crate) struct Released(Arc<Holder>);

impl Released {
    /// Waits for it.
    pub(crate) async fn wait(self) {
        loop {
            let mut notified = pin!(TABLE.released[shard_of(self.0.hash())].notified());
            // Registered before the flag is read, so a release in between still wakes it.
            notified.as_mut().enable();
            if self.0.released.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

type Shard = Mutex<HashTable<Arc<Holder>>>;

struct Table {
    hasher: RandomState,
    shards: [Shard; SHARDS],
    /// Wakes the takers waiting for a claim of the shard to be released (each looks at its
    /// own): takeovers are rare, so one per shard rather than one per connection.
    released: [Notify; SHARDS],
}

static TABLE: LazyLock<Table> = LazyLock::new(|| Table {
    hasher: RandomState::new(),
    shards: std::array::from_fn(|_| Mutex::new(HashTable::new())),
    released: std::array::from_fn(|_| Notify::new()),
});

fn hash(app: &AppId, client_id: &str) -> u64 {
    TABLE.hasher.hash_one((app.as_str(), client_id))
}

fn shard_of(hash: u64) -> usize {
    // Bits the shard's table uses for neither its buckets (the low ones) nor its tags (the
    // top seven).
    (hash >> 40) as usize % SHARDS
}

fn shard(hash: u64) -> std::sync::MutexGuard<'static, HashTable<Arc<Holder>>> {
    TABLE.shards[shard_of(hash)]
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The claims' holds in the cluster, on a cluster node, by their holder's address (unique while
/// the claim holds the holder, and a claim takes its hold out before it lets the holder go).
/// Kept apart from the claim, so a claim is one pointer (a parked MQTT connection's record
/// keeps one; it was two words with the hold's `Option<Box<_>>`); on a single node the table
/// stays empty and is never locked ([`Holder::clustered`] says whether to look).
static CLUSTER_HOLDS: LazyLock<Mutex<HashMap<usize, ClusterHold>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// A connection's hold on its client identifier: one pointer. On a cluster node the identifier
/// is held in the cluster too (`CLUSTER_HOLDS`), let go with the claim (only if no other claim
/// replaced it there) unless a waiting will took it.
pub(crate) struct Claim {
    holder: Arc<Holder>,
}

impl Claim {
    /// Claims `client_id` in `app` for the connection writing to `outbox`, taking it over from
    /// a connection that held it (whose release is returned, to wait for).
    pub(crate) fn take(
        app: &AppId,
        client_id: &str,
        outbox: &Arc<Outbox>,
    ) -> (Claim, Option<Released>) {
        let holder = Arc::new(Holder::new(app, client_id, outbox));
        let hash = hash(app, client_id);
        let previous = {
            let mut shard = shard(hash);
            match shard.find_mut(hash, |h| h.is(app, client_id)) {
                Some(held) => Some(std::mem::replace(held, holder.clone())),
                None => {
                    shard.insert_unique(hash, holder.clone(), |h| h.hash());
                    None
                }
            }
        };
        let released = previous.map(|previous| {
            previous.take_over();
            Released(previous)
        });
        telemetry().connections_mqtt.increment(1.0);
        let claim = Claim { holder };
        (claim, released)
    }

    /// The client identifier held (a parked connection keeps it only here).
    pub(crate) fn client_id(&self) -> &str {
        self.holder.parts().1
    }

    /// Whether another connection took the client identifier over.
    pub(crate) fn is_taken(&self) -> bool {
        self.holder.taken.load(Ordering::Acquire)
    }

    /// Whether the node was fenced while the connection held the identifier (it is then
    /// [`Claim::is_taken`] too).
    pub(crate) fn is_fenced(&self) -> bool {
        self.holder.fenced.load(Ordering::Acquire)
    }

    /// Ends the connection as fenced ([`fence_where`]), from the connection itself.
    pub(crate) fn fence(&self) {
        self.holder.fence();
    }

    /// Holds the client identifier in the cluster too, for as long as this claim (or the
    /// will it leaves waiting, [`Claim::take_cluster_hold`]).
    pub(crate) fn hold_in_cluster(&mut self, hold: ClusterHold) {
        let replaced = cluster_holds().insert(self.address(), hold);
        self.holder.clustered.store(true, Ordering::Release);
        // A claim is held in the cluster once (`crate::serve`); a second hold would replace
        // the first, which is then let go here, outside the lock.
        drop(replaced);
    }

    /// The claim's hold in the cluster, taken out (by a will waiting for its delay, which keeps
    /// the identifier the cluster's until it is published or dropped).
    pub(crate) fn take_cluster_hold(&mut self) -> Option<ClusterHold> {
        if !self.holder.clustered.swap(false, Ordering::AcqRel) {
            return None;
        }
        cluster_holds().remove(&self.address())
    }

    /// The key of its hold in [`CLUSTER_HOLDS`].
    fn address(&self) -> usize {
        Arc::as_ptr(&self.holder) as usize
    }
}

fn cluster_holds() -> std::sync::MutexGuard<'static, HashMap<usize, ClusterHold>> {
    CLUSTER_HOLDS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Another node claimed `client_id` in `app`: the connection of this node holding it, if any,
/// is taken over (marked taken and woken, as by a local [`Claim::take`], and its entry
/// removed, so it lets nothing go that is no longer its); its release is returned, to wait for.
pub(crate) fn take_for_another_node(app: &AppId, client_id: &str) -> Option<Released> {
    let hash = hash(app, client_id);
    let previous = {
        let mut shard = shard(hash);
        let entry = shard.find_entry(hash, |h| h.is(app, client_id)).ok()?;
        entry.remove().0
    };
    previous.take_over();
    Some(Released(previous))
}

/// The node was fenced (`crate::cluster`): every connection holding a client identifier whose
/// outbox `is_ours` says is this listener's (the table is the process's) is marked fenced and
/// woken; its next batch ends it. Returns how many.
pub(crate) fn fence_where(is_ours: impl Fn(&Outbox) -> bool) -> usize {
    let mut fenced = 0;
    for shard in &TABLE.shards {
        // Picked under the lock, woken outside it.
        let picked: Vec<Arc<Holder>> = {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            shard
                .iter()
                .filter(|h| h.outbox.upgrade().is_some_and(|o| is_ours(&o)))
                .cloned()
                .collect()
        };
        for holder in picked {
            holder.fence();
            fenced += 1;
        }
    }
    fenced
}

impl Drop for Claim {
    fn drop(&mut self) {
        telemetry().connections_mqtt.decrement(1.0);
        let holder = &self.holder;
        let hash = holder.hash();
        {
            let mut shard = shard(hash);
            // Only its own entry: a claim that took it over replaced it.
            if let Ok(entry) = shard.find_entry(hash, |h| Arc::ptr_eq(h, holder)) {
                entry.remove();
            }
        }
        holder.released.store(true, Ordering::Release);
        TABLE.released[shard_of(hash)].notify_waiters();
        // The cluster's hold is let go last, as when it was the claim's last field.
        drop(self.take_cluster_hold());
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
        assert_eq!(elsewhere.client_id(), "takeover-test");
        // The key's split is the app's length, not a separator: one app's id followed by a
        // client identifier is not another app's.
        let (a, b) = (AppId::parse("ab").unwrap(), AppId::parse("a").unwrap());
        let (ab_c, _) = Claim::take(&a, "c", &first_box);
        let (a_bc, none) = Claim::take(&b, "bc", &second_box);
        assert!(none.is_none() && !ab_c.is_taken() && !a_bc.is_taken());
        assert_eq!((ab_c.client_id(), a_bc.client_id()), ("c", "bc"));
    }

    #[test]
    fn a_claim_is_one_64_byte_allocation_with_its_key_inline() {
        // The holder with its key inline and its `Arc`'s two counts fit jemalloc's 64-byte
        // class (before: a 48-byte holder and its key in the 32-byte class; before that a
        // 64-byte holder with the app's id apart from the identifier); the connection keeps
        // one pointer (two while the cluster's hold was the claim's own field, which the
        // parked MQTT record could not spare for jemalloc's 128-byte class). Before that: a
        // 120-byte claim, a 64-byte oneshot channel, a 32-byte flag, the identifier twice and
        // a 64-byte slot in the table.
        assert!(
            size_of::<Holder>() + 16 <= 64,
            "{} bytes",
            size_of::<Holder>()
        );
        assert_eq!(size_of::<Claim>(), size_of::<usize>());
    }

    /// Cluster claims that count what is let go.
    #[derive(Default)]
    struct Counted {
        released: Mutex<Vec<String>>,
    }

    #[async_trait::async_trait]
    impl herald_core::claims::ClusterClaims for Counted {
        fn set_holder(&self, _: Arc<dyn herald_core::claims::ClaimHolder>) {}
        fn node(&self) -> u64 {
            1
        }
        async fn claim(
            &self,
            _: &herald_core::claims::ClaimKey,
            _: bool,
            _: std::time::Duration,
        ) -> u64 {
            7
        }
        fn release(&self, key: &herald_core::claims::ClaimKey, _: u64) {
            self.released.lock().unwrap().push(key.name.clone());
        }
    }

    #[test]
    fn a_claims_cluster_hold_is_let_go_with_it_unless_taken_out() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let claims = Arc::new(Counted::default());
        let hold = |name: &str| {
            let key = herald_core::claims::ClaimKey {
                app: AppId::default_app(),
                name: name.into(),
            };
            runtime.block_on(ClusterHold::claim(
                claims.clone(),
                key,
                true,
                std::time::Duration::ZERO,
            ))
        };
        let released = || claims.released.lock().unwrap().clone();
        let app = AppId::default_app();
        let (outbox_a, outbox_b) = (Outbox::new(1024), Outbox::new(1024));
        let (mut a, _) = Claim::take(&app, "cluster-hold-a", &outbox_a);
        let (mut b, _) = Claim::take(&app, "cluster-hold-b", &outbox_b);
        a.hold_in_cluster(hold("cluster-hold-a"));
        b.hold_in_cluster(hold("cluster-hold-b"));
        assert!(released().is_empty());
        // Dropping a claim lets its own hold go, and only its own.
        drop(a);
        assert_eq!(released(), ["cluster-hold-a"]);
        // A hold taken out (a will waiting for its delay) outlives its claim.
        let taken = b.take_cluster_hold().expect("b's hold");
        assert_eq!(taken.key().name, "cluster-hold-b");
        assert!(b.take_cluster_hold().is_none(), "taken once");
        drop(b);
        assert_eq!(released(), ["cluster-hold-a"]);
        drop(taken);
        assert_eq!(released(), ["cluster-hold-a", "cluster-hold-b"]);
        // A claim never held in the cluster has nothing to take.
        let (mut c, _) = Claim::take(&app, "cluster-hold-c", &outbox_a);
        assert!(c.take_cluster_hold().is_none());
    }

    #[test]
    fn a_key_too_long_to_keep_inline_is_boxed_and_held_the_same() {
        let app = AppId::parse("key-app").unwrap();
        let fits = "f".repeat(INLINE_KEY - "key-app".len());
        let one_more = "m".repeat(INLINE_KEY - "key-app".len() + 1);
        let multibyte = "é".repeat(20);
        for (id, inline) in [
            (fits, true),
            (one_more, false),
            (multibyte, false),
            (String::new(), true),
        ] {
            let outbox = Outbox::new(1024);
            let (first, none) = Claim::take(&app, &id, &outbox);
            assert!(none.is_none(), "{id:?} not held before");
            assert_eq!(first.client_id(), id);
            assert_eq!(matches!(first.holder.key, Key::Inline(_)), inline, "{id:?}");
            let (second, released) = Claim::take(&app, &id, &outbox);
            assert!(released.is_some() && first.is_taken(), "{id:?} taken over");
            assert_eq!(second.client_id(), id);
            drop((first, second));
            let (again, none) = Claim::take(&app, &id, &outbox);
            assert!(none.is_none() && !again.is_taken(), "{id:?} let go");
        }
    }

    #[test]
    fn a_fence_ends_only_the_listeners_connections_it_is_given() {
        let app = AppId::parse("fence-app").unwrap();
        let (ours, theirs) = (Outbox::new(1024), Outbox::new(1024));
        let (fenced, _) = Claim::take(&app, "fence-ours", &ours);
        let (spared, _) = Claim::take(&app, "fence-theirs", &theirs);
        let ours_ptr = Arc::as_ptr(&ours);
        assert_eq!(fence_where(|o| std::ptr::eq(o, ours_ptr)), 1);
        assert!(fenced.is_fenced() && fenced.is_taken(), "ended as fenced");
        assert!(
            !spared.is_fenced() && !spared.is_taken(),
            "another listener's"
        );
        let waker = std::task::Waker::noop();
        assert!(ours.take_lone_ping(waker), "the connection was woken");
        // A connection taken over (not fenced) is not taken for fenced.
        let (taker, _) = Claim::take(&app, "fence-theirs", &ours);
        assert!(spared.is_taken() && !spared.is_fenced());
        drop((fenced, spared, taker));
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
