//! Provider jobs as both backends store them (`jobs`): how long finished jobs are kept, the
//! columns a job read selects and how a row becomes a [`Job`], a [`DeadLetter`] or a
//! [`DeviceJob`]. The counters per push, and how each change of a job's state moves them, are
//! in `super::job_counts`.

use herald_core::log::StoreError;
use herald_push::jobs::{DeadLetter, DeviceJob, Job, JobId, JobKind, NewJob};

use super::row::StoredRow;
use super::values::{app_id, stored_platform};

/// How long finished send jobs are kept after their push expired (receipts read them), before
/// the writer's sweep deletes them: a day.
pub(crate) const DONE_JOBS_KEPT_AFTER_EXPIRY_MS: i64 = 24 * 3600 * 1000;

/// Most finished jobs one sweep deletes, so a sweep never holds up appends for long.
pub(crate) const PRUNE_CHUNK: i64 = 10_000;

/// The columns [`job_of`] reads, in order.
pub(crate) const JOB_COLUMNS: &str = "id, app, push, provider, kind, device, expand_after, due, \
     attempts, in_doubt, created, seq, in_flight_until";

/// How many columns [`JOB_COLUMNS`] names (a query's further columns start here).
pub(crate) const JOB_COLUMN_COUNT: usize = 13;

/// A job's stored columns ([`JOB_COLUMNS`], from column `at`) as a [`Job`].
pub(crate) fn job_of(r: &impl StoredRow, at: usize) -> Result<Job, StoreError> {
    let get = |i: usize| at + i;
    let id: JobId = r.column(get(0))?;
    let app: String = r.column(get(1))?;
    let provider: Option<String> = r.column(get(3))?;
    let kind: String = r.column(get(4))?;
    let device: Option<String> = r.column(get(5))?;
    let after: Option<String> = r.column(get(6))?;
    let attempts: i64 = r.column(get(8))?;
    let seq: i64 = r.column(get(11))?;
    let kind = match (kind.as_str(), device) {
        ("send", Some(device)) => JobKind::Send { device },
        ("expand", _) => JobKind::Expand { after },
        _ => return Err(StoreError::failed(format!("corrupt job {id} in store"))),
    };
    Ok(Job {
        id,
        job: NewJob {
            app: app_id(app)?,
            push: r.column(get(2))?,
            provider: provider.as_deref().map(stored_platform).transpose()?,
            kind,
            seq: u64::try_from(seq).unwrap_or(0),
            due_ms: r.column(get(7))?,
        },
        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        in_doubt: r.column(get(9))?,
        created_ms: r.column(get(10))?,
        in_flight_until: r.column(get(12))?,
    })
}

/// A dead letter from a row of [`JOB_COLUMNS`] followed by `result, finished`.
pub(crate) fn dead_letter_of(r: &impl StoredRow) -> Result<DeadLetter, StoreError> {
    let job = job_of(r, 0)?;
    let reason: Option<String> = r.column(JOB_COLUMN_COUNT)?;
    let died: Option<i64> = r.column(JOB_COLUMN_COUNT + 1)?;
    Ok(DeadLetter {
        id: job.id,
        job: job.job,
        attempts: job.attempts,
        reason: reason.unwrap_or_default(),
        died_ms: died.unwrap_or_default(),
    })
}

/// A push's send job for one device, from a row selected as `device, provider, state, result,
/// attempts, in_doubt`; a leased job reads as `running`.
pub(crate) fn device_job_of(r: &impl StoredRow) -> Result<DeviceJob, StoreError> {
    let provider: Option<String> = r.column(1)?;
    let state: String = r.column(2)?;
    let attempts: i64 = r.column(4)?;
    Ok(DeviceJob {
        device: r.column(0)?,
        provider: stored_platform(provider.as_deref().unwrap_or_default())?,
        state: if state == "leased" {
            "running".into()
        } else {
            state
        },
        result: r.column(3)?,
        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        in_doubt: r.column(5)?,
    })
}
