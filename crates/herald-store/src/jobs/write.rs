//! The queue's writes, each run inside one writer transaction: adding jobs, leasing, settling,
//! expanding a broadcast a page at a time, replaying and dropping dead letters, pruning.

use std::fmt::Write as _;

use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_push::device::Platform;
use herald_push::jobs::{Job, JobId, JobKind, NewJob, Settlement};
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use super::{job_row, sql_limit, JOB_COLUMNS};
use crate::backend;

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

/// Adds jobs as queued. A send job for a device the push already has a job for is left out,
/// so adding the same jobs twice adds them once.
pub(super) fn insert(tx: &Connection, jobs: &[NewJob]) -> Result<(), StoreError> {
    let now = now_millis();
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO jobs (app, push, provider, kind, device, expand_after, state, due,
                 created, seq)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued', ?7, ?8, ?9)
             ON CONFLICT (app, push, device) DO NOTHING",
        )
        .map_err(backend)?;
    for job in jobs {
        let (kind, device, after) = match &job.kind {
            JobKind::Send { device } => ("send", Some(device), None),
            JobKind::Expand { after } => ("expand", None, after.as_ref()),
        };
        stmt.execute(params![
            job.app.as_str(),
            job.push,
            job.provider.map(Platform::as_str),
            kind,
            device,
            after,
            job.due_ms,
            now,
            crate::seq_to_db(job.seq)
        ])
        .map_err(backend)?;
    }
    Ok(())
}

/// Takes up to `limit` jobs that are due (queued and due, or leased with a lapsed lease, which
/// become in doubt), oldest due first, skipping `paused` pairs, and leases them until
/// `now_ms + lease_ms`, counting an attempt. Returns them as they were due.
pub(super) fn lease(
    tx: &Connection,
    now_ms: i64,
    limit: usize,
    lease_ms: i64,
    paused: &[(AppId, Platform)],
) -> Result<Vec<Job>, StoreError> {
    let mut sql = format!(
        "SELECT {JOB_COLUMNS} FROM jobs INDEXED BY jobs_due
         WHERE state IN ('queued', 'leased') AND due <= ?1"
    );
    let mut args = vec![Value::Integer(now_ms), Value::Integer(sql_limit(limit))];
    for (app, provider) in paused {
        let _ = write!(
            sql,
            " AND NOT (app = ?{} AND provider IS ?{})",
            args.len() + 1,
            args.len() + 2
        );
        args.push(Value::Text(app.as_str().to_string()));
        args.push(Value::Text(provider.as_str().to_string()));
    }
    sql.push_str(" ORDER BY due, id LIMIT ?2");
    let jobs: Vec<Job> = {
        let mut select = tx.prepare_cached(&sql).map_err(backend)?;
        let rows = select
            .query_map(params_from_iter(args), job_row)
            .map_err(backend)?;
        let mut jobs = Vec::new();
        for row in rows {
            jobs.push(row.map_err(backend)??);
        }
        jobs
    };
    let until = now_ms.saturating_add(lease_ms);
    let mut take = tx
        .prepare_cached(
            "UPDATE jobs SET in_doubt = in_doubt OR state = 'leased', state = 'leased',
                 due = ?2, lease_until = ?2, attempts = attempts + 1
             WHERE id = ?1
             RETURNING attempts, in_doubt",
        )
        .map_err(backend)?;
    let mut leased = Vec::with_capacity(jobs.len());
    for mut job in jobs {
        let (attempts, in_doubt): (i64, bool) = take
            .query_row(params![job.id, until], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(backend)?;
        job.attempts = u32::try_from(attempts).unwrap_or(u32::MAX);
        job.in_doubt = in_doubt;
        leased.push(job);
    }
    Ok(leased)
}

/// Settles leased jobs; a job that is not leased is left alone.
pub(super) fn settle(tx: &Connection, settled: &[(JobId, Settlement)]) -> Result<(), StoreError> {
    let now = now_millis();
    let mut finish = tx
        .prepare_cached(
            "UPDATE jobs SET state = ?2, result = ?3, lease_until = NULL, finished = ?4
             WHERE id = ?1 AND state = 'leased'",
        )
        .map_err(backend)?;
    let mut retry = tx
        .prepare_cached(
            "UPDATE jobs SET state = 'queued', due = ?2, result = ?3, lease_until = NULL
             WHERE id = ?1 AND state = 'leased'",
        )
        .map_err(backend)?;
    for (id, settlement) in settled {
        match settlement {
            Settlement::Done { result } => finish.execute(params![id, "done", result, now]),
            Settlement::Dead { reason } => finish.execute(params![id, "dead", reason, now]),
            Settlement::Retry { due_ms, reason } => retry.execute(params![id, due_ms, reason]),
        }
        .map_err(backend)?;
    }
    Ok(())
}

/// Settles a device's queued send jobs of `pushes` as `live` (it acknowledged them); a job a
/// worker is running is left to finish.
pub(super) fn settle_live(
    tx: &Connection,
    app: &AppId,
    device: &str,
    pushes: &[String],
    now_ms: i64,
) -> Result<u64, StoreError> {
    let mut stmt = tx
        .prepare_cached(
            "UPDATE jobs SET state = 'done', result = 'live', finished = ?4
             WHERE app = ?1 AND push = ?2 AND device = ?3 AND state = 'queued'",
        )
        .map_err(backend)?;
    let mut settled = 0;
    for push in pushes {
        settled += stmt
            .execute(params![app.as_str(), push, device, now_ms])
            .map_err(backend)? as u64;
    }
    Ok(settled)
}

/// Adds an expansion's page of send jobs and moves its cursor to `next`, or finishes it when
/// `next` is `None`, renewing its lease. Refuses a job that is not a leased expansion and a page
/// for another app or push.
pub(super) fn expand(
    tx: &Connection,
    id: JobId,
    page: &[NewJob],
    next: Option<String>,
    now_ms: i64,
    lease_ms: i64,
) -> Result<(), StoreError> {
    let found: Option<(String, String, String, String)> = tx
        .query_row(
            "SELECT app, push, kind, state FROM jobs WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()
        .map_err(backend)?;
    let Some((app, push, kind, state)) = found else {
        return Err(StoreError::failed(format!("expansion job {id} is gone")));
    };
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
    insert(tx, page)?;
    let until = now_ms.saturating_add(lease_ms);
    match next {
        Some(after) => tx.execute(
            "UPDATE jobs SET expand_after = ?2, due = ?3, lease_until = ?3 WHERE id = ?1",
            params![id, after, until],
        ),
        None => tx.execute(
            "UPDATE jobs SET state = 'done', result = ?2, lease_until = NULL, finished = ?3
             WHERE id = ?1",
            params![id, EXPANDED, now_millis()],
        ),
    }
    .map_err(backend)?;
    Ok(())
}

/// Makes a dead letter of `app` due at `now_ms` with no attempts made.
pub(super) fn replay(
    tx: &Connection,
    app: &AppId,
    id: JobId,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let n = tx
        .execute(
            "UPDATE jobs SET state = 'queued', due = ?3, attempts = 0, lease_until = NULL,
                 finished = NULL
             WHERE id = ?1 AND app = ?2 AND state = 'dead'",
            params![id, app.as_str(), now_ms],
        )
        .map_err(backend)?;
    Ok(n == 1)
}

/// Deletes a dead letter of `app`.
pub(super) fn drop_dead(tx: &Connection, app: &AppId, id: JobId) -> Result<bool, StoreError> {
    let n = tx
        .execute(
            "DELETE FROM jobs WHERE id = ?1 AND app = ?2 AND state = 'dead'",
            params![id, app.as_str()],
        )
        .map_err(backend)?;
    Ok(n == 1)
}

/// Deletes up to `limit` (negative: no limit) finished send jobs of pushes that expired before
/// `before_ms`; returns how many.
pub(crate) fn prune_expired_chunk(
    tx: &Connection,
    before_ms: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    let n = tx
        .prepare_cached(
            "DELETE FROM jobs WHERE id IN (
                 SELECT j.id FROM pushes p JOIN jobs j ON j.app = p.app AND j.push = p.id
                 WHERE p.expires < ?1 AND j.kind = 'send' AND j.state = 'done'
                 LIMIT ?2)",
        )
        .and_then(|mut stmt| stmt.execute(params![before_ms, limit]))
        .map_err(backend)?;
    Ok(n as u64)
}
