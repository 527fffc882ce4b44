//! The provider job queue through `herald_push::jobs::JobQueue`: leasing (order, limits, lapsed
//! leases, paused pairs) here; settling and dead letters in [`settle`]; expansion (atomic,
//! resumable after a crash) in [`expansion`]; depth, how a push's jobs stand, pruning and app
//! deletion in [`status`]; the counters per push against the rows they count in [`counters`]. The helpers here build jobs and open stores for all of them.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use herald_core::log::ChannelLog;
use herald_core::message::now_millis;
use herald_core::tenancy::{App, Tenancy};
use herald_core::tenant::AppId;
use herald_push::device::Platform;
use herald_push::jobs::{Job, JobKind, JobQueue, NewJob, PushJobs, Settlement};
use herald_push::registry::{DeviceRegistry, Receipt};
use herald_store::{SqliteLog, SqliteOptions};

use super::RecordingSink;

mod counters;
mod expansion;
mod settle;
mod status;

/// Every test finishes well within this.
const BOUND: Duration = Duration::from_secs(60);

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

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(BOUND, f)
        .await
        .expect("test timed out")
}

/// Makes `n` dead letters of `app_id` (push `push`), returning their ids.
async fn bury(q: &SqliteLog, app_id: &str, push: &str, n: usize) -> Vec<i64> {
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

#[tokio::test]
async fn lease_takes_due_jobs_oldest_due_first_up_to_the_limit() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path());
        let jobs = [
            ("a", 300),
            ("b", 100),
            ("c", 200),
            ("d", 50),
            ("later", 5_000),
        ];
        q.enqueue(
            jobs.iter()
                .map(|(d, due)| send("shop", "p1", Platform::Apns, d, *due))
                .collect(),
        )
        .await
        .unwrap();
        let first = q.lease(1_000, 2, 10_000, &[]).await.unwrap();
        let names: Vec<_> = first.iter().map(device_of).collect();
        assert_eq!(names, ["d", "b"]);
        assert!(first.iter().all(|j| j.attempts == 1 && !j.in_doubt));
        assert_eq!(first[0].job.due_ms, 50, "a job is handed out as it was due");
        assert_eq!(first[0].job.seq, 7, "with the push's seq it was added with");
        let rest = q.lease(1_000, 10, 10_000, &[]).await.unwrap();
        let names: Vec<_> = rest.iter().map(device_of).collect();
        assert_eq!(names, ["c", "a"], "leased jobs are not handed out again");
        assert!(q.lease(1_000, 10, 10_000, &[]).await.unwrap().is_empty());
        assert!(q.lease(1_000, 0, 10_000, &[]).await.unwrap().is_empty());
        let later = q.lease(5_000, 10, 10_000, &[]).await.unwrap();
        assert_eq!(later.len(), 1);
        assert_eq!(device_of(&later[0]), "later");
        q.close().await;
    })
    .await
}

#[tokio::test]
async fn a_lapsed_lease_makes_the_job_due_again_in_doubt_with_its_attempt_counted() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path());
        q.enqueue(vec![send("shop", "p1", Platform::Fcm, "a", 0)])
            .await
            .unwrap();
        let first = q.lease(1_000, 10, 500, &[]).await.unwrap();
        assert_eq!(first.len(), 1);
        assert!(q.lease(1_499, 10, 500, &[]).await.unwrap().is_empty());
        let again = q.lease(1_500, 10, 500, &[]).await.unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].id, first[0].id);
        assert_eq!(again[0].attempts, 2);
        assert!(again[0].in_doubt);
        let stand = q.push_jobs(&app("shop"), "p1").await.unwrap();
        assert_eq!(stand.in_doubt, 1);
        assert_eq!(stand.queued, 1);
        let per_device = q.device_jobs(&app("shop"), "p1", None, 10).await.unwrap();
        assert_eq!(per_device[0].state, "running");
        assert!(per_device[0].in_doubt);
        // Settled at last: it stays in doubt (the receipt says a duplicate was possible).
        q.settle(vec![(again[0].id, done("accepted"))])
            .await
            .unwrap();
        let stand = q.push_jobs(&app("shop"), "p1").await.unwrap();
        assert_eq!(stand.done, vec![("accepted".to_string(), 1)]);
        assert_eq!(stand.in_doubt, 1);
        q.close().await;
    })
    .await
}

#[tokio::test]
async fn paused_app_and_provider_pairs_are_skipped() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path());
        q.enqueue(vec![
            send("shop", "p1", Platform::Apns, "a", 0),
            send("shop", "p1", Platform::Fcm, "b", 1),
            send("blog", "p2", Platform::Apns, "c", 2),
            expansion("shop", "p3"),
        ])
        .await
        .unwrap();
        let paused = [(app("shop"), Platform::Apns), (app("blog"), Platform::Fcm)];
        let leased = q.lease(1_000, 10, 10_000, &paused).await.unwrap();
        let mut names: Vec<_> = leased.iter().map(device_of).collect();
        names.sort_unstable();
        assert_eq!(names, ["(expand)", "b", "c"]);
        let resumed = q.lease(1_000, 10, 10_000, &[]).await.unwrap();
        assert_eq!(resumed.len(), 1);
        assert_eq!(device_of(&resumed[0]), "a");
        q.close().await;
    })
    .await
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
