//! The provider job queue through `herald_push::jobs::JobQueue`: leasing (order, limits, lapsed
//! leases, paused pairs) here; settling and dead letters in [`settle`]; expansion (atomic,
//! resumable after a crash) in [`expansion`]; depth, how a push's jobs stand, pruning and app
//! deletion in [`status`]; the counters per push against the rows they count in [`counters`].
//! Every test body runs on both backends ([`crate::on_both!`]: `sqlite` and `postgres`); the
//! helpers here build jobs for all of them. Only the throughput measure here is SQLite's alone.

use std::path::Path;
use std::sync::Arc;

use herald_core::log::ChannelLog;
use herald_core::message::now_millis;
use herald_core::tenancy::App;
use herald_core::tenant::AppId;
use herald_push::device::Platform;
use herald_push::jobs::{Job, JobKind, JobQueue, NewJob, PushJobs, Settlement};
use herald_push::registry::Receipt;
use herald_store::{SqliteLog, SqliteOptions};

use super::backends::{Backend, Store};
use super::RecordingSink;

mod counters;
mod expansion;
mod lease;
mod settle;
mod status;

fn open(dir: &Path) -> Arc<SqliteLog> {
    SqliteLog::open(
        dir,
        SqliteOptions::default(),
        Arc::new(RecordingSink::default()),
    )
    .unwrap()
}

fn app(id: &str) -> AppId {
    AppId::parse(id).unwrap()
}

fn send(app_id: &str, push: &str, provider: Platform, device: &str, due_ms: i64) -> NewJob {
    NewJob {
        app: app(app_id),
        push: push.into(),
        provider: Some(provider),
        kind: JobKind::Send {
            device: device.into(),
        },
        seq: 7,
        due_ms,
    }
}

fn expansion(app_id: &str, push: &str) -> NewJob {
    NewJob {
        app: app(app_id),
        push: push.into(),
        provider: None,
        kind: JobKind::Expand { after: None },
        seq: 3,
        due_ms: 0,
    }
}

fn device_of(job: &Job) -> &str {
    match &job.job.kind {
        JobKind::Send { device } => device,
        JobKind::Expand { .. } => "(expand)",
    }
}

fn done(result: &str) -> Settlement {
    Settlement::Done {
        result: result.into(),
    }
}

/// Makes `n` dead letters of `app_id` (push `push`), returning their ids.
async fn bury(q: &dyn Store, app_id: &str, push: &str, n: usize) -> Vec<i64> {
    q.enqueue(
        (0..n)
            .map(|i| send(app_id, push, Platform::Webpush, &format!("d{i}"), 0))
            .collect(),
    )
    .await
    .unwrap();
    let leased = q.lease(1_000, n, 10_000, &[]).await.unwrap();
    let mut ids: Vec<i64> = leased.iter().map(|j| j.id).collect();
    ids.sort_unstable();
    q.settle(
        ids.iter()
            .map(|id| {
                (
                    *id,
                    Settlement::Dead {
                        reason: "status 500".into(),
                    },
                )
            })
            .collect(),
    )
    .await
    .unwrap();
    ids
}

fn sends(push: &str, devices: &[&str]) -> Vec<NewJob> {
    devices
        .iter()
        .map(|d| send("shop", push, Platform::Apns, d, 0))
        .collect()
}

/// Not a test: how fast the queue turns over. `cargo test -p herald-store --test sqlite_log
/// -- --ignored --nocapture job_throughput`.
#[tokio::test]
#[ignore]
async fn job_throughput() {
    const JOBS: usize = 100_000;
    const BATCH: usize = 1_000;
    let dir = tempfile::tempdir_in(".").unwrap();
    let q = open(dir.path());
    let started = std::time::Instant::now();
    for chunk in 0..JOBS / BATCH {
        let jobs = (0..BATCH)
            .map(|i| {
                send(
                    "shop",
                    "bench",
                    Platform::Apns,
                    &format!("{:08}", chunk * BATCH + i),
                    0,
                )
            })
            .collect();
        q.enqueue(jobs).await.unwrap();
    }
    let enqueued = started.elapsed();
    let started = std::time::Instant::now();
    let mut settled = 0;
    loop {
        let jobs = q.lease(1_000, BATCH, 60_000, &[]).await.unwrap();
        if jobs.is_empty() {
            break;
        }
        settled += jobs.len();
        q.settle(jobs.iter().map(|j| (j.id, done("accepted"))).collect())
            .await
            .unwrap();
    }
    let turned = started.elapsed();
    assert_eq!(settled, JOBS);
    println!(
        "enqueue: {JOBS} jobs in {:.2?} ({:.0}/s); lease+settle in batches of {BATCH}: \
         {:.2?} ({:.0}/s)",
        enqueued,
        JOBS as f64 / enqueued.as_secs_f64(),
        turned,
        JOBS as f64 / turned.as_secs_f64()
    );
    q.close().await;
}
