//! How fast appends commit on the PostgreSQL store: 1 and 64 concurrent publishers, on one
//! channel and on 64 channels (each publisher going round them), each publisher appending one message at a time for a few
//! seconds against a PostgreSQL server of
//! its own (`herald_testkit::Postgres`, started here). docs/benchmarks.md ("PostgreSQL store")
//! has the figures, and those of the ways of keeping seqs gapless that were tried and dropped. A raw loop measured in the same run
//! (one `INSERT` per transaction on one connection, and the same from 64 connections) gives
//! the figures a scale. Run by hand:
//!
//! ```text
//! cargo run --release -p herald-store --example pg_seq_bench [seconds per cell]
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use herald_core::log::{ChannelLog, CommitSink, Retention};
use herald_core::message::{NewMessage, SharedMessage};
use herald_core::name::ChannelName;
use herald_store::{PostgresOptions, PostgresStore};
use herald_testkit::Postgres;

struct NoSink;

impl CommitSink for NoSink {
    fn committed(&self, _: &[SharedMessage]) {}
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let run = Duration::from_secs(seconds);
    let server = Postgres::start().expect("start PostgreSQL");
    let mut database = 0;
    let mut fresh = || {
        database += 1;
        server.create_database(&format!("bench{database}")).unwrap()
    };
    for publishers in [1, 64] {
        let rate = raw_inserts(&fresh(), publishers, run).await;
        println!("raw INSERT + COMMIT, {publishers:>2} connections: {rate:>8.0} /s");
    }
    for publishers in [1, 64] {
        for channels in [1, 64] {
            let rate = appends(&fresh(), publishers, channels, run).await;
            println!(
                "appends: {publishers:>2} publishers, {channels:>2} channels: \
                 {rate:>8.0} messages/s"
            );
        }
    }
}

/// Messages per second appended by `publishers` tasks over `channels` channels.
async fn appends(url: &str, publishers: usize, channels: usize, run: Duration) -> f64 {
    let store = PostgresStore::open(url, PostgresOptions::default(), Arc::new(NoSink))
        .await
        .expect("open store");
    let retention = Retention {
        max_messages: 1000,
        max_age_ms: 0,
    };
    let (count, stop) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let started = Instant::now();
    let tasks: Vec<_> = (0..publishers)
        .map(|p| {
            let (store, count, stop) = (store.clone(), count.clone(), stop.clone());
            let names: Vec<ChannelName> = (0..channels)
                .map(|c| ChannelName::parse(&format!("bench/{c}")).unwrap())
                .collect();
            tokio::spawn(async move {
                // Each publisher goes round the channels, starting at its own.
                let mut next = p;
                while !stop.load(Ordering::Relaxed) {
                    let channel = &names[next % names.len()];
                    next += 1;
                    let message = NewMessage {
                        id: None,
                        data: Bytes::from_static(b"{\"price\":1.2345}"),
                        retain: Default::default(),
                        hold: None,
                    };
                    store
                        .append(channel, vec![message], retention)
                        .await
                        .expect("append");
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let rate = count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    store.close().await;
    rate
}

/// Single-row transactions per second from `connections` connections, each its own loop.
async fn raw_inserts(url: &str, connections: usize, run: Duration) -> f64 {
    let (count, stop) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    {
        let (client, driver) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(driver);
        client
            .batch_execute("CREATE TABLE raw (id BIGSERIAL PRIMARY KEY, data BYTEA NOT NULL)")
            .await
            .unwrap();
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (mut client, driver) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(driver);
        let (count, stop) = (count.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let insert = client
                .prepare("INSERT INTO raw (data) VALUES ($1)")
                .await
                .unwrap();
            while !stop.load(Ordering::Relaxed) {
                let tx = client.transaction().await.unwrap();
                tx.execute(&insert, &[&&b"{\"price\":1.2345}"[..]])
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}
