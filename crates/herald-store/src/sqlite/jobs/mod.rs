//! The SQLite implementation of [`JobQueue`]: provider send jobs and broadcast expansions in the
//! `jobs` table, in the same database as the devices and pushes they refer to.
//!
//! Writes (enqueue, lease, settle, expand, replay, drop, prune) run on the writer thread, one
//! transaction each, durable like appends ([`write`]); reads (dead letters, depth, how a push's
//! jobs stand) use the read pool ([`read`]). The writer's periodic sweep also prunes finished send
//! jobs of pushes that expired more than a day ago, a chunk at a time ([`prune_expired_chunk`]).
//! Job columns, row decoding and the counters' rules are shared with PostgreSQL
//! (`crate::common::jobs`, `crate::common::job_counts`).
//!
//! Every write that moves a job also moves the push's counters ([`counts`]) in the same
//! transaction; a receipt reads those. A broadcast page sent directly is written by [`page`].
//!
//! A leased job's `due` is when its lease runs out, so one ordered index scan (`jobs_due`, which
//! holds only queued and leased jobs) finds both due jobs and lapsed leases.

mod counts;
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
use rusqlite::Row;

use crate::sqlite::SqliteLog;

pub(crate) use write::prune_expired_chunk;

pub(crate) use crate::common::jobs::JOB_COLUMNS;
use crate::common::jobs::{check_new, job_of};
pub(crate) use crate::common::values::sql_limit;

/// A job's stored columns ([`JOB_COLUMNS`]) as a [`Job`], as a row mapper for a query.
fn job_row(r: &Row<'_>) -> rusqlite::Result<Result<Job, StoreError>> {
    Ok(job_of(r, 0))
}

#[async_trait]
impl JobQueue for SqliteLog {
    async fn enqueue(&self, jobs: Vec<NewJob>) -> Result<(), StoreError> {
        check_new(&jobs)?;
        if jobs.is_empty() {
            return Ok(());
        }
        self.write(move |tx| write::insert(tx, &jobs)).await
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
        let paused = paused.to_vec();
        self.write(move |tx| write::lease(tx, now_ms, limit, lease_ms, &paused))
            .await
    }

    async fn settle(&self, settled: Vec<(JobId, Settlement)>) -> Result<(), StoreError> {
        if settled.is_empty() {
            return Ok(());
        }
        self.write(move |tx| write::settle(tx, &settled)).await
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
        let (app, device, pushes) = (app.clone(), device.to_string(), pushes.to_vec());
        self.write(move |tx| write::settle_live(tx, &app, &device, &pushes, now_ms))
            .await
    }

    async fn mark_in_flight(
        &self,
        job: JobId,
        until: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<(), StoreError> {
        let until = until.to_string();
        self.write(move |tx| page::mark_in_flight(tx, job, &until, now_ms, lease_ms))
            .await
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
        self.write(move |tx| page::expand_page(tx, job, &page, next, now_ms, lease_ms))
            .await
    }

    async fn dead_letters(
        &self,
        app: &AppId,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, StoreError> {
        let app = app.clone();
        self.readers()
            .run(move |conn| read::dead_letters(conn, &app, after, limit))
            .await
    }

    async fn replay(&self, app: &AppId, id: JobId, now_ms: i64) -> Result<bool, StoreError> {
        let app = app.clone();
        self.write(move |tx| write::replay(tx, &app, id, now_ms))
            .await
    }

    async fn drop_dead(&self, app: &AppId, id: JobId) -> Result<bool, StoreError> {
        let app = app.clone();
        self.write(move |tx| write::drop_dead(tx, &app, id)).await
    }

    async fn depth(&self, app: Option<&AppId>) -> Result<Vec<Depth>, StoreError> {
        let app = app.cloned();
        self.readers()
            .run(move |conn| read::depth(conn, app.as_ref()))
            .await
    }

    async fn push_jobs(&self, app: &AppId, push: &str) -> Result<PushJobs, StoreError> {
        let (app, push) = (app.clone(), push.to_string());
        self.readers()
            .run(move |conn| read::push_jobs(conn, &app, &push))
            .await
    }

    async fn device_jobs(
        &self,
        app: &AppId,
        push: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeviceJob>, StoreError> {
        let (app, push) = (app.clone(), push.to_string());
        let after = after.unwrap_or_default().to_string();
        self.readers()
            .run(move |conn| read::device_jobs(conn, &app, &push, &after, limit))
            .await
    }

    async fn prune(&self, before_ms: i64) -> Result<u64, StoreError> {
        self.write(move |tx| write::prune_expired_chunk(tx, before_ms, -1))
            .await
    }
}
