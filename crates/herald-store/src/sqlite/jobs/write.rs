//! The queue's writes, each run inside one writer transaction: adding jobs, leasing, settling,
//! replaying and dropping dead letters, pruning; each moves the push's counters ([`counts`]) in
//! the same transaction, as `crate::common::job_state` says each change does. (A broadcast's
//! pages are written by [`super::page`].)

use std::fmt::Write as _;

use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_push::device::Platform;
use herald_push::jobs::{Job, JobId, NewJob, PageJob, Settlement};
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use super::counts::{self, Tally};
use super::{job_row, sql_limit, JOB_COLUMNS};
use crate::common::job_state::{acked_result, settled_state};
use crate::common::jobs::{untried, NewJobRow};
use crate::sqlite::backend;

/// Adds jobs as queued. A send job for a device the push already has a job for is left out,
/// so adding the same jobs twice adds them once.
pub(super) fn insert(tx: &Connection, jobs: &[NewJob]) -> Result<(), StoreError> {
    let rows = untried(jobs);
    let mut tally = Tally::default();
    insert_rows(tx, &rows, &mut tally)?;
    counts::apply(tally, tx)
}

/// Adds job rows, untried (queued until due) or after one attempt (done, queued for a retry,
/// or dead), counting each row added in `tally`. A send job for a device the push already has
/// a job for is left out.
pub(super) fn insert_rows(
    tx: &Connection,
    rows: &[PageJob],
    tally: &mut Tally,
) -> Result<(), StoreError> {
    let now = now_millis();
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO jobs (app, push, provider, kind, device, expand_after, state, due,
                 created, seq, attempts, result, in_doubt, finished)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
             ON CONFLICT (app, push, device) DO NOTHING",
        )
        .map_err(backend)?;
    for row in rows {
        let row = NewJobRow::of(row, now);
        let added = stmt
            .execute(params![
                row.app,
                row.push,
                row.provider,
                row.kind,
                row.device,
                row.after,
                row.state,
                row.due,
                now,
                row.seq,
                row.attempts,
                row.result,
                row.in_doubt,
                row.finished
            ])
            .map_err(backend)?;
        if added == 1 {
            tally.enter(row.app, row.push, &row.standing());
        }
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
    let mut tally = Tally::default();
    for mut job in jobs {
        let (attempts, in_doubt): (i64, bool) = take
            .query_row(params![job.id, until], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(backend)?;
        tally.leased(&job, in_doubt);
        job.attempts = u32::try_from(attempts).unwrap_or(u32::MAX);
        job.in_doubt = in_doubt;
        leased.push(job);
    }
    counts::apply(tally, tx)?;
    Ok(leased)
}

/// Settles leased jobs; a job that is not leased is left alone.
pub(super) fn settle(tx: &Connection, settled: &[(JobId, Settlement)]) -> Result<(), StoreError> {
    let now = now_millis();
    let mut finish = tx
        .prepare_cached(
            "UPDATE jobs SET state = ?2, result = ?3, lease_until = NULL, finished = ?4
             WHERE id = ?1 AND state = 'leased'
             RETURNING app, push, kind, in_doubt",
        )
        .map_err(backend)?;
    let mut retry = tx
        .prepare_cached(
            "UPDATE jobs SET state = 'queued', due = ?2, result = ?3, lease_until = NULL
             WHERE id = ?1 AND state = 'leased'
             RETURNING app, push, kind, in_doubt",
        )
        .map_err(backend)?;
    let mut tally = Tally::default();
    for (id, settlement) in settled {
        let state = settled_state(settlement);
        let result = settlement.text();
        let read = |r: &rusqlite::Row<'_>| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, bool>(3)?,
            ))
        };
        let moved = match settlement {
            Settlement::Retry { due_ms, .. } => retry
                .query_row(params![id, due_ms, result], read)
                .optional(),
            _ => finish
                .query_row(params![id, state, result, now], read)
                .optional(),
        }
        .map_err(backend)?;
        if let Some((app, push, kind, in_doubt)) = moved {
            tally.settled((&app, &push), &kind, in_doubt, state, &result);
        }
    }
    counts::apply(tally, tx)
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
            "UPDATE jobs SET state = 'done', result = ?5, finished = ?4
             WHERE app = ?1 AND push = ?2 AND device = ?3 AND state = 'queued'
             RETURNING in_doubt",
        )
        .map_err(backend)?;
    let acked = acked_result();
    let mut settled = 0;
    let mut tally = Tally::default();
    for push in pushes {
        let rows = stmt
            .query_map(params![app.as_str(), push, device, now_ms, &*acked], |r| {
                r.get::<_, bool>(0)
            })
            .map_err(backend)?;
        for in_doubt in rows {
            let in_doubt = in_doubt.map_err(backend)?;
            tally.settled_live((app.as_str(), push), "send", in_doubt);
            settled += 1;
        }
    }
    counts::apply(tally, tx)?;
    Ok(settled)
}

/// Makes a dead letter of `app` due at `now_ms` with no attempts made.
pub(super) fn replay(
    tx: &Connection,
    app: &AppId,
    id: JobId,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let moved: Option<(String, String, bool)> = tx
        .query_row(
            "UPDATE jobs SET state = 'queued', due = ?3, attempts = 0, lease_until = NULL,
                 finished = NULL
             WHERE id = ?1 AND app = ?2 AND state = 'dead'
             RETURNING push, kind, in_doubt",
            params![id, app.as_str(), now_ms],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(backend)?;
    let Some((push, kind, in_doubt)) = moved else {
        return Ok(false);
    };
    let mut tally = Tally::default();
    tally.replayed((app.as_str(), &push), &kind, in_doubt);
    counts::apply(tally, tx)?;
    Ok(true)
}

/// Deletes a dead letter of `app`.
pub(super) fn drop_dead(tx: &Connection, app: &AppId, id: JobId) -> Result<bool, StoreError> {
    let gone: Option<(String, String, bool)> = tx
        .query_row(
            "DELETE FROM jobs WHERE id = ?1 AND app = ?2 AND state = 'dead'
             RETURNING push, kind, in_doubt",
            params![id, app.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(backend)?;
    let Some((push, kind, in_doubt)) = gone else {
        return Ok(false);
    };
    let mut tally = Tally::default();
    tally.dropped_dead((app.as_str(), &push), &kind, in_doubt);
    counts::apply(tally, tx)?;
    Ok(true)
}

/// Deletes up to `limit` (negative: no limit) finished send jobs of pushes that expired before
/// `before_ms`; returns how many. Their counts leave the push's counters; once no such job is
/// left, the counts of finished sends that had no row (a broadcast's direct sends) of those
/// pushes go too, so a receipt forgets a push's finished sends all at once.
pub(crate) fn prune_expired_chunk(
    tx: &Connection,
    before_ms: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    let mut tally = Tally::default();
    let mut n = 0u64;
    {
        let mut stmt = tx
            .prepare_cached(
                "DELETE FROM jobs WHERE id IN (
                     SELECT j.id FROM pushes p JOIN jobs j ON j.app = p.app AND j.push = p.id
                     WHERE p.expires < ?1 AND j.kind = 'send' AND j.state = 'done'
                     LIMIT ?2)
                 RETURNING app, push, result, in_doubt",
            )
            .map_err(backend)?;
        let rows = stmt
            .query_map(params![before_ms, limit], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, bool>(3)?,
                ))
            })
            .map_err(backend)?;
        for row in rows {
            let (app, push, result, in_doubt) = row.map_err(backend)?;
            tally.pruned((&app, &push), result.as_deref(), in_doubt);
            n += 1;
        }
    }
    counts::apply(tally, tx)?;
    if limit < 0 || n < limit as u64 {
        tx.prepare_cached(
            "DELETE FROM push_counts WHERE counter LIKE 'done:%' AND EXISTS (
                 SELECT 1 FROM pushes p
                 WHERE p.app = push_counts.app AND p.id = push_counts.push AND p.expires < ?1)",
        )
        .and_then(|mut stmt| stmt.execute(params![before_ms]))
        .map_err(backend)?;
    }
    Ok(n)
}
