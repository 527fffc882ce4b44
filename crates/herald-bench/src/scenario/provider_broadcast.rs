//! `broadcast --provider apns`: the whole provider path under load. Starts `herald mock apns`
//! and a server pointed at it (`HERALD_APNS_URL`, `HERALD_PROVIDER_CA_FILE`), sets the app's
//! APNs credentials, registers `--devices N` `apns` devices through the batch API (timed on
//! its own), warms the provider connection with one device push, then sends ONE
//! `"delivery":"provider"` push to the whole app and follows it until its receipt shows every
//! device accepted and nothing queued: the expansion time (until `expanding` is false), sends
//! per second (from the server's `/metrics`, every 100 ms), the total, and the CPU of the server
//! and of the mock. The raw floor is SQLite alone writing and reading N job-shaped rows
//! ([`super::sqlite_floor`]), measured in the same run.

use std::time::{Duration, Instant};

use crate::args::BroadcastArgs;
use crate::report::{f, Report, Table};
use crate::scenario::devices::{self, DeviceKind, Shape};
use crate::scenario::mock_apns::MockApns;
use crate::scenario::provider_api::{self, ended, settled};
use crate::scenario::sqlite_floor::{self, SqliteFloor};
use crate::scenario::{cpu_bound, status, Ctx};
use crate::server::{self, ProcStats};
use crate::stats;
use crate::svg::{Chart, Series};
use crate::wire::{self, now_ns};

/// How often the progress counter (`/metrics`) is read.
const TICK: Duration = Duration::from_millis(100);

/// The body of a provider push to `target` carrying the send time.
fn provider_push(target: &str) -> String {
    format!(
        "{{\"target\":{target},\"notification\":{{\"title\":\"Herald bench\",\"body\":\"broadcast\"}},\
         \"delivery\":\"provider\",\"data\":{}}}",
        wire::stamp(now_ns())
    )
}

/// What following the broadcast saw.
#[derive(Default)]
struct Followed {
    /// Seconds from the push to the first accepted send of it (`/metrics`): the worker expands
    /// a broadcast's whole audience into jobs before it sends (see docs/benchmarks.md).
    first_send_s: Option<f64>,
    /// Seconds from the push to `/metrics` counting every device accepted.
    sent_s: Option<f64>,
    /// Seconds from the push to the receipt showing every job ended and none queued.
    settled_s: Option<f64>,
    /// Accepted sends (from `/metrics`) at each tick: (seconds, total).
    curve: Vec<(f64, u64)>,
    /// The last receipt.
    last: herald_proto::receipt::ProviderReceipt,
    /// Slowest receipt request.
    slowest_receipt: Duration,
    /// Receipt requests made.
    receipts: u64,
}

/// Follows push `id` to `devices` devices until settled or the time limit. `before` is the
/// accepted-sends count before the push. Progress comes from `/metrics` every [`TICK`]; the
/// receipt counts every job row of the push (seconds of server CPU at a million), so it is read
/// only once `/metrics` shows every device accepted, then every [`TICK`] until it has settled.
async fn follow(
    ctx: &Ctx,
    key: &str,
    id: &str,
    devices: u64,
    before: u64,
    t0: Instant,
) -> Followed {
    let mut out = Followed::default();
    let mut metrics = ctx.http();
    let mut metrics_broken = false;
    while !ctx.left().is_zero() {
        let at = t0.elapsed().as_secs_f64();
        match provider_api::metrics_accepted(&mut metrics, key, "apns").await {
            Some(n) => {
                let sent = n.saturating_sub(before);
                out.curve.push((at, sent));
                if sent > 0 && out.first_send_s.is_none() {
                    out.first_send_s = Some(at);
                }
                if sent >= devices && out.sent_s.is_none() {
                    out.sent_s = Some(t0.elapsed().as_secs_f64());
                }
            }
            None => metrics_broken = true,
        }
        if out.sent_s.is_some() || metrics_broken {
            if let Ok((p, took)) = provider_api::provider_receipt(ctx, key, id).await {
                out.receipts += 1;
                out.slowest_receipt = out.slowest_receipt.max(took);
                let done = settled(&p, devices);
                out.last = p;
                if done {
                    out.settled_s = Some(t0.elapsed().as_secs_f64());
                    return out;
                }
            }
        }
        tokio::time::sleep(TICK).await;
    }
    out
}

/// Per-second rows from the curve: second, accepted that second, total.
fn per_second(curve: &[(f64, u64)]) -> Vec<(u64, u64, u64)> {
    let mut rows = Vec::new();
    let mut last_total = 0;
    let mut second = 1u64;
    let mut i = 0;
    let end = curve.last().map_or(0.0, |c| c.0);
    while (second as f64) < end + 1.0 {
        let mut total = last_total;
        while i < curve.len() && curve[i].0 <= second as f64 {
            total = total.max(curve[i].1);
            i += 1;
        }
        rows.push((second, total - last_total, total));
        last_total = total;
        second += 1;
    }
    rows
}

/// Runs `broadcast --provider apns`.
pub async fn run(args: BroadcastArgs) -> anyhow::Result<Report> {
    if !args.common.spawn {
        anyhow::bail!(
            "--provider needs --spawn: the bench starts the mock and points the server at it"
        );
    }
    let n = args.devices;
    let bin = server::server_binary(args.common.server_bin.as_deref())?;
    status("starting herald mock apns");
    let mock = MockApns::spawn(&bin)?;
    let mut env = vec![
        ("HERALD_APNS_URL", mock.url.clone()),
        (
            "HERALD_PROVIDER_CA_FILE",
            mock.ca_file().display().to_string(),
        ),
    ];
    if let Some(b) = args.provider_batch {
        env.push(("HERALD_PROVIDER_BATCH", b.to_string()));
    }
    if let Some(c) = args.provider_connections {
        env.push(("HERALD_PROVIDER_CONNECTIONS", c.to_string()));
    }
    let ctx = Ctx::open(&args.common, &env).await?;
    let key = ctx.target.require_api_key()?;
    provider_api::set_apns_credentials(&ctx, &key, &mock.credentials_body()?).await?;

    let floor: Option<SqliteFloor> = match (&ctx.target.data_dir, args.common.no_baseline) {
        (Some(dir), false) => {
            status(&format!("raw floor: SQLite writes and reads {n} job rows"));
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || sqlite_floor::measure(&dir, n))
                .await?
                .ok()
        }
        _ => None,
    };

    let prefix = devices::device_prefix(&ctx);
    let cpu_reg0 = ctx.mark_server();
    let shape = Shape {
        batch: args.batch,
        concurrency: args.concurrency,
        kind: DeviceKind::Apns,
        tag: |_| None,
    };
    let reg = devices::register_as(&ctx, &key, &prefix, n, shape).await;
    let reg_cpu = cpu_reg0.server_seconds(&ctx.mark_server());
    if reg.devices < n {
        anyhow::bail!(
            "only {} of {n} devices could be registered in {:.1} s: {}",
            reg.devices,
            reg.seconds,
            reg.sample.unwrap_or_default()
        );
    }

    // One device push first: APNs allows one stream until the first provider token is
    // accepted, so a cold client would make the broadcast's first second look slow.
    status("warming the APNs connection with one device push");
    let warm_t0 = Instant::now();
    let warm_target = format!("{{\"device\":\"{prefix}0\"}}");
    let warm_id = provider_api::push_id(&ctx, &key, provider_push(&warm_target)).await?;
    let warm = follow(&ctx, &key, &warm_id, 1, 0, warm_t0).await;
    if warm.last.accepted != 1 {
        anyhow::bail!(
            "the warm-up push was not accepted by the mock: {:?}",
            warm.last
        );
    }
    let warm_s = warm_t0.elapsed().as_secs_f64();

    status(&format!("one provider push to all {n} devices"));
    let mut metrics = ctx.http();
    let before = provider_api::metrics_accepted(&mut metrics, &key, "apns")
        .await
        .unwrap_or(0);
    let cpu0 = ctx.mark_server();
    let mock0 = mock.probe();
    let t0 = Instant::now();
    let id = provider_api::push_id(&ctx, &key, provider_push("{\"app\":true}")).await?;
    let accept_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let seen = follow(&ctx, &key, &id, n, before, t0).await;
    let cpu1 = ctx.mark_server();
    let mock1 = mock.probe();
    let total_s = seen.settled_s.unwrap_or_else(|| t0.elapsed().as_secs_f64());
    let server_cpu = cpu0.server_seconds(&cpu1);
    let mock_cpu = mock0.zip(mock1).map(|(a, b)| b.cpu_seconds - a.cpu_seconds);
    let server_now = ctx.probe();
    let mock_rss = mock1.map(|p: ProcStats| p.peak_rss_bytes);
    let p = seen.last.clone();
    let sends_per_s = p.accepted as f64 / seen.sent_s.unwrap_or(total_s).max(1e-9);
    // The rate once sending had begun (after the expansion).
    let sending_per_s = seen
        .first_send_s
        .zip(seen.sent_s)
        .map(|(a, b)| p.accepted as f64 / (b - a).max(1e-9));

    let mut r = Report::new("broadcast-apns");
    let mut table = Table::new(&["second", "accepted", "total"]);
    let rows = per_second(&seen.curve);
    for (s, k, t) in &rows {
        table.row(vec![s.to_string(), k.to_string(), t.to_string()]);
    }
    r.table = table;
    r.chart = Some(Chart {
        title: format!("One APNs push to {n} devices through the mock"),
        x_label: "seconds".into(),
        y_label: "notifications accepted".into(),
        series: vec![
            Series::Line {
                name: "total".into(),
                points: seen.curve.iter().map(|(t, k)| (*t, *k as f64)).collect(),
                color: "#1f5fa8",
            },
            Series::Points {
                name: "accepted this second".into(),
                points: rows
                    .iter()
                    .map(|(s, k, _)| (*s as f64, *k as f64))
                    .collect(),
                color: "#d9822b",
            },
        ],
    });
    r.lines.push(format!(
        "registration (timed apart): {} apns devices in {:.1} s, {:.0}/s; server {} CPU s",
        reg.devices,
        reg.seconds,
        reg.rate(),
        reg_cpu.map_or("?".into(), |c| f(c, 2)),
    ));
    r.lines.push(format!(
        "warm-up: one device push accepted by the mock in {warm_s:.3} s (connection, first provider token)"
    ));
    r.lines.push(format!(
        "broadcast: push answered in {accept_ms:.1} ms; first send accepted after {} s (the \
         expansion); all {} sends accepted after {} s ({sends_per_s:.0}/s overall, {}/s from the first send); receipt settled \
         after {} s",
        seen.first_send_s.map_or("?".into(), |s| f(s, 2)),
        n,
        seen.sent_s.map_or("not reached".into(), |s| f(s, 2)),
        sending_per_s.map_or("?".into(), |r| f(r, 0)),
        seen.settled_s.map_or("not reached".into(), |s| f(s, 2)),
    ));
    r.lines.push(format!(
        "receipt: accepted {}, failed {:?}, skipped {:?}, queued {}, dead {}, in doubt {}; slowest \
         of {} receipt requests {} ms",
        p.accepted,
        p.failed,
        p.skipped,
        p.queued,
        p.dead,
        p.in_doubt,
        seen.receipts,
        seen.slowest_receipt.as_millis()
    ));
    r.lines.push(format!(
        "CPU during the broadcast: server {} s ({} µs per device), mock {} s ({} µs per device)",
        server_cpu.map_or("?".into(), |c| f(c, 2)),
        server_cpu.map_or("?".into(), |c| f(c / n as f64 * 1e6, 1)),
        mock_cpu.map_or("?".into(), |c| f(c, 2)),
        mock_cpu.map_or("?".into(), |c| f(c / n as f64 * 1e6, 1)),
    ));
    if let Some(fl) = &floor {
        r.lines.push(format!(
            "raw floor (SQLite alone, {} rows): insert {:.3} s + read back {:.3} s = {:.3} s \
             (update each once: {:.3} s); the broadcast took {:.1}x that",
            fl.rows,
            fl.insert_s,
            fl.read_s,
            fl.insert_and_read_s(),
            fl.update_s,
            total_s / fl.insert_and_read_s().max(1e-9)
        ));
    }
    let failed = n.saturating_sub(p.accepted);
    r.headline.devices_per_sec = Some(stats::round1(reg.rate()));
    r.headline.deliveries_per_sec = Some(stats::round1(sends_per_s));
    r.headline.failed = failed;
    r.detail("devices", n);
    r.detail("provider", "apns");
    r.detail("provider_batch", args.provider_batch);
    r.detail("provider_connections", args.provider_connections);
    r.detail("registration_seconds", stats::round3(reg.seconds));
    r.detail(
        "registration_server_cpu_seconds",
        reg_cpu.map(stats::round3),
    );
    r.detail("warmup_seconds", stats::round3(warm_s));
    r.detail("push_accept_ms", stats::round3(accept_ms));
    r.detail("first_send_seconds", seen.first_send_s.map(stats::round3));
    r.detail("all_sent_seconds", seen.sent_s.map(stats::round3));
    r.detail("settled_seconds", seen.settled_s.map(stats::round3));
    r.detail("sends_per_sec", stats::round1(sends_per_s));
    r.detail(
        "sends_per_sec_after_first",
        sending_per_s.map(stats::round1),
    );
    r.detail("receipt_accepted", p.accepted);
    r.detail("receipt_ended", ended(&p));
    r.detail("receipt_failed", &p.failed);
    r.detail("receipt_skipped", &p.skipped);
    r.detail("receipt_in_doubt", p.in_doubt);
    r.detail(
        "slowest_receipt_ms",
        seen.slowest_receipt.as_millis() as u64,
    );
    r.detail(
        "server_cpu_seconds_broadcast",
        server_cpu.map(stats::round3),
    );
    r.detail(
        "server_cpu_us_per_device",
        server_cpu.map(|c| stats::round3(c / n as f64 * 1e6)),
    );
    r.detail("server_rss_bytes", server_now.map(|s| s.rss_bytes));
    r.detail("mock_cpu_seconds", mock_cpu.map(stats::round3));
    r.detail("mock_peak_rss_bytes", mock_rss);
    r.detail("sqlite_floor", floor);
    r.detail(
        "seconds_per_sqlite_floor",
        floor.map(|fl| stats::round3(total_s / fl.insert_and_read_s().max(1e-9))),
    );
    let share = cpu0.share(&cpu1);
    r.cpu = Some(share);
    r.limited_by = if seen.settled_s.is_none() {
        format!("time: --time-limit {} s", ctx.common.time_limit)
    } else {
        cpu_bound(&share, "count: every device accepted")
    };
    ctx.finish(&mut r);
    drop(ctx);
    let mock_total = mock.stop();
    r.lines.push(format!(
        "the mock accepted {} notifications in all (the broadcast plus the warm-up)",
        mock_total.map_or("?".into(), |t| t.to_string())
    ));
    r.detail("mock_accepted_in_all", mock_total);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curve_folds_into_seconds() {
        let curve = [(0.1, 0), (0.9, 10), (1.2, 15), (1.9, 40), (2.5, 41)];
        assert_eq!(
            per_second(&curve),
            vec![(1, 10, 10), (2, 30, 40), (3, 1, 41)]
        );
        assert!(per_second(&[]).is_empty());
    }

    #[test]
    fn the_push_body_is_json_with_a_send_time() {
        let v: serde_json::Value = serde_json::from_str(&provider_push("{\"app\":true}")).unwrap();
        assert_eq!(v["delivery"], "provider");
        assert_eq!(v["target"]["app"], true);
        assert!(v["data"]["ts"].as_u64().is_some());
    }
}
