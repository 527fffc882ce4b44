//! `subscribe-storm` (the iPush benchmark): `--users U` clients connect; then, at one moment,
//! each subscribes to `--subjects S` channels at once (WebSocket: S subscribe commands written
//! together; MQTT: S `SUBSCRIBE`s, one topic each; SSE and long-poll: one request naming S
//! channels), and every subscription must be acknowledged (with `--one-at-a-time`, each
//! WebSocket or MQTT user sends its next subscribe only once the previous one is acknowledged;
//! with `--batch B`, a WebSocket user puts B subscribes in each message, a JSON array). Prints iPush's per-second table (completed this second, cumulative, failed)
//! and the average rate.

use std::time::Duration;

use crate::args::StormArgs;
use crate::proto::{Action, Command, Plan};
use crate::report::{Report, Table};
use crate::scenario::{bound, Ctx, Progress};
use crate::stats::{self, LatencyMs};
use crate::svg::{Chart, Series};
use crate::wire::now_ns;

/// Runs the scenario.
pub async fn run(args: StormArgs) -> anyhow::Result<Report> {
    // A spawned server must allow S subscriptions per connection.
    let env = [(
        "HERALD_MAX_SUBSCRIPTIONS",
        args.subjects.max(10_000).to_string(),
    )];
    use crate::proto::Transport;
    if args.one_at_a_time && ![Transport::Ws, Transport::Mqtt].contains(&args.common.transport) {
        anyhow::bail!(
            "--one-at-a-time needs --transport ws or mqtt (the others name every channel in one \
             request)"
        );
    }
    if args.common.is_mqtt() && args.subjects > u64::from(u16::MAX) {
        anyhow::bail!(
            "MQTT clients subscribe to at most 65,535 topics each (one SUBSCRIBE per topic, each \
             with a packet identifier of its own): --subjects {}",
            args.subjects
        );
    }
    if args.batch > 1 && (args.common.transport != Transport::Ws || args.common.is_nats()) {
        anyhow::bail!(
            "--batch is for Herald's WebSocket clients (--transport ws, no --peer nats or \
             mosquitto, no Pusher clients)"
        );
    }
    if args.nats_one_ping && !args.common.is_nats() {
        anyhow::bail!("--nats-one-ping is for --peer nats");
    }
    if args.prepublish && args.common.is_nats() {
        anyhow::bail!("--prepublish: NATS keeps no history, so its channels are always new");
    }
    if args.prepublish && args.common.is_mosquitto() {
        anyhow::bail!("--prepublish publishes through Herald's API: not with --peer mosquitto");
    }
    if args.prepublish && args.common.is_pusher() {
        anyhow::bail!("--prepublish publishes through Herald's API: not with Pusher clients");
    }
    let ctx = Ctx::open(&args.common, &env).await?;
    let prefix = ctx.channel_name("s/");
    if args.prepublish {
        let key = ctx.target.require_api_key()?;
        let names: Vec<String> = if args.distinct {
            (0..args.users)
                .flat_map(|u| (0..args.subjects).map(move |j| (u, j)))
                .map(|(u, j)| format!("{prefix}{u}/{j}"))
                .collect()
        } else {
            (0..args.subjects).map(|j| format!("{prefix}{j}")).collect()
        };
        crate::scenario::status(&format!(
            "subscribe-storm: publishing one message to each of {} channels first",
            names.len()
        ));
        let mut clients: Vec<crate::client::HttpClient> = (0..4).map(|i| ctx.http_to(i)).collect();
        let (refused, sample) = crate::scenario::publish_to_all(&mut clients, &names, &key).await;
        if refused > 0 {
            anyhow::bail!(
                "--prepublish: the server refused {refused} messages: {}",
                sample.unwrap_or_default()
            );
        }
    }
    let mut pool = ctx.pool(args.users).await?;
    let bar = Progress::new(args.users, "subscribe-storm: connecting users");
    let (users, failed_conns, errors) = pool
        .open(args.users, Plan::Connect, |d, _| bar.set(d))
        .await?;
    bar.done();
    if users == 0 {
        anyhow::bail!("no user could connect: {}", errors.join("; "));
    }
    let expected = users * args.subjects;
    crate::scenario::status(&format!(
        "subscribe-storm: {users} users subscribe to {} channels each ({expected} subscriptions)",
        args.subjects
    ));
    let cpu0 = ctx.mark(&pool);
    let at = now_ns() + 300_000_000;
    pool.broadcast(
        Command::Fire {
            at_ns: at,
            bucket_ms: 1000,
            action: Action::Subscribe {
                prefix: prefix.clone(),
                subjects: args.subjects,
                distinct: args.distinct,
                one_at_a_time: args.one_at_a_time,
                one_ping: args.nats_one_ping,
                batch: args.batch,
            },
        },
        false,
    )
    .await?;
    tokio::time::sleep(Duration::from_nanos(at.saturating_sub(now_ns()))).await;
    let timeout = (30_000 + expected / 20).min(ctx.left().as_millis() as u64 + 1000);
    let round = pool.collect(0, args.subjects, timeout).await?;
    let cpu1 = ctx.mark(&pool);
    pool.close().await;

    let acked = round.acks.min(expected);
    let failed = expected - acked;
    let span_s = round.last_ns.saturating_sub(at) as f64 / 1e9;
    let rate = if span_s > 0.0 {
        acked as f64 / span_s
    } else {
        0.0
    };
    let mut table = Table::new(&["second", "completed", "total", "failed"]);
    let mut cumulative = 0u64;
    let mut per_sec = Vec::new();
    let mut total_curve = vec![(0.0, 0.0)];
    for (i, b) in round.buckets.iter().enumerate() {
        cumulative += b.acks;
        table.row(vec![
            (i + 1).to_string(),
            b.acks.to_string(),
            cumulative.to_string(),
            b.errors.to_string(),
        ]);
        per_sec.push(((i + 1) as f64, b.acks as f64));
        total_curve.push(((i + 1) as f64, cumulative as f64));
    }
    let mut r = Report::new("subscribe-storm");
    r.table = table;
    r.lines.push(format!(
        "{acked} of {expected} subscriptions acknowledged in {:.3} s: {:.0} subscriptions/s \
         on average, {failed} failed ({} error replies)",
        span_s, rate, round.errors
    ));
    let server_us_per_sub = cpu0
        .server_seconds(&cpu1)
        .filter(|_| acked > 0)
        .map(|c| stats::round3(c / acked as f64 * 1e6));
    if let Some(us) = server_us_per_sub {
        r.lines.push(format!(
            "server CPU {us} µs per acknowledged subscription (from the storm's start to its last acknowledgement collected)"
        ));
    }
    let ack = LatencyMs::of(&round.ack_hist);
    r.lines.push(format!(
        "acknowledgement latency from a user's burst: p50 {} ms, p99 {} ms, max {} ms",
        ack.p50, ack.p99, ack.max
    ));
    r.chart = Some(Chart {
        title: format!(
            "Subscribe storm: {users} users x {} channels",
            args.subjects
        ),
        x_label: "seconds".into(),
        y_label: "subscriptions acknowledged".into(),
        series: vec![
            Series::Line {
                name: "total".into(),
                points: total_curve,
                color: "#1f5fa8",
            },
            Series::Points {
                name: "completed this second".into(),
                points: per_sec,
                color: "#d9822b",
            },
        ],
    });
    r.headline.subscriptions_per_sec = Some(stats::round1(rate));
    r.headline.failed = failed;
    r.headline.latency_ms = Some(ack);
    r.detail("users", users);
    r.detail("subjects", args.subjects);
    r.detail("distinct_channels", args.distinct);
    r.detail("prepublished", args.prepublish);
    r.detail("one_at_a_time", args.one_at_a_time);
    r.detail("subscribes_per_message", args.batch);
    r.detail(
        "nats_one_ping",
        args.common.is_nats().then_some(args.nats_one_ping),
    );
    r.detail("expected", expected);
    r.detail("acknowledged", acked);
    r.detail("error_replies", round.errors);
    r.detail("seconds", stats::round3(span_s));
    r.detail("server_cpu_us_per_subscription", server_us_per_sub);
    r.detail("error_samples", &round.error_samples);
    ctx.report_parts(&mut r, &cpu0, &cpu1, "subscription", acked);
    let otherwise = format!("count: {users} users x {} subjects", args.subjects);
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
