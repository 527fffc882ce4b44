//! `all-to-all`: N subscribers of one channel each publish one message at the same moment, so
//! the server makes N x N deliveries. Over WebSocket every subscriber publishes on its own
//! connection (its token may publish); SSE and long-poll subscribers publish through the HTTP
//! API. Reports deliveries per second, latency, and whether every delivery arrived.

use std::time::Duration;

use serde_json::json;

use crate::args::AllToAllArgs;
use crate::proto::{Action, Command, Transport};
use crate::report::{f, Report, Table};
use crate::scenario::{bound, Ctx};
use crate::stats::{self, LatencyMs};
use crate::svg::{Chart, Series};
use crate::wire::now_ns;

/// Width of the time buckets of the chart and CSV.
const BUCKET_MS: u64 = 10;

/// Runs the scenario.
pub async fn run(args: AllToAllArgs) -> anyhow::Result<Report> {
    let ctx = Ctx::open(&args.common, &[]).await?;
    if ctx.common.transport == Transport::Ws && ctx.target.client_token().is_none() {
        anyhow::bail!(
            "all-to-all over WebSocket publishes with a client token: give --token-secret \
             (or --token with publish rights)"
        );
    }
    if ctx.common.transport != Transport::Ws {
        ctx.target.require_api_key()?;
    }
    let mut pool = ctx.pool(args.subscribers).await?;
    let channel = format!("bench/{}/all", ctx.run);
    let (n, failed_conns, errors) = super::open_shared(
        &mut pool,
        args.subscribers,
        &channel,
        "all-to-all: opening subscribers",
    )
    .await?;

    let cpu0 = ctx.mark(&pool);
    let at = now_ns() + 300_000_000;
    pool.broadcast(
        Command::Fire {
            at_ns: at,
            bucket_ms: BUCKET_MS,
            action: Action::PublishOnce {
                channel: channel.clone(),
            },
        },
        false,
    )
    .await?;
    crate::scenario::status(&format!(
        "all-to-all: {n} subscribers publish at once ({} deliveries)",
        n * n
    ));
    tokio::time::sleep(Duration::from_nanos(at.saturating_sub(now_ns()))).await;
    let timeout = (60_000 + n * n / 50).min(ctx.left().as_millis() as u64 + 1000);
    let round = pool.collect(n, 0, timeout).await?;
    let cpu1 = ctx.mark(&pool);
    pool.close().await;

    let expected = n * n;
    let failed = expected.saturating_sub(round.messages);
    let span_s = round.last_ns.saturating_sub(at) as f64 / 1e9;
    let dps = if span_s > 0.0 {
        round.messages as f64 / span_s
    } else {
        0.0
    };
    let lat = LatencyMs::of(&round.msg_hist);

    let mut r = Report::new("all-to-all");
    let mut summary = Table::new(&[
        "subscribers",
        "expected",
        "delivered",
        "failed",
        "published",
        "all_delivered_ms",
        "deliveries_per_sec",
        "p50_ms",
        "p99_ms",
        "max_ms",
    ]);
    summary.row(vec![
        n.to_string(),
        expected.to_string(),
        round.messages.to_string(),
        failed.to_string(),
        round.published.to_string(),
        f(span_s * 1000.0, 1),
        f(dps, 0),
        f(lat.p50, 2),
        f(lat.p99, 2),
        f(lat.max, 2),
    ]);
    r.lines.push(format!(
        "every delivery arrived: {}",
        if failed == 0 { "yes" } else { "NO" }
    ));
    // The CSV and chart are per time bucket after the moment of publishing.
    let mut buckets = Table::new(&[
        "t_ms",
        "delivered",
        "cumulative",
        "p50_ms",
        "p99_ms",
        "max_ms",
    ]);
    let mut cumulative = 0u64;
    let mut curve = vec![(0.0, 0.0)];
    for (i, b) in round.buckets.iter().enumerate() {
        cumulative += b.messages;
        let l = LatencyMs::of(&b.hist);
        let t = ((i + 1) as u64 * BUCKET_MS) as f64;
        buckets.row(vec![
            f(t, 0),
            b.messages.to_string(),
            cumulative.to_string(),
            f(l.p50, 2),
            f(l.p99, 2),
            f(l.max, 2),
        ]);
        curve.push((t, cumulative as f64 * 100.0 / expected.max(1) as f64));
    }
    r.table = summary;
    r.lines.push(format!(
        "deliveries per {BUCKET_MS} ms are in all-to-all.csv"
    ));
    r.chart = Some(Chart {
        title: format!("All-to-all: {n} subscribers publish at once ({expected} deliveries)"),
        x_label: "ms after the moment of publishing".into(),
        y_label: "deliveries done (%)".into(),
        series: vec![Series::Line {
            name: "cumulative deliveries %".into(),
            points: curve,
            color: "#1f5fa8",
        }],
    });
    r.headline.failed = failed;
    r.headline.deliveries_per_sec = Some(stats::round1(dps));
    r.headline.latency_ms = Some(lat);
    r.detail("subscribers", n);
    r.detail("expected", expected);
    r.detail("delivered", round.messages);
    r.detail("published", round.published);
    r.detail("all_delivered_ms", stats::round3(span_s * 1000.0));
    r.detail("errors", round.errors);
    r.detail("error_samples", &round.error_samples);
    let otherwise = format!("count: {n} subscribers (--subscribers)");
    bound(
        &ctx,
        &mut r,
        cpu0.share(&cpu1),
        failed_conns,
        &errors,
        &otherwise,
    );
    ctx.finish(&mut r);
    r.steps = None;
    r.detail("buckets", json!({ "bucket_ms": BUCKET_MS }));
    r.csv_override = Some(buckets);
    Ok(r)
}
