//! The queue's writes: adding jobs, leasing (`FOR UPDATE SKIP LOCKED`), settling, expanding a
//! broadcast a page at a time, pruning.

use deadpool_postgres::GenericClient;
use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_push::device::Platform;
use herald_push::jobs::{Job, JobId, JobKind, NewJob, Settlement};

use super::{job_of, JOB_COLUMNS};
use crate::postgres::{pg_error, sql_limit};
use crate::seq_to_db;

/// What a finished expansion's `result` says.
const EXPANDED: &str = "expanded";

/// Refuses jobs the queue could not run: a send job needs a provider.
pub(super) fn check_new(jobs: &[NewJob]) -> Result<(), StoreError> {
    match jobs
        .iter()
        .find(|j| matches!(j.kind, JobKind::Send { .. }) && j.provider.is_none())
    {
        Some(j) => Err(StoreError::failed(format!(
            "a send job of push {:?} has no provider",
            j.push
        ))),
        None => Ok(()),
    }
}

/// Adds jobs as queued, in one statement. A send job for a device the push already has a job
/// for is left out, so adding the same jobs twice adds them once.
pub(super) async fn insert(client: &impl GenericClient, jobs: &[NewJob]) -> Result<(), StoreError> {
    let now = now_millis();
    let mut columns = JobColumns::default();
    for job in jobs {
        let (kind, device, after) = match &job.kind {
            JobKind::Send { device } => ("send", Some(device.as_str()), None),
            JobKind::Expand { after } => ("expand", None, after.as_deref()),
        };
        columns.app.push(job.app.as_str());
        columns.push.push(&job.push);
        columns.provider.push(job.provider.map(Platform::as_str));
        columns.kind.push(kind);
        columns.device.push(device);
        columns.after.push(after);
        columns.due.push(job.due_ms);
        columns.seq.push(seq_to_db(job.seq));
    }
    let c = &columns;
    client
        .execute(
            "INSERT INTO jobs (app, push, provider, kind, device, expand_after, state, due,
                 created, seq)
             SELECT a, p, pr, k, d, af, 'queued', du, $9, s
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                         $6::text[], $7::bigint[], $8::bigint[])
                 AS j(a, p, pr, k, d, af, du, s)
             ON CONFLICT (app, push, device) DO NOTHING",
            &[
                &c.app,
                &c.push,
                &c.provider,
                &c.kind,
                &c.device,
                &c.after,
                &c.due,
                &c.seq,
                &now,
            ],
        )
        .await
        .map_err(pg_error)?;
    Ok(())
}

/// Jobs to insert, column by column (for `unnest`).
#[derive(Default)]
struct JobColumns<'a> {
    app: Vec<&'a str>,
    push: Vec<&'a str>,
    provider: Vec<Option<&'a str>>,
    kind: Vec<&'a str>,
    device: Vec<Option<&'a str>>,
    after: Vec<Option<&'a str>>,
    due: Vec<i64>,
    seq: Vec<i64>,
}

/// Takes up to `limit` jobs that are due (queued and due, or leased with a lapsed lease, which
/// become in doubt), oldest due first, skipping `paused` pairs and jobs another worker is
/// leasing right now, and leases them until `now_ms + lease_ms`, counting an attempt. Returns
/// them as they were due.
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
    let columns = JOB_COLUMNS
        .split(", ")
        .map(|c| format!("due_jobs.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
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
    for row in rows {
        let mut job = job_of(&row, 0)?;
        let attempts: i64 = row.try_get(12).map_err(pg_error)?;
        job.attempts = u32::try_from(attempts).unwrap_or(u32::MAX);
        job.in_doubt = row.try_get(13).map_err(pg_error)?;
        leased.push(job);
    }
    leased.sort_by_key(|j| (j.job.due_ms, j.id));
    Ok(leased)
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
             WHERE id = $1 AND state = 'leased'",
        )
        .await
        .map_err(pg_error)?;
    let retry = client
        .prepare_cached(
            "UPDATE jobs SET state = 'queued', due = $2, result = $3, lease_until = NULL
             WHERE id = $1 AND state = 'leased'",
        )
        .await
        .map_err(pg_error)?;
    for (id, settlement) in settled {
        match settlement {
            Settlement::Done { result } => {
                client.execute(&finish, &[id, &"done", result, &now]).await
            }
            Settlement::Dead { reason } => {
                client.execute(&finish, &[id, &"dead", reason, &now]).await
            }
            Settlement::Retry { due_ms, reason } => {
                client.execute(&retry, &[id, due_ms, reason]).await
            }
        }
        .map_err(pg_error)?;
    }
    Ok(())
}

/// Adds an expansion's page of send jobs and moves its cursor to `next`, or finishes it when
/// `next` is `None`, renewing its lease. Refuses a job that is not a leased expansion and a page
/// for another app or push.
pub(super) async fn expand(
    client: &impl GenericClient,
    id: JobId,
    page: &[NewJob],
    next: Option<String>,
    now_ms: i64,
    lease_ms: i64,
) -> Result<(), StoreError> {
    let found = client
        .query_opt(
            "SELECT app, push, kind, state FROM jobs WHERE id = $1 FOR UPDATE",
            &[&id],
        )
        .await
        .map_err(pg_error)?;
    let Some(found) = found else {
        return Err(StoreError::failed(format!("expansion job {id} is gone")));
    };
    let (app, push, kind, state): (String, String, String, String) = (
        found.try_get(0).map_err(pg_error)?,
        found.try_get(1).map_err(pg_error)?,
        found.try_get(2).map_err(pg_error)?,
        found.try_get(3).map_err(pg_error)?,
    );
    if kind != "expand" || state != "leased" {
        return Err(StoreError::failed(format!(
            "job {id} is not a running expansion ({kind}, {state})"
        )));
    }
    if let Some(stray) = page
        .iter()
        .find(|j| j.app.as_str() != app || j.push != push)
    {
        return Err(StoreError::failed(format!(
            "expansion job {id} of push {push:?} was given a job of push {:?} of another app \
             or push",
            stray.push
        )));
    }
    if !page.is_empty() {
        insert(client, page).await?;
    }
    let until = now_ms.saturating_add(lease_ms);
    match next {
        Some(after) => {
            client
                .execute(
                    "UPDATE jobs SET expand_after = $2, due = $3, lease_until = $3
                     WHERE id = $1",
                    &[&id, &after, &until],
                )
                .await
        }
        None => {
            client
                .execute(
                    "UPDATE jobs SET state = 'done', result = $2, lease_until = NULL,
                         finished = $3
                     WHERE id = $1",
                    &[&id, &EXPANDED, &now_millis()],
                )
                .await
        }
    }
    .map_err(pg_error)?;
    Ok(())
}

/// Deletes up to `limit` (`None`: no limit) finished send jobs of pushes that expired before
/// `before_ms`; returns how many.
pub(crate) async fn prune_expired_chunk(
    client: &impl GenericClient,
    before_ms: i64,
    limit: Option<i64>,
) -> Result<u64, StoreError> {
    client
        .execute(
            "DELETE FROM jobs WHERE id IN (
                 SELECT j.id FROM pushes p JOIN jobs j ON j.app = p.app AND j.push = p.id
                 WHERE p.expires < $1 AND j.kind = 'send' AND j.state = 'done'
                 LIMIT $2)",
            &[&before_ms, &limit],
        )
        .await
        .map_err(pg_error)
}
