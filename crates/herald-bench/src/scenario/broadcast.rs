//! `broadcast` (Urban Airship's broadcast to every device of an app): registers `--devices N`
//! through `POST /v1/devices/batch` (`--batch` per request, `--concurrency` requests in
//! flight) and reports the registration rate per second; then sends `--messages M` broadcast
//! pushes (target: the whole app) one after the other and one tag-expression push, timing each
//! push's accept round trip (the server answers once the message is stored, before delivery).
//! With `--spawn` it also reports the store's size on disk before and after the pushes: a
//! broadcast is stored once, not once per device. With `--provider apns` it runs
//! [`super::provider_broadcast`] instead: one provider push to every device through a mock APNs.

use crate::args::BroadcastArgs;
use crate::report::{f, Report};
use crate::scenario::devices::{self, push_body};
use crate::scenario::{cpu_bound, Ctx};
use crate::stats::{self, LatencyMs};

/// Tags the devices are spread over (device `i` has tag `g{i % TAGS}`).
const TAGS: u64 = 10;
/// The tag expression of the tag push: 2 of the 10 groups.
const TAG_EXPRESSION: &str = "g1 OR g2";

fn tag(i: u64) -> Option<String> {
    Some(format!("g{}", i % TAGS))
}

/// Runs the scenario (`--provider`: [`super::provider_broadcast`]).
pub async fn run(args: BroadcastArgs) -> anyhow::Result<Report> {
    if args.provider.is_some() {
        return super::provider_broadcast::run(args).await;
    }
    let ctx = Ctx::open(&args.common, &[]).await?;
    let key = ctx.target.require_api_key()?;
    let prefix = devices::device_prefix(&ctx);

    let cpu0 = ctx.mark_server();
    let reg = devices::register(
        &ctx,
        &key,
        &prefix,
        args.devices,
        args.batch,
        args.concurrency,
        tag,
    )
    .await;
    let cpu1 = ctx.mark_server();
    if reg.devices == 0 {
        anyhow::bail!(
            "no device could be registered: {}",
            reg.sample.unwrap_or_default()
        );
    }
    let rate = reg.rate();

    let store_before = devices::store_bytes(&ctx);
    let label = format!("broadcasting {} pushes", args.messages);
    let pushed = devices::push(&ctx, &key, args.messages, 1, &label, |_| {
        push_body("{\"app\":true}")
    })
    .await;
    let tag_target = format!("{{\"tags\":\"{TAG_EXPRESSION}\"}}");
    let tagged = devices::push(&ctx, &key, 1, 1, "tag push", move |_| {
        push_body(&tag_target)
    })
    .await;
    let cpu2 = ctx.mark_server();
    let store_after = devices::store_bytes(&ctx);
    // The server counts a broadcast's (and a tag push's) audience after answering; wait for
    // the receipts to show it, which also takes that work out of the next run's way.
    let accepted_at = std::time::Instant::now();
    let limit = std::time::Duration::from_secs(120);
    let mut counted = Vec::new();
    for id in [&pushed.last_id, &tagged.last_id].into_iter().flatten() {
        counted.push(devices::audience(&ctx, &key, id, limit).await);
    }
    let cpu3 = ctx.mark_server();
    let audience_s = counted
        .iter()
        .flatten()
        .map(|(_, at)| at.duration_since(accepted_at).as_secs_f64())
        .fold(None, |m: Option<f64>, s| Some(m.map_or(s, |m| m.max(s))));
    let audience = |i: usize| counted.get(i).copied().flatten().map(|(n, _)| n);

    let lat = LatencyMs::of(&pushed.hist);
    let tag_ms = LatencyMs::of(&tagged.hist).max;
    let pushes = pushed.accepted + tagged.accepted;
    let growth = store_before
        .zip(store_after)
        .map(|(b, a)| a as i64 - b as i64);
    let reg_cpu = cpu0.server_seconds(&cpu1);
    let push_cpu = cpu1.server_seconds(&cpu2);
    let count_cpu = cpu2.server_seconds(&cpu3);

    let mut r = Report::new("broadcast");
    r.table = reg.table();
    r.chart = Some(reg.chart(format!(
        "Batch registration: {} devices, {} per request, {} in flight",
        reg.devices, args.batch, args.concurrency
    )));
    r.lines.push(format!(
        "{} of {} devices registered in {:.3} s: {:.0} devices/s ({} refused{}); server {} CPU s, {} µs per device",
        reg.devices,
        args.devices,
        reg.seconds,
        rate,
        reg.refused,
        reg.sample.as_deref().map_or(String::new(), |s| format!(": {s}")),
        reg_cpu.map_or("?".into(), |c| f(c, 2)),
        reg_cpu.map_or("?".into(), |c| f(c / reg.devices as f64 * 1e6, 1)),
    ));
    r.lines.push(format!(
        "{} broadcast pushes to {} devices, one after the other: accepted in p50 {} ms, p99 {} ms, \
         max {} ms (targeted {}); {} refused{}",
        pushed.accepted,
        reg.devices,
        lat.p50,
        lat.p99,
        lat.max,
        pushed.targeted,
        pushed.refused,
        pushed
            .sample
            .as_deref()
            .map_or(String::new(), |s| format!(": {s}")),
    ));
    r.lines.push(format!(
        "tag push ({TAG_EXPRESSION:?}; devices are spread over {TAGS} tags): accepted in {tag_ms} ms \
         (targeted {}){}",
        tagged.targeted,
        tagged
            .sample
            .as_deref()
            .map_or(String::new(), |s| format!("; refused: {s}")),
    ));
    r.lines.push(format!(
        "audiences counted after the answers (receipts show {} and {} devices) {} s after the last \
         push was accepted; server {} CPU s for the pushes, {} CPU s after them",
        audience(0).map_or("?".into(), |n| n.to_string()),
        audience(1).map_or("?".into(), |n| n.to_string()),
        audience_s.map_or("?".into(), |s| f(s, 3)),
        push_cpu.map_or("?".into(), |c| f(c, 3)),
        count_cpu.map_or("?".into(), |c| f(c, 3)),
    ));
    if let (Some(b), Some(a), Some(g)) = (store_before, store_after, growth) {
        r.lines.push(format!(
            "store on disk (herald.db + herald.db-wal): {b} B before the pushes, {a} B after: \
             {g:+} B for {pushes} pushes ({:.0} B each)",
            g as f64 / pushes.max(1) as f64
        ));
    }
    r.headline.devices_per_sec = Some(stats::round1(rate));
    r.headline.latency_ms = Some(lat);
    r.headline.failed = reg.refused + pushed.refused + tagged.refused;
    r.detail("devices", args.devices);
    r.detail("registered", reg.devices);
    r.detail("refused_devices", reg.refused);
    r.detail("batch", args.batch.clamp(1, devices::MAX_BATCH));
    r.detail("concurrency", args.concurrency);
    r.detail("registration_seconds", stats::round3(reg.seconds));
    r.detail("devices_per_sec", stats::round1(rate));
    r.detail(
        "registration_server_cpu_seconds",
        reg_cpu.map(stats::round3),
    );
    r.detail(
        "server_cpu_us_per_device",
        reg_cpu.map(|c| stats::round3(c / reg.devices as f64 * 1e6)),
    );
    r.detail("messages", args.messages);
    r.detail("broadcasts_accepted", pushed.accepted);
    r.detail("refused_pushes", pushed.refused + tagged.refused);
    r.detail("broadcast_targeted", &pushed.targeted);
    r.detail("tag_expression", TAG_EXPRESSION);
    r.detail("tag_push_ms", tag_ms);
    r.detail("tag_targeted", &tagged.targeted);
    r.detail("push_server_cpu_seconds", push_cpu.map(stats::round3));
    r.detail("broadcast_audience", audience(0));
    r.detail("tag_audience", audience(1));
    r.detail("audience_counted_after_s", audience_s.map(stats::round3));
    r.detail("audience_server_cpu_seconds", count_cpu.map(stats::round3));
    r.detail("store_bytes_before", store_before);
    r.detail("store_bytes_after", store_after);
    r.detail("store_growth_bytes", growth);
    r.detail(
        "store_growth_bytes_per_push",
        growth.map(|g| stats::round1(g as f64 / pushes.max(1) as f64)),
    );
    let samples: Vec<String> = [reg.sample, pushed.sample, tagged.sample]
        .into_iter()
        .flatten()
        .collect();
    r.detail("error_samples", samples);
    let cpu = cpu0.share(&cpu1);
    r.cpu = Some(cpu);
    r.limited_by = if reg.devices < args.devices && ctx.left().is_zero() {
        format!("time: --time-limit {} s", ctx.common.time_limit)
    } else {
        cpu_bound(
            &cpu,
            &format!(
                "registration round trips: {} requests of {} devices in flight",
                args.concurrency, args.batch
            ),
        )
    };
    ctx.finish(&mut r);
    Ok(r)
}
