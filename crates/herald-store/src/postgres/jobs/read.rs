//! The queue's reads: dead letters, depth per app and provider, and how one push's jobs stand,
//! in total (from its counters) and per device.

use deadpool_postgres::GenericClient;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_push::jobs::{DeadLetter, Depth, DeviceJob, JobId, PushJobs};

use super::JOB_COLUMNS;
use crate::common::jobs::{dead_letter_of, device_job_of};
use crate::common::values::app_id;
use crate::common::values::stored_platform;
use crate::postgres::{pg_error, sql_limit};

/// A stored count (never negative).
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Dead letters of `app` in id order after `after`.
pub(super) async fn dead_letters(
    client: &impl GenericClient,
    app: &AppId,
    after: Option<JobId>,
    limit: usize,
) -> Result<Vec<DeadLetter>, StoreError> {
    let rows = client
        .query(
            &format!(
                "SELECT {JOB_COLUMNS}, result, finished FROM jobs
                 WHERE app = $1 AND state = 'dead' AND id > $2 ORDER BY id LIMIT $3"
            ),
            &[&app.as_str(), &after.unwrap_or(0), &sql_limit(limit)],
        )
        .await
        .map_err(pg_error)?;
    rows.iter().map(dead_letter_of).collect()
}

/// Jobs waiting or running, the oldest's creation, and dead letters, per app and provider.
pub(super) async fn depth(
    client: &impl GenericClient,
    app: Option<&AppId>,
) -> Result<Vec<Depth>, StoreError> {
    let rows = client
        .query(
            "SELECT app, provider, count(*) FILTER (WHERE state <> 'dead'),
                 min(created) FILTER (WHERE state <> 'dead'),
                 count(*) FILTER (WHERE state = 'dead')
             FROM jobs WHERE state <> 'done' AND ($1::text IS NULL OR app = $1)
             GROUP BY app, provider ORDER BY app, provider NULLS FIRST",
            &[&app.map(AppId::as_str)],
        )
        .await
        .map_err(pg_error)?;
    let mut depths = Vec::with_capacity(rows.len());
    for row in rows {
        let provider: Option<String> = row.try_get(1).map_err(pg_error)?;
        depths.push(Depth {
            app: app_id(row.try_get(0).map_err(pg_error)?)?,
            provider: provider.as_deref().map(stored_platform).transpose()?,
            queued: count(row.try_get(2).map_err(pg_error)?),
            oldest_ms: row.try_get(3).map_err(pg_error)?,
            dead: count(row.try_get(4).map_err(pg_error)?),
        });
    }
    Ok(depths)
}

/// How a push's jobs stand, from its counters: finished sends by result (with or without a
/// job row), send jobs waiting or running, dead letters (sends and expansions), sends in doubt,
/// and whether an expansion is still running.
pub(super) async fn push_jobs(
    client: &impl GenericClient,
    app: &AppId,
    push: &str,
) -> Result<PushJobs, StoreError> {
    super::counts::read(client, app.as_str(), push).await
}

/// A push's send jobs per device, in device order after `after`.
pub(super) async fn device_jobs(
    client: &impl GenericClient,
    app: &AppId,
    push: &str,
    after: &str,
    limit: usize,
) -> Result<Vec<DeviceJob>, StoreError> {
    let rows = client
        .query(
            "SELECT device, provider, state, result, attempts, in_doubt FROM jobs
             WHERE app = $1 AND push = $2 AND device > $3 AND kind = 'send'
             ORDER BY device LIMIT $4",
            &[&app.as_str(), &push, &after, &sql_limit(limit)],
        )
        .await
        .map_err(pg_error)?;
    rows.iter().map(device_job_of).collect()
}
