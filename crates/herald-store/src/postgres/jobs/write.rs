//! The queue's writes other than adding rows ([`super::insert`]) and a broadcast's pages
//! ([`super::page`]), each inside one transaction the caller opened (pruning opens its own):
//! leasing (`FOR UPDATE SKIP LOCKED`), settling, settling live, replaying and dropping dead
//! letters, pruning; each moves the push's counters ([`counts`]) in the same transaction.

use deadpool_postgres::{GenericClient, Object};
use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_push::device::Platform;
use herald_push::jobs::{Job, JobId, Settlement};
use tokio_postgres::Row;

use super::counts::{self, Tally};
use super::{job_of, JOB_COLUMNS, JOB_COLUMN_COUNT};
use crate::common::job_state::{acked_result, settled_state};
use crate::common::qualified;
use crate::postgres::{pg_error, sql_limit};

/// Takes up to `limit` jobs that are due (queued and due, or leased with a lapsed lease, which
/// become in doubt), oldest due first, skipping `paused` pairs and jobs another worker is
/// leasing right now, and leases them until `now_ms + lease_ms`, counting an attempt and the
/// sends newly in doubt. Returns them as they were due.
pub(super) async fn lease(
    client: &impl GenericClient,
    now_ms: i64,
    limit: usize,
    lease_ms: i64,
    paused: &[(AppId, Platform)],
) -> Result<Vec<Job>, StoreError> {
    let paused_apps: Vec<&str> = paused.iter().map(|(a, _)| a.as_str()).collect();
    let paused_providers: Vec<&str> = paused.iter().map(|(_, p)| p.as_str()).collect();
    let until = now_ms.saturating_add(lease_ms);
    let columns = qualified(JOB_COLUMNS, "due_jobs");
    // `due_jobs` holds the rows as they were before the update: its `in_doubt` says whether
    // the job was in doubt already.
    let sql = format!(
        "WITH due_jobs AS (
             SELECT {JOB_COLUMNS} FROM jobs
             WHERE state IN ('queued', 'leased') AND due <= $1
               AND NOT EXISTS (SELECT 1 FROM unnest($3::text[], $4::text[]) AS p(app, provider)
                               WHERE p.app = jobs.app AND p.provider = jobs.provider)
             ORDER BY due, id LIMIT $2
             FOR UPDATE SKIP LOCKED)
         UPDATE jobs SET in_doubt = jobs.in_doubt OR jobs.state = 'leased', state = 'leased',
             due = $5, lease_until = $5, attempts = jobs.attempts + 1
         FROM due_jobs WHERE jobs.id = due_jobs.id
         RETURNING {columns}, jobs.attempts, jobs.in_doubt"
    );
    let rows = client
        .query(
            &sql,
            &[
                &now_ms,
                &sql_limit(limit),
                &paused_apps,
                &paused_providers,
                &until,
            ],
        )
        .await
        .map_err(pg_error)?;
    let mut leased = Vec::with_capacity(rows.len());
    let mut tally = Tally::default();
    for row in rows {
        let mut job = job_of(&row, 0)?;
        let attempts: i64 = row.try_get(JOB_COLUMN_COUNT).map_err(pg_error)?;
        let in_doubt: bool = row.try_get(JOB_COLUMN_COUNT + 1).map_err(pg_error)?;
        tally.leased(&job, in_doubt);
        job.attempts = u32::try_from(attempts).unwrap_or(u32::MAX);
        job.in_doubt = in_doubt;
        leased.push(job);
    }
    counts::apply(tally, client).await?;
    leased.sort_by_key(|j| (j.job.due_ms, j.id));
    Ok(leased)
}

/// A job's `app`, `push`, `kind` and `in_doubt`, as a statement returns them.
fn moved_job(row: &Row) -> Result<(String, String, String, bool), StoreError> {
    Ok((
        row.try_get(0).map_err(pg_error)?,
        row.try_get(1).map_err(pg_error)?,
        row.try_get(2).map_err(pg_error)?,
        row.try_get(3).map_err(pg_error)?,
    ))
}

/// Settles leased jobs; a job that is not leased is left alone.
pub(super) async fn settle(
    client: &impl GenericClient,
    settled: &[(JobId, Settlement)],
) -> Result<(), StoreError> {
    let now = now_millis();
    let finish = client
        .prepare_cached(
            "UPDATE jobs SET state = $2, result = $3, lease_until = NULL, finished = $4
             WHERE id = $1 AND state = 'leased'
             RETURNING app, push, kind, in_doubt",
        )
        .await
        .map_err(pg_error)?;
    let retry = client
        .prepare_cached(
            "UPDATE jobs SET state = 'queued', due = $2, result = $3, lease_until = NULL
             WHERE id = $1 AND state = 'leased'
             RETURNING app, push, kind, in_doubt",
        )
        .await
        .map_err(pg_error)?;
    let mut tally = Tally::default();
    for (id, settlement) in settled {
        let result = settlement.text();
        let state = settled_state(settlement);
        let moved = match settlement {
            Settlement::Retry { due_ms, .. } => {
                client.query_opt(&retry, &[id, due_ms, &result]).await
            }
            _ => {
                client
                    .query_opt(&finish, &[id, &state, &result, &now])
                    .await
            }
        };
        let Some(row) = moved.map_err(pg_error)? else {
            continue;
        };
        let (app, push, kind, in_doubt) = moved_job(&row)?;
        tally.settled((&app, &push), &kind, in_doubt, state, &result);
    }
    counts::apply(tally, client).await
}

/// Settles a device's queued send jobs of `pushes` as `live` (it acknowledged them); a job a
/// worker is running is left to finish. Returns how many it settled.
pub(super) async fn settle_live(
    client: &impl GenericClient,
    app: &AppId,
    device: &str,
    pushes: &[String],
    now_ms: i64,
) -> Result<u64, StoreError> {
    let acked = acked_result();
    let rows = client
        .query(
            "UPDATE jobs SET state = 'done', result = $5, finished = $4
             WHERE app = $1 AND push = ANY($2) AND device = $3 AND state = 'queued'
             RETURNING app, push, kind, in_doubt",
            &[&app.as_str(), &pushes, &device, &now_ms, &&*acked],
        )
        .await
        .map_err(pg_error)?;
    let mut tally = Tally::default();
    for row in &rows {
        let (app, push, kind, in_doubt) = moved_job(row)?;
        tally.settled_live((&app, &push), &kind, in_doubt);
    }
    counts::apply(tally, client).await?;
    Ok(rows.len() as u64)
}

/// Makes a dead letter of `app` due at `now_ms` with no attempts made.
pub(super) async fn replay(
    client: &impl GenericClient,
    app: &AppId,
    id: JobId,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let moved = client
        .query_opt(
            "UPDATE jobs SET state = 'queued', due = $3, attempts = 0, lease_until = NULL,
                 finished = NULL
             WHERE id = $1 AND app = $2 AND state = 'dead'
             RETURNING app, push, kind, in_doubt",
            &[&id, &app.as_str(), &now_ms],
        )
        .await
        .map_err(pg_error)?;
    let Some(row) = moved else {
        return Ok(false);
    };
    let (app, push, kind, in_doubt) = moved_job(&row)?;
    let mut tally = Tally::default();
    tally.replayed((&app, &push), &kind, in_doubt);
    counts::apply(tally, client).await?;
    Ok(true)
}

/// Deletes a dead letter of `app`.
pub(super) async fn drop_dead(
    client: &impl GenericClient,
    app: &AppId,
    id: JobId,
) -> Result<bool, StoreError> {
    let gone = client
        .query_opt(
            "DELETE FROM jobs WHERE id = $1 AND app = $2 AND state = 'dead'
             RETURNING app, push, kind, in_doubt",
            &[&id, &app.as_str()],
        )
        .await
        .map_err(pg_error)?;
    let Some(row) = gone else {
        return Ok(false);
    };
    let (app, push, kind, in_doubt) = moved_job(&row)?;
    let mut tally = Tally::default();
    tally.dropped_dead((&app, &push), &kind, in_doubt);
    counts::apply(tally, client).await?;
    Ok(true)
}

/// Deletes up to `limit` (`None`: no limit) finished send jobs of pushes that expired before
/// `before_ms`, in one transaction; returns how many. Their counts leave the push's counters;
/// once no such job is left, the counts of finished sends that had no row (a broadcast's direct
/// sends) of those pushes go too, so a receipt forgets a push's finished sends all at once.
pub(crate) async fn prune_expired_chunk(
    client: &mut Object,
    before_ms: i64,
    limit: Option<i64>,
) -> Result<u64, StoreError> {
    let tx = client.transaction().await.map_err(pg_error)?;
    let rows = tx
        .query(
            "DELETE FROM jobs WHERE id IN (
                 SELECT j.id FROM pushes p JOIN jobs j ON j.app = p.app AND j.push = p.id
                 WHERE p.expires < $1 AND j.kind = 'send' AND j.state = 'done'
                 LIMIT $2)
             RETURNING app, push, result, in_doubt",
            &[&before_ms, &limit],
        )
        .await
        .map_err(pg_error)?;
    let mut tally = Tally::default();
    for row in &rows {
        let (app, push, result, in_doubt): (String, String, Option<String>, bool) = (
            row.try_get(0).map_err(pg_error)?,
            row.try_get(1).map_err(pg_error)?,
            row.try_get(2).map_err(pg_error)?,
            row.try_get(3).map_err(pg_error)?,
        );
        tally.pruned((&app, &push), result.as_deref(), in_doubt);
    }
    counts::apply(tally, &tx).await?;
    let n = rows.len() as u64;
    if limit.is_none_or(|limit| n < u64::try_from(limit).unwrap_or(0)) {
        tx.execute(
            "DELETE FROM push_counts c WHERE c.counter LIKE 'done:%' AND EXISTS (
                 SELECT 1 FROM pushes p
                 WHERE p.app = c.app AND p.id = c.push AND p.expires < $1)",
            &[&before_ms],
        )
        .await
        .map_err(pg_error)?;
    }
    tx.commit().await.map_err(pg_error)?;
    Ok(n)
}
