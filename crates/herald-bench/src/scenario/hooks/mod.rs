//! `hooks`: webhook delivery under connection churn (issue 32's speed items). The bench starts
//! its own receiver on 127.0.0.1 (`receiver.rs`: verifies every Standard Webhooks signature,
//! counts requests and events, each event once by id), registers an endpoint for every event
//! type through the API (a spawned server gets `outbound_allow = 127.0.0.1` so it may reach
//! it), then `--clients` clients with tokens of their own connect, subscribe to a channel of
//! their own and disconnect, `--rounds` times (`churn.rs`). It waits (bounded by `--wait`) until
//! the receiver has every event the server must have sent (`expect.rs` says which), and
//! reports events received, distinct, duplicates, missing, HTTP requests, events per request,
//! the server's CPU per event, the time from the last client action to the last event received,
//! and the churn rate. Any expected event missing, or a request that does not verify, fails the
//! run (non-zero exit) after the report.
//!
//! `--no-hooks` runs the same churn without an endpoint, and `--hooks-matching-nothing` with one
//! that wants only channel events of a pattern no client uses (nothing may arrive): the A/B pair
//! for "hooks configured but matching nothing cost at most 3 %" (CPU per cycle, churn rate).

mod churn;
mod expect;
mod receiver;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail};
use serde_json::{json, Value};

use crate::args::HooksArgs;
use crate::client::HttpClient;
use crate::report::{f, Report, Table};
use crate::scenario::{cpu_bound, status, Ctx, Progress};
use crate::stats;
use crate::svg::{Chart, Series};
use crate::wire::now_ns;

use expect::{Comparison, Mode};
use receiver::{Names, Receiver, BUCKET_MS};

/// Most clients connecting at a time (one process may hold 20,000 files; the receiver and the
/// runtime need some).
const MAX_CONCURRENCY: usize = 15_000;

/// The event types an endpoint of `--hooks-matching-nothing` wants: those about a channel.
const CHANNEL_EVENTS: [&str; 4] = [
    "client.subscribed",
    "client.unsubscribed",
    "channel.occupied",
    "channel.vacated",
];

/// How long `--hooks-matching-nothing` waits after the churn for events that must not come.
const QUIET_WAIT: Duration = Duration::from_secs(2);

/// Runs the scenario.
pub async fn run(args: HooksArgs) -> anyhow::Result<Report> {
    check(&args)?;
    let mode = if args.no_hooks {
        Mode::NoHooks
    } else if args.hooks_matching_nothing {
        Mode::MatchingNothing
    } else {
        Mode::All
    };
    let mut env = vec![("HERALD_OUTBOUND_ALLOW", "127.0.0.1".to_string())];
    if let Some(n) = args.batch_max {
        env.push(("HERALD_HOOKS_BATCH_MAX", n.to_string()));
    }
    if let Some(d) = &args.batch_delay {
        env.push(("HERALD_HOOKS_BATCH_DELAY", d.clone()));
    }
    let ctx = Ctx::open(&args.common, &env).await?;
    let key = ctx.target.require_api_key()?;
    let secret = ctx.target.token_secret.clone().ok_or_else(|| {
        anyhow!(
            "each client needs a token of its own: --token-secret SECRET or \
             HERALD_TOKEN_SECRET (or --spawn)"
        )
    })?;
    let names = Names {
        user_prefix: format!("bench-{}-", ctx.run),
        channel_prefix: format!("bench/{}/h/", ctx.run),
        clients: args.clients,
    };
    let (receiver, secret_slot) = Receiver::start(names.clone()).await?;
    let mut api = ctx.http();
    let hook = match mode {
        Mode::NoHooks => None,
        _ => {
            let (id, hook_secret) =
                create_endpoint(&mut api, &key, &args, &ctx, &receiver, mode).await?;
            secret_slot.set(&hook_secret)?;
            Some(id)
        }
    };
    let tokens: Vec<String> = (0..args.clients)
        .map(|i| {
            herald_proto::token::mint(
                secret.as_bytes(),
                &herald_proto::token::ClientClaims {
                    sub: format!("{}{i}", names.user_prefix),
                    channels: vec![format!("{}{i}", names.channel_prefix)],
                    ..Default::default()
                },
            )
        })
        .collect();
    let plan = churn::Plan {
        addr: ctx.target.addr,
        host: ctx.target.host.clone(),
        tokens: Arc::new(tokens),
        channel_prefix: names.channel_prefix.clone(),
        concurrency: args.concurrency,
    };

    let cycles_total = args.clients * args.rounds;
    let progress = Arc::new(AtomicU64::new(0));
    let bar = Progress::new(
        cycles_total,
        &format!(
            "hooks: {} clients x {} rounds of connect, subscribe, disconnect",
            args.clients, args.rounds
        ),
    );
    let follow = bar.follow(progress.clone(), cycles_total);
    let sampler = sample_progress(progress.clone());
    let cpu0 = ctx.mark_server();
    let start_ns = now_ns();
    receiver.with(|t| {
        t.start_ns = start_ns;
        t.buckets.clear();
    });
    // The churn may use what the time limit leaves after the longest wait.
    let until = tokio::time::Instant::now()
        + ctx
            .left()
            .saturating_sub(Duration::from_secs(args.wait.min(ctx.left().as_secs() / 2)));
    let done = churn::run(&plan, args.rounds, until, progress.clone()).await;
    let churn_end_ns = now_ns();
    follow.abort();
    bar.done();
    let cycles_series = sampler.stop().await;
    let cpu_churn = ctx.mark_server();

    let waited = wait_for_events(&ctx, &args, &receiver, &done, mode).await;
    let cpu1 = ctx.mark_server();
    if let Some(id) = hook {
        if let Err(e) = delete_endpoint(&mut api, &key, &args.app, id).await {
            status(&format!("hooks: could not delete endpoint {id}: {e}"));
        }
    }

    let cmp = receiver.with(|t| expect::compare(&done, t, mode));
    let mut r = Report::new("hooks");
    let figures = receiver.with(|t| Figures::of(t, churn_end_ns));
    report_events(&mut r, &cmp, &figures);
    let cycles = done.connected.iter().sum::<u64>();
    let churn_s = churn_end_ns.saturating_sub(start_ns) as f64 / 1e9;
    let churn_rate = if churn_s > 0.0 {
        cycles as f64 / churn_s
    } else {
        0.0
    };
    let mode_name = match mode {
        Mode::All => "every event type",
        Mode::MatchingNothing => "an endpoint matching nothing",
        Mode::NoHooks => "no endpoint",
    };
    r.lines.push(format!(
        "{} clients x {} rounds ({} run) with {mode_name}: {cycles} connections in {:.3} s ({:.0} \
         connections/s), {} cycles failed",
        args.clients, args.rounds, done.rounds, churn_s, churn_rate, done.failed
    ));
    let server_cpu = cpu0.server_seconds(&cpu1);
    let server_cpu_churn = cpu0.server_seconds(&cpu_churn);
    let per = |cpu: Option<f64>, n: u64| {
        cpu.filter(|_| n > 0)
            .map(|c| stats::round3(c * 1e6 / n as f64))
    };
    let us_per_event = per(server_cpu, figures.distinct).filter(|_| mode == Mode::All);
    let us_per_cycle = per(server_cpu_churn, cycles);
    let us_per_cycle_all = per(server_cpu, cycles);
    r.lines.push(format!(
        "server: {} CPU s in all ({} during the churn): {} us per connection cycle ({} with \
         what followed), {} us per event",
        server_cpu.map_or("?".into(), |c| f(c, 3)),
        server_cpu_churn.map_or("?".into(), |c| f(c, 3)),
        us_per_cycle.map_or("?".into(), |c| f(c, 1)),
        us_per_cycle_all.map_or("?".into(), |c| f(c, 1)),
        us_per_event.map_or("-".into(), |c| f(c, 1)),
    ));
    if mode != Mode::NoHooks {
        r.lines.push(format!(
            "last client action to last event received: {}; waited {:.1} s for the events{}",
            figures
                .last_event_after_ms
                .map_or("-".into(), |ms| format!("{ms:.0} ms")),
            waited.as_secs_f64(),
            if cmp.missing > 0 {
                format!(" (gave up after --wait {} s)", args.wait)
            } else {
                String::new()
            }
        ));
    }
    r.chart = Some(Chart {
        title: format!(
            "Webhooks under churn: {} clients x {} rounds, {mode_name}",
            args.clients, args.rounds
        ),
        x_label: "seconds since the churn started".into(),
        y_label: "total".into(),
        series: vec![
            Series::Line {
                name: "connection cycles done".into(),
                points: cycles_series,
                color: "#1f5fa8",
            },
            Series::Line {
                name: "distinct events received".into(),
                points: figures.curve.clone(),
                color: "#d9822b",
            },
        ],
    });
    let cycle_time = stats::LatencyMs::of(&done.cycle_time);
    r.lines.push(format!(
        "connection cycle (connect, subscribe, acknowledgement, close): p50 {} ms, p99 {} ms, \
         max {} ms",
        cycle_time.p50, cycle_time.p99, cycle_time.max
    ));
    r.headline.latency_ms = Some(cycle_time);
    r.headline.failed = cmp.missing + done.failed;
    r.detail("mode", mode_name);
    r.detail("clients", args.clients);
    r.detail("rounds", args.rounds);
    r.detail("rounds_run", done.rounds);
    r.detail("concurrency", args.concurrency);
    r.detail("connections", cycles);
    r.detail("subscriptions", done.subscribed.iter().sum::<u64>());
    r.detail("failed_cycles", done.failed);
    r.detail("churn_seconds", stats::round3(churn_s));
    r.detail("connections_per_sec", stats::round1(churn_rate));
    r.detail("events_received", figures.events);
    r.detail("events_distinct", figures.distinct);
    r.detail("duplicates", figures.duplicates);
    r.detail("expected", cmp.rows.iter().map(|r| r.expected).sum::<u64>());
    r.detail("missing", cmp.missing);
    r.detail("unexpected", cmp.unexpected);
    r.detail("out_of_order_users", cmp.out_of_order_users);
    r.detail("withdrawn_pairs", cmp.withdrawn_pairs);
    r.detail("final_online_users", cmp.final_online_users);
    r.detail("foreign_events", figures.foreign);
    r.detail("http_requests", figures.requests);
    r.detail("bad_signatures", figures.bad_signatures);
    r.detail("bad_bodies", figures.bad_bodies);
    r.detail(
        "events_per_request",
        (figures.requests > 0)
            .then(|| stats::round1(figures.events as f64 / figures.requests as f64)),
    );
    r.detail("server_cpu_us_per_event", us_per_event);
    r.detail("server_cpu_us_per_connection", us_per_cycle);
    r.detail("server_cpu_us_per_connection_all", us_per_cycle_all);
    r.detail(
        "server_cpu_seconds_churn",
        server_cpu_churn.map(stats::round3),
    );
    r.detail("last_action_to_last_event_ms", figures.last_event_after_ms);
    r.detail("offline_delay_ms", args.offline_delay_ms);
    r.detail("batch_max", args.batch_max);
    r.detail("batch_delay", &args.batch_delay);
    r.detail("per_type", rows_json(&cmp));
    let mut errors = done.errors.clone();
    errors.extend(figures.sample.clone());
    r.detail("error_samples", &errors);
    r.cpu = Some(cpu0.share(&cpu_churn));
    r.limited_by = if done.failed > 0 {
        crate::scenario::open_failure(&ctx, &done.errors)
    } else {
        cpu_bound(
            &cpu0.share(&cpu_churn),
            &format!(
                "count: {} clients x {} rounds, {} at a time",
                args.clients, args.rounds, args.concurrency
            ),
        )
    };
    r.failure = failure(&cmp, &figures, &done, mode);
    ctx.finish(&mut r);
    Ok(r)
}

/// Refuses flags that cannot work together.
fn check(args: &HooksArgs) -> anyhow::Result<()> {
    if args.clients == 0 || args.rounds == 0 {
        bail!("--clients and --rounds must be at least 1");
    }
    if args.concurrency == 0 || args.concurrency > MAX_CONCURRENCY {
        bail!("--concurrency must be 1 to {MAX_CONCURRENCY} (one process may hold 20,000 files)");
    }
    if args.common.transport != crate::proto::Transport::Ws {
        bail!("hooks churns WebSocket clients only (--transport ws)");
    }
    if args.common.spawn_cluster.is_some() {
        bail!("hooks runs against one node: --spawn or --target");
    }
    if args.common.target.is_some() && (args.batch_max.is_some() || args.batch_delay.is_some()) {
        bail!(
            "--batch-max and --batch-delay configure a spawned server; set hooks.batch_max and \
             hooks.batch_delay in the --target server's configuration instead"
        );
    }
    if args.offline_delay_ms > 600_000 {
        bail!("--offline-delay-ms is at most 600000");
    }
    Ok(())
}

/// Creates the run's endpoint; returns its id and signing secret.
async fn create_endpoint(
    api: &mut HttpClient,
    key: &str,
    args: &HooksArgs,
    ctx: &Ctx,
    receiver: &Receiver,
    mode: Mode,
) -> anyhow::Result<(u64, String)> {
    let mut body = json!({
        "url": receiver.url(),
        "events": ["*"],
        "offline_delay_ms": args.offline_delay_ms,
        "description": format!("herald bench hooks {}", ctx.run),
    });
    if mode == Mode::MatchingNothing {
        body["events"] = json!(CHANNEL_EVENTS);
        body["channels"] = json!([format!("bench-nothing/{}/*", ctx.run)]);
    }
    let path = format!("/v1/apps/{}/hooks", args.app);
    let (status, answer) = api
        .post(&path, key, body.to_string().as_bytes())
        .await
        .map_err(|e| anyhow!("POST {path}: {e}"))?;
    let text = String::from_utf8_lossy(&answer);
    if status != 201 {
        let hint = if text.contains("outbound_allow") || text.contains("destination") {
            " (a --target server must allow 127.0.0.1 in outbound_allow)"
        } else {
            ""
        };
        bail!("creating the endpoint: HTTP {status} {text}{hint}");
    }
    let v: Value = serde_json::from_str(&text)?;
    let id = v["hook"]["id"]
        .as_u64()
        .ok_or_else(|| anyhow!("the endpoint's answer has no hook.id: {text}"))?;
    let secret = v["secret"]
        .as_str()
        .ok_or_else(|| anyhow!("the endpoint's answer has no secret"))?;
    Ok((id, secret.to_owned()))
}

async fn delete_endpoint(
    api: &mut HttpClient,
    key: &str,
    app: &str,
    id: u64,
) -> Result<(), String> {
    match api
        .delete(&format!("/v1/apps/{app}/hooks/{id}"), key)
        .await?
    {
        (200..=299, _) => Ok(()),
        (status, body) => Err(format!("HTTP {status} {}", String::from_utf8_lossy(&body))),
    }
}

/// Waits until the receiver has every expected event (`--wait` at most, and what the time
/// limit leaves); `--hooks-matching-nothing` waits [`QUIET_WAIT`] for events that must not
/// come, and `--no-hooks` as long. Returns how long it waited.
async fn wait_for_events(
    ctx: &Ctx,
    args: &HooksArgs,
    receiver: &Receiver,
    done: &churn::Done,
    mode: Mode,
) -> Duration {
    let started = tokio::time::Instant::now();
    match mode {
        // Both wait alike, so that the CPU over the churn and the wait compares.
        Mode::NoHooks | Mode::MatchingNothing => {
            tokio::time::sleep(QUIET_WAIT.min(ctx.left())).await;
            return started.elapsed();
        }
        Mode::All => {}
    }
    status("hooks: waiting for every expected event");
    let limit = started + Duration::from_secs(args.wait).min(ctx.left());
    loop {
        let missing = receiver.with(|t| expect::compare(done, t, mode).missing);
        if missing == 0 || tokio::time::Instant::now() >= limit {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The receiver's figures for the report.
struct Figures {
    requests: u64,
    events: u64,
    distinct: u64,
    duplicates: u64,
    foreign: u64,
    bad_signatures: u64,
    bad_bodies: u64,
    last_event_after_ms: Option<f64>,
    curve: Vec<(f64, f64)>,
    sample: Option<String>,
}

impl Figures {
    fn of(t: &receiver::Tally, churn_end_ns: u64) -> Figures {
        let duplicates: u64 = t.duplicates.iter().sum();
        let mut total = 0u64;
        let mut curve = vec![(0.0, 0.0)];
        for (i, n) in t.buckets.iter().enumerate() {
            total += n;
            curve.push((((i as u64 + 1) * BUCKET_MS) as f64 / 1000.0, total as f64));
        }
        Figures {
            requests: t.requests,
            events: t.events,
            distinct: t.events - duplicates,
            duplicates,
            foreign: t.foreign,
            bad_signatures: t.bad_signatures,
            bad_bodies: t.bad_bodies,
            last_event_after_ms: (t.last_new_ns > 0)
                .then(|| stats::round1(t.last_new_ns.saturating_sub(churn_end_ns) as f64 / 1e6)),
            curve,
            sample: t.sample.clone(),
        }
    }
}

/// The per-type table and the events line.
fn report_events(r: &mut Report, cmp: &Comparison, figures: &Figures) {
    let mut table = Table::new(&[
        "type",
        "expected",
        "received",
        "duplicates",
        "missing",
        "unexpected",
    ]);
    for row in &cmp.rows {
        table.row(vec![
            row.kind.to_string(),
            row.expected.to_string(),
            row.received.to_string(),
            row.duplicates.to_string(),
            row.missing.to_string(),
            row.unexpected.to_string(),
        ]);
    }
    r.table = table;
    r.lines.push(format!(
        "events: {} received, {} distinct, {} duplicates, {} missing, {} unexpected; {} HTTP \
         requests ({} events per request), {} failed signature checks",
        figures.events,
        figures.distinct,
        figures.duplicates,
        cmp.missing,
        cmp.unexpected,
        figures.requests,
        if figures.requests > 0 {
            f(figures.events as f64 / figures.requests as f64, 1)
        } else {
            "-".into()
        },
        figures.bad_signatures,
    ));
    let online = &cmp.rows[6];
    if online.expected > 0 {
        r.lines.push(format!(
            "user.online/user.offline: {} pairs; {} reconnects within the offline delay withdrew \
             their offline and online; {} users' presence did not alternate (online, offline, \
             ...); {} users are still heard online after their last disconnect",
            online.received, cmp.withdrawn_pairs, cmp.out_of_order_users, cmp.final_online_users
        ));
    }
}

fn rows_json(cmp: &Comparison) -> Value {
    cmp.rows
        .iter()
        .map(|r| {
            (
                r.kind.to_string(),
                json!({"expected": r.expected, "received": r.received,
                       "duplicates": r.duplicates, "missing": r.missing,
                       "unexpected": r.unexpected}),
            )
        })
        .collect::<serde_json::Map<String, Value>>()
        .into()
}

/// Why the run failed, if it did: an expected event missing, a request that did not verify, a
/// body that did not parse, or events beyond the expectation (only when no cycle failed: a
/// cycle that failed before reading the server's answer may still have been carried out).
fn failure(cmp: &Comparison, fig: &Figures, done: &churn::Done, mode: Mode) -> Option<String> {
    if cmp.missing > 0 {
        return Some(format!("{} expected events missing", cmp.missing));
    }
    if fig.bad_signatures > 0 || fig.bad_bodies > 0 {
        return Some(format!(
            "{} requests failed the signature check and {} had a bad body: {}",
            fig.bad_signatures,
            fig.bad_bodies,
            fig.sample.clone().unwrap_or_default()
        ));
    }
    if cmp.unexpected > 0 && (done.failed == 0 || mode == Mode::MatchingNothing) {
        return Some(format!("{} unexpected events received", cmp.unexpected));
    }
    if done.failed > 0 && done.connected.iter().sum::<u64>() == 0 {
        return Some(format!(
            "no client could connect: {}",
            done.errors.join("; ")
        ));
    }
    None
}

/// Samples the number of finished cycles every [`BUCKET_MS`] until stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<(f64, f64)>>,
}

fn sample_progress(progress: Arc<AtomicU64>) -> Sampler {
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let task = tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        let mut points = vec![(0.0, 0.0)];
        let mut tick = tokio::time::interval(Duration::from_millis(BUCKET_MS));
        tick.tick().await;
        loop {
            tick.tick().await;
            points.push((
                start.elapsed().as_secs_f64(),
                progress.load(Ordering::Relaxed) as f64,
            ));
            if stopped.load(Ordering::Relaxed) || points.len() > 36_000 {
                return points;
            }
        }
    });
    Sampler { stop, task }
}

impl Sampler {
    async fn stop(self) -> Vec<(f64, f64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or_default()
    }
}
