//! Measures the purge of a deleted app on SQLite (`common::app_purge`): how long one step holds
//! the writer, against the commit of a 1,000-message append measured in the same run, and how
//! long the whole purge takes at the writer's own pace.
//!
//! ```text
//! cargo run --release -p herald-store --example purge_rate -- [messages] [channels] [dir]
//! ```
//! Defaults: 200,000 messages over 100 channels (each appended 1,000 at a time) in each of two
//! apps, in a temporary directory under the current one (on the same disk as a real data
//! directory).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use herald_core::log::{ChannelLog, CommitSink, Retention, StoreError};
use herald_core::message::{NewMessage, SharedMessage};
use herald_core::tenancy::{App, AppLimits, Tenancy};
use herald_core::tenant::AppId;
use herald_store::{SqliteLog, SqliteOptions};

struct NoSink;

impl CommitSink for NoSink {
    fn committed(&self, _: &[SharedMessage]) {}
}

/// The `q`-quantile of sorted `d`, in ms.
fn ms(d: &[Duration], q: f64) -> f64 {
    let i = ((d.len() as f64 - 1.0) * q).round() as usize;
    d[i].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> Result<(), StoreError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let messages: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let channels: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100);
    let base = args
        .get(2)
        .map(Into::into)
        .unwrap_or_else(|| std::path::PathBuf::from("."));
    let dir = tempfile::Builder::new()
        .prefix("purge-rate-")
        .tempdir_in(base)
        .expect("temporary directory");
    let log = SqliteLog::open(dir.path(), SqliteOptions::default(), Arc::new(NoSink))?;
    let retention = Retention {
        max_messages: u64::MAX / 2,
        max_age_ms: 0,
    };
    let per_channel = messages.div_ceil(channels);
    let mut appends = Vec::new();
    // Two apps alike: one purged at the writer's own pace, one step by step, timed.
    for id in ["gone", "timed"] {
        let app = App {
            id: AppId::parse(id).expect("app id"),
            name: id.into(),
            token_secret: Some("s".repeat(32)),
            limits: AppLimits::default(),
            created: 1,
        };
        log.create_app(&app).await?;
        for c in 0..channels {
            let channel = app
                .id
                .parse_channel(&format!("room/{c:05}"))
                .expect("channel");
            let mut left = per_channel;
            while left > 0 {
                let n = left.min(1000);
                let batch: Vec<NewMessage> = (0..n)
                    .map(|i| NewMessage {
                        id: None,
                        data: Bytes::from(format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(80))),
                        retain: Default::default(),
                        hold: None,
                    })
                    .collect();
                let started = Instant::now();
                log.append(&channel, batch, retention).await?;
                if n == 1000 {
                    appends.push(started.elapsed());
                }
                left -= n;
            }
        }
    }
    appends.sort();
    let stored = per_channel * channels;

    // The writer's own pace: a step after the deletion, then one 250 ms after each.
    let gone = AppId::parse("gone").expect("app id");
    let last = gone
        .parse_channel(&format!("room/{:05}", channels - 1))
        .expect("channel");
    let started = Instant::now();
    log.delete_app(&gone).await?;
    while log.state(&last).await?.last_seq > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let total = started.elapsed();

    // One step at a time, each timed (the writer's own steps run between them).
    let timed = AppId::parse("timed").expect("app id");
    log.delete_app(&timed).await?;
    let mut steps = Vec::new();
    loop {
        let step = Instant::now();
        let rows = log.purge_deleted_apps().await?;
        steps.push(step.elapsed());
        if rows == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    steps.sort();
    println!(
        "messages={stored} channels={channels}: purged at the writer's own pace in {:.1} s \
         ({:.0} messages/s)",
        total.as_secs_f64(),
        stored as f64 / total.as_secs_f64()
    );
    println!(
        "a purge step ({} timed): median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        steps.len(),
        ms(&steps, 0.5),
        ms(&steps, 0.99),
        ms(&steps, 1.0)
    );
    println!(
        "a 1,000-message append ({} timed): median {:.2} ms, p99 {:.2} ms; step/append median \
         ratio {:.2}",
        appends.len(),
        ms(&appends, 0.5),
        ms(&appends, 0.99),
        ms(&steps, 0.5) / ms(&appends, 0.5)
    );
    log.close().await;
    Ok(())
}
