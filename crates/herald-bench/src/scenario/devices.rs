//! What `broadcast` and `reconnect-storm` share: registering devices through
//! `POST /v1/devices/batch` with several requests in flight (counted per second), sending pushes
//! through `POST /v1/push` (timing each answer), and the size of a spawned server's store.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Deserialize;

use crate::report::Table;
use crate::scenario::{Ctx, Progress};
use crate::stats;
use crate::svg::{Chart, Series};
use crate::wire::{self, now_ns};

/// Most devices the server takes in one batch registration.
pub const MAX_BATCH: u64 = 1000;

/// The id of device `i` of a run: `{prefix}{i}`.
pub fn device_prefix(ctx: &Ctx) -> String {
    format!("bench-{}-", ctx.run)
}

/// What a registration phase did.
#[derive(Default)]
pub struct Registered {
    /// Devices the server stored (created or updated).
    pub devices: u64,
    /// Devices of refused or failed requests.
    pub refused: u64,
    /// A sample error.
    pub sample: Option<String>,
    /// From the first request to the last answer.
    pub seconds: f64,
    /// Devices registered in each second of the phase.
    pub per_second: Vec<u64>,
}

impl Registered {
    /// Devices per second over the phase.
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.devices as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// Per-second table: second, registered that second, total.
    pub fn table(&self) -> Table {
        let mut t = Table::new(&["second", "registered", "total"]);
        for (i, (n, total)) in self.cumulative().enumerate() {
            t.row(vec![(i + 1).to_string(), n.to_string(), total.to_string()]);
        }
        t
    }

    /// Chart of the per-second rate and the running total.
    pub fn chart(&self, title: String) -> Chart {
        let mut per_sec = Vec::new();
        let mut total = vec![(0.0, 0.0)];
        for (i, (n, t)) in self.cumulative().enumerate() {
            per_sec.push(((i + 1) as f64, n as f64));
            total.push(((i + 1) as f64, t as f64));
        }
        Chart {
            title,
            x_label: "seconds".into(),
            y_label: "devices registered".into(),
            series: vec![
                Series::Line {
                    name: "total".into(),
                    points: total,
                    color: "#1f5fa8",
                },
                Series::Points {
                    name: "registered this second".into(),
                    points: per_sec,
                    color: "#d9822b",
                },
            ],
        }
    }

    fn cumulative(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.per_second.iter().scan(0u64, |total, n| {
            *total += n;
            Some((*n, *total))
        })
    }
}

#[derive(Deserialize)]
struct BatchAnswer {
    created: u64,
    updated: u64,
}

/// What kind of device a registration makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    /// `herald`: a live connection only.
    Herald,
    /// `apns`, with the provider token [`apns_token`]`(i)`.
    Apns,
}

/// The APNs device token of device `i`: 64 hex digits, distinct per device.
pub fn apns_token(i: u64) -> String {
    format!("{:064x}", u128::from(i).wrapping_mul(104_729) + 1)
}

/// The body registering devices `from..to` of `kind`; device `i` gets the tag `tag(i)` when one
/// is given.
fn batch_body(
    prefix: &str,
    from: u64,
    to: u64,
    kind: DeviceKind,
    tag: impl Fn(u64) -> Option<String>,
) -> String {
    let per_device = if kind == DeviceKind::Apns { 150 } else { 64 };
    let mut body = String::with_capacity(((to - from) * per_device) as usize + 16);
    body.push_str("{\"devices\":[");
    for i in from..to {
        if i > from {
            body.push(',');
        }
        match kind {
            DeviceKind::Herald => body.push_str("{\"platform\":\"herald\",\"id\":\""),
            DeviceKind::Apns => {
                body.push_str("{\"platform\":\"apns\",\"token\":\"");
                body.push_str(&apns_token(i));
                body.push_str("\",\"id\":\"");
            }
        }
        body.push_str(prefix);
        body.push_str(&i.to_string());
        body.push('"');
        if let Some(t) = tag(i) {
            body.push_str(",\"tags\":[\"");
            body.push_str(&t);
            body.push_str("\"]");
        }
        body.push('}');
    }
    body.push_str("]}");
    body
}

/// Sends `jobs` API requests over `lanes` keep-alive connections, each lane one request at a
/// time, until all are sent or the time limit passes. `request(i)` gives job `i`'s path and
/// body; `answer(i, result, round_trip_ns, state)` records its answer in the shared state,
/// which is returned at the end.
async fn in_lanes<S, Req, Ans>(
    ctx: &Ctx,
    key: &str,
    jobs: u64,
    lanes: u64,
    request: Req,
    answer: Ans,
) -> S
where
    S: Default + Send + 'static,
    Req: Fn(u64) -> (&'static str, String) + Send + Sync + 'static,
    Ans: Fn(u64, Result<(u16, Vec<u8>), String>, u64, &mut S) + Send + Sync + 'static,
{
    let shared = Arc::new((Mutex::new(S::default()), AtomicU64::new(0), request, answer));
    let key: Arc<str> = Arc::from(key);
    let stop_at = Instant::now() + ctx.left();
    let mut tasks = Vec::new();
    for _ in 0..lanes.clamp(1, jobs.max(1)) {
        let (shared, key) = (shared.clone(), key.clone());
        let mut http = ctx.http();
        tasks.push(tokio::spawn(async move {
            let (state, next, request, answer) = &*shared;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs || Instant::now() >= stop_at {
                    return;
                }
                let (path, body) = request(i);
                let sent = now_ns();
                let result = http.post(path, &key, body.as_bytes()).await;
                let took = now_ns() - sent;
                answer(
                    i,
                    result,
                    took,
                    &mut state.lock().unwrap_or_else(|p| p.into_inner()),
                );
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let mut state = shared.0.lock().unwrap_or_else(|p| p.into_inner());
    std::mem::take(&mut *state)
}

/// The error of an answer that is not `ok`, or the answer's body.
fn expect(what: &str, ok: u16, result: Result<(u16, Vec<u8>), String>) -> Result<Vec<u8>, String> {
    match result {
        Ok((status, b)) if status == ok => Ok(b),
        Ok((status, b)) => Err(format!(
            "{what}: HTTP {status} {}",
            String::from_utf8_lossy(&b[..b.len().min(200)])
        )),
        Err(e) => Err(e),
    }
}

/// Registers devices `{prefix}0` .. `{prefix}{count-1}`, `batch` per request (at most 1,000),
/// `concurrency` requests in flight, device `i` tagged `tag(i)`; stops at the time limit.
pub async fn register(
    ctx: &Ctx,
    key: &str,
    prefix: &str,
    count: u64,
    batch: u64,
    concurrency: u64,
    tag: fn(u64) -> Option<String>,
) -> Registered {
    let shape = Shape {
        batch,
        concurrency,
        kind: DeviceKind::Herald,
        tag,
    };
    register_as(ctx, key, prefix, count, shape).await
}

/// How [`register_as`] registers: requests, flight, device kind, tags.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Devices per request (at most 1,000).
    pub batch: u64,
    /// Requests in flight.
    pub concurrency: u64,
    /// Kind of device.
    pub kind: DeviceKind,
    /// Device `i`'s tag, if any.
    pub tag: fn(u64) -> Option<String>,
}

/// [`register`] with devices of any [`DeviceKind`].
pub async fn register_as(
    ctx: &Ctx,
    key: &str,
    prefix: &str,
    count: u64,
    shape: Shape,
) -> Registered {
    let Shape {
        batch,
        concurrency,
        kind,
        tag,
    } = shape;
    let batch = batch.clamp(1, MAX_BATCH);
    let range = move |r: u64| (r * batch, ((r + 1) * batch).min(count));
    let done = Arc::new(AtomicU64::new(0));
    let bar = Progress::new(count, &format!("registering {count} devices"));
    let ticker = bar.follow(done.clone(), count);
    let start = Instant::now();
    let prefix = prefix.to_owned();
    let request = move |r| {
        let (from, to) = range(r);
        (
            "/v1/devices/batch",
            batch_body(&prefix, from, to, kind, tag),
        )
    };
    let answer = move |r, result, _, out: &mut Registered| {
        let (from, to) = range(r);
        let stored = expect("batch registration", 200, result).and_then(|b| {
            serde_json::from_slice::<BatchAnswer>(&b)
                .map(|a| a.created + a.updated)
                .map_err(|e| format!("bad batch answer: {e}"))
        });
        match stored {
            Ok(n) => {
                let second = start.elapsed().as_secs() as usize;
                if out.per_second.len() <= second {
                    out.per_second.resize(second + 1, 0);
                }
                out.per_second[second] += n;
                out.devices += n;
                out.refused += (to - from).saturating_sub(n);
            }
            Err(e) => {
                out.refused += to - from;
                out.sample.get_or_insert(e);
            }
        }
        out.seconds = start.elapsed().as_secs_f64();
        done.fetch_add(to - from, Ordering::Relaxed);
    };
    let requests = count.div_ceil(batch);
    let registered = in_lanes(ctx, key, requests, concurrency, request, answer).await;
    ticker.abort();
    bar.done();
    registered
}

/// What a series of pushes did.
pub struct Pushed {
    /// Pushes the server accepted (202).
    pub accepted: u64,
    /// Pushes refused or failed.
    pub refused: u64,
    /// A sample error.
    pub sample: Option<String>,
    /// Accept latency (request to answer).
    pub hist: hdrhistogram::Histogram<u64>,
    /// `targeted` of the last accepted answer, as the server gave it.
    pub targeted: serde_json::Value,
    /// Id of the last accepted push.
    pub last_id: Option<String>,
}

impl Default for Pushed {
    fn default() -> Self {
        Pushed {
            accepted: 0,
            refused: 0,
            sample: None,
            hist: stats::histogram(),
            targeted: serde_json::Value::Null,
            last_id: None,
        }
    }
}

#[derive(Deserialize)]
struct PushAnswer {
    #[serde(default)]
    id: String,
    #[serde(default)]
    targeted: serde_json::Value,
}

/// The body of a push to `target` (a JSON object) carrying the current time as its data.
pub fn push_body(target: &str) -> String {
    format!("{{\"target\":{target},\"data\":{}}}", wire::stamp(now_ns()))
}

/// Sends `count` pushes through `POST /v1/push` over `lanes` keep-alive connections, each
/// waiting for its answer; push `i` has the body `body(i)`. Stops at the time limit.
pub async fn push(
    ctx: &Ctx,
    key: &str,
    count: u64,
    lanes: u64,
    label: &str,
    body: impl Fn(u64) -> String + Send + Sync + 'static,
) -> Pushed {
    let done = Arc::new(AtomicU64::new(0));
    let bar = Progress::new(count, label);
    let ticker = bar.follow(done.clone(), count);
    let request = move |i| ("/v1/push", body(i));
    let answer = move |_, result, took, out: &mut Pushed| {
        match expect("push", 202, result) {
            Ok(b) => {
                stats::record_ns(&mut out.hist, took);
                out.accepted += 1;
                if let Ok(a) = serde_json::from_slice::<PushAnswer>(&b) {
                    out.targeted = a.targeted;
                    out.last_id = Some(a.id);
                }
            }
            Err(e) => {
                out.refused += 1;
                out.sample.get_or_insert(e);
            }
        }
        done.fetch_add(1, Ordering::Relaxed);
    };
    let pushed = in_lanes(ctx, key, count, lanes, request, answer).await;
    ticker.abort();
    bar.done();
    pushed
}

/// Waits (up to `limit`) until the receipt of push `id` names its audience: the server counts
/// the devices of a broadcast or tag push after it has answered. Returns the count and when it
/// was seen, or `None` when it did not come.
pub async fn audience(
    ctx: &Ctx,
    key: &str,
    id: &str,
    limit: std::time::Duration,
) -> Option<(u64, Instant)> {
    let publisher = ctx.publisher(key);
    let until = Instant::now() + limit.min(ctx.left());
    while Instant::now() < until {
        if let Ok(receipt) = publisher.receipt(id).await {
            if let Some(n) = receipt.targeted {
                return Some((n, Instant::now()));
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    None
}

/// Bytes of a spawned server's store on disk: `herald.db` plus its write-ahead log.
pub fn store_bytes(ctx: &Ctx) -> Option<u64> {
    let dir = ctx.target.data_dir.as_ref()?;
    let size = |name: &str| std::fs::metadata(dir.join(name)).map_or(0, |m| m.len());
    Some(size("herald.db") + size("herald.db-wal"))
}
