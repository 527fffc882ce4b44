//! `connections`: the idle footprint. Opens `--connections N` connections, each subscribed to the
//! same `--channels K` channels, and reports the server's memory per connection (RSS delta from
//! /proc over N), its CPU while they sit idle for `--idle-seconds`, and finally checks that
//! every connection still receives a message.

use std::time::Duration;

use crate::args::ConnectionsArgs;
use crate::proto::Plan;
use crate::report::{f, Report, Table};
use crate::scenario::{open_failure, Ctx, Progress};
use crate::stats::{self, LatencyMs};
use crate::svg::{Chart, Series};

/// Runs the scenario.
pub async fn run(args: ConnectionsArgs) -> anyhow::Result<Report> {
    let env = [(
        "HERALD_MAX_SUBSCRIPTIONS",
        args.channels.max(10_000).to_string(),
    )];
    let ctx = Ctx::open(&args.common, &env).await?;
    if ctx.target.pid.is_none() {
        crate::scenario::status(
            "connections: the server's pid is unknown (use --spawn or --server-pid), so memory \
             cannot be measured",
        );
    }
    let mut pool = ctx.pool(args.connections).await?;
    let prefix = ctx.channel_name("idle/");
    let plan = Plan::Set {
        prefix: prefix.clone(),
        count: args.channels.max(1),
    };
    // Let the server settle after start-up and the baseline before the first reading.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = ctx.probe();
    let chunk = (args.connections / 20).max(100);
    let mut table = Table::new(&["connections", "server_rss_mb", "bytes_per_connection"]);
    let mut curve = Vec::new();
    if let Some(b) = before {
        table.row(vec!["0".into(), f(b.rss_bytes as f64 / 1e6, 1), "-".into()]);
        curve.push((0.0, b.rss_bytes as f64 / 1e6));
    }
    let bar = Progress::new(args.connections, "connections: opening");
    let started = std::time::Instant::now();
    let (mut ok, mut failed) = (0u64, 0u64);
    let mut errors = Vec::new();
    while ok + failed < args.connections && !ctx.left().is_zero() {
        let n = chunk.min(args.connections - ok - failed);
        let base = ok;
        let (o, fl, e) = pool.open(n, plan.clone(), |d, _| bar.set(base + d)).await?;
        ok += o;
        failed += fl;
        errors.extend(e);
        if let (Some(b), Some(now)) = (before, ctx.probe()) {
            let delta = now.rss_bytes as f64 - b.rss_bytes as f64;
            table.row(vec![
                ok.to_string(),
                f(now.rss_bytes as f64 / 1e6, 1),
                f(delta / ok.max(1) as f64, 0),
            ]);
            curve.push((ok as f64, now.rss_bytes as f64 / 1e6));
        }
        if fl > 0 {
            break;
        }
    }
    let open_s = started.elapsed().as_secs_f64();
    bar.done();

    crate::scenario::status(&format!(
        "connections: {ok} open; idle for {} s",
        args.idle_seconds
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let settled = ctx.probe();
    let cpu0 = ctx.mark(&pool);
    tokio::time::sleep(Duration::from_secs_f64(
        args.idle_seconds.min(ctx.left().as_secs_f64()),
    ))
    .await;
    let cpu1 = ctx.mark(&pool);
    // Read again at the end of the idle time: a server that parks idle connections (Herald's
    // `park_idle_after`) holds less once they have parked than just after they opened.
    let after_idle = ctx.probe();
    let idle = cpu0.share(&cpu1);
    let idle_cpu = cpu0.server_seconds(&cpu1);

    // Every connection must still be subscribed: one message to the first channel reaches all.
    let mut lost = 0u64;
    let mut lat = None;
    if let Ok(mut publisher) = ctx.load_publisher(0) {
        let published = publisher.publish_now(&format!("{prefix}0"), 1).await;
        let round = pool.collect(1, 0, 30_000).await?;
        lost = if published.is_ok() {
            ok.saturating_sub(round.messages)
        } else {
            ok
        };
        lat = Some(LatencyMs::of(&round.msg_hist));
    }
    pool.close().await;

    let bytes_per_conn = match (before, settled) {
        (Some(b), Some(a)) if ok > 0 => {
            Some(((a.rss_bytes as f64 - b.rss_bytes as f64) / ok as f64).round())
        }
        _ => None,
    };
    let mut r = Report::new("connections");
    r.table = table;
    let cps = ok as f64 / open_s.max(1e-9);
    if let (Some(b), Some(a)) = (before, settled) {
        r.lines.push(format!(
            "server RSS {:.1} MB before, {:.1} MB with {ok} connections x {} channels: {} bytes per connection",
            b.rss_bytes as f64 / 1e6,
            a.rss_bytes as f64 / 1e6,
            args.channels,
            bytes_per_conn.map_or("?".into(), |x| f(x, 0))
        ));
    }
    r.lines.push(format!(
        "opened {ok} connections in {open_s:.2} s ({cps:.0}/s), {failed} failed"
    ));
    if let (Some(b), Some(a)) = (before, after_idle) {
        if ok > 0 {
            r.lines.push(format!(
                "after {} s idle: server RSS {:.1} MB, {:.0} bytes per connection",
                args.idle_seconds,
                a.rss_bytes as f64 / 1e6,
                (a.rss_bytes as f64 - b.rss_bytes as f64) / ok as f64
            ));
            // The file pages in the RSS change with what code ran, not with connections (a
            // megabyte more or less between runs and builds); the anonymous memory leaves them out.
            r.lines.push(format!(
                "after {} s idle: server anonymous memory (RssAnon) {:.1} MB before, {:.1} MB now: {:.0} bytes per connection",
                args.idle_seconds,
                b.anon_bytes as f64 / 1e6,
                a.anon_bytes as f64 / 1e6,
                (a.anon_bytes as f64 - b.anon_bytes as f64) / ok as f64
            ));
        }
    }
    if let Some(c) = idle_cpu {
        r.lines.push(format!(
            "idle for {} s: server used {c:.3} CPU s ({:.2}% of one core)",
            args.idle_seconds,
            c / args.idle_seconds.max(1e-9) * 100.0
        ));
    }
    if let Some(l) = &lat {
        r.lines.push(format!(
            "a message to the first channel reached {} of {ok} connections (p50 {} ms, max {} ms)",
            ok - lost,
            l.p50,
            l.max
        ));
    }
    r.chart = Some(Chart {
        title: format!(
            "Server memory by open connections ({} channels each)",
            args.channels
        ),
        x_label: "connections".into(),
        y_label: "server RSS (MB)".into(),
        series: vec![Series::Line {
            name: "RSS".into(),
            points: curve,
            color: "#1f5fa8",
        }],
    });
    r.headline.bytes_per_connection = bytes_per_conn;
    r.headline.failed = failed + lost;
    r.headline.latency_ms = lat;
    r.detail("connections", ok);
    r.detail("channels_per_connection", args.channels);
    r.detail("failed_connections", failed);
    r.detail("lost_connections", lost);
    r.detail("connections_per_sec", stats::round1(cps));
    r.detail("server_rss_before_bytes", before.map(|b| b.rss_bytes));
    r.detail("server_rss_after_bytes", settled.map(|b| b.rss_bytes));
    r.detail(
        "server_rss_after_idle_bytes",
        after_idle.map(|b| b.rss_bytes),
    );
    r.detail("server_anon_before_bytes", before.map(|b| b.anon_bytes));
    r.detail(
        "server_anon_after_idle_bytes",
        after_idle.map(|b| b.anon_bytes),
    );
    r.detail("idle_seconds", args.idle_seconds);
    r.detail("idle_server_cpu_seconds", idle_cpu.map(stats::round3));
    r.detail(
        "idle_server_cpu_percent_of_core",
        idle_cpu.map(|c| stats::round3(c / args.idle_seconds.max(1e-9) * 100.0)),
    );
    r.detail("error_samples", &errors);
    r.cpu = Some(idle);
    r.limited_by = if failed > 0 {
        open_failure(&ctx, &errors)
    } else if ok < args.connections {
        format!("time: --time-limit {} s", ctx.common.time_limit)
    } else {
        format!("count: --connections {}", args.connections)
    };
    ctx.finish(&mut r);
    Ok(r)
}
