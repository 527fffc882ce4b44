//! The queue's reads, on a pooled read connection: dead letters, depth per app and provider,
//! and how one push's jobs stand, in total and per device.

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_push::jobs::{DeadLetter, Depth, DeviceJob, JobId, PushJobs};
use rusqlite::{params, Connection};

use super::{sql_limit, JOB_COLUMNS};
use crate::common::jobs::{dead_letter_of, device_job_of};
use crate::common::values::app_id;
use crate::common::values::stored_platform;
use crate::sqlite::backend;

/// Dead letters of `app` in id order after `after`.
pub(super) fn dead_letters(
    conn: &Connection,
    app: &AppId,
    after: Option<JobId>,
    limit: usize,
) -> Result<Vec<DeadLetter>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {JOB_COLUMNS}, result, finished FROM jobs
             WHERE app = ?1 AND state = 'dead' AND id > ?2 ORDER BY id LIMIT ?3"
        ))
        .map_err(backend)?;
    let rows = stmt
        .query_map(
            params![app.as_str(), after.unwrap_or(0), sql_limit(limit)],
            |r| Ok(dead_letter_of(r)),
        )
        .map_err(backend)?;
    let mut letters = Vec::new();
    for row in rows {
        letters.push(row.map_err(backend)??);
    }
    Ok(letters)
}

/// Jobs waiting or running, the oldest's creation, and dead letters, per app and provider.
pub(super) fn depth(conn: &Connection, app: Option<&AppId>) -> Result<Vec<Depth>, StoreError> {
    const SELECT: &str = "SELECT app, provider, sum(state <> 'dead'),
             min(CASE WHEN state <> 'dead' THEN created END), sum(state = 'dead')
         FROM jobs INDEXED BY jobs_depth WHERE state <> 'done'";
    const GROUP: &str = "GROUP BY app, provider ORDER BY app, provider";
    let mut stmt = match app {
        Some(_) => conn.prepare_cached(&format!("{SELECT} AND app = ?1 {GROUP}")),
        None => conn.prepare_cached(&format!("{SELECT} {GROUP}")),
    }
    .map_err(backend)?;
    let read = |r: &rusqlite::Row<'_>| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, Option<String>>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, Option<i64>>(3)?,
            r.get::<_, i64>(4)?,
        ))
    };
    let rows = match app {
        Some(app) => stmt.query_map([app.as_str()], read),
        None => stmt.query_map([], read),
    }
    .map_err(backend)?;
    let mut depths = Vec::new();
    for row in rows {
        let (app, provider, queued, oldest_ms, dead) = row.map_err(backend)?;
        depths.push(Depth {
            app: app_id(app)?,
            provider: provider.as_deref().map(stored_platform).transpose()?,
            queued: queued as u64,
            oldest_ms,
            dead: dead as u64,
        });
    }
    Ok(depths)
}

/// How a push's jobs stand, from its counters: finished sends by result (with or without a
/// job row), send jobs waiting or running, dead letters (sends and expansions), sends in doubt,
/// and whether an expansion is still running.
pub(super) fn push_jobs(
    conn: &Connection,
    app: &AppId,
    push: &str,
) -> Result<PushJobs, StoreError> {
    super::counts::read(conn, app.as_str(), push)
}

/// A push's send jobs per device, in device order after `after`.
pub(super) fn device_jobs(
    conn: &Connection,
    app: &AppId,
    push: &str,
    after: &str,
    limit: usize,
) -> Result<Vec<DeviceJob>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT device, provider, state, result, attempts, in_doubt FROM jobs
             WHERE app = ?1 AND push = ?2 AND device > ?3 AND kind = 'send'
             ORDER BY device LIMIT ?4",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map(params![app.as_str(), push, after, sql_limit(limit)], |r| {
            Ok(device_job_of(r))
        })
        .map_err(backend)?;
    let mut jobs = Vec::new();
    for row in rows {
        jobs.push(row.map_err(backend)??);
    }
    Ok(jobs)
}
