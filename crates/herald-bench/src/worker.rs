//! A worker process: holds up to ~15,000 client connections (one process may hold at most
//! 20,000 open files), carries out the parent's commands and reports rounds. It runs on its own
//! single-threaded runtime; the parent runs as many workers as the connection count needs.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, watch, Semaphore};

use crate::client::{self, Fire, HttpClient, Tally};
use crate::proto::{Action, Bucket, Command, Event, RoundReport, Transport, WorkerConfig};
use crate::stats;
use crate::wire::now_ns;

/// Most time buckets a round keeps.
const MAX_BUCKETS: usize = 3600;
/// Error messages kept per round.
const MAX_SAMPLES: usize = 5;

/// State shared by the worker's connections.
pub struct Shared {
    /// Where and how to connect.
    pub cfg: WorkerConfig,
    /// Connections that are ready and still open.
    pub alive: AtomicU64,
    /// The current round.
    pub round: Mutex<Round>,
    /// Fires, as every connection sees them.
    pub fire: watch::Sender<Option<Fire>>,
    /// HTTP publishes of the current fire whose answer has not been counted yet: a delivery
    /// can arrive before its publish's answer, and a round is complete only with both.
    pub publishing: AtomicU64,
    /// The failover clients' records ([`crate::proto::Plan::Failover`]).
    pub book: client::failover::Book,
}

/// One time bucket while it fills.
#[derive(Default)]
pub struct BucketAcc {
    messages: u64,
    acks: u64,
    errors: u64,
    hist: Option<Histogram<u64>>,
}

/// What the worker saw since the round started.
pub struct Round {
    start_ns: u64,
    bucket_ns: u64,
    messages: u64,
    acks: u64,
    published: u64,
    errors: u64,
    disconnected: u64,
    msg_hist: Histogram<u64>,
    ack_hist: Histogram<u64>,
    first_ns: u64,
    last_ns: u64,
    buckets: Vec<BucketAcc>,
    samples: Vec<String>,
}

impl Round {
    fn new(start_ns: u64, bucket_ms: u64) -> Round {
        Round {
            start_ns,
            bucket_ns: bucket_ms.max(1) * 1_000_000,
            messages: 0,
            acks: 0,
            published: 0,
            errors: 0,
            disconnected: 0,
            msg_hist: stats::histogram(),
            ack_hist: stats::histogram(),
            first_ns: 0,
            last_ns: 0,
            buckets: Vec::new(),
            samples: Vec::new(),
        }
    }

    fn bucket(&mut self, now: u64) -> Option<&mut BucketAcc> {
        let i = self.bucket_index(now)?;
        Some(&mut self.buckets[i])
    }

    /// The index of the bucket of `now`, creating it (and those before it) if needed.
    fn bucket_index(&mut self, now: u64) -> Option<usize> {
        let i = (now.checked_sub(self.start_ns)? / self.bucket_ns) as usize;
        if i >= MAX_BUCKETS {
            return None;
        }
        if self.buckets.len() <= i {
            self.buckets.resize_with(i + 1, BucketAcc::default);
        }
        Some(i)
    }

    fn seen(&mut self, now: u64) {
        if self.first_ns == 0 {
            self.first_ns = now;
        }
        self.last_ns = self.last_ns.max(now);
    }

    fn sample(&mut self, e: String) {
        if self.samples.len() < MAX_SAMPLES {
            self.samples.push(e);
        }
    }

    fn report(mut self, alive: u64) -> RoundReport {
        // Deliveries were recorded once, in their time bucket (see `Shared::apply`).
        for hist in self.buckets.iter().filter_map(|b| b.hist.as_ref()) {
            stats::merge(&mut self.msg_hist, hist);
        }
        RoundReport {
            messages: self.messages,
            acks: self.acks,
            published: self.published,
            errors: self.errors,
            disconnected: self.disconnected,
            alive,
            msg_hist: stats::encode(&self.msg_hist),
            ack_hist: stats::encode(&self.ack_hist),
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            start_ns: self.start_ns,
            buckets: self
                .buckets
                .into_iter()
                .map(|b| Bucket {
                    messages: b.messages,
                    acks: b.acks,
                    errors: b.errors,
                    hist: b.hist.map(|h| stats::encode(&h)).unwrap_or_default(),
                })
                .collect(),
            error_samples: self.samples,
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Round> {
        self.round.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies what a connection received at `now`, and empties the tally.
    pub fn apply(&self, now: u64, t: &mut Tally) {
        let mut r = self.lock();
        if !t.sent.is_empty() {
            r.seen(now);
            r.messages += t.sent.len() as u64;
            // Every message of a tally was received at `now`: one bucket for all of them. A
            // delivery is recorded only there; the round's histogram is their sum (merged in
            // `Round::report`), and holds directly only those outside every bucket.
            let r = &mut *r;
            let hist = match r.bucket_index(now) {
                Some(i) => {
                    let b = &mut r.buckets[i];
                    b.messages += t.sent.len() as u64;
                    b.hist.get_or_insert_with(stats::histogram)
                }
                None => &mut r.msg_hist,
            };
            for &sent in &t.sent {
                stats::record_ns(hist, now.saturating_sub(sent));
            }
        }
        if t.acks > 0 {
            r.seen(now);
            r.acks += t.acks;
            let ns = now.saturating_sub(t.ack_sent_ns);
            let us = (ns / 1000).max(1);
            let _ = r.ack_hist.record_n(us.min(600_000_000), t.acks);
            if let Some(b) = r.bucket(now) {
                b.acks += t.acks;
            }
        }
        r.published += t.published;
        if !t.errors.is_empty() {
            let n = t.errors.len() as u64;
            r.errors += n;
            if let Some(b) = r.bucket(now) {
                b.errors += n;
            }
        }
        for e in t.errors.drain(..) {
            r.sample(e);
        }
        t.sent.clear();
        t.acks = 0;
        t.published = 0;
    }

    /// A ready connection closed.
    pub fn lost(&self, why: String) {
        self.alive.fetch_sub(1, Ordering::Relaxed);
        let mut r = self.lock();
        r.disconnected += 1;
        r.sample(format!("connection lost: {why}"));
    }

    fn error(&self, why: String) {
        let mut r = self.lock();
        r.errors += 1;
        if let Some(b) = r.bucket(now_ns()) {
            b.errors += 1;
        }
        r.sample(why);
    }

    fn take_round(&self, start_ns: u64, bucket_ms: u64) -> Round {
        std::mem::replace(&mut *self.lock(), Round::new(start_ns, bucket_ms))
    }
}

fn emit(ev: &Event) {
    let mut line = serde_json::to_string(ev).expect("events serialise");
    line.push('\n');
    let mut out = std::io::stdout().lock();
    // The parent reading our stdout is gone: nothing more to do.
    if out
        .write_all(line.as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        std::process::exit(0);
    }
}

/// Runs a worker on its own single-threaded runtime (in a thread of its own, so it works the
/// same whether or not the caller already runs a runtime).
pub async fn main() -> anyhow::Result<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        let result = match rt {
            Ok(rt) => rt.block_on(serve()),
            Err(e) => Err(e.into()),
        };
        let _ = tx.send(result);
    });
    rx.await?
}

async fn serve() -> anyhow::Result<()> {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let Some(first) = lines.next_line().await? else {
        return Ok(());
    };
    let cfg: WorkerConfig = serde_json::from_str(&first)?;
    let (fire, _) = watch::channel(None);
    let sh = Arc::new(Shared {
        cfg,
        alive: AtomicU64::new(0),
        round: Mutex::new(Round::new(now_ns(), 1000)),
        fire,
        publishing: AtomicU64::new(0),
        book: Default::default(),
    });
    let mut fire_seq = 0u64;
    while let Some(line) = lines.next_line().await? {
        let command: Command = match serde_json::from_str(&line) {
            Ok(c) => c,
            Err(e) => {
                emit(&Event::Error {
                    message: format!("bad command: {e}"),
                });
                continue;
            }
        };
        match command {
            Command::Open {
                first,
                count,
                plan,
                concurrency,
            } => emit(&open(&sh, first, count, plan, concurrency).await),
            Command::Fire {
                at_ns,
                bucket_ms,
                action,
            } => {
                fire_seq += 1;
                sh.take_round(at_ns, bucket_ms);
                let sh2 = sh.clone();
                let seq = fire_seq;
                tokio::spawn(async move {
                    let wait = at_ns.saturating_sub(now_ns());
                    tokio::time::sleep(Duration::from_nanos(wait)).await;
                    go(sh2, seq, action).await;
                });
                emit(&Event::Fired);
            }
            Command::Collect {
                per_conn_messages,
                per_conn_acks,
                timeout_ms,
            } => {
                let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
                loop {
                    let (m, a) = {
                        let r = sh.lock();
                        (r.messages, r.acks)
                    };
                    let alive = sh.alive.load(Ordering::Relaxed);
                    let done = m >= alive * per_conn_messages
                        && a >= alive * per_conn_acks
                        && sh.publishing.load(Ordering::Relaxed) == 0;
                    let hopeless = sh.alive.load(Ordering::Relaxed) == 0 && !done;
                    if done || hopeless || tokio::time::Instant::now() >= deadline {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                let round = sh.take_round(now_ns(), 1000);
                emit(&Event::Collected(
                    round.report(sh.alive.load(Ordering::Relaxed)),
                ));
            }
            Command::Account {
                expected,
                timeout_ms,
            } => {
                let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
                let mut last_progress = tokio::time::Instant::now();
                loop {
                    let (clients, done) = sh.book.caught_up(expected);
                    if done >= clients || tokio::time::Instant::now() >= deadline {
                        break;
                    }
                    if last_progress.elapsed() >= Duration::from_millis(250) {
                        last_progress = tokio::time::Instant::now();
                        emit(&Event::Progress { done, failed: 0 });
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                emit(&Event::Accounted(sh.book.account(expected)));
            }
            Command::Close => {
                emit(&Event::Closed);
                std::process::exit(0);
            }
        }
    }
    Ok(())
}

async fn open(
    sh: &Arc<Shared>,
    first: u64,
    count: u64,
    plan: crate::proto::Plan,
    concurrency: usize,
) -> Event {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let permits = Arc::new(Semaphore::new(concurrency.max(1)));
    {
        let sh = sh.clone();
        let permits = permits.clone();
        tokio::spawn(async move {
            for n in first..first + count {
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    return;
                };
                let ready = client::Ready::new(tx.clone(), permit);
                tokio::spawn(client::run(sh.clone(), n, plan.clone(), ready));
            }
        });
    }
    let (mut ok, mut failed) = (0u64, 0u64);
    let mut errors: Vec<String> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    while ok + failed < count {
        tokio::select! {
            r = rx.recv() => match r {
                Some(Ok(())) => ok += 1,
                Some(Err(e)) => {
                    failed += 1;
                    if errors.len() < MAX_SAMPLES && !errors.contains(&e) {
                        errors.push(e);
                    }
                }
                None => break,
            },
            _ = tick.tick() => emit(&Event::Progress { done: ok, failed }),
        }
    }
    // Subscription acknowledgements of the opening are not part of any measured round.
    sh.take_round(now_ns(), 1000);
    Event::Opened { ok, failed, errors }
}

/// Carries out a fire's action at its moment.
async fn go(sh: Arc<Shared>, seq: u64, action: Action) {
    match (&action, sh.cfg.transport) {
        (Action::PublishOnce { channel }, Transport::Sse | Transport::Poll) => {
            // SSE and long-poll subscribers cannot publish on their stream: publish through the
            // HTTP API instead, one message per connection, over a few keep-alive connections.
            let total = sh.alive.load(Ordering::Relaxed);
            let lanes = total.clamp(1, 32);
            let key = sh.cfg.api_key.clone().unwrap_or_default();
            let mut tasks = Vec::new();
            sh.publishing.fetch_add(total, Ordering::Relaxed);
            for lane in 0..lanes {
                let share = total / lanes + u64::from(lane < total % lanes);
                let sh = sh.clone();
                let channel = channel.clone();
                let key = key.clone();
                tasks.push(tokio::spawn(async move {
                    let mut http = HttpClient::new(sh.cfg.addr, &sh.cfg.host, sh.cfg.source_ip);
                    for _ in 0..share {
                        match http.publish_now(&channel, &key).await {
                            Ok(_) => sh.lock().published += 1,
                            Err(e) => sh.error(e),
                        }
                        sh.publishing.fetch_sub(1, Ordering::Relaxed);
                    }
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
        }
        _ => {
            sh.fire.send_replace(Some(Fire { seq, action }));
        }
    }
}
