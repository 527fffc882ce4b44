//! PostgreSQL as several nodes see it: two stores ("nodes") on one database appending to one
//! channel at once get gapless, unique seqs and each sink sees its own in order; the server
//! killed mid-traffic makes appends fail with a `StoreError`, loses nothing acknowledged, and
//! the store recovers by itself once the server is back; three nodes migrating at once; a
//! clear error for an unreachable server and for a schema newer than this build.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use herald_core::log::{ChannelLog, ReadFrom, Retention};
use herald_core::message::NewMessage;
use herald_core::name::ChannelName;
use herald_store::postgres::SCHEMA_VERSION;
use herald_store::{PostgresOptions, PostgresStore};
use herald_testkit::Postgres;
use tokio::sync::Notify;

use super::RecordingSink;

const LIMIT: Duration = Duration::from_secs(120);

async fn server() -> (Postgres, String) {
    let server = tokio::task::spawn_blocking(Postgres::start)
        .await
        .unwrap()
        .expect("start PostgreSQL (scripts/install-services.sh installs it)");
    let url = server.create_database("herald").unwrap();
    (server, url)
}

async fn node(url: &str) -> (Arc<PostgresStore>, Arc<RecordingSink>) {
    let sink = Arc::new(RecordingSink::default());
    let store = PostgresStore::open(url, PostgresOptions::default(), sink.clone())
        .await
        .unwrap();
    (store, sink)
}

fn keep() -> Retention {
    Retention {
        max_messages: 100_000,
        max_age_ms: 0,
    }
}

fn msg(data: String, id: Option<String>) -> NewMessage {
    NewMessage {
        id,
        data: Bytes::from(data),
        retain: Default::default(),
        hold: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_appending_to_one_channel_get_gapless_unique_seqs() {
    tokio::time::timeout(LIMIT, async {
        let (_server, url) = server().await;
        let nodes = [node(&url).await, node(&url).await];
        let c = ChannelName::parse("shared").unwrap();
        let mut tasks = Vec::new();
        for (n, (store, _)) in nodes.iter().enumerate() {
            for t in 0..16 {
                let (store, c) = (store.clone(), c.clone());
                tasks.push(tokio::spawn(async move {
                    let mut got = Vec::new();
                    for i in 0..10 {
                        // Some carry a key another node's publisher also sends.
                        let key = (i % 3 == 0).then(|| format!("k{t}-{i}"));
                        let batch = vec![msg(format!("{n}/{t}/{i}"), key), msg("x".into(), None)];
                        for a in store.append(&c, batch, keep()).await.unwrap() {
                            got.push((a.message.seq, a.duplicate));
                        }
                    }
                    (n, got)
                }));
            }
        }
        let mut fresh: Vec<u64> = Vec::new();
        let mut per_node: HashMap<usize, BTreeSet<u64>> = HashMap::new();
        for task in tasks {
            let (n, got) = task.await.unwrap();
            for (seq, duplicate) in got {
                if !duplicate {
                    fresh.push(seq);
                    per_node.entry(n).or_default().insert(seq);
                }
            }
        }
        let total = fresh.len() as u64;
        fresh.sort_unstable();
        assert_eq!(
            fresh,
            (1..=total).collect::<Vec<_>>(),
            "no gap, no duplicate"
        );
        // 2 nodes x 16 publishers x 10 appends x 2 messages, less one per shared key.
        assert_eq!(total, 2 * 16 * 10 * 2 - 16 * 4);
        for (n, (store, sink)) in nodes.iter().enumerate() {
            let seen: Vec<u64> = sink.seen.lock().iter().map(|(_, s)| *s).collect();
            assert!(
                seen.windows(2).all(|w| w[0] < w[1]),
                "node {n}: sink in order"
            );
            let own: Vec<u64> = per_node[&n].iter().copied().collect();
            assert_eq!(seen, own, "node {n}: the sink saw exactly its own");
            let state = store.state(&c).await.unwrap();
            assert_eq!((state.first_seq, state.last_seq), (1, total));
        }
        let slice = nodes[1]
            .0
            .read(&c, ReadFrom::After(0), 10_000)
            .await
            .unwrap();
        let read: Vec<u64> = slice.messages.iter().map(|m| m.seq).collect();
        assert_eq!(read, (1..=total).collect::<Vec<_>>());
        for (store, _) in &nodes {
            store.close().await;
        }
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_fails_appends_loses_nothing_acknowledged_and_the_store_recovers() {
    tokio::time::timeout(LIMIT, async {
        let (server, url) = server().await;
        let (store, _) = node(&url).await;
        let c = ChannelName::parse("through/a/crash").unwrap();
        let acknowledged = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (oks, failures) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let progress = Arc::new(Notify::new());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let publisher = {
            let (store, c, acknowledged) = (store.clone(), c.clone(), acknowledged.clone());
            let (oks, failures, progress, stop) = (
                oks.clone(),
                failures.clone(),
                progress.clone(),
                stop.clone(),
            );
            tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    match store
                        .append(&c, vec![msg(format!("m{i}"), None)], keep())
                        .await
                    {
                        Ok(out) => {
                            let m = &out[0].message;
                            acknowledged.lock().push((m.seq, m.data.clone()));
                            oks.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            assert!(!e.chain().is_empty());
                            failures.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                    progress.notify_waiters();
                }
            })
        };
        let wait_until = |what: &'static str, done: Box<dyn Fn() -> bool + Send>| {
            let progress = progress.clone();
            async move {
                tokio::time::timeout(Duration::from_secs(60), async {
                    while !done() {
                        let _ =
                            tokio::time::timeout(Duration::from_millis(100), progress.notified())
                                .await;
                    }
                })
                .await
                .unwrap_or_else(|_| panic!("waiting for {what}"));
            }
        };
        let o = oks.clone();
        wait_until(
            "appends before the crash",
            Box::new(move || o.load(Ordering::Relaxed) >= 50),
        )
        .await;
        let mut server = tokio::task::spawn_blocking(move || {
            let mut server = server;
            server.kill();
            server
        })
        .await
        .unwrap();
        let f = failures.clone();
        wait_until(
            "a failed append",
            Box::new(move || f.load(Ordering::Relaxed) >= 3),
        )
        .await;
        let after_crash = oks.load(Ordering::Relaxed);
        server = tokio::task::spawn_blocking(move || {
            server.restart().expect("restart PostgreSQL");
            server
        })
        .await
        .unwrap();
        let o = oks.clone();
        wait_until(
            "appends after the restart",
            Box::new(move || o.load(Ordering::Relaxed) >= after_crash + 50),
        )
        .await;
        stop.store(true, Ordering::Relaxed);
        publisher.await.unwrap();

        let slice = store.read(&c, ReadFrom::After(0), 100_000).await.unwrap();
        let stored: HashMap<u64, Bytes> = slice
            .messages
            .iter()
            .map(|m| (m.seq, m.data.clone()))
            .collect();
        for (seq, data) in acknowledged.lock().iter() {
            assert_eq!(
                stored.get(seq),
                Some(data),
                "acknowledged seq {seq} is readable"
            );
        }
        let seqs: Vec<u64> = slice.messages.iter().map(|m| m.seq).collect();
        let last = slice.state.last_seq;
        assert_eq!(seqs, (1..=last).collect::<Vec<_>>(), "the log has no gap");
        store.close().await;
        drop(server);
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_starting_at_once_migrate_once() {
    tokio::time::timeout(LIMIT, async {
        let (server, url) = server().await;
        let opened = futures_util::future::join_all((0..3).map(|_| node(&url))).await;
        assert_eq!(opened.len(), 3);
        let versions = server
            .psql("herald", "SELECT version FROM herald_schema")
            .unwrap();
        assert_eq!(versions, SCHEMA_VERSION.to_string());
        assert_eq!(PostgresStore::migrate(&url).await.unwrap(), SCHEMA_VERSION);
        for (store, _) in opened {
            store.close().await;
        }
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_servers_and_newer_schemas_are_refused_clearly() {
    tokio::time::timeout(LIMIT, async {
        let (mut server, url) = server().await;
        assert_eq!(
            PostgresStore::migrate(&url).await.unwrap(),
            0,
            "a new database"
        );
        server
            .psql(
                "herald",
                &format!("UPDATE herald_schema SET version = {}", SCHEMA_VERSION + 1),
            )
            .unwrap();
        let sink = Arc::new(RecordingSink::default());
        let err = PostgresStore::open(&url, PostgresOptions::default(), sink.clone())
            .await
            .unwrap_err()
            .chain();
        assert!(err.contains("newer than this Herald supports"), "{err}");
        let port = server.port();
        tokio::task::spawn_blocking(move || server.stop())
            .await
            .unwrap();
        let url = format!("postgres://herald:secret-pw@127.0.0.1:{port}/herald");
        let err = PostgresStore::open(&url, PostgresOptions::default(), sink)
            .await
            .unwrap_err()
            .chain();
        let expected = format!("cannot connect to PostgreSQL at 127.0.0.1:{port}/herald");
        assert!(err.contains(&expected), "{err}");
        assert!(!err.contains("secret-pw"), "{err}");
    })
    .await
    .expect("test timed out");
}
