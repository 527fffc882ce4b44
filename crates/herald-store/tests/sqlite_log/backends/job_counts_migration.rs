//! PostgreSQL's migration 2 (counters per push, `jobs.in_flight_until`) on a database that
//! already holds jobs: the jobs are counted once, so receipts read the same figures after the
//! upgrade as the rows gave before it.

use std::sync::Arc;
use std::time::Duration;

use herald_core::log::ChannelLog;
use herald_core::tenant::AppId;
use herald_push::device::Platform;
use herald_push::jobs::{JobKind, JobQueue, NewJob, PushJobs, Settlement};
use herald_store::postgres::SCHEMA_VERSION;
use herald_store::{PostgresOptions, PostgresStore};

use super::RecordingSink;

fn job(push: &str, device: Option<&str>) -> NewJob {
    NewJob {
        app: AppId::parse("shop").unwrap(),
        push: push.into(),
        provider: device.map(|_| Platform::Fcm),
        kind: match device {
            Some(device) => JobKind::Send {
                device: device.into(),
            },
            None => JobKind::Expand { after: None },
        },
        seq: 1,
        due_ms: 0,
    }
}

async fn open(url: &str) -> Arc<PostgresStore> {
    let sink = Arc::new(RecordingSink::default());
    PostgresStore::open(url, PostgresOptions::default(), sink)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrating_from_version_1_counts_the_jobs_already_there() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let server = tokio::task::spawn_blocking(herald_testkit::Postgres::start)
            .await
            .unwrap()
            .expect("start PostgreSQL");
        let url = server.create_database("herald").unwrap();
        let store = open(&url).await;
        let devices = ["a", "b", "c", "d", "e"];
        let mut jobs: Vec<NewJob> = devices.iter().map(|d| job("p", Some(d))).collect();
        jobs.push(job("p", None));
        store.enqueue(jobs).await.unwrap();
        let leased = store.lease(1_000, 5, 100, &[]).await.unwrap();
        let id = |device: &str| {
            leased
                .iter()
                .find(|j| {
                    j.job.kind
                        == JobKind::Send {
                            device: device.into(),
                        }
                })
                .map(|j| j.id)
        };
        let settled = vec![
            (
                id("a").unwrap(),
                Settlement::Done {
                    result: "accepted".into(),
                },
            ),
            (id("b").unwrap(), Settlement::Dead { reason: "x".into() }),
        ];
        store.settle(settled).await.unwrap();
        // Whatever is still leased lapses and is leased again: in doubt.
        store.lease(5_000, 10, 100, &[]).await.unwrap();
        let before = store
            .push_jobs(&AppId::parse("shop").unwrap(), "p")
            .await
            .unwrap();
        assert!(before.in_doubt > 0 && before.expanding, "{before:?}");
        store.close().await;
        drop(store);

        // Back to version 1, as a database written before the counters (and the revoked
        // tokens, apps' token keys, the audit log and webhooks of later versions) existed.
        // Whatever a later migration creates must be dropped here too, or migrating again
        // fails on it.
        let undo = "DROP TABLE push_counts; ALTER TABLE jobs DROP COLUMN in_flight_until; \
                    DROP TABLE revoked_tokens; DROP TABLE revoked_before; \
                    DROP TABLE app_token_keys; DROP TABLE audit_log; \
                    DROP TABLE hook_endpoints; DROP TABLE hook_events; \
                    DROP TABLE pusher_credentials; DROP TABLE mqtt_sessions; \
                    DROP TABLE mqtt_session_positions; DROP TABLE mqtt_session_inflight; \
                    DROP TABLE mqtt_session_wills; DROP TABLE retained; \
                    DROP TABLE mqtt_session_inbound_qos2; \
                    UPDATE herald_schema SET version = 1";
        let server = tokio::task::spawn_blocking(move || {
            server.psql("herald", undo).unwrap();
            server
        })
        .await
        .unwrap();
        assert_eq!(PostgresStore::migrate(&url).await.unwrap(), 1);
        let store = open(&url).await;
        let after = store
            .push_jobs(&AppId::parse("shop").unwrap(), "p")
            .await
            .unwrap();
        assert_eq!(after, before);
        assert_ne!(after, PushJobs::default());
        // Every migration ran again (no version number here: the lead orders migrations).
        assert_eq!(PostgresStore::migrate(&url).await.unwrap(), SCHEMA_VERSION);
        store.close().await;
        drop(server);
    })
    .await
    .expect("test timed out");
}
