//! [`MemoryHookStore`], a [`HookStore`] in memory for tests (this crate's and, with the
//! `memory-store` feature, other crates' dev-dependencies): a mutex over plain vectors, keeping
//! the trait's contract (see [`crate::store`]) exactly, and nothing across restarts. Not for
//! production: a server stores its endpoints and queues in its database.

use std::sync::Mutex;

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;

use crate::endpoint::{Endpoint, EndpointId, StoredEndpoint};
use crate::store::{
    Batching, CreateEndpointError, DeadEvent, EndpointDepth, EndpointPatch, Enqueue, Enqueued,
    Hold, HookStore, LeasedBatch, NewEndpoint, QueuedEvent, RowId, Settlement,
};

/// Endpoints and their queues in memory (see the [module documentation](self)).
#[derive(Debug, Default)]
pub struct MemoryHookStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    last_endpoint: EndpointId,
    last_row: RowId,
    endpoints: Vec<Entry>,
    queue: Vec<Row>,
    dead: Vec<Dead>,
}

/// An endpoint with its delivery state.
#[derive(Debug)]
struct Entry {
    stored: StoredEndpoint,
    delivered: u64,
    failures: u32,
    failing_since_ms: Option<i64>,
    next_attempt_ms: i64,
    last_error: Option<String>,
    /// The current lease's end (its token), kept after it ran out unsettled (the next lease
    /// is in doubt).
    lease: Option<i64>,
}

#[derive(Debug)]
struct Row {
    row: RowId,
    endpoint: EndpointId,
    event: Enqueue,
    /// The end of the lease whose batch holds it (in flight while that lease is live).
    leased_until_ms: Option<i64>,
}

#[derive(Debug)]
struct Dead {
    row: RowId,
    app: AppId,
    endpoint: EndpointId,
    event: Enqueue,
    reason: String,
    died_ms: i64,
}

impl MemoryHookStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    fn entry(&mut self, app: &AppId, id: EndpointId) -> Option<&mut Entry> {
        self.endpoints
            .iter_mut()
            .find(|e| e.stored.endpoint.id == id && &e.stored.endpoint.app == app)
    }

    fn queued(&self, endpoint: EndpointId) -> impl Iterator<Item = &Row> {
        self.queue.iter().filter(move |r| r.endpoint == endpoint)
    }

    /// `endpoint`'s events due at or before `now_ms`, in queue order.
    fn due(&self, endpoint: EndpointId, now_ms: i64) -> Vec<&Row> {
        let mut due: Vec<&Row> = self
            .queued(endpoint)
            .filter(|r| r.event.due_ms <= now_ms)
            .collect();
        due.sort_by_key(|r| (r.event.due_ms, r.row));
        due
    }

    /// `user`'s pending (not dead) held offlines for `endpoint`: (index in the queue, row).
    fn held<'a>(
        &'a self,
        endpoint: EndpointId,
        user: &'a str,
    ) -> impl Iterator<Item = (usize, &'a Row)> + 'a {
        self.queue.iter().enumerate().filter(move |(_, r)| {
            r.endpoint == endpoint
                && matches!(&r.event.hold, Some(Hold::Offline { user: u }) if &**u == user)
        })
    }
}

#[async_trait]
impl HookStore for MemoryHookStore {
    async fn create_endpoint(
        &self,
        new: NewEndpoint,
        max_per_app: usize,
    ) -> Result<StoredEndpoint, CreateEndpointError> {
        let mut state = self.state();
        let of_app = state
            .endpoints
            .iter()
            .filter(|e| e.stored.endpoint.app == new.app)
            .count();
        if of_app >= max_per_app {
            return Err(CreateEndpointError::TooMany { max: max_per_app });
        }
        state.last_endpoint += 1;
        let stored = StoredEndpoint {
            endpoint: Endpoint {
                id: state.last_endpoint,
                app: new.app,
                url: new.url,
                description: new.description,
                events: new.events,
                channels: new.channels,
                enabled: new.enabled,
                offline_delay_ms: new.offline_delay_ms,
                created_ms: new.created_ms,
                format: new.format,
            },
            secret: new.secret,
            previous_secret: None,
        };
        state.endpoints.push(Entry {
            stored: stored.clone(),
            delivered: 0,
            failures: 0,
            failing_since_ms: None,
            next_attempt_ms: 0,
            last_error: None,
            lease: None,
        });
        Ok(stored)
    }

    async fn endpoints(&self, app: Option<&AppId>) -> Result<Vec<StoredEndpoint>, StoreError> {
        let state = self.state();
        Ok(state
            .endpoints
            .iter()
            .filter(|e| app.is_none_or(|a| &e.stored.endpoint.app == a))
            .map(|e| e.stored.clone())
            .collect())
    }

    async fn endpoint(
        &self,
        app: &AppId,
        id: EndpointId,
    ) -> Result<Option<StoredEndpoint>, StoreError> {
        Ok(self.state().entry(app, id).map(|e| e.stored.clone()))
    }

    async fn update_endpoint(
        &self,
        app: &AppId,
        id: EndpointId,
        patch: &EndpointPatch,
    ) -> Result<Option<StoredEndpoint>, StoreError> {
        let mut state = self.state();
        let Some(entry) = state.entry(app, id) else {
            return Ok(None);
        };
        let endpoint = &mut entry.stored.endpoint;
        if let Some(url) = &patch.url {
            endpoint.url = url.clone();
        }
        if let Some(description) = &patch.description {
            endpoint.description = description.clone();
        }
        if let Some(events) = patch.events {
            endpoint.events = events;
        }
        if let Some(channels) = &patch.channels {
            endpoint.channels = channels.clone();
        }
        if let Some(enabled) = patch.enabled {
            endpoint.enabled = enabled;
        }
        if let Some(delay) = patch.offline_delay_ms {
            endpoint.offline_delay_ms = delay;
        }
        Ok(Some(entry.stored.clone()))
    }

    async fn rotate_secret(
        &self,
        app: &AppId,
        id: EndpointId,
        secret: Vec<u8>,
        previous_until_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut state = self.state();
        let Some(entry) = state.entry(app, id) else {
            return Ok(false);
        };
        let old = std::mem::replace(&mut entry.stored.secret, secret);
        entry.stored.previous_secret = Some((old, previous_until_ms));
        Ok(true)
    }

    async fn delete_endpoint(&self, app: &AppId, id: EndpointId) -> Result<bool, StoreError> {
        let mut state = self.state();
        if state.entry(app, id).is_none() {
            return Ok(false);
        }
        state.endpoints.retain(|e| e.stored.endpoint.id != id);
        state.queue.retain(|r| r.endpoint != id);
        state.dead.retain(|d| d.endpoint != id);
        Ok(true)
    }

    async fn enqueue(&self, events: Vec<Enqueue>, max_queued: u64) -> Result<Enqueued, StoreError> {
        let mut state = self.state();
        let mut done = Enqueued::default();
        for event in events {
            let endpoint = event.endpoint;
            let withdraw_only = matches!(event.hold, Some(Hold::Withdraw { .. }));
            if !state
                .endpoints
                .iter()
                .any(|e| e.stored.endpoint.id == endpoint)
            {
                if !withdraw_only {
                    done.dropped += 1;
                }
                continue;
            }
            let returning = match &event.hold {
                Some(Hold::Online { user } | Hold::Withdraw { user }) => Some(user.clone()),
                Some(Hold::Offline { .. }) | None => None,
            };
            let mut event = event;
            if let Some(user) = returning {
                // The latest held offline not dead, due after the return, not in flight.
                let held = state
                    .held(endpoint, &user)
                    .filter(|(_, r)| {
                        r.event.due_ms > event.due_ms
                            && r.leased_until_ms.is_none_or(|until| until <= event.due_ms)
                    })
                    .max_by_key(|(_, r)| (r.event.due_ms, r.row))
                    .map(|(index, _)| index);
                if let Some(index) = held {
                    state.queue.remove(index);
                    done.withdrawn += 1;
                    continue;
                }
                // Not withdrawn: after the user's latest pending offline.
                let latest = state
                    .held(endpoint, &user)
                    .map(|(_, r)| r.event.due_ms)
                    .max();
                event.due_ms = event.due_ms.max(latest.unwrap_or(i64::MIN));
            }
            if withdraw_only {
                continue;
            }
            if state.queued(endpoint).count() as u64 >= max_queued {
                done.dropped += 1;
                continue;
            }
            state.last_row += 1;
            let row = state.last_row;
            state.queue.push(Row {
                row,
                endpoint,
                event,
                leased_until_ms: None,
            });
            done.queued += 1;
        }
        Ok(done)
    }

    async fn lease_batches(
        &self,
        now_ms: i64,
        limit: usize,
        lease_ms: i64,
        batching: Batching,
        paused: &[EndpointId],
    ) -> Result<Vec<LeasedBatch>, StoreError> {
        let mut state = self.state();
        // (oldest due, endpoint, rows of its batch)
        let mut ready: Vec<(i64, EndpointId, Vec<QueuedEvent>)> = Vec::new();
        for entry in &state.endpoints {
            let id = entry.stored.endpoint.id;
            let leased = entry.lease.is_some_and(|until| until > now_ms);
            if !entry.stored.endpoint.enabled
                || entry.next_attempt_ms > now_ms
                || leased
                || paused.contains(&id)
            {
                continue;
            }
            let due = state.due(id, now_ms);
            let Some(oldest) = due.first().map(|r| r.event.due_ms) else {
                continue;
            };
            if due.len() < batching.size && oldest > now_ms - batching.delay_ms {
                continue;
            }
            let batch = due
                .iter()
                .take(batching.most)
                .map(|r| QueuedEvent {
                    row: r.row,
                    event_id: r.event.event_id.clone(),
                    payload: r.event.payload.clone(),
                })
                .collect();
            ready.push((oldest, id, batch));
        }
        ready.sort_by_key(|(oldest, id, _)| (*oldest, *id));
        ready.truncate(limit);
        let lease_until_ms = now_ms + lease_ms;
        let mut leased = Vec::with_capacity(ready.len());
        for (_, id, events) in ready {
            for row in state.queue.iter_mut() {
                if row.endpoint == id && events.iter().any(|e| e.row == row.row) {
                    row.leased_until_ms = Some(lease_until_ms);
                }
            }
            let entry = state
                .endpoints
                .iter_mut()
                .find(|e| e.stored.endpoint.id == id)
                .expect("found above, under the same lock");
            let in_doubt = entry.lease.is_some();
            entry.lease = Some(lease_until_ms);
            leased.push(LeasedBatch {
                endpoint: entry.stored.clone(),
                lease_until_ms,
                events,
                failures: entry.failures,
                failing_since_ms: entry.failing_since_ms,
                in_doubt,
            });
        }
        Ok(leased)
    }

    async fn settle(
        &self,
        now_ms: i64,
        settled: Vec<(EndpointId, i64, Settlement)>,
    ) -> Result<(), StoreError> {
        let mut state = self.state();
        for (id, token, settlement) in settled {
            let Some(index) = state
                .endpoints
                .iter()
                .position(|e| e.stored.endpoint.id == id && e.lease == Some(token))
            else {
                continue;
            };
            state.endpoints[index].lease = None;
            match settlement {
                Settlement::Delivered { rows } => {
                    let before = state.queue.len();
                    state
                        .queue
                        .retain(|r| !(r.endpoint == id && rows.contains(&r.row)));
                    let delivered = (before - state.queue.len()) as u64;
                    let entry = &mut state.endpoints[index];
                    entry.delivered += delivered;
                    entry.failures = 0;
                    entry.failing_since_ms = None;
                    entry.next_attempt_ms = 0;
                    entry.last_error = None;
                }
                Settlement::Retry {
                    next_attempt_ms,
                    reason,
                } => {
                    for row in state.queue.iter_mut() {
                        if row.endpoint == id && row.leased_until_ms == Some(token) {
                            row.leased_until_ms = None;
                        }
                    }
                    let entry = &mut state.endpoints[index];
                    entry.failures = entry.failures.saturating_add(1);
                    entry.failing_since_ms.get_or_insert(now_ms);
                    entry.next_attempt_ms = next_attempt_ms;
                    entry.last_error = Some(reason);
                }
                Settlement::Dead { rows, reason } => {
                    let app = state.endpoints[index].stored.endpoint.app.clone();
                    let (dying, kept): (Vec<Row>, Vec<Row>) = std::mem::take(&mut state.queue)
                        .into_iter()
                        .partition(|r| r.endpoint == id && rows.contains(&r.row));
                    state.queue = kept;
                    for row in dying {
                        state.dead.push(Dead {
                            row: row.row,
                            app: app.clone(),
                            endpoint: id,
                            event: row.event,
                            reason: reason.clone(),
                            died_ms: now_ms,
                        });
                    }
                    state.dead.sort_by_key(|d| d.row);
                    let entry = &mut state.endpoints[index];
                    entry.failures = entry.failures.saturating_add(1);
                    entry.failing_since_ms.get_or_insert(now_ms);
                    entry.next_attempt_ms = 0;
                    entry.last_error = Some(reason);
                }
            }
        }
        Ok(())
    }

    async fn next_due(&self) -> Result<Option<i64>, StoreError> {
        let state = self.state();
        Ok(state
            .endpoints
            .iter()
            .filter(|e| e.stored.endpoint.enabled)
            .filter_map(|e| {
                let soonest = state
                    .queued(e.stored.endpoint.id)
                    .map(|r| r.event.due_ms)
                    .min()?;
                let lease_end = e.lease.unwrap_or(0);
                Some(soonest.max(e.next_attempt_ms).max(lease_end))
            })
            .min())
    }

    async fn dead_letters(
        &self,
        app: &AppId,
        endpoint: Option<EndpointId>,
        after: Option<RowId>,
        limit: usize,
    ) -> Result<Vec<DeadEvent>, StoreError> {
        let state = self.state();
        Ok(state
            .dead
            .iter()
            .filter(|d| &d.app == app)
            .filter(|d| endpoint.is_none_or(|e| d.endpoint == e))
            .filter(|d| after.is_none_or(|a| d.row > a))
            .take(limit)
            .map(|d| DeadEvent {
                row: d.row,
                endpoint: d.endpoint,
                event_id: d.event.event_id.clone(),
                kind: d.event.kind,
                payload: d.event.payload.clone(),
                reason: d.reason.clone(),
                died_ms: d.died_ms,
            })
            .collect())
    }

    async fn replay(&self, app: &AppId, row: RowId, now_ms: i64) -> Result<bool, StoreError> {
        let mut state = self.state();
        let Some(index) = state
            .dead
            .iter()
            .position(|d| d.row == row && &d.app == app)
        else {
            return Ok(false);
        };
        let dead = state.dead.remove(index);
        state.last_row += 1;
        let row = state.last_row;
        let mut event = dead.event;
        event.due_ms = now_ms;
        event.hold = None;
        state.queue.push(Row {
            row,
            endpoint: dead.endpoint,
            event,
            leased_until_ms: None,
        });
        Ok(true)
    }

    async fn drop_dead(&self, app: &AppId, row: RowId) -> Result<bool, StoreError> {
        let mut state = self.state();
        let before = state.dead.len();
        state.dead.retain(|d| !(d.row == row && &d.app == app));
        Ok(state.dead.len() < before)
    }

    async fn depth(&self, app: Option<&AppId>) -> Result<Vec<EndpointDepth>, StoreError> {
        let state = self.state();
        Ok(state
            .endpoints
            .iter()
            .filter(|e| app.is_none_or(|a| &e.stored.endpoint.app == a))
            .map(|e| {
                let id = e.stored.endpoint.id;
                EndpointDepth {
                    endpoint: id,
                    queued: state.queued(id).count() as u64,
                    oldest_due_ms: state.queued(id).map(|r| r.event.due_ms).min(),
                    dead: state.dead.iter().filter(|d| d.endpoint == id).count() as u64,
                    delivered: e.delivered,
                    failures: e.failures,
                    failing_since_ms: e.failing_since_ms,
                    next_attempt_ms: e.next_attempt_ms,
                    last_error: e.last_error.clone(),
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventSet, EventType};

    fn new_endpoint(app: &AppId) -> NewEndpoint {
        NewEndpoint {
            app: app.clone(),
            url: "https://example.com/hooks".into(),
            description: String::new(),
            events: EventSet::all(),
            channels: Vec::new(),
            enabled: true,
            offline_delay_ms: 3_000,
            secret: vec![1, 2, 3],
            created_ms: 1,
            format: crate::endpoint::Format::Standard,
        }
    }

    fn event(endpoint: EndpointId, id: &str, due_ms: i64, hold: Option<Hold>) -> Enqueue {
        Enqueue {
            endpoint,
            event_id: id.into(),
            kind: EventType::ClientConnected,
            due_ms,
            payload: format!("{{\"id\":\"{id}\"}}"),
            hold,
        }
    }

    fn ids(batch: &LeasedBatch) -> Vec<&str> {
        batch.events.iter().map(|e| e.event_id.as_str()).collect()
    }

    #[tokio::test]
    async fn a_ready_endpoint_with_more_than_the_normal_size_due_gets_a_grown_batch() {
        let store = MemoryHookStore::new();
        let shop = AppId::parse("shop").unwrap();
        let id = store
            .create_endpoint(new_endpoint(&shop), 20)
            .await
            .unwrap()
            .endpoint
            .id;
        let queued = (0..25).map(|i| event(id, &format!("e{i:02}"), 10, None));
        store.enqueue(queued.collect(), 100).await.unwrap();
        let batching = Batching {
            size: 2,
            most: 20,
            delay_ms: 1_000,
        };
        let leased = store
            .lease_batches(10, 10, 100, batching, &[])
            .await
            .unwrap();
        assert_eq!(ids(&leased[0]).len(), 20, "ready (2 due), grown to 20");
        assert_eq!(ids(&leased[0])[..2], ["e00", "e01"]);
        let rows = leased[0].events.iter().map(|e| e.row).collect();
        let token = leased[0].lease_until_ms;
        let delivered = Settlement::Delivered { rows };
        store
            .settle(11, vec![(id, token, delivered)])
            .await
            .unwrap();
        let rest = store
            .lease_batches(12, 10, 100, batching, &[])
            .await
            .unwrap();
        assert_eq!(ids(&rest[0]), ["e20", "e21", "e22", "e23", "e24"]);
        // The fixed lease is the same with no growth.
        let fixed = MemoryHookStore::new();
        let id = fixed
            .create_endpoint(new_endpoint(&shop), 20)
            .await
            .unwrap()
            .endpoint
            .id;
        let queued = (0..25).map(|i| event(id, &format!("e{i:02}"), 10, None));
        fixed.enqueue(queued.collect(), 100).await.unwrap();
        let leased = fixed.lease(10, 10, 100, 2, 1_000, &[]).await.unwrap();
        assert_eq!(ids(&leased[0]), ["e00", "e01"]);
    }

    #[tokio::test]
    async fn batches_go_in_order_one_lease_at_a_time_and_settle() {
        let store = MemoryHookStore::new();
        let shop = AppId::parse("shop").unwrap();
        let id = store
            .create_endpoint(new_endpoint(&shop), 20)
            .await
            .unwrap()
            .endpoint
            .id;
        let queued = vec![
            event(id, "b", 20, None),
            event(id, "a", 10, None),
            event(id, "c", 20, None),
        ];
        let done = store.enqueue(queued, 3).await.unwrap();
        assert_eq!((done.queued, done.dropped), (3, 0));
        let over = store.enqueue(vec![event(id, "d", 5, None)], 3).await;
        assert_eq!(over.unwrap().dropped, 1);
        assert_eq!(store.next_due().await.unwrap(), Some(10));

        // Not ready: two due, fewer than the batch's size, the oldest younger than the delay.
        assert!(store
            .lease(20, 10, 1_000, 5, 100, &[])
            .await
            .unwrap()
            .is_empty());
        let batches = store.lease(20, 10, 1_000, 2, 100, &[]).await.unwrap();
        assert_eq!(batches.len(), 1);
        assert_eq!(ids(&batches[0]), ["a", "b"]);
        assert!(!batches[0].in_doubt);
        // Leased: not leased again until its lease runs out.
        assert!(store
            .lease(21, 10, 1_000, 1, 0, &[])
            .await
            .unwrap()
            .is_empty());

        let token = batches[0].lease_until_ms;
        let retry = Settlement::Retry {
            next_attempt_ms: 500,
            reason: "HTTP 503".into(),
        };
        store.settle(30, vec![(id, token, retry)]).await.unwrap();
        let depth = &store.depth(Some(&shop)).await.unwrap()[0];
        assert_eq!(
            (depth.queued, depth.failures, depth.failing_since_ms),
            (3, 1, Some(30))
        );
        assert_eq!(depth.last_error.as_deref(), Some("HTTP 503"));
        assert!(store
            .lease(100, 10, 1_000, 1, 0, &[])
            .await
            .unwrap()
            .is_empty());
        assert!(store
            .lease(500, 10, 1_000, 1, 0, &[id])
            .await
            .unwrap()
            .is_empty());

        let batches = store.lease(500, 10, 1_000, 10, 0, &[]).await.unwrap();
        assert_eq!(ids(&batches[0]), ["a", "b", "c"]);
        assert_eq!(batches[0].failures, 1);
        let rows = batches[0].events.iter().map(|e| e.row).collect();
        let token = batches[0].lease_until_ms;
        // A stale token settles nothing.
        let stale = Settlement::Delivered { rows: vec![] };
        store
            .settle(501, vec![(id, token - 1, stale)])
            .await
            .unwrap();
        let delivered = Settlement::Delivered { rows };
        store
            .settle(501, vec![(id, token, delivered)])
            .await
            .unwrap();
        let depth = &store.depth(None).await.unwrap()[0];
        assert_eq!((depth.queued, depth.delivered, depth.failures), (0, 3, 0));
        assert_eq!(store.next_due().await.unwrap(), None);
    }

    #[tokio::test]
    async fn an_online_withdraws_a_held_offline_not_yet_due() {
        let store = MemoryHookStore::new();
        let shop = AppId::parse("shop").unwrap();
        let id = store
            .create_endpoint(new_endpoint(&shop), 20)
            .await
            .unwrap()
            .endpoint
            .id;
        let offline = || Some(Hold::Offline { user: "al".into() });
        let online = || Some(Hold::Online { user: "al".into() });
        let done = store
            .enqueue(
                vec![
                    event(id, "off", 3_000, offline()),
                    event(id, "on", 2_000, online()),
                ],
                100,
            )
            .await
            .unwrap();
        assert_eq!((done.queued, done.withdrawn), (1, 1));
        assert_eq!(store.depth(None).await.unwrap()[0].queued, 0);

        let done = store
            .enqueue(
                vec![
                    event(id, "off", 3_000, offline()),
                    event(id, "on", 3_500, online()),
                ],
                100,
            )
            .await
            .unwrap();
        assert_eq!((done.queued, done.withdrawn), (2, 0));
    }

    #[tokio::test]
    async fn a_return_withdraws_an_offline_not_in_flight_and_otherwise_follows_it() {
        let store = MemoryHookStore::new();
        let shop = AppId::parse("shop").unwrap();
        let id = store
            .create_endpoint(new_endpoint(&shop), 20)
            .await
            .unwrap()
            .endpoint
            .id;
        let offline = |user: &str| Some(Hold::Offline { user: user.into() });
        let online = |user: &str| Some(Hold::Online { user: user.into() });
        // The endpoint is leased (for 25 s) with another event; the held offline is not in
        // that batch, so the return withdraws it.
        let queued = vec![
            event(id, "a", 10, None),
            event(id, "off", 3_000, offline("al")),
        ];
        store.enqueue(queued, 100).await.unwrap();
        let leased = store.lease(10, 10, 25_000, 10, 0, &[]).await.unwrap();
        assert_eq!(ids(&leased[0]), ["a"]);
        let back = vec![event(id, "on", 2_000, online("al"))];
        let done = store.enqueue(back, 100).await.unwrap();
        assert_eq!((done.queued, done.withdrawn), (0, 1));
        let token = leased[0].lease_until_ms;
        let rows = leased[0].events.iter().map(|e| e.row).collect();
        let delivered = Settlement::Delivered { rows };
        store
            .settle(20, vec![(id, token, delivered)])
            .await
            .unwrap();

        // In flight, the offline stays; the return is queued after it, and stays after it
        // when the batch fails and is retried.
        let queued = vec![event(id, "off2", 4_000, offline("al"))];
        store.enqueue(queued, 100).await.unwrap();
        let leased = store.lease(4_000, 10, 25_000, 10, 0, &[]).await.unwrap();
        assert_eq!(ids(&leased[0]), ["off2"]);
        let late = vec![event(id, "on2", 3_500, online("al"))];
        let done = store.enqueue(late, 100).await.unwrap();
        assert_eq!((done.queued, done.withdrawn), (1, 0));
        let retry = Settlement::Retry {
            next_attempt_ms: 5_000,
            reason: "HTTP 503".into(),
        };
        let token = leased[0].lease_until_ms;
        store.settle(4_100, vec![(id, token, retry)]).await.unwrap();
        let again = store.lease(5_000, 10, 25_000, 10, 0, &[]).await.unwrap();
        assert_eq!(ids(&again[0]), ["off2", "on2"]);
    }

    #[tokio::test]
    async fn a_withdraw_withdraws_a_held_offline_and_is_never_queued() {
        let store = MemoryHookStore::new();
        let shop = AppId::parse("shop").unwrap();
        let id = store
            .create_endpoint(new_endpoint(&shop), 20)
            .await
            .unwrap()
            .endpoint
            .id;
        let offline = || Some(Hold::Offline { user: "al".into() });
        let withdraw = || Some(Hold::Withdraw { user: "al".into() });
        let done = store
            .enqueue(
                vec![
                    event(id, "off", 3_000, offline()),
                    event(id, "back", 2_000, withdraw()),
                    event(id, "again", 2_500, withdraw()),
                ],
                100,
            )
            .await
            .unwrap();
        assert_eq!((done.queued, done.withdrawn, done.dropped), (1, 1, 0));
        assert_eq!(store.depth(None).await.unwrap()[0].queued, 0);
        // Nothing held (or held but due): nothing withdrawn, nothing queued, even when full.
        let done = store
            .enqueue(
                vec![
                    event(id, "off", 3_000, offline()),
                    event(id, "late", 3_000, withdraw()),
                ],
                1,
            )
            .await
            .unwrap();
        assert_eq!((done.queued, done.withdrawn, done.dropped), (1, 0, 0));
        assert_eq!(store.depth(None).await.unwrap()[0].queued, 1);
    }

    #[tokio::test]
    async fn an_app_past_its_endpoints_gets_none() {
        let store = MemoryHookStore::new();
        let (shop, blog) = (AppId::parse("shop").unwrap(), AppId::parse("blog").unwrap());
        store.create_endpoint(new_endpoint(&shop), 2).await.unwrap();
        store.create_endpoint(new_endpoint(&blog), 2).await.unwrap();
        store.create_endpoint(new_endpoint(&shop), 2).await.unwrap();
        let refused = store.create_endpoint(new_endpoint(&shop), 2).await;
        assert!(
            matches!(refused, Err(CreateEndpointError::TooMany { max: 2 })),
            "{refused:?}"
        );
        assert_eq!(store.endpoints(Some(&shop)).await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn dead_letters_list_replay_and_drop() {
        let store = MemoryHookStore::new();
        let shop = AppId::parse("shop").unwrap();
        let other = AppId::parse("other").unwrap();
        let id = store
            .create_endpoint(new_endpoint(&shop), 20)
            .await
            .unwrap()
            .endpoint
            .id;
        store
            .enqueue(vec![event(id, "a", 1, None), event(id, "b", 2, None)], 10)
            .await
            .unwrap();
        let batch = &store.lease(10, 1, 100, 10, 0, &[]).await.unwrap()[0];
        let rows: Vec<RowId> = batch.events.iter().map(|e| e.row).collect();
        let dead = Settlement::Dead {
            rows: rows.clone(),
            reason: "timeout".into(),
        };
        store
            .settle(20, vec![(id, batch.lease_until_ms, dead)])
            .await
            .unwrap();
        let letters = store.dead_letters(&shop, Some(id), None, 10).await.unwrap();
        assert_eq!(letters.len(), 2);
        assert_eq!(
            (letters[0].reason.as_str(), letters[0].died_ms),
            ("timeout", 20)
        );
        assert_eq!(
            store
                .dead_letters(&shop, None, Some(rows[0]), 10)
                .await
                .unwrap()[0]
                .event_id,
            "b"
        );
        assert!(store
            .dead_letters(&other, None, None, 10)
            .await
            .unwrap()
            .is_empty());
        assert!(!store.replay(&other, rows[0], 30).await.unwrap());
        assert!(store.replay(&shop, rows[0], 30).await.unwrap());
        assert!(store.drop_dead(&shop, rows[1]).await.unwrap());
        assert!(!store.drop_dead(&shop, rows[1]).await.unwrap());
        let depth = &store.depth(None).await.unwrap()[0];
        assert_eq!(
            (depth.queued, depth.dead, depth.oldest_due_ms),
            (1, 0, Some(30))
        );
        assert!(store.delete_endpoint(&shop, id).await.unwrap());
        assert!(store.depth(None).await.unwrap().is_empty());
    }
}
