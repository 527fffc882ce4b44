//! Measures the SQLite log's append rate: N concurrent appenders of one message each for a few
//! seconds, against the raw fsync rate of the same disk measured in the same run.
//!
//! ```text
//! cargo run --release -p herald-store --example append_rate -- [sync] [appenders] [seconds] [dir]
//! ```
//! Defaults: `batch 64 2` and a temporary directory under the current one (so it is on the same
//! disk as a real data directory, not a tmpfs).

use std::collections::HashMap;
use std::io::{Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use herald_core::log::{ChannelLog, CommitSink, Retention};
use herald_core::message::{NewMessage, SharedMessage};
use herald_core::name::ChannelName;
use herald_store::{SqliteLog, SqliteOptions, SyncMode};
use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

/// Counts what the fan-out would receive.
#[derive(Default)]
struct CountingSink(AtomicU64);

impl CommitSink for CountingSink {
    fn committed(&self, messages: &[SharedMessage]) {
        self.0.fetch_add(messages.len() as u64, Ordering::Relaxed);
    }
}

/// Keeps the count and mean of the store's histograms, to print batch size and commit latency.
#[derive(Default)]
struct Summaries(Mutex<HashMap<String, Arc<Summary>>>);

#[derive(Default)]
struct Summary(Mutex<(u64, f64)>);

impl HistogramFn for Summary {
    fn record(&self, value: f64) {
        let mut s = self.0.lock().expect("summary lock");
        s.0 += 1;
        s.1 += value;
    }
}

impl Summaries {
    fn mean(&self, name: &str) -> (u64, f64) {
        let map = self.0.lock().expect("summaries lock");
        let Some(summary) = map.get(name) else {
            return (0, 0.0);
        };
        let (n, sum) = *summary.0.lock().expect("summary lock");
        (n, if n == 0 { 0.0 } else { sum / n as f64 })
    }
}

impl Recorder for &'static Summaries {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut map = self.0.lock().expect("summaries lock");
        let summary = map.entry(key.name().to_owned()).or_default().clone();
        Histogram::from_arc(summary)
    }
}

/// fsyncs per second of a small write overwriting a preallocated file, like a WAL in steady
/// state.
fn raw_fsync_rate(dir: &std::path::Path, duration: Duration) -> f64 {
    let path = dir.join("fsync-probe");
    let mut file = std::fs::File::create(&path).expect("create probe file");
    let block = [0u8; 4096];
    for _ in 0..256 {
        file.write_all(&block).expect("write probe");
    }
    file.sync_all().expect("fsync probe");
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < duration {
        file.seek(SeekFrom::Start((n % 256) * 4096))
            .expect("seek probe");
        file.write_all(&block).expect("write probe");
        file.sync_data().expect("fsync probe");
        n += 1;
    }
    let _ = std::fs::remove_file(&path);
    n as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sync: SyncMode = match args.first().map(|s| s.parse()).transpose() {
        Ok(mode) => mode.unwrap_or_default(),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let appenders: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(64);
    let seconds: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let base = args
        .get(3)
        .map(Into::into)
        .unwrap_or_else(|| std::path::PathBuf::from("."));
    let dir = tempfile::Builder::new()
        .prefix("append-rate-")
        .tempdir_in(base)
        .expect("temporary directory");

    let summaries: &'static Summaries = Box::leak(Box::default());
    metrics::set_global_recorder(summaries).expect("install metrics recorder");
    let fsyncs_before = raw_fsync_rate(dir.path(), Duration::from_secs(1));

    let sink = Arc::new(CountingSink::default());
    let options = SqliteOptions {
        sync,
        ..SqliteOptions::default()
    };
    let log = SqliteLog::open(dir.path(), options, sink.clone()).expect("open store");
    let channel = ChannelName::parse("bench/append-rate").expect("channel name");
    let payload = Bytes::from_static(br#"{"price":1.2345,"symbol":"EURUSD"}"#);
    let retention = Retention {
        max_messages: 100_000,
        max_age_ms: 0,
    };

    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let tasks: Vec<_> = (0..appenders)
        .map(|_| {
            let (log, channel, payload, stop) =
                (log.clone(), channel.clone(), payload.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let message = NewMessage {
                        id: None,
                        data: payload.clone(),
                        retain: Default::default(),
                        hold: None,
                    };
                    log.append(&channel, vec![message], retention)
                        .await
                        .expect("append");
                    n += 1;
                }
                n
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut appended = 0;
    for t in tasks {
        appended += t.await.expect("appender task");
    }
    let elapsed = started.elapsed().as_secs_f64();
    log.close().await;

    let fsyncs_after = raw_fsync_rate(dir.path(), Duration::from_secs(1));
    let fsyncs = (fsyncs_before + fsyncs_after) / 2.0;
    let rate = appended as f64 / elapsed;
    let (commits, batch) = summaries.mean("herald_store_batch_messages");
    let (_, commit_secs) = summaries.mean("herald_store_commit_seconds");
    println!(
        "sync={sync} appenders={appenders} messages={appended} seconds={elapsed:.2} \
         rate={rate:.0} msg/s sink_saw={}",
        sink.0.load(Ordering::Relaxed)
    );
    println!(
        "commits={commits} mean_batch={batch:.1} msgs mean_commit={:.3} ms",
        commit_secs * 1e3
    );
    println!(
        "raw fsync rate on this disk: {fsyncs:.0}/s (before {fsyncs_before:.0}, after \
         {fsyncs_after:.0}); messages per raw fsync: {:.1}",
        rate / fsyncs
    );
}
