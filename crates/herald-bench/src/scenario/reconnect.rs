//! `reconnect-storm`: `--devices N` devices are registered; while they are offline, `--pending
//! P` messages are stored for each (P - D broadcast pushes and, with `--direct D`, D pushes to
//! each device by id); then N device connections (spread over the worker processes) ask for
//! their inboxes at the same moment, each with a device token of its own, and each waits until
//! all P messages arrived. Reports the time until every device was caught up, each device's
//! catch-up time (its inbox request to its last pending message; the TCP connection is made
//! beforehand), failed devices, and the server's CPU time per caught-up device.

use std::time::Duration;

use crate::args::ReconnectArgs;
use crate::proto::{Action, Command, Plan};
use crate::report::{f, Report, Table};
use crate::scenario::devices::{self, push_body};
use crate::scenario::{bound, status, Ctx, Progress};
use crate::stats::{self, LatencyMs};
use crate::svg::{Chart, Series};
use crate::wire::now_ns;

/// Width of the time buckets of the table, CSV and chart.
const BUCKET_MS: u64 = 100;

/// Runs the scenario.
pub async fn run(args: ReconnectArgs) -> anyhow::Result<Report> {
    if args.pending == 0 {
        anyhow::bail!("--pending must be at least 1");
    }
    if args.direct > args.pending {
        anyhow::bail!("--direct cannot exceed --pending");
    }
    let ctx = Ctx::open(&args.common, &[]).await?;
    let key = ctx.target.require_api_key()?;
    if ctx.target.token_secret.is_none() {
        anyhow::bail!(
            "device connections need the server's token secret: --token-secret SECRET or \
             HERALD_TOKEN_SECRET (or --spawn)"
        );
    }
    let prefix = devices::device_prefix(&ctx);
    let n = args.devices;
    let reg = devices::register(&ctx, &key, &prefix, n, devices::MAX_BATCH, 4, |_| None).await;
    if reg.devices < n {
        anyhow::bail!(
            "only {} of {n} devices could be registered: {}",
            reg.devices,
            reg.sample.unwrap_or_default()
        );
    }
    let broadcasts = args.pending - args.direct;
    let stored0 = ctx.mark_server();
    let pushed = devices::push(
        &ctx,
        &key,
        broadcasts,
        1,
        &format!("storing {broadcasts} broadcasts"),
        |_| push_body("{\"app\":true}"),
    )
    .await;
    let stored1 = ctx.mark_server();
    let direct_total = n * args.direct;
    let device_prefix = prefix.clone();
    let direct = devices::push(
        &ctx,
        &key,
        direct_total,
        4,
        &format!("storing {direct_total} device pushes"),
        move |i| push_body(&format!("{{\"device\":\"{device_prefix}{}\"}}", i % n)),
    )
    .await;
    let stored2 = ctx.mark_server();
    let refused = pushed.refused + direct.refused;
    if refused > 0 {
        anyhow::bail!(
            "the server refused {refused} pushes: {}",
            pushed.sample.or(direct.sample).unwrap_or_default()
        );
    }

    let mut pool = ctx.pool(n).await?;
    let bar = Progress::new(n, "reconnect-storm: connecting devices (TCP)");
    let plan = Plan::Inbox {
        prefix: prefix.clone(),
        pending: args.pending,
        ack: false,
    };
    let (opened, failed_conns, errors) = pool.open(n, plan, |d, _| bar.set(d)).await?;
    bar.done();
    if opened == 0 {
        anyhow::bail!("no device could connect: {}", errors.join("; "));
    }
    status(&format!(
        "reconnect-storm: {opened} devices ask for their {} pending messages at once",
        args.pending
    ));
    let cpu0 = ctx.mark(&pool);
    let at = now_ns() + 300_000_000;
    pool.broadcast(
        Command::Fire {
            at_ns: at,
            bucket_ms: BUCKET_MS,
            action: Action::Mark,
        },
        false,
    )
    .await?;
    tokio::time::sleep(Duration::from_nanos(at.saturating_sub(now_ns()))).await;
    let timeout = (30_000 + opened * args.pending / 50).min(ctx.left().as_millis() as u64 + 1000);
    let round = pool.collect(args.pending, 1, timeout).await?;
    let cpu1 = ctx.mark(&pool);
    pool.close().await;

    let caught_up = round.acks.min(opened);
    let failed = n - caught_up;
    let span_s = round.last_ns.saturating_sub(at) as f64 / 1e9;
    let catchup = LatencyMs::of(&round.ack_hist);
    let server_cpu = cpu0.server_seconds(&cpu1);
    let ms_per_device = server_cpu
        .filter(|_| caught_up > 0)
        .map(|c| stats::round3(c * 1000.0 / caught_up as f64));
    let dps = if span_s > 0.0 {
        round.messages as f64 / span_s
    } else {
        0.0
    };

    let mut table = Table::new(&["t_ms", "caught_up", "total", "messages", "errors"]);
    let (mut total, mut curve, mut per_bucket) = (0u64, vec![(0.0, 0.0)], Vec::new());
    for (i, b) in round.buckets.iter().enumerate() {
        total += b.acks;
        let t = ((i as u64 + 1) * BUCKET_MS) as f64;
        table.row(vec![
            f(t, 0),
            b.acks.to_string(),
            total.to_string(),
            b.messages.to_string(),
            b.errors.to_string(),
        ]);
        curve.push((t, total as f64));
        per_bucket.push((t, b.acks as f64));
    }
    let mut r = Report::new("reconnect-storm");
    r.table = table;
    r.chart = Some(Chart {
        title: format!(
            "Reconnect storm: {opened} devices x {} pending messages",
            args.pending
        ),
        x_label: "milliseconds".into(),
        y_label: "devices caught up".into(),
        series: vec![
            Series::Line {
                name: "total".into(),
                points: curve,
                color: "#1f5fa8",
            },
            Series::Points {
                name: format!("caught up in each {BUCKET_MS} ms"),
                points: per_bucket,
                color: "#d9822b",
            },
        ],
    });
    r.lines.push(format!(
        "{caught_up} of {n} devices caught up with {} pending messages each ({} broadcasts, {} \
         direct) in {:.3} s; {failed} failed",
        args.pending, broadcasts, args.direct, span_s
    ));
    r.lines.push(format!(
        "catch-up per device (inbox request to last pending message): p50 {} ms, p99 {} ms, max {} ms",
        catchup.p50, catchup.p99, catchup.max
    ));
    r.lines.push(format!(
        "server: {} CPU s for the storm, {} ms per caught-up device; {} messages delivered ({:.0}/s)",
        server_cpu.map_or("?".into(), |c| f(c, 3)),
        ms_per_device.map_or("?".into(), |c| f(c, 3)),
        round.messages,
        dps
    ));
    r.headline.deliveries_per_sec = Some(stats::round1(dps));
    r.headline.latency_ms = Some(catchup);
    r.headline.failed = failed;
    r.detail("devices", n);
    r.detail("pending", args.pending);
    r.detail("broadcasts", broadcasts);
    r.detail("direct", args.direct);
    r.detail("caught_up", caught_up);
    r.detail("delivered", round.messages);
    r.detail("expected", n * args.pending);
    r.detail("seconds_until_all_caught_up", stats::round3(span_s));
    r.detail("server_cpu_seconds_storm", server_cpu.map(stats::round3));
    r.detail("server_cpu_ms_per_device", ms_per_device);
    r.detail("devices_per_sec_registered", stats::round1(reg.rate()));
    r.detail("broadcast_accept_ms", LatencyMs::of(&pushed.hist));
    r.detail("direct_accept_ms", LatencyMs::of(&direct.hist));
    let per_push = |cpu: Option<f64>, count: u64| {
        cpu.filter(|_| count > 0)
            .map(|c| stats::round3(c * 1000.0 / count as f64))
    };
    r.detail(
        "server_cpu_ms_per_broadcast_stored",
        per_push(stored0.server_seconds(&stored1), pushed.accepted),
    );
    r.detail(
        "server_cpu_ms_per_direct_push_stored",
        per_push(stored1.server_seconds(&stored2), direct.accepted),
    );
    r.detail("disconnected", round.disconnected);
    r.detail("error_samples", &round.error_samples);
    let otherwise = format!("count: {n} devices x {} pending messages", args.pending);
    bound(
        &ctx,
        &mut r,
        cpu0.share(&cpu1),
        failed_conns,
        &errors,
        &otherwise,
    );
    ctx.finish(&mut r);
    Ok(r)
}
