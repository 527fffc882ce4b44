//! `auto`: the cost of the delivery state machine. Starts `herald mock apns` and a server
//! pointed at it, sets the app's APNs credentials, registers `--devices N` `apns` devices, and
//! connects every one over a WebSocket with a device token of its own (spread over the worker
//! processes), its inbox open, acknowledging each inbox message as it arrives. Then one `auto`
//! push to the whole app (`"ack_window": --ack-window`): every device should ack in time, so the
//! receipt's `providers.live` reaches N and the mock receives no provider push. The same push
//! with `"delivery":"live"` (no state machine, no provider jobs) is the baseline, in the same
//! run on the same connections, so the state machine's cost is a ratio: time until every
//! device's ack was answered, and the server's CPU.

use std::time::{Duration, Instant};

use crate::args::AutoArgs;
use crate::pool::{Pool, Round};
use crate::proto::{Action, Command, Plan, Transport};
use crate::report::{f, Report, Table};
use crate::scenario::devices::{self, DeviceKind, Shape};
use crate::scenario::mock_apns::MockApns;
use crate::scenario::provider_api::{self, settled};
use crate::scenario::{bound, status, Ctx, Progress};
use crate::server;
use crate::stats::{self, LatencyMs};
use crate::svg::{Chart, Series};
use crate::wire::{self, now_ns};

/// Width of the time buckets of a round.
const BUCKET_MS: u64 = 100;

/// One push to every connected device, as measured.
struct Measured {
    /// `auto` or `live`.
    delivery: &'static str,
    /// The push's id.
    id: String,
    /// What the devices saw: each delivery and the answer to each device's ack.
    round: Round,
    /// Seconds from sending the push to the last ack answered.
    all_acked_s: f64,
    /// Server CPU seconds from the push to the last ack.
    server_cpu_s: Option<f64>,
    /// Share of the machine while it ran.
    cpu: crate::server::CpuShare,
}

/// The body of the push: to the whole app, with a notification, stamped with the send time.
fn push_body(delivery: Option<&str>, ack_window: u64) -> String {
    let delivery = delivery.map_or(String::new(), |d| format!(",\"delivery\":\"{d}\""));
    format!(
        "{{\"target\":{{\"app\":true}},\"notification\":{{\"title\":\"Herald bench\",\"body\":\"auto\"}},\
         \"ack_window\":{ack_window}{delivery},\"data\":{}}}",
        wire::stamp(now_ns())
    )
}

/// Sends one push to the app and waits until every connected device received it and its ack
/// was answered.
async fn measure(
    ctx: &Ctx,
    pool: &mut Pool,
    key: &str,
    delivery: &'static str,
    body: String,
    devices: u64,
) -> anyhow::Result<Measured> {
    status(&format!(
        "one {delivery} push to {devices} connected devices"
    ));
    let cpu0 = ctx.mark(pool);
    let sent_ns = now_ns();
    pool.broadcast(
        Command::Fire {
            at_ns: sent_ns,
            bucket_ms: BUCKET_MS,
            action: Action::Mark,
        },
        false,
    )
    .await?;
    let id = provider_api::push_id(ctx, key, body).await?;
    let timeout = (30_000 + devices / 10).min(ctx.left().as_millis() as u64 + 1000);
    let round = pool.collect(1, 1, timeout).await?;
    let cpu1 = ctx.mark(pool);
    Ok(Measured {
        delivery,
        id,
        all_acked_s: round.last_ns.saturating_sub(sent_ns) as f64 / 1e9,
        server_cpu_s: cpu0.server_seconds(&cpu1),
        cpu: cpu0.share(&cpu1),
        round,
    })
}

/// Devices acked so far at the end of each bucket of a round: (milliseconds, total).
fn acked_curve(round: &Round) -> Vec<(f64, f64)> {
    let mut total = 0u64;
    let mut points = vec![(0.0, 0.0)];
    for (i, b) in round.buckets.iter().enumerate() {
        total += b.acks;
        points.push((((i as u64 + 1) * BUCKET_MS) as f64, total as f64));
    }
    points
}

/// Runs the scenario.
pub async fn run(args: AutoArgs) -> anyhow::Result<Report> {
    if !args.common.spawn {
        anyhow::bail!("auto needs --spawn: the bench starts the mock and points the server at it");
    }
    if args.common.transport != Transport::Ws {
        anyhow::bail!("auto runs over WebSocket only (devices ack with the `ack` command)");
    }
    let n = args.devices;
    let bin = server::server_binary(args.common.server_bin.as_deref())?;
    status("starting herald mock apns");
    let mock = MockApns::spawn(&bin)?;
    let env = vec![
        ("HERALD_APNS_URL", mock.url.clone()),
        (
            "HERALD_PROVIDER_CA_FILE",
            mock.ca_file().display().to_string(),
        ),
    ];
    let ctx = Ctx::open(&args.common, &env).await?;
    let key = ctx.target.require_api_key()?;
    provider_api::set_apns_credentials(&ctx, &key, &mock.credentials_body()?).await?;
    let prefix = devices::device_prefix(&ctx);
    let shape = Shape {
        batch: devices::MAX_BATCH,
        concurrency: 4,
        kind: DeviceKind::Apns,
        tag: |_| None,
    };
    let reg = devices::register_as(&ctx, &key, &prefix, n, shape).await;
    if reg.devices < n {
        anyhow::bail!(
            "only {} of {n} devices could be registered: {}",
            reg.devices,
            reg.sample.unwrap_or_default()
        );
    }

    let mut pool = ctx.pool(n).await?;
    let bar = Progress::new(n, "auto: connecting devices (TCP)");
    let plan = Plan::Inbox {
        prefix: prefix.clone(),
        pending: 0,
        ack: true,
    };
    let (opened, failed_conns, errors) = pool.open(n, plan, |d, _| bar.set(d)).await?;
    bar.done();
    if opened == 0 {
        anyhow::bail!("no device could connect: {}", errors.join("; "));
    }
    status(&format!("auto: {opened} devices open their inboxes"));
    let at = now_ns() + 200_000_000;
    pool.broadcast(
        Command::Fire {
            at_ns: at,
            bucket_ms: BUCKET_MS,
            action: Action::Mark,
        },
        false,
    )
    .await?;
    let timeout = (30_000 + n / 10).min(ctx.left().as_millis() as u64 + 1000);
    let inboxes = pool.collect(0, 1, timeout).await?;
    if inboxes.acks < opened {
        anyhow::bail!(
            "only {} of {opened} devices opened their inboxes: {:?}",
            inboxes.acks,
            inboxes.error_samples
        );
    }

    let auto = measure(
        &ctx,
        &mut pool,
        &key,
        "auto",
        push_body(None, args.ack_window),
        opened,
    )
    .await?;
    // The state machine finishes after the acks: the receipt's `live` count reaches N once
    // every device's job is settled (at an ack, or when the window ends at the latest).
    let settle_t0 = Instant::now();
    let limit = Duration::from_secs(args.ack_window + 60).min(ctx.left());
    let cpu_settle0 = ctx.mark(&pool);
    let mut receipt = None;
    while settle_t0.elapsed() < limit {
        if let Ok((p, _)) = provider_api::provider_receipt(&ctx, &key, &auto.id).await {
            let done = settled(&p, n);
            receipt = Some(p);
            if done {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let settled_after_acks_s = settle_t0.elapsed().as_secs_f64();
    let settle_cpu = cpu_settle0.server_seconds(&ctx.mark(&pool));
    let receipt = receipt.unwrap_or_default();

    let live = measure(
        &ctx,
        &mut pool,
        &key,
        "live",
        push_body(Some("live"), args.ack_window),
        opened,
    )
    .await?;
    pool.close().await;
    let cpu = auto.cpu;
    let runs = [&auto, &live];

    let mut table = Table::new(&[
        "delivery",
        "devices_acked",
        "all_acked_s",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "server_cpu_s",
    ]);
    for m in runs {
        let lat = LatencyMs::of(&m.round.ack_hist);
        table.row(vec![
            m.delivery.to_string(),
            m.round.acks.min(opened).to_string(),
            f(m.all_acked_s, 3),
            f(lat.p50, 1),
            f(lat.p99, 1),
            f(lat.max, 1),
            m.server_cpu_s.map_or("?".into(), |c| f(c, 3)),
        ]);
    }
    let ratio = auto.all_acked_s / live.all_acked_s.max(1e-9);
    let cpu_ratio = auto
        .server_cpu_s
        .zip(live.server_cpu_s)
        .map(|(a, l)| a / l.max(1e-9));

    let mut r = Report::new("auto");
    r.table = table;
    r.chart = Some(Chart {
        title: format!("One push to {opened} connected devices that ack: auto against live"),
        x_label: "milliseconds after the push".into(),
        y_label: "devices whose ack was answered".into(),
        series: vec![
            Series::Line {
                name: "auto".into(),
                points: acked_curve(&auto.round),
                color: "#1f5fa8",
            },
            Series::Line {
                name: "live".into(),
                points: acked_curve(&live.round),
                color: "#d9822b",
            },
        ],
    });
    for m in runs {
        let lat = LatencyMs::of(&m.round.ack_hist);
        r.lines.push(format!(
            "{}: {} of {opened} devices received the push and had their ack answered in {:.3} s \
             (push to ack answer p50 {} ms, p99 {} ms, max {} ms); server {} CPU s",
            m.delivery,
            m.round.acks.min(opened),
            m.all_acked_s,
            lat.p50,
            lat.p99,
            lat.max,
            m.server_cpu_s.map_or("?".into(), |c| f(c, 3)),
        ));
    }
    r.lines.push(format!(
        "auto / live: {ratio:.2}x the time until every device acked, {} the server CPU",
        cpu_ratio.map_or("?".into(), |c| format!("{c:.2}x"))
    ));
    r.lines.push(format!(
        "auto receipt {settled_after_acks_s:.2} s after the last ack: live {}, accepted {}, queued \
         {}, expanding {}, failed {:?}, skipped {:?}; server {} CPU s meanwhile",
        receipt.live,
        receipt.accepted,
        receipt.queued,
        receipt.expanding,
        receipt.failed,
        receipt.skipped,
        settle_cpu.map_or("?".into(), |c| f(c, 3)),
    ));
    let failed = 2 * opened - auto.round.acks.min(opened) - live.round.acks.min(opened);
    r.headline.latency_ms = Some(LatencyMs::of(&auto.round.ack_hist));
    r.headline.failed = failed + (n - opened);
    r.detail("devices", n);
    r.detail("connected", opened);
    r.detail("ack_window_s", args.ack_window);
    for m in runs {
        let d = m.delivery;
        r.detail(&format!("{d}_acked"), m.round.acks.min(opened));
        r.detail(&format!("{d}_delivered"), m.round.messages);
        r.detail(&format!("{d}_all_acked_s"), stats::round3(m.all_acked_s));
        r.detail(&format!("{d}_ack_ms"), LatencyMs::of(&m.round.ack_hist));
        r.detail(
            &format!("{d}_server_cpu_s"),
            m.server_cpu_s.map(stats::round3),
        );
        r.detail(&format!("{d}_disconnected"), m.round.disconnected);
        r.detail(&format!("{d}_error_samples"), &m.round.error_samples);
    }
    r.detail("auto_over_live_time", stats::round3(ratio));
    r.detail("auto_over_live_server_cpu", cpu_ratio.map(stats::round3));
    r.detail("receipt_live", receipt.live);
    r.detail("receipt_accepted", receipt.accepted);
    r.detail("receipt_queued", receipt.queued);
    r.detail(
        "receipt_settled_after_acks_s",
        stats::round3(settled_after_acks_s),
    );
    r.detail("settle_server_cpu_s", settle_cpu.map(stats::round3));
    bound(
        &ctx,
        &mut r,
        cpu,
        failed_conns,
        &errors,
        "count: every device acked",
    );
    ctx.finish(&mut r);
    drop(ctx);
    let mock_total = mock.stop();
    r.lines.push(format!(
        "the mock received {} provider pushes (expected 0)",
        mock_total.map_or("?".into(), |t| t.to_string())
    ));
    r.detail("mock_accepted_in_all", mock_total);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_bodies_name_the_delivery_and_window() {
        let auto: serde_json::Value = serde_json::from_str(&push_body(None, 5)).unwrap();
        assert_eq!(auto["ack_window"], 5);
        assert!(auto.get("delivery").is_none());
        assert_eq!(auto["target"]["app"], true);
        assert!(auto["data"]["ts"].as_u64().is_some());
        let live: serde_json::Value = serde_json::from_str(&push_body(Some("live"), 5)).unwrap();
        assert_eq!(live["delivery"], "live");
    }
}
