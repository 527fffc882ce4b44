//! [`HookStore`] on PostgreSQL: webhook endpoints (`hook_endpoints`) and their queues of events
//! (`hook_events`), with the SQLite implementation's semantics (`crate::sqlite::hooks` says
//! what the store decides where the trait is silent), shared by every node's workers.
//!
//! One lease per endpoint across nodes: leasing takes endpoints `FOR UPDATE SKIP LOCKED` and
//! sets their lease's end, the token a settlement must still find ([`queue`]); adding events
//! locks their endpoints first, so the `max_queued` check and the debounce read a `queued`
//! count and held offlines no other node changes meanwhile; it works the whole call out first
//! ([`plan`]) and writes it in a few statements, not one per event. Each write is one transaction on a pooled
//! connection (endpoints: [`endpoints`]; adding and leasing: [`queue`]; settling, replaying and
//! dropping: [`settle`]) and moves the endpoint's `queued` count in that transaction; reads are
//! single queries ([`read`]). Row decoding is shared with SQLite (`crate::common::hooks`).
//!
//! An endpoint is created only while its app has fewer than `max_per_app`: one transaction
//! takes a transaction-scoped advisory lock keyed by the app (`pg_advisory_xact_lock` on the
//! two-key space, [`endpoints::CREATE_LOCK`] and the app id's hash), then counts and inserts,
//! so two nodes creating at once wait for each other and the second counts the first's.
//! Neither the app's row (an endpoint's app need not have one in `apps`, and locking it would
//! hold up the app's own changes) nor its endpoints' rows (a new row is no locked row) would do;
//! a serializable transaction would, but it fails one of the two and the create would need a
//! retry loop. Two apps whose ids hash alike only take turns.

mod endpoints;
mod plan;
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

use super::{pg_error, PostgresStore};

#[async_trait]
impl HookStore for PostgresStore {
    async fn create_endpoint(
        &self,
        new: NewEndpoint,
        max_per_app: usize,
    ) -> Result<StoredEndpoint, CreateEndpointError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let created = endpoints::create(&tx, &new, max_per_app).await?;
        tx.commit().await.map_err(pg_error)?;
        created.ok_or(CreateEndpointError::TooMany { max: max_per_app })
    }

    async fn endpoints(&self, app: Option<&AppId>) -> Result<Vec<StoredEndpoint>, StoreError> {
        let client = self.client().await?;
        endpoints::read(&client, app, None).await
    }

    async fn endpoint(
        &self,
        app: &AppId,
        id: EndpointId,
    ) -> Result<Option<StoredEndpoint>, StoreError> {
        let client = self.client().await?;
        let found = endpoints::read(&client, Some(app), Some(id)).await?;
        Ok(found.into_iter().next())
    }

    async fn update_endpoint(
        &self,
        app: &AppId,
        id: EndpointId,
        patch: &EndpointPatch,
    ) -> Result<Option<StoredEndpoint>, StoreError> {
        let client = self.client().await?;
        endpoints::update(&client, app, id, patch).await
    }

    async fn rotate_secret(
        &self,
        app: &AppId,
        id: EndpointId,
        secret: Vec<u8>,
        previous_until_ms: i64,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        endpoints::rotate_secret(&client, app, id, &secret, previous_until_ms).await
    }

    async fn delete_endpoint(&self, app: &AppId, id: EndpointId) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let deleted = endpoints::delete(&tx, app, id).await?;
        tx.commit().await.map_err(pg_error)?;
        Ok(deleted)
    }

    async fn enqueue(&self, events: Vec<Enqueue>, max_queued: u64) -> Result<Enqueued, StoreError> {
        if events.is_empty() {
            return Ok(Enqueued::default());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let done = queue::enqueue(&tx, &events, max_queued).await?;
        tx.commit().await.map_err(pg_error)?;
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
        if limit == 0 || batching.size == 0 {
            return Ok(Vec::new());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let leased = queue::lease(&tx, now_ms, limit, lease_ms, batching, paused).await?;
        tx.commit().await.map_err(pg_error)?;
        Ok(leased)
    }

    async fn settle(
        &self,
        now_ms: i64,
        settled: Vec<(EndpointId, i64, Settlement)>,
    ) -> Result<(), StoreError> {
        if settled.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        settle::settle(&tx, now_ms, &settled).await?;
        tx.commit().await.map_err(pg_error)
    }

    async fn next_due(&self) -> Result<Option<i64>, StoreError> {
        let client = self.client().await?;
        read::next_due(&client).await
    }

    async fn dead_letters(
        &self,
        app: &AppId,
        endpoint: Option<EndpointId>,
        after: Option<RowId>,
        limit: usize,
    ) -> Result<Vec<DeadEvent>, StoreError> {
        let client = self.client().await?;
        read::dead_letters(&client, app, endpoint, after, limit).await
    }

    async fn replay(&self, app: &AppId, row: RowId, now_ms: i64) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let replayed = settle::replay(&tx, app, row, now_ms).await?;
        tx.commit().await.map_err(pg_error)?;
        Ok(replayed)
    }

    async fn drop_dead(&self, app: &AppId, row: RowId) -> Result<bool, StoreError> {
        let client = self.client().await?;
        settle::drop_dead(&client, app, row).await
    }

    async fn depth(&self, app: Option<&AppId>) -> Result<Vec<EndpointDepth>, StoreError> {
        let client = self.client().await?;
        read::depth(&client, app).await
    }
}
