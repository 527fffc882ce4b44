//! The SQLite implementation of [`HookStore`]: webhook endpoints (`hook_endpoints`) and their
//! queues of events (`hook_events`), in the same database as the apps.
//!
//! Writes (endpoints: [`endpoints`]; adding and leasing: [`queue`]; settling, replaying and
//! dropping: [`settle`]) run on the writer thread, one transaction each, durable like appends;
//! reads ([`read`], and listing endpoints) use the read pool. Row decoding is shared with
//! PostgreSQL (`crate::common::hooks`). Every write that adds, removes, kills or revives
//! queued events moves the endpoint's `queued` count in the same transaction, so the
//! `max_queued` check and depth read one row.
//!
//! What the trait leaves to the store, decided here and by PostgreSQL alike:
//! - The lease's end is its token: settling checks `lease_until_ms` still equals it, and ends
//!   the lease. A lease that ran out unsettled leaves its token in place, which makes the next
//!   lease of the endpoint in doubt (that one only).
//! - A lease marks its batch's rows in flight (`hook_events.leased_until_ms`, the lease's end);
//!   a retry clears the mark of its lease's rows, a dead letter has none, and a later lease of
//!   the same rows (the first ran out) sets its own.
//! - A `user.online` ([`Hold::Online`](herald_hooks::store::Hold)) withdraws, of its endpoint's
//!   live events held for its user, the latest one (by due time, then row) due after the
//!   online's own due time (its event time: "not yet due") and not in flight at that time (no
//!   mark, or a mark at or before it), whatever else the endpoint has leased. One that
//!   withdrew nothing is stored due at the later of its time and the due time of the user's
//!   latest live held event for the endpoint, so it follows that offline (a later row). A
//!   withdrawing online needs no room in the queue; any other event finds its endpoint's queue
//!   full when `queued` (held events included, dead letters not) is at `max_queued`. A
//!   [`Hold::Withdraw`](herald_hooks::store::Hold) withdraws as an online does and is never
//!   stored, withdrawing or not (nor counted dropped).
//! - An endpoint is created only while its app has fewer than `max_per_app`: the count and the
//!   insert are one writer transaction, and the writer thread runs one at a time, so creates
//!   at once never go past it.
//! - Settling: a delivered batch's rows are deleted and count as delivered, and the endpoint's
//!   failures, failing time, next attempt and last error are cleared. A retry keeps the rows,
//!   sets the next attempt, counts a failure, starts the failing time if it was not, and keeps
//!   the reason (its first 256 characters) as the last error. A dead batch is a failed attempt
//!   too (counted, the failing time kept, its reason the last error), its rows dead letters
//!   with that reason, and the next attempt is now: the endpoint stays failing until a batch
//!   is delivered, so the worker's horizon goes on applying to its next batches.
//! - A dead letter loses its hold (a replayed `user.offline` is never withdrawn); replaying
//!   one counts it queued again whatever `max_queued` is.
//! - [`HookStore::next_due`] counts a leased endpoint from its lease's end, and never adds the
//!   batch delay: the time it answers may be past, and a worker waits the batch delay itself.

mod endpoints;
mod queue;
mod read;
mod settle;

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_hooks::endpoint::{EndpointId, StoredEndpoint};
use herald_hooks::store::{
    Batching, CreateEndpointError, DeadEvent, EndpointDepth, EndpointPatch, Enqueue, Enqueued,
    HookStore, LeasedBatch, NewEndpoint, RowId, Settlement,
};

use crate::sqlite::SqliteLog;

#[async_trait]
impl HookStore for SqliteLog {
    async fn create_endpoint(
        &self,
        new: NewEndpoint,
        max_per_app: usize,
    ) -> Result<StoredEndpoint, CreateEndpointError> {
        self.write(move |tx| endpoints::create(tx, &new, max_per_app))
            .await?
            .ok_or(CreateEndpointError::TooMany { max: max_per_app })
    }

    async fn endpoints(&self, app: Option<&AppId>) -> Result<Vec<StoredEndpoint>, StoreError> {
        let app = app.cloned();
        self.readers()
            .run(move |conn| endpoints::read(conn, app.as_ref(), None))
            .await
    }

    async fn endpoint(
        &self,
        app: &AppId,
        id: EndpointId,
    ) -> Result<Option<StoredEndpoint>, StoreError> {
        let app = app.clone();
        let found = self
            .readers()
            .run(move |conn| endpoints::read(conn, Some(&app), Some(id)))
            .await?;
        Ok(found.into_iter().next())
    }

    async fn update_endpoint(
        &self,
        app: &AppId,
        id: EndpointId,
        patch: &EndpointPatch,
    ) -> Result<Option<StoredEndpoint>, StoreError> {
        let (app, patch) = (app.clone(), patch.clone());
        self.write(move |tx| endpoints::update(tx, &app, id, &patch))
            .await
    }

    async fn rotate_secret(
        &self,
        app: &AppId,
        id: EndpointId,
        secret: Vec<u8>,
        previous_until_ms: i64,
    ) -> Result<bool, StoreError> {
        let app = app.clone();
        self.write(move |tx| endpoints::rotate_secret(tx, &app, id, &secret, previous_until_ms))
            .await
    }

    async fn delete_endpoint(&self, app: &AppId, id: EndpointId) -> Result<bool, StoreError> {
        let app = app.clone();
        self.write(move |tx| endpoints::delete(tx, &app, id)).await
    }

    async fn enqueue(&self, events: Vec<Enqueue>, max_queued: u64) -> Result<Enqueued, StoreError> {
        if events.is_empty() {
            return Ok(Enqueued::default());
        }
        self.write(move |tx| queue::enqueue(tx, &events, max_queued))
            .await
    }

    async fn lease_batches(
        &self,
        now_ms: i64,
        limit: usize,
        lease_ms: i64,
        batching: Batching,
        paused: &[EndpointId],
    ) -> Result<Vec<LeasedBatch>, StoreError> {
        if limit == 0 || batching.size == 0 {
            return Ok(Vec::new());
        }
        let paused = paused.to_vec();
        self.write(move |tx| queue::lease(tx, now_ms, limit, lease_ms, batching, &paused))
            .await
    }

    async fn settle(
        &self,
        now_ms: i64,
        settled: Vec<(EndpointId, i64, Settlement)>,
    ) -> Result<(), StoreError> {
        if settled.is_empty() {
            return Ok(());
        }
        self.write(move |tx| settle::settle(tx, now_ms, &settled))
            .await
    }

    async fn next_due(&self) -> Result<Option<i64>, StoreError> {
        self.readers().run(|conn| read::next_due(conn)).await
    }

    async fn dead_letters(
        &self,
        app: &AppId,
        endpoint: Option<EndpointId>,
        after: Option<RowId>,
        limit: usize,
    ) -> Result<Vec<DeadEvent>, StoreError> {
        let app = app.clone();
        self.readers()
            .run(move |conn| read::dead_letters(conn, &app, endpoint, after, limit))
            .await
    }

    async fn replay(&self, app: &AppId, row: RowId, now_ms: i64) -> Result<bool, StoreError> {
        let app = app.clone();
        self.write(move |tx| settle::replay(tx, &app, row, now_ms))
            .await
    }

    async fn drop_dead(&self, app: &AppId, row: RowId) -> Result<bool, StoreError> {
        let app = app.clone();
        self.write(move |tx| settle::drop_dead(tx, &app, row)).await
    }

    async fn depth(&self, app: Option<&AppId>) -> Result<Vec<EndpointDepth>, StoreError> {
        let app = app.cloned();
        self.readers()
            .run(move |conn| read::depth(conn, app.as_ref()))
            .await
    }
}
