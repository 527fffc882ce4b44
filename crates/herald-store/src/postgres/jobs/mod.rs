//! [`JobQueue`] on PostgreSQL: provider send jobs and broadcast expansions in the `jobs` table,
//! with the SQLite implementation's semantics (`crate::sqlite::jobs`), shared by every node's
//! workers.
//!
//! Leasing takes due jobs with `FOR UPDATE SKIP LOCKED`, so workers on several nodes leasing at
//! once each get different jobs without waiting for one another; a leased job's `due` is when its
//! lease runs out, so one ordered scan of `jobs_due` finds due jobs and lapsed leases alike. Each
//! write is one transaction on a pooled connection ([`write`]; rows added in [`insert`], a
//! broadcast's pages in [`page`]) and moves the push's counters ([`counts`]) in that transaction;
//! reads are single queries ([`read`]), a receipt's from the counters. The writer task's periodic
//! sweep also prunes finished send jobs of long-expired pushes, a chunk at a time.

mod counts;
mod insert;
mod page;
mod read;
mod write;

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_push::device::Platform;
use herald_push::jobs::{
    DeadLetter, Depth, DeviceJob, ExpandedPage, Job, JobId, JobQueue, NewJob, PushJobs, Settlement,
};

use super::{pg_error, PostgresStore};
use crate::common::jobs::check_new;
pub(crate) use crate::common::jobs::{job_of, JOB_COLUMNS, JOB_COLUMN_COUNT};

pub(crate) use write::prune_expired_chunk;

#[async_trait]
impl JobQueue for PostgresStore {
    async fn enqueue(&self, jobs: Vec<NewJob>) -> Result<(), StoreError> {
        check_new(&jobs)?;
        if jobs.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        insert::insert(&tx, &jobs).await?;
        tx.commit().await.map_err(pg_error)
    }

    async fn lease(
        &self,
        now_ms: i64,
        limit: usize,
        lease_ms: i64,
        paused: &[(AppId, Platform)],
    ) -> Result<Vec<Job>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let leased = write::lease(&tx, now_ms, limit, lease_ms, paused).await?;
        tx.commit().await.map_err(pg_error)?;
        Ok(leased)
    }

    async fn settle(&self, settled: Vec<(JobId, Settlement)>) -> Result<(), StoreError> {
        if settled.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        write::settle(&tx, &settled).await?;
        tx.commit().await.map_err(pg_error)
    }

    async fn settle_live(
        &self,
        app: &AppId,
        device: &str,
        pushes: &[String],
        now_ms: i64,
    ) -> Result<u64, StoreError> {
        if pushes.is_empty() {
            return Ok(0);
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let n = write::settle_live(&tx, app, device, pushes, now_ms).await?;
        tx.commit().await.map_err(pg_error)?;
        Ok(n)
    }

    async fn mark_in_flight(
        &self,
        job: JobId,
        until: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        page::mark_in_flight(&client, job, until, now_ms, lease_ms).await
    }

    async fn expand_page(
        &self,
        job: JobId,
        page: ExpandedPage,
        next: Option<String>,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<(), StoreError> {
        let rows: Vec<NewJob> = page.jobs.iter().map(|j| j.job.clone()).collect();
        check_new(&rows)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        page::expand_page(&tx, job, &page, next, now_ms, lease_ms).await?;
        tx.commit().await.map_err(pg_error)
    }

    async fn dead_letters(
        &self,
        app: &AppId,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, StoreError> {
        let client = self.client().await?;
        read::dead_letters(&client, app, after, limit).await
    }

    async fn replay(&self, app: &AppId, id: JobId, now_ms: i64) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let replayed = write::replay(&tx, app, id, now_ms).await?;
        tx.commit().await.map_err(pg_error)?;
        Ok(replayed)
    }

    async fn drop_dead(&self, app: &AppId, id: JobId) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let dropped = write::drop_dead(&tx, app, id).await?;
        tx.commit().await.map_err(pg_error)?;
        Ok(dropped)
    }

    async fn depth(&self, app: Option<&AppId>) -> Result<Vec<Depth>, StoreError> {
        let client = self.client().await?;
        read::depth(&client, app).await
    }

    async fn push_jobs(&self, app: &AppId, push: &str) -> Result<PushJobs, StoreError> {
        let client = self.client().await?;
        read::push_jobs(&client, app, push).await
    }

    async fn device_jobs(
        &self,
        app: &AppId,
        push: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeviceJob>, StoreError> {
        let client = self.client().await?;
        read::device_jobs(&client, app, push, after.unwrap_or_default(), limit).await
    }

    async fn prune(&self, before_ms: i64) -> Result<u64, StoreError> {
        let mut client = self.client().await?;
        prune_expired_chunk(&mut client, before_ms, None).await
    }
}
