//! Group commit of session writes: every connection hands its [`SessionWrite`]s to the
//! listener's one [`Flusher`], and its task writes whatever queued while the previous batch
//! was being written in one [`MqttSessionStore::write_mqtt_sessions`] call (one transaction,
//! one fsync), then tells the writers that wait. A position is coalesced: a channel's position
//! written again before its batch went keeps only the newest, so a subscriber acknowledging a
//! thousand messages between two commits costs one row. A PUBACK therefore costs no
//! transaction or fsync of its own.
//!
//! A QoS 1 message's packet id, stored once it is sent, is cancelled by its PUBACK while its
//! batch has not gone: the `Inflight` write is dropped and so is the `Completed` one (no row
//! was written), so a subscriber that acknowledges within a batch's time costs the store no
//! row for its packet ids at all; only those still awaiting their PUBACK when a batch goes are
//! written (and deleted by a later one).
//!
//! A session's subscription list is written whole, so of the lists a session hands in between
//! two commits only the newest is written (a storm of a thousand SUBSCRIBEs to a persistent
//! session costs one row update per batch, not one per SUBSCRIBE, each a list longer than the
//! one before).
//!
//! An inbound QoS 2 release (a PUBREL came, its PUBCOMP went at once) waits for a commit that
//! happens anyway rather than costing one of its own ([`Flusher::defer_release`]): its
//! session's next append takes it back ([`Flusher::take_releases`]) and deletes the hold in
//! its own transaction (core's `SessionHold`), and any batch that goes meanwhile writes it;
//! one neither took is written [`RELEASE_WAITS_AT_MOST`] after it was queued at the latest.
//! One publisher's exchanges one at a time therefore cost one commit each, the append's, and
//! a crash can lose a release for that long after its PUBCOMP (the hold left is adopted by
//! the session's next connection: `crate::inflight::InboundQoS2::arrival`).
//!
//! Writes are applied in the order they were handed in, except that a position takes the
//! place of the one it replaces, a subscription list replaced by a newer one and a cancelled
//! QoS 1 id are left out; any other write but a packet id's (`Inflight`, `Completed`,
//! `ReleasedQoS2`: rows no position touches) ends the coalescing (a position after a session's
//! `Start` or `Delete` is never moved before it). Deferred releases go after a batch's other
//! writes: a release deletes a hold only if it still has its message's key number, so where
//! it goes among them changes nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herald_core::log::StoreError;
use tokio::sync::{oneshot, Notify};

use super::store::{MqttSessionStore, SessionKey, SessionWrite, StoredHeldQoS2};

/// The longest a deferred release waits for a commit that happens anyway before a batch goes
/// for it: an idle publisher's last release is stored this long after its PUBCOMP.
pub(crate) const RELEASE_WAITS_AT_MOST: Duration = Duration::from_millis(100);

/// Told a batch's outcome once it committed (or failed).
pub(crate) type Done = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// What waits for the next batch.
#[derive(Default)]
struct Pending {
    /// The writes, in order; `None` where a QoS 1 packet id was cancelled by its PUBACK.
    writes: Vec<Option<SessionWrite>>,
    /// Where each session's channel position is in `writes`.
    positions: HashMap<(SessionKey, String), usize>,
    /// Where each session's QoS 1 packet id stored since the last batch is in `writes`.
    qos1: HashMap<(SessionKey, u16), usize>,
    /// Where each session's subscription list is in `writes`: a newer list replaces it.
    subscriptions: HashMap<SessionKey, usize>,
    done: Vec<Done>,
    /// Inbound QoS 2 releases waiting for a commit that happens anyway, by session: its next
    /// append takes them back, or the next batch writes them.
    releases: HashMap<SessionKey, Vec<StoredHeldQoS2>>,
    /// When the oldest of `releases` was deferred (reset when none is left): a batch goes
    /// [`RELEASE_WAITS_AT_MOST`] later at the latest.
    releases_since: Option<Instant>,
    /// The task waits for a wake with no deadline: a deferred release must wake it.
    task_idle: bool,
}

/// What the flusher's task does next.
enum Next {
    /// Writes this batch (boxed: a batch is far larger than a deadline).
    Write(Box<Pending>),
    /// Waits for a wake, or until the time given (a deferred release's due time).
    Wait(Option<Instant>),
}

impl Pending {
    /// Whether nothing waits but deferred releases.
    fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.done.is_empty()
    }

    /// The batch due at `now` (taken), or how long to wait for one: a batch is due when a
    /// write or a waiter is queued, or when the oldest deferred release waited its most.
    fn next(&mut self, now: Instant) -> Next {
        let due = self
            .releases_since
            .map(|since| since + RELEASE_WAITS_AT_MOST);
        if self.is_empty() && due.is_none_or(|due| due > now) {
            self.task_idle = due.is_none();
            return Next::Wait(due);
        }
        Next::Write(Box::new(std::mem::take(self)))
    }

    /// The batch's writes, in order (cancelled ones left out), then its deferred releases.
    fn into_writes(self: Box<Self>) -> (Vec<SessionWrite>, Vec<Done>) {
        let mut writes: Vec<SessionWrite> = self.writes.into_iter().flatten().collect();
        for (key, released) in self.releases {
            writes.extend(released.into_iter().map(|held| SessionWrite::ReleasedQoS2 {
                key: key.clone(),
                held,
            }));
        }
        (writes, self.done)
    }

    /// Defers the release of `held` by session `key`; whether the task must be woken.
    fn defer_release(&mut self, key: SessionKey, held: StoredHeldQoS2, now: Instant) -> bool {
        self.releases.entry(key).or_default().push(held);
        self.releases_since.get_or_insert(now);
        std::mem::take(&mut self.task_idle)
    }

    /// Takes back the releases deferred for session `key`.
    fn take_releases(&mut self, key: &SessionKey) -> Vec<StoredHeldQoS2> {
        let taken = self.releases.remove(key).unwrap_or_default();
        if self.releases.is_empty() {
            self.releases_since = None;
        }
        taken
    }

    /// Queues `write` (see the module documentation for what is coalesced or cancelled).
    fn push(&mut self, write: SessionWrite) {
        match &write {
            SessionWrite::Position { key, position } => {
                let slot = (key.clone(), position.channel.clone());
                if let Some(&at) = self.positions.get(&slot) {
                    self.writes[at] = Some(write);
                    return;
                }
                self.positions.insert(slot, self.writes.len());
            }
            SessionWrite::Inflight { key, inflight } => {
                if inflight.qos == 1 {
                    let slot = (key.clone(), inflight.packet_id);
                    self.qos1.insert(slot, self.writes.len());
                }
            }
            SessionWrite::Completed { key, packet_id } => {
                // Its id's write, from since the last batch: neither is written.
                if let Some(at) = self.qos1.remove(&(key.clone(), *packet_id)) {
                    self.writes[at] = None;
                    return;
                }
            }
            // Rows no position touches: the coalescing goes on.
            SessionWrite::ReleasedQoS2 { .. } => {}
            SessionWrite::Subscriptions { key, .. } => {
                // The list is stored whole: only the newest of a batch is written, in its
                // own place (after whatever came between, so never before a `Start`).
                if let Some(at) = self.subscriptions.insert(key.clone(), self.writes.len()) {
                    self.writes[at] = None;
                }
                self.positions.clear();
            }
            _ => self.positions.clear(),
        }
        self.writes.push(Some(write));
    }
}

/// The listener's queue of session writes and the task that commits them.
pub(crate) struct Flusher {
    pending: Mutex<Pending>,
    wake: Notify,
}

impl Flusher {
    /// A flusher writing to `store`, its task spawned on the current runtime (it runs as long
    /// as the runtime does).
    pub(crate) fn start(store: Arc<dyn MqttSessionStore>) -> Arc<Flusher> {
        let flusher = Arc::new(Flusher {
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
        });
        let task = flusher.clone();
        tokio::spawn(async move {
            loop {
                let next = task.lock().next(Instant::now());
                let batch = match next {
                    Next::Write(batch) => batch,
                    Next::Wait(None) => {
                        task.wake.notified().await;
                        continue;
                    }
                    Next::Wait(Some(due)) => {
                        let woken = task.wake.notified();
                        let _ = tokio::time::timeout_at(due.into(), woken).await;
                        continue;
                    }
                };
                let (writes, done) = batch.into_writes();
                let result = if writes.is_empty() {
                    Ok(())
                } else {
                    store.write_mqtt_sessions(writes).await
                };
                if let Err(e) = &result {
                    tracing::warn!(error = %e, "MQTT sessions: a batch of session writes failed");
                }
                for done in done {
                    done(result.clone());
                }
            }
        });
        flusher
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `write` for the next batch, nothing told when it committed.
    pub(crate) fn push(&self, write: SessionWrite) {
        self.push_all(vec![write], None);
    }

    /// Queues `writes` for the next batch; `done` is told its outcome.
    pub(crate) fn push_all(&self, writes: Vec<SessionWrite>, done: Option<Done>) {
        {
            let mut pending = self.lock();
            for write in writes {
                pending.push(write);
            }
            if let Some(done) = done {
                pending.done.push(done);
            }
        }
        self.wake.notify_one();
    }

    /// Defers the release of inbound QoS 2 hold `held` of session `key` (its PUBREL came) to a
    /// commit that happens anyway: its session's next append, which takes it back
    /// ([`Flusher::take_releases`]), or the next batch, which goes [`RELEASE_WAITS_AT_MOST`]
    /// after the oldest deferred release at the latest.
    pub(crate) fn defer_release(&self, key: SessionKey, held: StoredHeldQoS2) {
        if self.lock().defer_release(key, held, Instant::now()) {
            self.wake.notify_one();
        }
    }

    /// Takes back the releases deferred for session `key`, for its append to write in its own
    /// transaction; one that append does not write must be deferred again.
    pub(crate) fn take_releases(&self, key: &SessionKey) -> Vec<StoredHeldQoS2> {
        self.lock().take_releases(key)
    }

    /// Queues `writes` and waits until they (and what queued before them) committed.
    pub(crate) async fn write(&self, writes: Vec<SessionWrite>) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.push_all(
            writes,
            Some(Box::new(move |result| {
                let _ = tx.send(result);
            })),
        );
        rx.await
            .unwrap_or_else(|_| Err(StoreError::failed("the MQTT session writer stopped")))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex as StdMutex;

    use async_trait::async_trait;
    use herald_core::tenant::AppId;

    use super::super::store::{
        StoredInflight, StoredPosition, StoredSession, StoredSubscription, StoredWill, WaitingWill,
    };
    use super::*;

    #[derive(Default)]
    struct Recording(StdMutex<Vec<Vec<SessionWrite>>>);

    #[async_trait]
    impl MqttSessionStore for Recording {
        async fn mqtt_session(
            &self,
            _: &AppId,
            _: &str,
        ) -> Result<Option<StoredSession>, StoreError> {
            Ok(None)
        }
        async fn write_mqtt_sessions(&self, writes: Vec<SessionWrite>) -> Result<(), StoreError> {
            self.0.lock().unwrap().push(writes);
            Ok(())
        }
        async fn take_mqtt_will(&self, _: &SessionKey) -> Result<Option<StoredWill>, StoreError> {
            Ok(None)
        }
        async fn mqtt_wills_waiting(&self) -> Result<Vec<WaitingWill>, StoreError> {
            Ok(Vec::new())
        }
        async fn end_mqtt_node(&self, _: u64, _: i64) -> Result<Vec<WaitingWill>, StoreError> {
            Ok(Vec::new())
        }
    }

    fn key(id: &str) -> SessionKey {
        SessionKey {
            app: AppId::default_app(),
            client_id: id.into(),
        }
    }

    fn position(id: &str, channel: &str, seq: u64) -> SessionWrite {
        SessionWrite::Position {
            key: key(id),
            position: StoredPosition {
                channel: channel.into(),
                epoch: "e".into(),
                seq,
            },
        }
    }

    fn idle() -> Flusher {
        Flusher {
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
        }
    }

    #[test]
    fn a_channel_position_queued_again_keeps_its_place_with_the_newest_seq() {
        let flusher = idle();
        flusher.push(position("a", "news", 1));
        flusher.push(position("b", "news", 1));
        flusher.push(position("a", "news", 2));
        flusher.push(position("a", "sport", 7));
        flusher.push(position("a", "news", 3));
        assert_eq!(
            queued(&flusher),
            [
                position("a", "news", 3),
                position("b", "news", 1),
                position("a", "sport", 7)
            ]
        );
    }

    #[test]
    fn a_position_is_never_moved_before_another_write() {
        let flusher = idle();
        let start = SessionWrite::Start {
            key: key("a"),
            expiry_ms: 1000,
            node: None,
        };
        flusher.push(position("a", "news", 5));
        flusher.push(start.clone());
        flusher.push(position("a", "news", 6));
        assert_eq!(
            queued(&flusher),
            [position("a", "news", 5), start, position("a", "news", 6)]
        );
    }

    fn subscriptions(id: &str, filters: &[&str]) -> SessionWrite {
        SessionWrite::Subscriptions {
            key: key(id),
            subscriptions: filters
                .iter()
                .map(|f| StoredSubscription {
                    filter: (*f).into(),
                    qos: 1,
                    no_local: false,
                    retain_as_published: false,
                    retain_handling: 0,
                    subscription_identifier: None,
                    since_ms: None,
                })
                .collect(),
        }
    }

    #[test]
    fn only_the_newest_subscription_list_of_a_session_is_written() {
        let flusher = idle();
        let start = SessionWrite::Start {
            key: key("a"),
            expiry_ms: 1000,
            node: None,
        };
        flusher.push(subscriptions("a", &["x"]));
        flusher.push(position("a", "x", 0));
        flusher.push(subscriptions("b", &["x"]));
        flusher.push(subscriptions("a", &["x", "y"]));
        flusher.push(position("a", "y", 0));
        flusher.push(start.clone());
        flusher.push(subscriptions("a", &["z"]));
        assert_eq!(
            queued(&flusher),
            [
                position("a", "x", 0),
                subscriptions("b", &["x"]),
                position("a", "y", 0),
                start,
                subscriptions("a", &["z"]),
            ],
            "each list in the newest one's place, never before the session's start"
        );
        // The next batch starts afresh.
        let batch = std::mem::take(&mut *flusher.lock());
        assert_eq!(batch.writes.len(), 7);
        flusher.push(subscriptions("a", &["w"]));
        assert_eq!(queued(&flusher), [subscriptions("a", &["w"])]);
    }

    fn queued(flusher: &Flusher) -> Vec<SessionWrite> {
        flusher.lock().writes.iter().flatten().cloned().collect()
    }

    fn qos1(id: &str, packet_id: u16, seq: u64) -> SessionWrite {
        SessionWrite::Inflight {
            key: key(id),
            inflight: StoredInflight {
                packet_id,
                qos: 1,
                channel: "news".into(),
                epoch: "e".into(),
                seq,
                released: false,
                retain: Some(false),
            },
        }
    }

    fn completed(id: &str, packet_id: u16) -> SessionWrite {
        SessionWrite::Completed {
            key: key(id),
            packet_id,
        }
    }

    #[test]
    fn a_qos1_id_acknowledged_before_its_batch_goes_is_never_written() {
        let flusher = idle();
        flusher.push(qos1("a", 1, 10));
        flusher.push(qos1("b", 1, 10));
        flusher.push(position("a", "news", 9));
        flusher.push(qos1("a", 2, 11));
        flusher.push(completed("a", 1));
        flusher.push(position("a", "news", 10));
        // An id written by an earlier batch is deleted; one reused since is cancelled.
        flusher.push(completed("a", 7));
        flusher.push(qos1("a", 7, 12));
        flusher.push(completed("a", 7));
        assert_eq!(
            queued(&flusher),
            [
                qos1("b", 1, 10),
                position("a", "news", 10),
                qos1("a", 2, 11),
                completed("a", 7),
            ],
            "the position still coalesced across packet ids"
        );
    }

    fn release(id: &str, packet_id: u16, n: u64) -> SessionWrite {
        SessionWrite::ReleasedQoS2 {
            key: key(id),
            held: StoredHeldQoS2 { packet_id, n },
        }
    }

    fn batch_at(pending: &mut Pending, now: Instant) -> Option<Vec<SessionWrite>> {
        match pending.next(now) {
            Next::Write(batch) => Some(batch.into_writes().0),
            Next::Wait(_) => None,
        }
    }

    #[test]
    fn a_deferred_release_waits_for_its_sessions_append_at_most_its_bound() {
        let mut pending = Pending::default();
        let t0 = Instant::now();
        assert!(matches!(pending.next(t0), Next::Wait(None)));
        let held = |packet_id, n| StoredHeldQoS2 { packet_id, n };
        assert!(
            pending.defer_release(key("a"), held(1, 10), t0),
            "the idle task is woken"
        );
        // Taken back by its session's append: nothing is left to write.
        assert_eq!(pending.take_releases(&key("a")), [held(1, 10)]);
        assert!(pending.take_releases(&key("a")).is_empty());
        assert!(matches!(pending.next(t0), Next::Wait(None)));

        // Not taken: written once the oldest waited its most, not before.
        let t1 = t0 + Duration::from_millis(5);
        assert!(pending.defer_release(key("a"), held(2, 11), t1));
        let due = t1 + RELEASE_WAITS_AT_MOST;
        assert!(matches!(pending.next(t1), Next::Wait(Some(at)) if at == due));
        let later = t1 + RELEASE_WAITS_AT_MOST / 2;
        assert!(
            !pending.defer_release(key("b"), held(2, 12), later),
            "a task waiting for a deadline is not woken again"
        );
        assert_eq!(batch_at(&mut pending, later), None);
        // Both sessions' (in no particular order: a release's place changes nothing).
        assert_eq!(
            batch_at(&mut pending, due).map(sorted),
            Some(sorted(vec![release("a", 2, 11), release("b", 2, 12)]))
        );
    }

    #[test]
    fn a_deferred_release_goes_with_the_next_batch_after_its_writes() {
        let mut pending = Pending::default();
        let t0 = Instant::now();
        pending.defer_release(key("a"), StoredHeldQoS2 { packet_id: 3, n: 7 }, t0);
        pending.push(position("a", "news", 1));
        assert_eq!(
            batch_at(&mut pending, t0),
            Some(vec![position("a", "news", 1), release("a", 3, 7)])
        );
        assert!(matches!(pending.next(t0), Next::Wait(None)));
    }

    #[tokio::test]
    async fn a_release_no_append_takes_is_written_by_a_batch_of_its_own() {
        let store = Arc::new(Recording::default());
        let flusher = Flusher::start(store.clone());
        let held = StoredHeldQoS2 { packet_id: 9, n: 4 };
        flusher.defer_release(key("a"), held);
        // No timing asserted: whenever it goes, it goes alone.
        for _ in 0..1000 {
            if !store.0.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(*store.0.lock().unwrap(), [vec![release("a", 9, 4)]]);
        assert!(flusher.take_releases(&key("a")).is_empty());
    }

    fn sorted(mut writes: Vec<SessionWrite>) -> Vec<SessionWrite> {
        writes.sort_by_key(|w| format!("{w:?}"));
        writes
    }

    #[tokio::test]
    async fn a_write_returns_once_its_batch_committed() {
        let store = Arc::new(Recording::default());
        let flusher = Flusher::start(store.clone());
        flusher.push(position("a", "news", 1));
        flusher
            .write(vec![position("a", "sport", 2)])
            .await
            .unwrap();
        let written: Vec<SessionWrite> =
            store.0.lock().unwrap().iter().flatten().cloned().collect();
        assert_eq!(
            written,
            [position("a", "news", 1), position("a", "sport", 2)]
        );
    }
}
