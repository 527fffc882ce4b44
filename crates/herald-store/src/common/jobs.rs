//! Provider jobs as both backends store them (`jobs`): how long finished jobs are kept, the
//! columns a job read selects and how a row becomes a [`Job`], a [`DeadLetter`] or a
//! [`DeviceJob`], which new jobs the queue refuses, and the columns of a row it adds
//! ([`NewJobRow`]). The counters per push are in `super::job_counts`, how each change of a
//! job's state moves them in `super::job_state`.

use std::borrow::Cow;

use herald_core::log::StoreError;
use herald_push::device::Platform;
use herald_push::jobs::{
    DeadLetter, DeviceJob, ExpandedPage, Job, JobId, JobKind, NewJob, PageJob, Settlement,
};

use super::job_counts::Standing;
use super::row::StoredRow;
use super::values::{app_id, seq_to_db, stored_platform};

/// How long finished send jobs are kept after their push expired (receipts read them), before
/// the writer's sweep deletes them: a day.
pub(crate) const DONE_JOBS_KEPT_AFTER_EXPIRY_MS: i64 = 24 * 3600 * 1000;

/// Most finished jobs one sweep deletes, so a sweep never holds up appends for long.
pub(crate) const PRUNE_CHUNK: i64 = 10_000;

/// What a finished expansion's `result` says.
pub(crate) const EXPANDED: &str = "expanded";

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

/// Refuses jobs the queue could not run: a send job needs a provider.
pub(crate) fn check_new(jobs: &[NewJob]) -> Result<(), StoreError> {
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

/// `jobs` as rows to add untried (queued until due).
pub(crate) fn untried(jobs: &[NewJob]) -> Vec<PageJob> {
    jobs.iter()
        .map(|job| PageJob {
            job: job.clone(),
            sent: None,
            in_doubt: false,
        })
        .collect()
}

/// The columns of one `jobs` row to add (`created` aside: the statement's time), untried
/// (queued until due) or after one attempt (done, queued for a retry, or dead).
pub(crate) struct NewJobRow<'a> {
    pub app: &'a str,
    pub push: &'a str,
    pub provider: Option<&'static str>,
    pub kind: &'static str,
    pub device: Option<&'a str>,
    pub after: Option<&'a str>,
    pub state: &'static str,
    pub due: i64,
    pub seq: i64,
    pub attempts: i64,
    pub result: Option<Cow<'a, str>>,
    pub in_doubt: bool,
    pub finished: Option<i64>,
}

impl<'a> NewJobRow<'a> {
    /// The row `row` adds at `now` (ms).
    pub(crate) fn of(row: &'a PageJob, now: i64) -> Self {
        let job = &row.job;
        let (kind, device, after) = match &job.kind {
            JobKind::Send { device } => ("send", Some(device.as_str()), None),
            JobKind::Expand { after } => ("expand", None, after.as_deref()),
        };
        let (state, due, attempts, finished) = match &row.sent {
            None => ("queued", job.due_ms, 0, None),
            Some(Settlement::Done { .. }) => ("done", now, 1, Some(now)),
            Some(Settlement::Retry { due_ms, .. }) => ("queued", *due_ms, 1, None),
            Some(Settlement::Dead { .. }) => ("dead", now, 1, Some(now)),
        };
        NewJobRow {
            app: job.app.as_str(),
            push: &job.push,
            provider: job.provider.map(Platform::as_str),
            kind,
            device,
            after,
            state,
            due,
            seq: seq_to_db(job.seq),
            attempts,
            result: row.sent.as_ref().map(Settlement::text),
            in_doubt: row.in_doubt,
            finished,
        }
    }

    /// How the row stands once added, for the counters.
    pub(crate) fn standing(&self) -> Standing<'_> {
        Standing {
            kind: self.kind,
            state: self.state,
            result: self.result.as_deref(),
            in_doubt: self.in_doubt,
        }
    }
}

/// The app and push of expansion `id`, from the row an expansion's write read for it (`app,
/// push, kind, state`; `None` when there is none); fails unless it is a leased expansion.
pub(crate) fn running_expansion(
    id: JobId,
    found: Option<&impl StoredRow>,
) -> Result<(String, String), StoreError> {
    let Some(found) = found else {
        return Err(StoreError::failed(format!("expansion job {id} is gone")));
    };
    let (app, push, kind, state): (String, String, String, String) = (
        found.column(0)?,
        found.column(1)?,
        found.column(2)?,
        found.column(3)?,
    );
    if kind != "expand" || state != "leased" {
        return Err(StoreError::failed(format!(
            "job {id} is not a running expansion ({kind}, {state})"
        )));
    }
    Ok((app, push))
}

/// Refuses a page of expansion `id` (of `app`'s `push`) holding a job of another app or push.
pub(crate) fn check_page(
    id: JobId,
    (app, push): (&str, &str),
    page: &ExpandedPage,
) -> Result<(), StoreError> {
    match page
        .jobs
        .iter()
        .find(|j| j.job.app.as_str() != app || j.job.push != push)
    {
        Some(stray) => Err(StoreError::failed(format!(
            "expansion job {id} of push {push:?} was given a job of push {:?} of another app \
             or push",
            stray.job.push
        ))),
        None => Ok(()),
    }
}
