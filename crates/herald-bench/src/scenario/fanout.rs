//! `fanout`: throughput of one channel. `--subscribers N` subscribe; `--publishers P` publish
//! `--messages M` in total through the HTTP API (each publisher one request at a time, at
//! `--rate R` messages/s across publishers or as fast as they can; against NATS, `PUB` and a
//! `PING` on a NATS connection, waiting for the `PONG`). With `--channels C` the publishers are
//! spread over C channels (publisher `p` on channel `p` mod C) and every subscriber subscribes
//! to all of them. Reports deliveries per second, latency percentiles, and server CPU seconds
//! per million deliveries.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use crate::args::FanoutArgs;
use crate::proto::{Action, Command};
use crate::report::{f, Report, Table};
use crate::scenario::publisher::Share;
use crate::scenario::{cpu_bound, open_failure, Ctx, Progress};
use crate::stats::{self, LatencyMs};
use crate::svg::{latency_series, Chart};
use crate::wire::now_ns;

/// Runs the scenario.
pub async fn run(args: FanoutArgs) -> anyhow::Result<Report> {
    if args.nats_window > 1 && !args.common.is_nats() {
        anyhow::bail!("--nats-window is for --peer nats (Herald's publishers are HTTP requests)");
    }
    if args.nats_window > 1 && args.batch > 1 {
        anyhow::bail!("give --nats-window or --batch, not both");
    }
    if args.batch > 1 && args.common.is_pusher() {
        anyhow::bail!(
            "--batch is not for Pusher clients: their publishers trigger one event per request"
        );
    }
    let ctx = Ctx::open(&args.common, &[]).await?;
    // Publishers spread round-robin over a cluster's nodes (all on the one server else).
    let publishers = (0..args.publishers.max(1))
        .map(|p| ctx.load_publisher(p as usize))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // As fast as possible, the clients must read as fast as the whole machine delivers; paced,
    // one worker keeps up, and more would only add wake-ups.
    let mut pool = if args.rate.is_none() {
        ctx.reader_pool(args.subscribers).await?
    } else {
        ctx.pool(args.subscribers).await?
    };
    let channels = Channels::new(&ctx, args.channels);
    let (n, failed_conns, errors) = channels.open(&mut pool, args.subscribers).await?;

    let t0 = now_ns() + 200_000_000;
    pool.broadcast(
        Command::Fire {
            at_ns: t0,
            bucket_ms: 1000,
            action: Action::Mark,
        },
        false,
    )
    .await?;
    tokio::time::sleep(Duration::from_nanos(t0.saturating_sub(now_ns()))).await;
    let cpu0 = ctx.mark(&pool);

    let m = args.messages;
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let stop_at = tokio::time::Instant::now() + ctx.left();
    let bar = Progress::new(
        m,
        &format!("fanout: publishing {m} messages to {n} subscribers"),
    );
    let mut tasks = Vec::new();
    for (p, publisher) in publishers.into_iter().enumerate() {
        let share = Share {
            next: next.clone(),
            done: done.clone(),
            channel: channels.of_publisher(p),
            messages: m,
            batch: args.batch.max(1),
            rate: args.rate,
            t0,
            stop_at,
            window: args.nats_window.max(1),
        };
        tasks.push(tokio::spawn(publisher.run(share)));
    }
    let ticker = bar.follow(done.clone(), m);
    let mut sent = Vec::new();
    let mut refused = 0;
    let mut sample = None;
    let mut publish_hist = stats::histogram();
    for t in tasks {
        let p = t.await?;
        sent.extend(p.sent);
        refused += p.refused;
        sample = sample.or(p.sample);
        stats::merge(&mut publish_hist, &p.hist);
    }
    ticker.abort();
    bar.done();
    let publish_end = now_ns();
    let ok = sent.len() as u64;
    let timeout = (30_000 + n * ok / 100).min(ctx.left().as_millis() as u64 + 5000);
    let round = pool.collect(ok, 0, timeout).await?;
    let cpu1 = ctx.mark(&pool);
    pool.close().await;

    let attempted = ok + refused;
    let expected = n * m;
    let failed = expected.saturating_sub(round.messages);
    let span_s = round.last_ns.saturating_sub(t0) as f64 / 1e9;
    let dps = if span_s > 0.0 {
        round.messages as f64 / span_s
    } else {
        0.0
    };
    let pps = ok as f64 / (publish_end.saturating_sub(t0) as f64 / 1e9).max(1e-9);
    let lat = LatencyMs::of(&round.msg_hist);
    let server_cpu = cpu0.server_seconds(&cpu1);
    let per_million = server_cpu
        .filter(|_| round.messages > 0)
        .map(|c| stats::round3(c / round.messages as f64 * 1e6));
    // The clients' share of the same work: on one machine they compete with the server.
    let loadgen_cpu = cpu0.loadgen_seconds(&cpu1);
    let loadgen_per_million =
        (round.messages > 0).then(|| stats::round3(loadgen_cpu / round.messages as f64 * 1e6));

    let mut summary = Table::new(&[
        "subscribers",
        "published",
        "delivered",
        "failed",
        "deliveries_per_sec",
        "publishes_per_sec",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "server_cpu_s_per_million",
        "loadgen_cpu_s_per_million",
    ]);
    summary.row(vec![
        n.to_string(),
        ok.to_string(),
        round.messages.to_string(),
        failed.to_string(),
        f(dps, 0),
        f(pps, 0),
        f(lat.p50, 2),
        f(lat.p99, 2),
        f(lat.max, 2),
        per_million.map_or("-".into(), |c| f(c, 2)),
        loadgen_per_million.map_or("-".into(), |c| f(c, 2)),
    ]);
    let mut per_sec = Table::new(&[
        "second",
        "published",
        "delivered",
        "p50_ms",
        "p99_ms",
        "max_ms",
    ]);
    let mut pub_per_sec = vec![0u64; round.buckets.len()];
    for s in &sent {
        let i = (s.saturating_sub(t0) / 1_000_000_000) as usize;
        if i < pub_per_sec.len() {
            pub_per_sec[i] += 1;
        }
    }
    let mut rows = Vec::new();
    for (i, b) in round.buckets.iter().enumerate() {
        let l = LatencyMs::of(&b.hist);
        per_sec.row(vec![
            (i + 1).to_string(),
            pub_per_sec[i].to_string(),
            b.messages.to_string(),
            f(l.p50, 2),
            f(l.p99, 2),
            f(l.max, 2),
        ]);
        if b.messages > 0 {
            rows.push(((i + 1) as f64, l));
        }
    }
    let publish_lat = LatencyMs::of(&publish_hist);
    let mut r = Report::new("fanout");
    r.table = summary;
    r.lines.push(format!(
        "{} publishers{}{}{}: publish round trip p50 {} ms, p99 {} ms, max {} ms; {refused} refused{}",
        args.publishers,
        if args.channels > 1 {
            format!(" over {} channels", args.channels)
        } else {
            String::new()
        },
        args.rate
            .map_or(" as fast as possible".into(), |r| format!(" at {r} msg/s")),
        if args.nats_window > 1 {
            format!(
                ", each keeping up to {} publishes unconfirmed (PUB and PING, confirmed by PONG)",
                args.nats_window
            )
        } else if args.batch > 1 && ctx.common.is_nats() {
            format!(", {} messages per write and PING", args.batch)
        } else if args.batch > 1 && ctx.common.is_mqtt() {
            format!(", {} QoS 1 PUBLISHes per write, each waiting for its PUBACK", args.batch)
        } else if args.batch > 1 {
            format!(", {} messages per request (POST /v1/batch)", args.batch)
        } else {
            String::new()
        },
        publish_lat.p50,
        publish_lat.p99,
        publish_lat.max,
        sample
            .as_deref()
            .map_or(String::new(), |s| format!(" ({s})"))
    ));
    r.lines
        .push("per-second deliveries and latency are in fanout.csv".into());
    r.csv_override = Some(per_sec);
    r.chart = Some(Chart {
        title: format!("Fanout: {n} subscribers, {ok} messages, latency per second"),
        x_label: "second of the run".into(),
        y_label: "latency (ms)".into(),
        series: latency_series(&rows),
    });
    r.headline.deliveries_per_sec = Some(stats::round1(dps));
    r.headline.failed = failed;
    r.headline.latency_ms = Some(lat);
    r.detail("subscribers", n);
    r.detail("channels", args.channels);
    r.detail("publishers", args.publishers);
    r.detail("rate", args.rate);
    r.detail("batch", args.batch);
    r.detail(
        "nats_window",
        ctx.common.is_nats().then_some(args.nats_window),
    );
    r.detail("messages", attempted);
    r.detail("published", ok);
    r.detail("refused", refused);
    r.detail("delivered", round.messages);
    r.detail("expected", expected);
    r.detail("publishes_per_sec", stats::round1(pps));
    r.detail("publish_latency_ms", publish_lat);
    r.detail(
        "server_cpu_seconds_while_publishing",
        server_cpu.map(stats::round3),
    );
    r.detail("server_cpu_seconds_per_million_deliveries", per_million);
    r.detail(
        "loadgen_cpu_seconds_while_publishing",
        stats::round3(loadgen_cpu),
    );
    r.detail(
        "loadgen_cpu_seconds_per_million_deliveries",
        loadgen_per_million,
    );
    r.detail("seconds", stats::round3(span_s));
    r.detail("failed_connections", failed_conns);
    r.detail("disconnected", round.disconnected);
    r.detail("error_samples", &round.error_samples);
    ctx.report_parts(&mut r, &cpu0, &cpu1, "delivery", round.messages);
    let cpu = cpu0.share(&cpu1);
    r.cpu = Some(cpu);
    r.limited_by = if failed_conns > 0 {
        open_failure(&ctx, &errors)
    } else if let Some(rate) = args.rate.filter(|r| pps >= 0.9 * r) {
        format!("rate: --rate {rate} messages/s")
    } else if let Some(rate) = args.rate {
        cpu_bound(
            &cpu,
            &format!(
                "publish round trips: {} publishers reached {pps:.0} of --rate {rate} messages/s ({} ms p50 per publish)",
                args.publishers, publish_lat.p50
            ),
        )
    } else {
        let waiting = if args.nats_window > 1 {
            format!("up to {} unconfirmed publishes", args.nats_window)
        } else {
            "waiting for its answer".to_string()
        };
        cpu_bound(
            &cpu,
            &format!(
                "publish round trips: {} publishers each {waiting} ({} ms p50)",
                args.publishers, publish_lat.p50
            ),
        )
    };
    ctx.finish(&mut r);
    Ok(r)
}

/// The channels of a run: one shared by every publisher, or `--channels C` of them.
struct Channels {
    /// The channel's name, or with several the prefix their numbers follow.
    name: String,
    count: u64,
}

impl Channels {
    fn new(ctx: &Ctx, count: u64) -> Channels {
        let name = if count > 1 {
            ctx.channel_name("fanout/")
        } else {
            ctx.channel_name("fanout")
        };
        Channels { name, count }
    }

    /// The channel publisher number `p` publishes to.
    fn of_publisher(&self, p: usize) -> String {
        if self.count > 1 {
            format!("{}{}", self.name, p as u64 % self.count)
        } else {
            self.name.clone()
        }
    }

    /// Opens `subscribers` connections, each subscribed to every channel; answers (ready,
    /// failed, error samples).
    async fn open(
        &self,
        pool: &mut crate::pool::Pool,
        subscribers: u64,
    ) -> anyhow::Result<(u64, u64, Vec<String>)> {
        let label = "fanout: opening subscribers";
        if self.count == 1 {
            return super::open_shared(pool, subscribers, &self.name, label).await;
        }
        let bar = Progress::new(subscribers, label);
        let plan = crate::proto::Plan::Set {
            prefix: self.name.clone(),
            count: self.count,
        };
        let (n, failed, errors) = pool.open(subscribers, plan, |d, _| bar.set(d)).await?;
        bar.done();
        if n == 0 {
            anyhow::bail!("no subscriber could connect: {}", errors.join("; "));
        }
        Ok((n, failed, errors))
    }
}

#[cfg(test)]
mod tests {
    use super::Channels;

    #[test]
    fn publishers_are_spread_over_the_channels_round_robin() {
        let several = Channels {
            name: "bench/r/fanout/".into(),
            count: 3,
        };
        let of: Vec<String> = (0..7).map(|p| several.of_publisher(p)).collect();
        assert_eq!(
            of,
            [0, 1, 2, 0, 1, 2, 0].map(|c| format!("bench/r/fanout/{c}"))
        );
        let one = Channels {
            name: "bench/r/fanout".into(),
            count: 1,
        };
        assert_eq!(one.of_publisher(5), "bench/r/fanout");
    }
}
