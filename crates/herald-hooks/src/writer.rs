//! The writer: the task that takes the node queue's events, up to [`WRITE_BATCH`] at a time,
//! matches each against its app's enabled endpoints (the snapshot's, with their compiled
//! channel patterns) and queues one row per endpoint that wants it in the store
//! ([`crate::store::HookStore::enqueue`], one transaction per batch), in the order the events
//! came.
//!
//! A `user.offline` is held: due at its time plus the endpoint's offline delay, withdrawn by
//! the same user's `user.online` that comes before then (neither is sent) unless the batch
//! being sent holds it; an online that withdrew nothing is queued after the user's pending
//! offline (the store's contract, [`crate::store`]). An endpoint that
//! asked for `user.offline` but not `user.online` gets a withdrawal row for the user's return
//! ([`Hold::Withdraw`]), which the store never queues. An endpoint whose
//! queue is full (`hooks.max_queued_per_endpoint`) gets nothing, counted as
//! `herald_hook_events_dropped_total{reason="endpoint_full"}`.
//!
//! An event's row holds the event as its endpoint's format writes it: Herald's JSON, or for a
//! Pusher endpoint Pusher's ([`crate::pusher::pusher_event`]; an event with no Pusher form is
//! not queued for it), each written once per event.
//!
//! Once a batch is queued, its events that some endpoint wants go to this node's tails of their
//! apps ([`crate::tail`]).
//!
//! When the store fails, the same batch is tried again after 100 ms, doubling to 5 s, with no
//! more than that batch in hand: the node queue fills meanwhile, and the listener drops what
//! does not fit (counted). On shutdown the writer stores what is in the node queue, one
//! attempt per batch, and ends.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::endpoint::Format;
use crate::event::{EventType, HookEvent};
use crate::listener::DROPPED_METRIC;
use crate::pusher::{pusher_event, PusherWebhooks};
use crate::service::Hooks;
use crate::snapshot::Snapshot;
use crate::store::{Enqueue, Hold};

/// Most events taken from the node queue and stored at once.
pub const WRITE_BATCH: usize = 1_000;

/// The first wait before a failed batch is tried again; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(100);

/// The longest wait before a failed batch is tried again.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Drains `queued` into the store until `shutdown` (see the [module documentation](self)).
pub(crate) async fn run_writer(
    hooks: Arc<Hooks>,
    mut queued: mpsc::Receiver<HookEvent>,
    shutdown: CancellationToken,
) {
    let mut batch = Vec::with_capacity(WRITE_BATCH);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            taken = queued.recv_many(&mut batch, WRITE_BATCH) => {
                if taken == 0 {
                    return;
                }
            }
        }
        let mut wait = RETRY_FIRST;
        let mut failures = 0u32;
        loop {
            match write(&hooks, &batch).await {
                Ok(()) => {
                    if failures > 0 {
                        tracing::info!(failures, "webhooks: the store queues events again");
                    }
                    batch.clear();
                    break;
                }
                Err(e) => {
                    failures += 1;
                    // The first failure, then about once a minute.
                    if failures % 12 == 1 {
                        tracing::warn!(
                            error = %e,
                            events = batch.len(),
                            failures,
                            "webhooks: queueing events in the store failed; trying the same \
                             events again, backing off to {RETRY_MAX:?}"
                        );
                    }
                }
            }
            tokio::select! {
                // The batch in hand gets its last attempt with the rest of the node queue.
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
            }
            wait = (wait * 2).min(RETRY_MAX);
        }
    }
    // Shutdown: what is in hand and in the node queue, one attempt per batch.
    queued.close();
    loop {
        while batch.len() < WRITE_BATCH {
            match queued.try_recv() {
                Ok(event) => batch.push(event),
                Err(_) => break,
            }
        }
        if batch.is_empty() {
            return;
        }
        if let Err(e) = write(&hooks, &batch).await {
            tracing::warn!(
                error = %e,
                events = batch.len(),
                "webhooks: queueing events in the store failed at shutdown; they are lost"
            );
        }
        batch.clear();
    }
}

/// Queues `events` for the endpoints that want them, in one store transaction.
async fn write(hooks: &Hooks, events: &[HookEvent]) -> Result<(), herald_core::log::StoreError> {
    let rows = rows_for(&hooks.snapshot(), events, hooks.pusher().map(|p| &**p));
    if rows.is_empty() {
        return Ok(());
    }
    let tailed = hooks.tails().wanted(events, &rows);
    let done = hooks
        .store()
        .enqueue(rows, hooks.config().max_queued_per_endpoint)
        .await?;
    if done.queued > 0 {
        // Due now, or held: the worker looks at once (and sleeps until the soonest due).
        hooks.worker_wake().notify_one();
    }
    if done.dropped > 0 {
        metrics::counter!(DROPPED_METRIC, "reason" => "endpoint_full").increment(done.dropped);
    }
    hooks.tails().send(tailed);
    Ok(())
}

/// The rows of `events` for the endpoints of `snapshot` that want them, in event order (and
/// endpoint order within an event).
#[cfg(test)]
pub(crate) fn rows(snapshot: &Snapshot, events: &[HookEvent]) -> Vec<Enqueue> {
    rows_for(snapshot, events, None)
}

/// [`rows`], with Pusher endpoints' rows written by `pusher` (none without it).
pub(crate) fn rows_for(
    snapshot: &Snapshot,
    events: &[HookEvent],
    pusher: Option<&dyn PusherWebhooks>,
) -> Vec<Enqueue> {
    let mut rows = Vec::new();
    for event in events {
        let mut payload: Option<String> = None;
        let mut pusher_payload: Option<Option<String>> = None;
        for compiled in snapshot.endpoints(&event.app) {
            let endpoint = &compiled.endpoint;
            if !endpoint.wants(&compiled.patterns, event) {
                // The return of a user whose offline it may hold: withdrawn, never sent.
                if let (EventType::UserOnline, Some(user)) = (event.kind, &event.user) {
                    let withdraws = endpoint.enabled
                        && endpoint.app == event.app
                        && endpoint.events.contains(EventType::UserOffline);
                    if withdraws {
                        rows.push(Enqueue {
                            endpoint: endpoint.id,
                            event_id: event.id.to_string(),
                            kind: event.kind,
                            due_ms: event.at_ms,
                            payload: String::new(),
                            hold: Some(Hold::Withdraw { user: user.clone() }),
                        });
                    }
                }
                continue;
            }
            let payload = match endpoint.format {
                Format::Standard => payload
                    .get_or_insert_with(|| event.to_json().to_string())
                    .clone(),
                Format::Pusher => {
                    let written = pusher_payload.get_or_insert_with(|| {
                        let pusher = pusher?;
                        pusher_event(event, |c| pusher.channel_name(c)).map(|e| e.to_string())
                    });
                    match written {
                        Some(written) => written.clone(),
                        None => continue,
                    }
                }
            };
            let user = event.user.clone();
            let (due_ms, hold) = match (event.kind, user) {
                (EventType::UserOffline, Some(user)) => (
                    event
                        .at_ms
                        .saturating_add(i64::from(endpoint.offline_delay_ms)),
                    Some(Hold::Offline { user }),
                ),
                (EventType::UserOnline, Some(user)) => (event.at_ms, Some(Hold::Online { user })),
                _ => (event.at_ms, None),
            };
            rows.push(Enqueue {
                endpoint: endpoint.id,
                event_id: event.id.to_string(),
                kind: event.kind,
                due_ms,
                payload,
                hold,
            });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use async_trait::async_trait;
    use herald_core::lifecycle::LifecycleEvent;
    use herald_core::log::StoreError;
    use herald_core::tenant::AppId;
    use serde_json::json;

    use super::*;
    use crate::endpoint::{EndpointId, StoredEndpoint};
    use crate::memory::MemoryHookStore;
    use crate::service::tests::{body, hooks_over, shop};
    use crate::service::HooksConfig;
    use crate::store::*;

    fn user(kind: EventType, at_ms: i64) -> HookEvent {
        let event = match kind {
            EventType::UserOffline => LifecycleEvent::UserOffline {
                app: shop(),
                sub: "al".into(),
            },
            _ => LifecycleEvent::UserOnline {
                app: shop(),
                sub: "al".into(),
            },
        };
        HookEvent::from_lifecycle(&event, at_ms)
    }

    fn vacated(channel: &str, at_ms: i64) -> HookEvent {
        let event = LifecycleEvent::ChannelVacated {
            channel: shop().parse_channel(channel).unwrap(),
        };
        HookEvent::from_lifecycle(&event, at_ms)
    }

    /// Every queued event of `store`, leased at `now_ms`: (endpoint, event ids in queue order).
    async fn queued(store: &MemoryHookStore, now_ms: i64) -> Vec<(EndpointId, Vec<String>)> {
        let batches = store
            .lease(now_ms, 100, 1_000, 1_000, 0, &[])
            .await
            .unwrap();
        let mut queued: Vec<_> = batches
            .into_iter()
            .map(|b| {
                let ids = b.events.into_iter().map(|e| e.event_id).collect();
                (b.endpoint.endpoint.id, ids)
            })
            .collect();
        queued.sort();
        queued
    }

    #[tokio::test]
    async fn events_are_queued_in_order_for_each_endpoint_that_wants_them() {
        let store = Arc::new(MemoryHookStore::new());
        let hooks = hooks_over(store.clone(), HooksConfig::default()).await;
        let (rooms, _) = hooks
            .create(
                &shop(),
                &json!({"url": "http://127.0.0.1:9/", "events": ["channel.vacated"],
                        "channels": ["rooms/*"]}),
            )
            .await
            .unwrap();
        let (all, _) = hooks.create(&shop(), &body(&["*"])).await.unwrap();
        hooks
            .create(&AppId::parse("blog").unwrap(), &body(&["*"]))
            .await
            .unwrap();
        let events = [
            vacated("rooms/2", 10),
            vacated("lobby", 11),
            vacated("rooms/1", 12),
        ];
        write(&hooks, &events).await.unwrap();
        let ids = |picked: &[usize]| -> Vec<String> {
            picked.iter().map(|i| events[*i].id.to_string()).collect()
        };
        assert_eq!(
            queued(&store, 100).await,
            [(rooms.id, ids(&[0, 2])), (all.id, ids(&[0, 1, 2]))]
        );
        // The payload is the event's JSON as sent.
        let rows = rows(&hooks.snapshot(), &events[..1]);
        assert_eq!(rows[0].payload, events[0].to_json().to_string());
        assert_eq!((rows[0].due_ms, rows[0].hold.clone()), (10, None));
    }

    #[tokio::test]
    async fn an_offline_withdrawn_by_a_return_within_the_delay_is_not_sent() {
        let store = Arc::new(MemoryHookStore::new());
        let hooks = hooks_over(store.clone(), HooksConfig::default()).await;
        let (endpoint, _) = hooks
            .create(
                &shop(),
                &json!({"url": "http://127.0.0.1:9/", "events": ["user.online", "user.offline"],
                        "offline_delay_ms": 3000}),
            )
            .await
            .unwrap();
        // Back within the delay (offline due at 4,000, online at 2,000): neither is queued.
        write(&hooks, &[user(EventType::UserOffline, 1_000)])
            .await
            .unwrap();
        let offline_row = &rows(&hooks.snapshot(), &[user(EventType::UserOffline, 1_000)])[0];
        assert_eq!(offline_row.due_ms, 4_000);
        assert!(matches!(offline_row.hold, Some(Hold::Offline { .. })));
        write(&hooks, &[user(EventType::UserOnline, 2_000)])
            .await
            .unwrap();
        assert!(queued(&store, 100_000).await.is_empty());

        // Back after the delay: both are sent, in order.
        let (offline, online) = (
            user(EventType::UserOffline, 10_000),
            user(EventType::UserOnline, 13_500),
        );
        write(&hooks, &[offline.clone(), online.clone()])
            .await
            .unwrap();
        assert_eq!(
            queued(&store, 100_000).await,
            [(
                endpoint.id,
                vec![offline.id.to_string(), online.id.to_string()]
            )]
        );
    }

    #[tokio::test]
    async fn a_return_withdraws_the_offline_of_an_endpoint_that_wants_no_online() {
        let store = Arc::new(MemoryHookStore::new());
        let hooks = hooks_over(store.clone(), HooksConfig::default()).await;
        let (offline_only, _) = hooks
            .create(
                &shop(),
                &json!({"url": "http://127.0.0.1:9/", "events": ["user.offline"],
                        "offline_delay_ms": 3000}),
            )
            .await
            .unwrap();
        hooks
            .create(&shop(), &body(&["channel.vacated"]))
            .await
            .unwrap();
        // The listener gives the writer the return, though no endpoint asked for it.
        let mut taken = hooks.take_queue().unwrap();
        hooks.listener().on_event(&LifecycleEvent::UserOnline {
            app: shop(),
            sub: "al".into(),
        });
        assert_eq!(taken.try_recv().unwrap().kind, EventType::UserOnline);

        // Back within the delay: the offline is withdrawn, and the online never queued.
        write(&hooks, &[user(EventType::UserOffline, 1_000)])
            .await
            .unwrap();
        let back = user(EventType::UserOnline, 2_000);
        let withdrawal = rows(&hooks.snapshot(), std::slice::from_ref(&back));
        assert_eq!(
            withdrawal.len(),
            1,
            "one row, for the offline-only endpoint"
        );
        assert_eq!(
            (withdrawal[0].endpoint, withdrawal[0].hold.clone()),
            (offline_only.id, Some(Hold::Withdraw { user: "al".into() }))
        );
        write(&hooks, &[back]).await.unwrap();
        assert!(queued(&store, 100_000).await.is_empty());

        // Back after the delay: the offline is sent, the online (not asked for) is not.
        let (offline, online) = (
            user(EventType::UserOffline, 10_000),
            user(EventType::UserOnline, 13_500),
        );
        write(&hooks, &[offline.clone(), online]).await.unwrap();
        assert_eq!(
            queued(&store, 100_000).await,
            [(offline_only.id, vec![offline.id.to_string()])]
        );
    }

    #[tokio::test]
    async fn queueing_wakes_the_worker() {
        use futures_util::FutureExt;
        let store = Arc::new(MemoryHookStore::new());
        let hooks = hooks_over(store.clone(), HooksConfig::default()).await;
        hooks
            .create(&shop(), &body(&["user.offline"]))
            .await
            .unwrap();
        // Nothing queued (a withdrawal that withdrew nothing): the worker sleeps on.
        write(&hooks, &[user(EventType::UserOnline, 1_000)])
            .await
            .unwrap();
        assert!(hooks.worker_wake().notified().now_or_never().is_none());
        write(&hooks, &[user(EventType::UserOffline, 2_000)])
            .await
            .unwrap();
        assert!(
            hooks.worker_wake().notified().now_or_never().is_some(),
            "the writer woke the worker"
        );
    }

    #[tokio::test]
    async fn the_writer_drains_the_node_queue_and_stores_the_rest_at_shutdown() {
        let store = Arc::new(MemoryHookStore::new());
        let hooks = hooks_over(store.clone(), HooksConfig::default()).await;
        let (endpoint, _) = hooks.create(&shop(), &body(&["*"])).await.unwrap();
        let taken = hooks.take_queue().unwrap();
        let events: Vec<HookEvent> = (0..5).map(|i| vacated("rooms/1", i)).collect();
        for event in &events {
            hooks.queue().try_send(event.clone()).unwrap();
        }
        let shutdown = CancellationToken::new();
        let writer = tokio::spawn(run_writer(hooks.clone(), taken, shutdown.clone()));
        shutdown.cancel();
        writer.await.unwrap();
        let ids: Vec<String> = events.iter().map(|e| e.id.to_string()).collect();
        assert_eq!(queued(&store, 100).await, [(endpoint.id, ids)]);
    }

    /// The memory store, whose `enqueue` fails while `failing` is above zero (counting down).
    #[derive(Default)]
    struct Flaky {
        store: MemoryHookStore,
        failing: AtomicU32,
    }

    #[async_trait]
    impl HookStore for Flaky {
        async fn create_endpoint(
            &self,
            new: NewEndpoint,
            max_per_app: usize,
        ) -> Result<StoredEndpoint, CreateEndpointError> {
            self.store.create_endpoint(new, max_per_app).await
        }
        async fn endpoints(&self, app: Option<&AppId>) -> Result<Vec<StoredEndpoint>, StoreError> {
            self.store.endpoints(app).await
        }
        async fn endpoint(
            &self,
            app: &AppId,
            id: EndpointId,
        ) -> Result<Option<StoredEndpoint>, StoreError> {
            self.store.endpoint(app, id).await
        }
        async fn update_endpoint(
            &self,
            app: &AppId,
            id: EndpointId,
            patch: &EndpointPatch,
        ) -> Result<Option<StoredEndpoint>, StoreError> {
            self.store.update_endpoint(app, id, patch).await
        }
        async fn rotate_secret(
            &self,
            app: &AppId,
            id: EndpointId,
            secret: Vec<u8>,
            until: i64,
        ) -> Result<bool, StoreError> {
            self.store.rotate_secret(app, id, secret, until).await
        }
        async fn delete_endpoint(&self, app: &AppId, id: EndpointId) -> Result<bool, StoreError> {
            self.store.delete_endpoint(app, id).await
        }
        async fn enqueue(&self, events: Vec<Enqueue>, max: u64) -> Result<Enqueued, StoreError> {
            let failing = self.failing.load(Ordering::SeqCst);
            if failing > 0 {
                self.failing.store(failing - 1, Ordering::SeqCst);
                return Err(StoreError::Unavailable {
                    context: "the test's store is down".into(),
                    source: None,
                });
            }
            self.store.enqueue(events, max).await
        }
        async fn lease_batches(
            &self,
            now_ms: i64,
            limit: usize,
            lease_ms: i64,
            batching: crate::store::Batching,
            paused: &[EndpointId],
        ) -> Result<Vec<LeasedBatch>, StoreError> {
            let store = &self.store;
            store
                .lease_batches(now_ms, limit, lease_ms, batching, paused)
                .await
        }
        async fn settle(
            &self,
            now_ms: i64,
            settled: Vec<(EndpointId, i64, Settlement)>,
        ) -> Result<(), StoreError> {
            self.store.settle(now_ms, settled).await
        }
        async fn next_due(&self) -> Result<Option<i64>, StoreError> {
            self.store.next_due().await
        }
        async fn dead_letters(
            &self,
            app: &AppId,
            endpoint: Option<EndpointId>,
            after: Option<RowId>,
            limit: usize,
        ) -> Result<Vec<DeadEvent>, StoreError> {
            self.store.dead_letters(app, endpoint, after, limit).await
        }
        async fn replay(&self, app: &AppId, row: RowId, now_ms: i64) -> Result<bool, StoreError> {
            self.store.replay(app, row, now_ms).await
        }
        async fn drop_dead(&self, app: &AppId, row: RowId) -> Result<bool, StoreError> {
            self.store.drop_dead(app, row).await
        }
        async fn depth(&self, app: Option<&AppId>) -> Result<Vec<EndpointDepth>, StoreError> {
            self.store.depth(app).await
        }
    }

    #[tokio::test]
    async fn a_failing_store_gets_the_same_batch_again_once_back() {
        let flaky = Arc::new(Flaky::default());
        let hooks = hooks_over(flaky.clone(), HooksConfig::default()).await;
        let (endpoint, _) = hooks.create(&shop(), &body(&["*"])).await.unwrap();
        flaky.failing.store(2, Ordering::SeqCst);
        let taken = hooks.take_queue().unwrap();
        let shutdown = CancellationToken::new();
        let writer = tokio::spawn(run_writer(hooks.clone(), taken, shutdown.clone()));
        let events: Vec<HookEvent> = (0..3).map(|i| vacated("rooms/1", i)).collect();
        for event in &events {
            hooks.queue().try_send(event.clone()).unwrap();
        }
        // Two failures: tried again after 100 ms, then 200 ms.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while flaky.store.depth(None).await.unwrap()[0].queued == 0 {
            assert!(tokio::time::Instant::now() < deadline, "never stored");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(flaky.failing.load(Ordering::SeqCst), 0);
        shutdown.cancel();
        writer.await.unwrap();
        let ids: Vec<String> = events.iter().map(|e| e.id.to_string()).collect();
        assert_eq!(queued(&flaky.store, 100).await, [(endpoint.id, ids)]);
    }
}
