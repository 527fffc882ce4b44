//! The provider job queue through `herald_push::jobs::JobQueue`: leasing (order, limits, lapsed
//! leases, paused pairs), settling, dead letters, expansion (atomic, resumable after a crash),
//! depth, how a push's jobs stand, pruning, and app deletion.

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
        due_ms,
    }
}

fn expansion(app_id: &str, push: &str) -> NewJob {
    NewJob {
        app: app(app_id),
        push: push.into(),
        provider: None,
        kind: JobKind::Expand { after: None },
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

#[tokio::test]
async fn settle_finishes_retries_or_buries_leased_jobs_and_ignores_the_rest() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path());
        let shop = app("shop");
        q.enqueue(
            ["a", "b", "c", "d"]
                .iter()
                .map(|d| send("shop", "p1", Platform::Apns, d, 0))
                .collect(),
        )
        .await
        .unwrap();
        let leased = q.lease(1_000, 3, 10_000, &[]).await.unwrap();
        let id = |name: &str| leased.iter().find(|j| device_of(j) == name).unwrap().id;
        let unleased = q.device_jobs(&shop, "p1", Some("c"), 1).await.unwrap();
        assert_eq!(unleased[0].device, "d");
        assert_eq!(unleased[0].state, "queued");
        let all = q.dead_letters(&shop, None, 10).await.unwrap();
        assert!(all.is_empty());
        q.settle(vec![
            (id("a"), done("accepted")),
            (
                id("b"),
                Settlement::Retry {
                    due_ms: 2_000,
                    reason: "status 503".into(),
                },
            ),
            (
                id("c"),
                Settlement::Dead {
                    reason: "rejected:BadDeviceToken".into(),
                },
            ),
        ])
        .await
        .unwrap();
        // "a" is done, "b" queued again, "c" dead, and no job has id 999,999: all left alone.
        q.settle(
            ["a", "b", "c"]
                .into_iter()
                .map(|n| (id(n), done("live")))
                .chain([(999_999, done("live"))])
                .collect(),
        )
        .await
        .unwrap();
        let d = q.device_jobs(&shop, "p1", Some("c"), 1).await.unwrap();
        assert_eq!(d[0].state, "queued");
        let stand = q.push_jobs(&shop, "p1").await.unwrap();
        assert_eq!(
            stand,
            PushJobs {
                done: vec![("accepted".into(), 1)],
                queued: 2,
                dead: 1,
                in_doubt: 0,
                expanding: false,
            }
        );
        let jobs = q.device_jobs(&shop, "p1", None, 10).await.unwrap();
        let b = jobs.iter().find(|j| j.device == "b").unwrap();
        assert_eq!(
            (b.state.as_str(), b.result.as_deref()),
            ("queued", Some("status 503"))
        );
        let d_leased = q.lease(1_999, 10, 100_000, &[]).await.unwrap();
        assert_eq!(d_leased.iter().map(device_of).collect::<Vec<_>>(), ["d"]);
        let retried = q.lease(2_000, 10, 100_000, &[]).await.unwrap();
        assert_eq!(retried.iter().map(device_of).collect::<Vec<_>>(), ["b"]);
        assert_eq!(retried[0].attempts, 2);
        let dead = q.dead_letters(&shop, None, 10).await.unwrap();
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].reason, "rejected:BadDeviceToken");
        assert_eq!(dead[0].attempts, 1);
        assert!(dead[0].died_ms > 0);
        q.close().await;
    })
    .await
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

#[tokio::test]
async fn dead_letters_are_listed_replayed_and_dropped_per_app() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path());
        let (shop, blog) = (app("shop"), app("blog"));
        let mine = bury(&q, "shop", "p1", 3).await;
        let theirs = bury(&q, "blog", "p2", 1).await;
        let page = q.dead_letters(&shop, None, 2).await.unwrap();
        assert_eq!(page.iter().map(|d| d.id).collect::<Vec<_>>(), mine[..2]);
        let rest = q.dead_letters(&shop, Some(page[1].id), 2).await.unwrap();
        assert_eq!(rest.iter().map(|d| d.id).collect::<Vec<_>>(), mine[2..]);
        assert_eq!(rest[0].job.app, shop);
        assert_eq!(rest[0].job.provider, Some(Platform::Webpush));

        assert!(
            !q.replay(&shop, theirs[0], 5_000).await.unwrap(),
            "other app's"
        );
        assert!(!q.drop_dead(&shop, theirs[0]).await.unwrap(), "other app's");
        assert_eq!(q.dead_letters(&blog, None, 10).await.unwrap().len(), 1);

        assert!(q.replay(&shop, mine[0], 5_000).await.unwrap());
        assert!(
            !q.replay(&shop, mine[0], 5_000).await.unwrap(),
            "no longer dead"
        );
        assert!(q.lease(4_999, 10, 10_000, &[]).await.unwrap().is_empty());
        let replayed = q.lease(5_000, 10, 10_000, &[]).await.unwrap();
        assert_eq!(replayed.len(), 1);
        assert_eq!(replayed[0].id, mine[0]);
        assert_eq!(replayed[0].attempts, 1, "attempts start again");

        assert!(q.drop_dead(&shop, mine[1]).await.unwrap());
        assert!(!q.drop_dead(&shop, mine[1]).await.unwrap());
        let left = q.dead_letters(&shop, None, 10).await.unwrap();
        assert_eq!(left.iter().map(|d| d.id).collect::<Vec<_>>(), [mine[2]]);
        q.close().await;
    })
    .await
}

fn sends(push: &str, devices: &[&str]) -> Vec<NewJob> {
    devices
        .iter()
        .map(|d| send("shop", push, Platform::Apns, d, 0))
        .collect()
}

#[tokio::test]
async fn an_expansion_is_atomic_and_resumes_after_a_crash_where_it_stopped() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let shop = app("shop");
        let q = open(dir.path());
        q.enqueue(vec![expansion("shop", "b1")]).await.unwrap();
        let job = q.lease(1_000, 10, 500, &[]).await.unwrap().remove(0);
        assert_eq!(job.job.kind, JobKind::Expand { after: None });
        q.expand(
            job.id,
            sends("b1", &["d1", "d2"]),
            Some("d2".into()),
            1_200,
            500,
        )
        .await
        .unwrap();
        // The lease was renewed to 1,700: at 1,600 only the page's two sends are due.
        let page = q.lease(1_600, 10, 100_000, &[]).await.unwrap();
        assert_eq!(page.iter().map(device_of).collect::<Vec<_>>(), ["d1", "d2"]);
        // A page that cannot be added (another app's job) changes nothing, cursor included.
        let mut bad = sends("b1", &["d3"]);
        bad.push(send("blog", "b1", Platform::Apns, "x", 0));
        assert!(q
            .expand(job.id, bad, Some("x".into()), 1_300, 500)
            .await
            .is_err());
        assert!(q.push_jobs(&shop, "b1").await.unwrap().expanding);
        let added = q.device_jobs(&shop, "b1", None, 100).await.unwrap();
        assert_eq!(added.len(), 2, "nothing of the refused page was added");
        // The process dies between two pages.
        drop(q);

        let q = open(dir.path());
        let resumed = q.lease(5_000, 10, 500, &[]).await.unwrap();
        assert_eq!(
            resumed.len(),
            1,
            "the page's sends are leased until 101,600"
        );
        let resumed = &resumed[0];
        assert_eq!(resumed.id, job.id);
        assert_eq!(
            resumed.job.kind,
            JobKind::Expand {
                after: Some("d2".into())
            }
        );
        assert_eq!(resumed.attempts, 2);
        // A page repeated (a worker that lost its lease mid-page) adds nothing twice.
        q.expand(resumed.id, sends("b1", &["d2", "d3"]), None, 5_100, 500)
            .await
            .unwrap();
        let devices: Vec<String> = q
            .device_jobs(&shop, "b1", None, 100)
            .await
            .unwrap()
            .into_iter()
            .map(|j| j.device)
            .collect();
        assert_eq!(devices, ["d1", "d2", "d3"]);
        let stand = q.push_jobs(&shop, "b1").await.unwrap();
        assert!(!stand.expanding);
        assert_eq!(stand.queued, 3);
        assert!(
            q.expand(resumed.id, vec![], None, 5_200, 500)
                .await
                .is_err(),
            "a finished expansion takes no more pages"
        );
        q.close().await;
    })
    .await
}

#[tokio::test]
async fn depth_counts_waiting_running_and_dead_jobs_per_app_and_provider() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path());
        let before = now_millis();
        q.enqueue(vec![
            send("shop", "p1", Platform::Apns, "a", 0),
            send("shop", "p1", Platform::Apns, "b", 0),
            send("shop", "p1", Platform::Fcm, "c", 9_000),
            send("blog", "p2", Platform::Webpush, "d", 9_000),
            expansion("shop", "p3"),
        ])
        .await
        .unwrap();
        let after = now_millis();
        let leased = q.lease(1_000, 10, 10_000, &[]).await.unwrap();
        let id = |name: &str| leased.iter().find(|j| device_of(j) == name).unwrap().id;
        q.settle(vec![
            (id("a"), done("accepted")),
            (id("b"), Settlement::Dead { reason: "x".into() }),
        ])
        .await
        .unwrap();
        let all = q.depth(None).await.unwrap();
        let row = |app_id: &str, provider: Option<Platform>| {
            all.iter()
                .find(|d| d.app.as_str() == app_id && d.provider == provider)
                .map(|d| (d.queued, d.dead, d.oldest_ms.is_some()))
        };
        assert_eq!(all.len(), 4, "{all:?}");
        assert_eq!(row("shop", Some(Platform::Apns)), Some((0, 1, false)));
        assert_eq!(row("shop", Some(Platform::Fcm)), Some((1, 0, true)));
        assert_eq!(
            row("shop", None),
            Some((1, 0, true)),
            "the running expansion"
        );
        assert_eq!(row("blog", Some(Platform::Webpush)), Some((1, 0, true)));
        for d in &all {
            if let Some(oldest) = d.oldest_ms {
                assert!((before..=after).contains(&oldest), "{d:?}");
            }
        }
        let blog = q.depth(Some(&app("blog"))).await.unwrap();
        assert_eq!(blog.len(), 1);
        assert_eq!(blog[0].provider, Some(Platform::Webpush));
        q.close().await;
    })
    .await
}

#[tokio::test]
async fn a_push_reports_its_jobs_by_result_and_per_device_in_pages() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path());
        let shop = app("shop");
        let names = ["a", "b", "c", "d", "e"];
        q.enqueue(sends("p1", &names)).await.unwrap();
        q.enqueue(sends("p1", &["a"])).await.unwrap(); // again: nothing added
        q.enqueue(sends("other", &["a"])).await.unwrap();
        let leased = q.lease(1_000, 10, 10_000, &[]).await.unwrap();
        assert_eq!(leased.len(), 6);
        let id = |name: &str| {
            leased
                .iter()
                .find(|j| device_of(j) == name && j.job.push == "p1")
                .unwrap()
                .id
        };
        q.settle(vec![
            (id("a"), done("accepted")),
            (id("b"), done("accepted")),
            (id("c"), done("unregistered:Unregistered")),
            (
                id("d"),
                Settlement::Dead {
                    reason: "status 500".into(),
                },
            ),
        ])
        .await
        .unwrap();
        let stand = q.push_jobs(&shop, "p1").await.unwrap();
        assert_eq!(
            stand.done,
            vec![
                ("accepted".to_string(), 2),
                ("unregistered:Unregistered".to_string(), 1)
            ]
        );
        assert_eq!((stand.queued, stand.dead, stand.in_doubt), (1, 1, 0));
        assert_eq!(
            q.push_jobs(&app("blog"), "p1").await.unwrap(),
            PushJobs::default()
        );
        let first = q.device_jobs(&shop, "p1", None, 2).await.unwrap();
        assert_eq!(
            first
                .iter()
                .map(|j| (j.device.as_str(), j.state.as_str(), j.result.as_deref()))
                .collect::<Vec<_>>(),
            [
                ("a", "done", Some("accepted")),
                ("b", "done", Some("accepted"))
            ]
        );
        let next = q.device_jobs(&shop, "p1", Some("b"), 10).await.unwrap();
        assert_eq!(
            next.iter()
                .map(|j| (j.device.as_str(), j.state.as_str()))
                .collect::<Vec<_>>(),
            [("c", "done"), ("d", "dead"), ("e", "running")]
        );
        assert!(next
            .iter()
            .all(|j| j.provider == Platform::Apns && j.attempts == 1));
        q.close().await;
    })
    .await
}

fn receipt(id: &str, expires: i64) -> Receipt {
    Receipt {
        id: id.into(),
        targeted: Some(1),
        delivered: 0,
        pending: 0,
        expired: 0,
        created: 0,
        expires,
    }
}

#[tokio::test]
async fn prune_deletes_finished_sends_of_expired_pushes_only() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path());
        let shop = app("shop");
        let day = 24 * 3600 * 1000;
        q.record_push(&shop, &receipt("old", 1_000)).await.unwrap();
        q.record_push(&shop, &receipt("new", i64::MAX))
            .await
            .unwrap();
        q.enqueue(sends("old", &["a", "b", "c"])).await.unwrap();
        q.enqueue(sends("new", &["a"])).await.unwrap();
        let leased = q.lease(1_000, 3, 10_000, &[]).await.unwrap();
        q.settle(leased.iter().map(|j| (j.id, done("accepted"))).collect())
            .await
            .unwrap();
        // The three of "old" are done; the one of "new" is still queued.
        assert!(leased.iter().all(|j| j.job.push == "old"));
        assert_eq!(q.prune(1_000).await.unwrap(), 0, "not expired before 1,000");
        let old_done = leased.iter().filter(|j| j.job.push == "old").count() as u64;
        // The sweep keeps them a day after expiry.
        q.trim_expired_at(1_000 + day).await.unwrap();
        let stand = q.push_jobs(&shop, "old").await.unwrap();
        assert_eq!(stand.done.iter().map(|(_, n)| n).sum::<u64>(), old_done);
        q.trim_expired_at(1_001 + day).await.unwrap();
        let stand = q.push_jobs(&shop, "old").await.unwrap();
        assert!(stand.done.is_empty(), "{stand:?}");
        assert_eq!(stand.queued, 3 - old_done);
        let new = q.push_jobs(&shop, "new").await.unwrap();
        assert_eq!(new.done.len() as u64 + new.queued, 1, "unexpired push kept");
        // The trait's prune does the same without the day's grace.
        q.enqueue(sends("old", &["z"])).await.unwrap();
        let z = q.lease(1_000, 10, 10_000, &[]).await.unwrap();
        q.settle(z.iter().map(|j| (j.id, done("accepted"))).collect())
            .await
            .unwrap();
        assert_eq!(q.prune(1_001).await.unwrap(), 1);
        assert!(q.push_jobs(&shop, "old").await.unwrap().done.is_empty());
        q.close().await;
    })
    .await
}

#[tokio::test]
async fn deleting_an_app_deletes_its_jobs_and_no_one_elses() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path());
        for id in ["shop", "blog"] {
            let created = q
                .create_app(&App {
                    id: app(id),
                    name: id.into(),
                    token_secret: Some("s".repeat(32)),
                    limits: Default::default(),
                    created: 1,
                })
                .await
                .unwrap();
            assert!(created);
        }
        q.enqueue(sends("p1", &["a", "b"])).await.unwrap();
        q.enqueue(vec![send("blog", "p1", Platform::Fcm, "a", 0)])
            .await
            .unwrap();
        bury(&q, "shop", "p2", 1).await;
        assert!(q.delete_app(&app("shop")).await.unwrap());
        assert!(q.depth(Some(&app("shop"))).await.unwrap().is_empty());
        assert_eq!(
            q.push_jobs(&app("shop"), "p1").await.unwrap(),
            PushJobs::default()
        );
        let left = q.lease(10_000, 10, 10_000, &[]).await.unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].job.app, app("blog"));
        q.close().await;
    })
    .await
}

#[tokio::test]
async fn a_send_job_without_a_provider_is_refused_and_nothing_is_queued() {
    bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path());
        let mut bad = send("shop", "p1", Platform::Apns, "b", 0);
        bad.provider = None;
        let good = send("shop", "p1", Platform::Apns, "a", 0);
        assert!(q.enqueue(vec![good, bad]).await.is_err());
        assert!(q.lease(1_000, 10, 10_000, &[]).await.unwrap().is_empty());
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
