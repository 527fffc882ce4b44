//! `soak`: a steady load for a bounded time (`--duration`, at most 24 hours): publishes at a
//! fixed rate, WebSocket subscribers that disconnect and reconnect all the time (resuming where
//! they left off), and device pushes. Every `--interval` it records the server's resident memory
//! and open files (from /proc), publish latency p50/p99, delivery latency p99 and errors, prints
//! them, and at the end reports how memory and files grew (first interval to last, and per
//! hour): the figures that show a leak. `soak.csv` holds one row per interval and `soak.svg`
//! draws them as four panels (memory, files, latency, errors).

mod chart;
mod load;

use std::time::{Duration, Instant};

use anyhow::bail;

use crate::args::SoakArgs;
use crate::report::Report;
use crate::scenario::Ctx;
use crate::server::{self, CpuMark, ProcStats};
use crate::stats::{self, LatencyMs};

use load::{Load, Plan, Tally};

/// Longest `--duration` accepted.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Shortest `--interval` accepted.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The figures of one interval.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Seconds since the load started, at the end of the interval.
    pub t_s: f64,
    /// The server's resident memory, MB (unknown without its pid).
    pub rss_mb: Option<f64>,
    /// The server's open files (unknown without its pid).
    pub open_files: Option<u64>,
    /// Publishes stored.
    pub publishes: u64,
    /// Publish request to answer.
    pub publish: LatencyMs,
    /// Messages received by subscribers.
    pub deliveries: u64,
    /// Publish to receipt.
    pub delivery: LatencyMs,
    /// Subscriber reconnects.
    pub reconnects: u64,
    /// Device pushes accepted.
    pub pushes: u64,
    /// Errors of every kind.
    pub errors: u64,
}

/// Checks the bounds of the flags.
fn validate(args: &SoakArgs) -> anyhow::Result<()> {
    if args.duration.is_zero() || args.duration > MAX_DURATION {
        bail!(
            "--duration must be more than 0 and at most 24h (got {})",
            humantime::format_duration(args.duration)
        );
    }
    if args.interval < MIN_INTERVAL || args.interval > args.duration {
        bail!("--interval must be at least 1s and at most --duration");
    }
    let positive = |r: f64| r.is_finite() && r > 0.0;
    if !positive(args.rate) || !(positive(args.push_rate) || args.push_rate == 0.0) {
        bail!("--rate must be more than 0 and --push-rate at least 0");
    }
    if args.channels == 0 || args.publishers == 0 {
        bail!("--channels and --publishers must be at least 1");
    }
    if args.churn < Duration::from_millis(100) {
        bail!("--churn must be at least 100ms");
    }
    Ok(())
}

/// Registers `count` offline devices named `prefix{i}`; their ids.
async fn register_devices(
    ctx: &Ctx,
    key: &str,
    prefix: &str,
    count: u64,
) -> anyhow::Result<Vec<String>> {
    let mut http = ctx.http();
    let mut ids = Vec::new();
    for i in 0..count {
        let id = format!("{prefix}{i}");
        let body = format!("{{\"platform\":\"herald\",\"id\":\"{id}\"}}");
        match http.post("/v1/devices", key, body.as_bytes()).await {
            Ok((200 | 201, _)) => ids.push(id),
            Ok((status, answer)) => bail!(
                "registering device {id}: HTTP {status} {}",
                String::from_utf8_lossy(&answer)
            ),
            Err(e) => bail!("registering device {id}: {e}"),
        }
    }
    Ok(ids)
}

/// Reads the interval's figures.
fn sample(t_s: f64, pid: Option<u32>, tally: &Tally) -> Sample {
    let proc = pid.and_then(ProcStats::read);
    Sample {
        t_s: stats::round1(t_s),
        rss_mb: proc.map(|p| stats::round1(p.rss_bytes as f64 / 1e6)),
        open_files: pid.and_then(server::open_files),
        publishes: tally.publishes,
        publish: LatencyMs::of(&tally.publish_latency),
        deliveries: tally.deliveries,
        delivery: LatencyMs::of(&tally.delivery_latency),
        reconnects: tally.reconnects,
        pushes: tally.pushes,
        errors: tally.errors,
    }
}

/// The progress line of one interval.
fn progress_line(s: &Sample) -> String {
    let rss = s.rss_mb.map_or("?".into(), |m| format!("{m:.1}"));
    let files = s.open_files.map_or("?".into(), |n| n.to_string());
    format!(
        "herald bench soak: {} rss {rss} MB, {files} open files; {} publishes (p50 {} ms, p99 {} \
         ms), {} deliveries (p99 {} ms), {} reconnects, {} pushes, {} errors",
        humantime::format_duration(Duration::from_secs(s.t_s as u64)),
        s.publishes,
        s.publish.p50,
        s.publish.p99,
        s.deliveries,
        s.delivery.p99,
        s.reconnects,
        s.pushes,
        s.errors
    )
}

/// Runs the scenario.
pub async fn run(args: SoakArgs) -> anyhow::Result<Report> {
    validate(&args)?;
    let mut common = args.common.clone();
    // The run is as long as --duration says; the time limit only guards against a hang.
    common.time_limit = common.time_limit.max(args.duration.as_secs() + 300);
    let ctx = Ctx::open(&common, &[]).await?;
    let key = ctx.target.require_api_key()?;
    let Some(token) = ctx.target.client_token() else {
        bail!("subscribers need a client token: --token-secret SECRET, --token TOKEN or --spawn");
    };
    let prefix = format!("soak-{}-", ctx.run);
    let devices = register_devices(&ctx, &key, &prefix, args.devices).await?;
    let pid = ctx.target.pid;
    let plan = Plan {
        url: ctx.target.url.clone(),
        addr: ctx.target.addr,
        host: ctx.target.host.clone(),
        api_key: key,
        token,
        channels: (0..args.channels).map(|i| format!("{prefix}{i}")).collect(),
        publishers: args.publishers,
        rate: args.rate,
        subscribers: args.subscribers,
        churn: args.churn,
        devices,
        push_rate: args.push_rate,
    };
    crate::scenario::status(&format!(
        "soak: {} publishes/s to {} channels, {} subscribers reconnecting every ~{}, {} pushes/s, \
         for {} (a line every {})",
        args.rate,
        args.channels,
        args.subscribers,
        humantime::format_duration(args.churn),
        args.push_rate,
        humantime::format_duration(args.duration),
        humantime::format_duration(args.interval)
    ));
    let cpu0 = CpuMark::now(pid, &[]);
    let started = Instant::now();
    let load = Load::start(plan);
    let mut samples = Vec::new();
    let mut publish_all = stats::histogram();
    let mut delivery_all = stats::histogram();
    let mut first_error = None;
    let mut next = tokio::time::Instant::now() + args.interval;
    let end = tokio::time::Instant::now() + args.duration;
    while next <= end + Duration::from_millis(10) && !ctx.left().is_zero() {
        tokio::time::sleep_until(next).await;
        let tally = load.tally.take();
        stats::merge(&mut publish_all, &tally.publish_latency);
        stats::merge(&mut delivery_all, &tally.delivery_latency);
        first_error = first_error.or(tally.sample.clone());
        let s = sample(started.elapsed().as_secs_f64(), pid, &tally);
        eprintln!("{}", progress_line(&s));
        samples.push(s);
        next += args.interval;
    }
    load.stop().await;
    let cpu1 = CpuMark::now(pid, &[]);
    let mut r = chart::report(&args, &samples, &publish_all, &delivery_all);
    if let Some(e) = first_error {
        r.detail("error_sample", e);
    }
    r.cpu = Some(cpu0.share(&cpu1));
    r.limited_by = format!(
        "duration: a steady load for {} (--duration), not a capacity test",
        humantime::format_duration(args.duration)
    );
    ctx.finish(&mut r);
    Ok(r)
}
