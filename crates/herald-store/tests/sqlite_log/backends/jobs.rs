//! The provider job queue on both backends: leasing (order, limit, paused pairs, a lapsed lease
//! in doubt), settling (done, retry, dead; a job no longer leased left alone), live settlement,
//! dead letters replayed and dropped, an expansion's pages and cursor, depth, how a push's jobs
//! stand, pruning, and an app's deletion taking its jobs. On PostgreSQL, two stores leasing at
//! once never get the same job (`FOR UPDATE SKIP LOCKED`) and move the same counters without
//! losing a count; a database of schema version 1 counts its existing jobs when migrated.

use std::collections::HashSet;
use std::sync::Arc;

use herald_core::tenant::AppId;
use herald_push::device::Platform;
use herald_push::jobs::{Job, JobKind, NewJob, Settlement};
use herald_push::registry::Receipt;
use herald_store::{PostgresOptions, PostgresStore};

use super::{Backend, RecordingSink};

crate::on_both!(
    leases_in_due_order_and_settles,
    a_lapsed_lease_is_in_doubt_and_dead_letters_replay,
    expansions_add_pages_and_finish,
    depth_push_jobs_prune_and_app_deletion,
);

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

async fn leases_in_due_order_and_settles(b: Backend) {
    let q = b.store();
    let no_provider = NewJob {
        provider: None,
        ..send("a", "p", Platform::Apns, "x", 0)
    };
    assert!(
        q.enqueue(vec![no_provider]).await.is_err(),
        "a send needs a provider"
    );
    q.enqueue(vec![
        send("a", "p1", Platform::Apns, "d3", 30),
        send("a", "p1", Platform::Apns, "d1", 10),
        send("a", "p1", Platform::Fcm, "d2", 20),
        send("b", "p2", Platform::Apns, "d4", 15),
        send("a", "p1", Platform::Apns, "d1", 5),
        send("a", "later", Platform::Apns, "d1", 1000),
    ])
    .await
    .unwrap();
    let paused = [(app("b"), Platform::Apns)];
    let leased = q.lease(100, 3, 50, &paused).await.unwrap();
    let got: Vec<(&str, i64, u32, bool)> = leased
        .iter()
        .map(|j| (device_of(j), j.job.due_ms, j.attempts, j.in_doubt))
        .collect();
    assert_eq!(
        got,
        [
            ("d1", 10, 1, false),
            ("d2", 20, 1, false),
            ("d3", 30, 1, false)
        ]
    );
    assert!(
        q.lease(100, 10, 50, &paused).await.unwrap().is_empty(),
        "b is paused"
    );
    let b_jobs = q.lease(100, 10, 50, &[]).await.unwrap();
    assert_eq!(b_jobs.iter().map(device_of).collect::<Vec<_>>(), ["d4"]);
    let retry = Settlement::Retry {
        due_ms: 120,
        reason: "503".into(),
    };
    let dead = Settlement::Dead {
        reason: "bad".into(),
    };
    q.settle(vec![
        (leased[0].id, done("accepted")),
        (leased[1].id, retry),
        (leased[2].id, dead),
    ])
    .await
    .unwrap();
    q.settle(vec![(leased[0].id, done("twice"))]).await.unwrap();
    let again = q.lease(130, 10, 50, &[]).await.unwrap();
    let got: Vec<(&str, u32)> = again.iter().map(|j| (device_of(j), j.attempts)).collect();
    assert_eq!(got, [("d2", 2)]);
    assert_eq!(
        q.settle_live(&app("a"), "d1", &["later".into(), "p1".into()], 140)
            .await
            .unwrap(),
        1,
        "only the queued one"
    );
    let jobs = q.push_jobs(&app("a"), "p1").await.unwrap();
    assert_eq!(jobs.done, [("accepted".to_string(), 1)]);
    assert_eq!((jobs.queued, jobs.dead), (1, 1));
    let later = q.push_jobs(&app("a"), "later").await.unwrap();
    assert_eq!(later.done, [("live".to_string(), 1)]);
    q.close().await;
}

async fn a_lapsed_lease_is_in_doubt_and_dead_letters_replay(b: Backend) {
    let q = b.store();
    q.enqueue(vec![send("a", "p", Platform::Apns, "d", 0)])
        .await
        .unwrap();
    let first = q.lease(10, 1, 100, &[]).await.unwrap();
    assert!(
        q.lease(50, 1, 100, &[]).await.unwrap().is_empty(),
        "still leased"
    );
    let second = q.lease(111, 1, 100, &[]).await.unwrap();
    assert_eq!(second[0].id, first[0].id);
    assert_eq!((second[0].attempts, second[0].in_doubt), (2, true));
    q.settle(vec![(
        first[0].id,
        Settlement::Dead {
            reason: "gone".into(),
        },
    )])
    .await
    .unwrap();
    let letters = q.dead_letters(&app("a"), None, 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (letters[0].reason.as_str(), letters[0].attempts),
        ("gone", 2)
    );
    assert!(q
        .dead_letters(&app("a"), Some(letters[0].id), 10)
        .await
        .unwrap()
        .is_empty());
    assert!(!q.replay(&app("other"), letters[0].id, 500).await.unwrap());
    assert!(q.replay(&app("a"), letters[0].id, 500).await.unwrap());
    let replayed = q.lease(500, 1, 100, &[]).await.unwrap();
    assert_eq!(replayed[0].attempts, 1);
    q.settle(vec![(
        replayed[0].id,
        Settlement::Dead {
            reason: "again".into(),
        },
    )])
    .await
    .unwrap();
    assert!(q.drop_dead(&app("a"), replayed[0].id).await.unwrap());
    assert!(!q.drop_dead(&app("a"), replayed[0].id).await.unwrap());
    assert!(q
        .dead_letters(&app("a"), None, 10)
        .await
        .unwrap()
        .is_empty());
    q.close().await;
}

async fn expansions_add_pages_and_finish(b: Backend) {
    let q = b.store();
    let expand = NewJob {
        app: app("a"),
        push: "all".into(),
        provider: None,
        kind: JobKind::Expand { after: None },
        seq: 3,
        due_ms: 0,
    };
    q.enqueue(vec![expand]).await.unwrap();
    let job = q.lease(10, 1, 100, &[]).await.unwrap().remove(0);
    let page = vec![
        send("a", "all", Platform::Apns, "d1", 0),
        send("a", "all", Platform::Fcm, "d2", 0),
    ];
    q.expand(job.id, page.clone(), Some("d2".into()), 20, 100)
        .await
        .unwrap();
    q.expand(job.id, page, Some("d2".into()), 20, 100)
        .await
        .unwrap();
    let stray = vec![send("b", "all", Platform::Apns, "d9", 0)];
    assert!(q.expand(job.id, stray, None, 30, 100).await.is_err());
    let status = q.push_jobs(&app("a"), "all").await.unwrap();
    assert!(status.expanding);
    assert_eq!(status.queued, 2, "a page added twice adds it once");
    q.expand(job.id, Vec::new(), None, 40, 100).await.unwrap();
    assert!(!q.push_jobs(&app("a"), "all").await.unwrap().expanding);
    assert!(
        q.expand(job.id, Vec::new(), None, 50, 100).await.is_err(),
        "finished"
    );
    let devices = q.device_jobs(&app("a"), "all", None, 10).await.unwrap();
    let got: Vec<(&str, &str)> = devices
        .iter()
        .map(|d| (d.device.as_str(), d.state.as_str()))
        .collect();
    assert_eq!(got, [("d1", "queued"), ("d2", "queued")]);
    assert_eq!(
        q.device_jobs(&app("a"), "all", Some("d1"), 10)
            .await
            .unwrap()
            .len(),
        1
    );
    q.close().await;
}

async fn depth_push_jobs_prune_and_app_deletion(b: Backend) {
    let q = b.store();
    for id in ["a", "b"] {
        let created = herald_core::tenancy::App {
            id: app(id),
            name: id.into(),
            token_secret: None,
            limits: Default::default(),
            created: 1,
        };
        q.create_app(&created).await.unwrap();
    }
    q.enqueue(vec![
        send("a", "old", Platform::Apns, "d1", 0),
        send("a", "old", Platform::Fcm, "d2", 0),
        send("b", "new", Platform::Apns, "d3", 0),
    ])
    .await
    .unwrap();
    let depth = q.depth(None).await.unwrap();
    let got: Vec<(String, Option<Platform>, u64, u64)> = depth
        .iter()
        .map(|d| (d.app.to_string(), d.provider, d.queued, d.dead))
        .collect();
    assert_eq!(
        got,
        [
            ("a".into(), Some(Platform::Apns), 1, 0),
            ("a".into(), Some(Platform::Fcm), 1, 0),
            ("b".into(), Some(Platform::Apns), 1, 0)
        ]
    );
    assert_eq!(q.depth(Some(&app("b"))).await.unwrap().len(), 1);
    let receipt = |id: &str, expires| Receipt {
        id: id.into(),
        created: 0,
        expires,
        targeted: None,
        delivered: 0,
        pending: 0,
        expired: 0,
        delivery: None,
        providers: None,
        devices: None,
    };
    q.record_push(&app("a"), &receipt("old", 100), None)
        .await
        .unwrap();
    let leased = q.lease(10, 10, 100, &[]).await.unwrap();
    let settled = leased.iter().map(|j| (j.id, done("accepted"))).collect();
    q.settle(settled).await.unwrap();
    assert_eq!(q.prune(50).await.unwrap(), 0, "not expired yet");
    assert_eq!(q.prune(101).await.unwrap(), 2);
    assert!(q.push_jobs(&app("a"), "old").await.unwrap().done.is_empty());
    q.enqueue(vec![send("b", "more", Platform::Apns, "d4", 0)])
        .await
        .unwrap();
    q.delete_app(&app("b")).await.unwrap();
    assert!(q.depth(Some(&app("b"))).await.unwrap().is_empty());
    q.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_leasing_at_once_never_share_a_job() {
    use herald_push::jobs::JobQueue;
    tokio::time::timeout(std::time::Duration::from_secs(120), async {
        let server = tokio::task::spawn_blocking(herald_testkit::Postgres::start)
            .await
            .unwrap()
            .expect("start PostgreSQL");
        let url = server.create_database("herald").unwrap();
        let mut nodes = Vec::new();
        for _ in 0..2 {
            let sink = Arc::new(RecordingSink::default());
            nodes.push(
                PostgresStore::open(&url, PostgresOptions::default(), sink)
                    .await
                    .unwrap(),
            );
        }
        let jobs: Vec<NewJob> = (0..400)
            .map(|i| send("a", "p", Platform::Apns, &format!("d{i:03}"), i))
            .collect();
        nodes[0].enqueue(jobs).await.unwrap();
        // Workers on both nodes lease and settle while the devices of the first hundred jobs
        // acknowledge them live: every one moves the same counters of the push at once.
        let workers: Vec<_> = (0..8)
            .map(|w| {
                let node = nodes[w % 2].clone();
                tokio::spawn(async move {
                    let mut mine = Vec::new();
                    loop {
                        let got = node.lease(1000, 7, 60_000, &[]).await.unwrap();
                        if got.is_empty() {
                            return mine;
                        }
                        let settled = got.iter().map(|j| (j.id, done("accepted"))).collect();
                        node.settle(settled).await.unwrap();
                        mine.extend(got.into_iter().map(|j| j.id));
                    }
                })
            })
            .collect();
        let acknowledging = {
            let node = nodes[1].clone();
            tokio::spawn(async move {
                let mut live = 0;
                for i in 0..100 {
                    let device = format!("d{i:03}");
                    live += node
                        .settle_live(&app("a"), &device, &["p".into()], 1000)
                        .await
                        .unwrap();
                }
                live
            })
        };
        let mut seen = HashSet::new();
        for worker in workers {
            for id in worker.await.unwrap() {
                assert!(seen.insert(id), "job {id} leased twice");
            }
        }
        let live = acknowledging.await.unwrap();
        assert_eq!(seen.len() as u64 + live, 400);
        let stand = nodes[0].push_jobs(&app("a"), "p").await.unwrap();
        let mut expected = vec![("accepted".to_string(), seen.len() as u64)];
        if live > 0 {
            expected.push(("live".to_string(), live));
        }
        assert_eq!(stand.done, expected);
        assert_eq!((stand.queued, stand.dead, stand.in_doubt), (0, 0, 0));
        for node in nodes {
            herald_core::log::ChannelLog::close(&*node).await;
        }
    })
    .await
    .expect("test timed out");
}
