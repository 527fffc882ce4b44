//! `subscribers` (Deacon's Simultaneous Subscribers Test) and `channels` (Deacon's Channel Count
//! Test): add subscribers in steps; after each step publish messages carrying their send time
//! and record p50, p99 and worst-case latency across all subscribers. `subscribers` puts every
//! subscriber on one channel; `channels` gives each its own channel and publishes to all of them
//! (through `POST /v1/batch`, 1,000 messages per request). Deacon's long-poll clients reconnect
//! after every message; a sample then also waits until every one is back (its new header
//! arrived) before the next is published, as Deacon's test spaced its messages. Stops at
//! `--max-latency`, at
//! `--max-subscribers`, when connections or deliveries fail, or at the time limit. MQTT clients
//! (`--transport mqtt`, `--peer mosquitto`) run `subscribers`, their messages published at QoS 1
//! by an MQTT connection.

use serde_json::json;

use crate::args::StepArgs;
use crate::client::HttpClient;
use crate::proto::Plan;
use crate::report::{f, Report, Table};
use crate::scenario::{open_failure, publish_to_all, Ctx, Progress};
use crate::stats::{self, LatencyMs};
use crate::svg::{latency_series, Chart};
use crate::wire::now_ns;

/// Runs `subscribers` (`own_channels` false) or `channels` (true).
pub async fn run(args: StepArgs, own_channels: bool) -> anyhow::Result<Report> {
    let name = if own_channels {
        "channels"
    } else {
        "subscribers"
    };
    let ctx = Ctx::open(&args.common, &[]).await?;
    // Pusher clients' messages are triggers signed with the app's secret (`channels` does not
    // run over Pusher: lib.rs refuses it); the others' go through Herald's API with its key.
    let pusher_app = ctx.pusher_app().cloned();
    // MQTT clients' messages are QoS 1 PUBLISHes of an MQTT publisher (`subscribers` only: lib.rs
    // refuses `channels` over MQTT), as in fanout, so Mosquitto needs no API of Herald's.
    let mut mqtt_publisher = match ctx.common.is_mqtt() {
        true => Some(ctx.load_publisher(0)?),
        false => None,
    };
    let key = if pusher_app.is_some() || mqtt_publisher.is_some() {
        String::new()
    } else {
        ctx.target.require_api_key()?
    };
    let mut pool = ctx.pool(args.max_subscribers).await?;
    let channel = ctx.channel_name("subs");
    let prefix = ctx.channel_name("ch/");
    let plan = if own_channels {
        Plan::Own {
            prefix: prefix.clone(),
        }
    } else {
        Plan::Shared {
            channel: channel.clone(),
        }
    };
    let mut clients: Vec<HttpClient> = (0..4)
        .map(|_| HttpClient::new(ctx.target.addr, &ctx.target.host, None))
        .collect();
    let bound_ms = args.max_latency.as_secs_f64() * 1000.0;
    let collect_ms = (bound_ms as u64 * 5).max(10_000);
    let cpu0 = ctx.mark(&pool);

    let mut table = Table::new(&[
        "subscribers",
        "delivered",
        "failed",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "deliveries_per_sec",
        "publish_ms",
        "server_rss_mb",
    ]);
    let mut steps = Vec::new();
    let mut chart_rows = Vec::new();
    let mut all = stats::histogram();
    let (mut total, mut failed_deliveries, mut failed_connections) = (0u64, 0u64, 0u64);
    let mut last: Option<(LatencyMs, f64)> = None;
    let mut samples_err: Vec<String> = Vec::new();
    let limited_by = loop {
        if total >= args.max_subscribers {
            break format!("count: reached --max-subscribers {}", args.max_subscribers);
        }
        if ctx.left().is_zero() {
            break format!("time: --time-limit {} s", ctx.common.time_limit);
        }
        let n = args.step.max(1).min(args.max_subscribers - total);
        let bar = Progress::new(n, &format!("{name}: opening {}..{}", total + 1, total + n));
        let (ok, failed, errors) = pool.open(n, plan.clone(), |d, _| bar.set(d)).await?;
        bar.done();
        total += ok;
        failed_connections += failed;
        let open_problem = (failed > 0).then(|| open_failure(&ctx, &errors));
        if total == 0 {
            break open_problem.unwrap_or_else(|| "no subscriber could connect".into());
        }

        let mut hist = stats::histogram();
        let (mut delivered, mut expected, mut spread_ns) = (0u64, 0u64, 0u64);
        let mut publish_ns = 0u64;
        for _ in 0..args.samples.max(1) {
            let sent = now_ns();
            let problem = if own_channels {
                let names: Vec<String> = (0..pool.next_conn())
                    .map(|i| format!("{prefix}{i}"))
                    .collect();
                let (refused, sample) = publish_to_all(&mut clients, &names, &key).await;
                (refused > 0).then(|| sample.unwrap_or_default())
            } else if let Some(publisher) = &mut mqtt_publisher {
                publisher.publish_now(&channel, 1).await.err()
            } else if let Some(app) = &pusher_app {
                clients[0].trigger_now(app, &channel).await.err()
            } else {
                clients[0].publish_now(&channel, &key).await.err()
            };
            publish_ns += now_ns() - sent;
            expected += total;
            if let Some(e) = problem {
                if samples_err.len() < 5 {
                    samples_err.push(e);
                }
            }
            let round = pool
                .collect(
                    1,
                    u64::from(ctx.common.reconnects_per_message()),
                    collect_ms.min(ctx.left().as_millis() as u64 + 1000),
                )
                .await?;
            delivered += round.messages;
            stats::merge(&mut hist, &round.msg_hist);
            if round.last_ns > sent {
                spread_ns += round.last_ns - sent;
            }
            for e in round.error_samples {
                if samples_err.len() < 5 && !samples_err.contains(&e) {
                    samples_err.push(e);
                }
            }
        }
        let failed_now = expected.saturating_sub(delivered);
        failed_deliveries += failed_now;
        stats::merge(&mut all, &hist);
        let lat = LatencyMs::of(&hist);
        let dps = if spread_ns > 0 {
            delivered as f64 / (spread_ns as f64 / 1e9)
        } else {
            0.0
        };
        let publish_ms = publish_ns as f64 / 1e6 / args.samples.max(1) as f64;
        let rss = ctx.probe().map(|p| p.rss_bytes);
        table.row(vec![
            total.to_string(),
            delivered.to_string(),
            failed_now.to_string(),
            f(lat.p50, 2),
            f(lat.p99, 2),
            f(lat.max, 2),
            f(dps, 0),
            f(publish_ms, 2),
            rss.map_or("-".into(), |r| f(r as f64 / 1e6, 1)),
        ]);
        steps.push(json!({
            "subscribers": total,
            "delivered": delivered,
            "expected": expected,
            "failed": failed_now,
            "latency_ms": lat,
            "deliveries_per_sec": stats::round1(dps),
            "publish_ms": stats::round3(publish_ms),
            "server_rss_bytes": rss,
            "server_open_files": ctx.target.pid.and_then(crate::server::open_files),
        }));
        chart_rows.push((total as f64, lat));
        last = Some((lat, dps));
        crate::scenario::status(&format!(
            "{name}: {total} subscribers: p50 {} ms, p99 {} ms, max {} ms, failed {failed_now}",
            lat.p50, lat.p99, lat.max
        ));
        if lat.max > bound_ms {
            break format!(
                "latency bound: worst case {} ms > --max-latency {} ms at {total} subscribers",
                lat.max, bound_ms
            );
        }
        if failed_now > 0 {
            break format!(
                "deliveries failed: {failed_now} of {expected} at {total} subscribers ({})",
                samples_err.join("; ")
            );
        }
        if let Some(p) = open_problem {
            break p;
        }
    };
    let cpu1 = ctx.mark(&pool);
    pool.close().await;
    if let Some(publisher) = mqtt_publisher {
        publisher.close().await;
    }

    let mut r = Report::new(name);
    r.table = table;
    r.steps = Some(steps);
    r.headline.failed = failed_deliveries;
    if let Some((lat, dps)) = last {
        r.headline.latency_ms = Some(lat);
        r.headline.deliveries_per_sec = Some(stats::round1(dps));
    }
    r.detail("subscribers", total);
    r.detail("failed_connections", failed_connections);
    r.detail("latency_ms_all_steps", LatencyMs::of(&all));
    r.detail("max_latency_ms", bound_ms);
    r.detail("error_samples", &samples_err);
    let cpu = cpu0.share(&cpu1);
    r.cpu = Some(cpu);
    r.limited_by = limited_by;
    r.chart = Some(Chart {
        title: if own_channels {
            "Latency by channel count (one subscriber per channel)".into()
        } else {
            "Latency by subscribers of one channel".into()
        },
        x_label: if own_channels {
            "channels (= subscribers)".into()
        } else {
            "subscribers".into()
        },
        y_label: "latency (ms)".into(),
        series: latency_series(&chart_rows),
    });
    ctx.finish(&mut r);
    Ok(r)
}
