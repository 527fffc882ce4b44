//! `failover` (issue 36): a cluster (`--spawn-cluster 3`, or `--target` nodes with their
//! `--server-pid`s) with `--clients-per-node` WebSocket clients on each node, each subscribed
//! to `--channels` channels of its own ([`Plan::Failover`], `client/failover.rs`). `--received`
//! messages are published to every channel and every client receives them; then one node is
//! killed with SIGKILL and `--pending` more messages are published to every channel through
//! the surviving nodes. The killed node's clients then reconnect (once those are stored, or at
//! once with `--reconnect-at-once`) to the other nodes, round-robin, resubscribing from their
//! last position as Herald's SDKs do, and every client must end with every message once, in
//! order ([`crate::ledger`]). Reports the time from the kill to all resumed and all caught up,
//! messages lost (the first few named), duplicates, out-of-order deliveries, and the surviving
//! nodes', PostgreSQL's and Redis's CPU over the failover. Bounded by `--resume-timeout`: a
//! failover that does not complete is reported as such and fails the run.

use std::time::Duration;

use anyhow::{anyhow, bail};
use serde_json::json;

use crate::args::FailoverArgs;
use crate::client::HttpClient;
use crate::ledger::Tally;
use crate::pool::Pool;
use crate::proto::{Action, Command, Event, Plan, Transport};
use crate::report::{f, Report, Table};
use crate::scenario::{cpu_bound, open_failure, publish_to_all, status, Ctx, Progress};
use crate::server::{CpuMark, Part};
use crate::wire::now_ns;

/// Publishing connections per node.
const LANES_PER_NODE: usize = 2;

/// Runs the scenario.
pub async fn run(args: FailoverArgs) -> anyhow::Result<Report> {
    if args.common.transport != Transport::Ws {
        bail!("failover's clients speak the WebSocket protocol: leave --transport out");
    }
    if args.clients_per_node == 0 {
        bail!("--clients-per-node must be at least 1");
    }
    if args.common.spawn {
        bail!(
            "failover needs a cluster: --spawn-cluster 3, or --target URL,URL,... --server-pid ..."
        );
    }
    let mut ctx = Ctx::open(&args.common, &[]).await?;
    let nodes = ctx.target.nodes.len();
    if nodes < 2 {
        bail!("failover needs at least two nodes (--spawn-cluster 3, or several --target URLs)");
    }
    let victim = args.kill.unwrap_or(nodes);
    if victim == 0 || victim > nodes {
        bail!("--kill {victim}: the nodes are numbered 1 to {nodes}");
    }
    let victim = victim - 1;
    let victim_pid = ctx.target.nodes[victim].pid.ok_or_else(|| {
        anyhow!(
            "node {} has no known pid to kill: give --server-pid, one per --target URL",
            victim + 1
        )
    })?;
    let key = ctx.target.require_api_key()?;
    if ctx.target.client_token().is_none() {
        bail!(
            "the clients need a token: --token-secret SECRET or --token TOKEN (or --spawn-cluster)"
        );
    }
    let total = args.clients_per_node * nodes as u64;
    let prefix = format!("bench/{}/f/", ctx.run);
    let mut pool = ctx.pool(total).await?;

    let bar = Progress::new(
        total,
        &format!(
            "failover: {total} clients ({} per node) subscribing",
            args.clients_per_node
        ),
    );
    let plan = Plan::Failover {
        prefix: prefix.clone(),
        channels: args.channels,
    };
    let (_, failed, errors) = pool.open(total, plan, |d, _| bar.set(d)).await?;
    bar.done();
    if failed > 0 {
        bail!(
            "{failed} of {total} clients could not subscribe: {}",
            open_failure(&ctx, &errors)
        );
    }
    let orphans: u64 = (0..pool.len())
        .filter(|w| w % nodes == victim)
        .map(|w| pool.held[w])
        .sum();
    let names: Vec<String> = (0..total)
        .flat_map(|n| {
            let prefix = &prefix;
            (0..args.channels).map(move |j| format!("{prefix}{n}/{j}"))
        })
        .collect();

    let mut lanes: Vec<HttpClient> = (0..nodes * LANES_PER_NODE)
        .map(|i| ctx.http_to(i))
        .collect();
    publish_rounds(&mut lanes, &names, &key, args.received, "before the kill").await?;
    let before = account(
        &mut pool,
        args.received,
        ctx.left(),
        total,
        "every client receiving",
    )
    .await?;
    if before.caught_up < total || !before.exact() {
        bail!(
            "before the kill, {} of {total} clients had received all {} messages of their \
             channels within --time-limit ({} lost, {} duplicates, {} out of order){}",
            before.caught_up,
            args.received,
            before.lost,
            before.duplicates,
            before.out_of_order,
            if before.errors.is_empty() {
                String::new()
            } else {
                format!(": {}", before.errors.join("; "))
            }
        );
    }

    // The same processes in every mark: the surviving nodes, PostgreSQL and Redis.
    let survivors: Vec<usize> = (0..nodes).filter(|i| *i != victim).collect();
    let parts: Vec<Part> = ctx
        .target
        .parts()
        .into_iter()
        .filter(|p| p.pid != victim_pid)
        .collect();
    let survivor_pids: Vec<u32> = survivors
        .iter()
        .filter_map(|i| ctx.target.nodes[*i].pid)
        .collect();
    let mark = |pool: &Pool| CpuMark::of(&survivor_pids, &pool.pids(), &parts);

    status(&format!(
        "failover: killing node {} ({}, pid {victim_pid}) with SIGKILL",
        victim + 1,
        ctx.target.nodes[victim].url
    ));
    let at_kill = mark(&pool);
    let kill_ns = now_ns();
    ctx.target.kill_node(victim)?;
    if args.reconnect_at_once {
        resume(&mut pool).await?;
    }
    let mut lanes: Vec<HttpClient> = survivors
        .iter()
        .flat_map(|i| std::iter::repeat_n(*i, LANES_PER_NODE))
        .map(|i| ctx.http_to(i))
        .collect();
    publish_rounds(&mut lanes, &names, &key, args.pending, "after the kill").await?;
    let published_ns = now_ns();
    let at_resume = mark(&pool);
    let resume_ns = if args.reconnect_at_once {
        kill_ns
    } else {
        resume(&mut pool).await?;
        now_ns()
    };
    let expected = args.received + args.pending;
    let limit = Duration::from_secs(args.resume_timeout)
        .saturating_sub(Duration::from_nanos(now_ns().saturating_sub(kill_ns)))
        .min(ctx.left());
    let after = account(
        &mut pool,
        expected,
        limit,
        total,
        "resuming and catching up",
    )
    .await?;
    let at_done = mark(&pool);

    let figures = Figures {
        total,
        orphans,
        expected,
        kill_ns,
        published_ns,
        resume_ns,
    };
    let mut r = Report::new("failover");
    report(&mut r, &args, &ctx, &figures, &after);
    ctx.report_parts(&mut r, &at_kill, &at_done, "resumed client", after.resumed);
    rename_detail(&mut r, "cluster", "cpu_kill_to_caught_up");
    if !args.reconnect_at_once {
        r.lines
            .push("the same from the reconnects (the pending messages stored) on:".into());
        ctx.report_parts(
            &mut r,
            &at_resume,
            &at_done,
            "resumed client",
            after.resumed,
        );
        rename_detail(&mut r, "cluster", "cpu_reconnect_to_caught_up");
    }
    let cpu = at_kill.share(&at_done);
    r.cpu = Some(cpu);
    r.limited_by = match &r.failure {
        Some(why) => why.clone(),
        None => cpu_bound(&cpu, "nothing: every client resumed exactly and caught up"),
    };
    ctx.finish(&mut r);
    // The server's CPU since the start would mix the killed node in at the start only: the
    // surviving nodes' over the failover instead.
    r.headline.server_cpu_seconds = at_kill.server_seconds(&at_done).map(crate::stats::round3);
    pool.close().await;
    Ok(r)
}

/// Publishes `rounds` stamped messages to every channel, round after round, over `lanes`.
async fn publish_rounds(
    lanes: &mut [HttpClient],
    names: &[String],
    key: &str,
    rounds: u64,
    when: &str,
) -> anyhow::Result<()> {
    let bar = Progress::new(
        rounds * names.len() as u64,
        &format!(
            "failover: publishing {rounds} messages to each of {} channels {when}",
            names.len()
        ),
    );
    for round in 0..rounds {
        let (refused, sample) = publish_to_all(lanes, names, key).await;
        if refused > 0 {
            bar.done();
            bail!(
                "{refused} publishes {when} were refused (round {} of {rounds}): {}",
                round + 1,
                sample.unwrap_or_default()
            );
        }
        bar.set((round + 1) * names.len() as u64);
    }
    bar.done();
    Ok(())
}

/// Lets the clients that lost their node reconnect.
async fn resume(pool: &mut Pool) -> anyhow::Result<()> {
    let fire = Command::Fire {
        at_ns: now_ns(),
        bucket_ms: 1000,
        action: Action::Resume,
    };
    pool.broadcast(fire, false).await?;
    Ok(())
}

/// Every worker's clients against `expected` messages per channel, once all are caught up or
/// `limit` passed, with a progress bar of clients caught up.
async fn account(
    pool: &mut Pool,
    expected: u64,
    limit: Duration,
    total: u64,
    label: &str,
) -> anyhow::Result<Tally> {
    let bar = Progress::new(total, &format!("failover: {label}"));
    let cmds = (0..pool.len())
        .filter(|&i| pool.held[i] > 0)
        .map(|i| {
            (
                i,
                Command::Account {
                    expected,
                    timeout_ms: limit.as_millis() as u64,
                },
            )
        })
        .collect();
    let replies = pool.request(cmds, |done, _| bar.set(done)).await?;
    bar.done();
    let mut tally = Tally::default();
    for (_, ev) in replies {
        if let Event::Accounted(t) = ev {
            tally.merge(&t);
        }
    }
    Ok(tally)
}

/// Moves a detail to another key (the cluster table is added twice).
fn rename_detail(r: &mut Report, from: &str, to: &str) {
    if let Some(v) = r.details.remove(from) {
        r.details.insert(to.to_string(), v);
    }
}

/// What the run knows besides the clients' tally.
struct Figures {
    total: u64,
    orphans: u64,
    expected: u64,
    kill_ns: u64,
    published_ns: u64,
    resume_ns: u64,
}

/// Milliseconds from `from` to `to` (unix nanos), if `to` happened.
fn ms(from: u64, to: u64) -> Option<f64> {
    (to >= from && to > 0).then(|| (to - from) as f64 / 1e6)
}

fn cell(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| f(v, 1))
}

/// Why the run fails its check, if it does.
fn failure(args: &FailoverArgs, fig: &Figures, t: &Tally) -> Option<String> {
    let mut why = Vec::new();
    if t.caught_up < fig.total {
        why.push(format!(
            "the failover did not complete within --resume-timeout {} s: {} of {} clients \
             resumed, {} of {} clients caught up",
            args.resume_timeout, t.resumed, fig.orphans, t.caught_up, fig.total
        ));
    }
    if t.lost > 0 {
        // Before every client is back, a message not received may still have been coming.
        let what = if t.caught_up < fig.total {
            "messages not received when the wait ended"
        } else {
            "messages lost"
        };
        why.push(format!(
            "{} {what} (first: {})",
            t.lost,
            t.lost_samples.join(", ")
        ));
    }
    for (n, what) in [
        (t.duplicates, "duplicate deliveries"),
        (t.out_of_order, "deliveries out of order"),
        (t.unexpected, "deliveries of seqs never published"),
        (t.epoch_changes, "messages of another epoch"),
        (t.not_recovered, "resumes answered recovered: false"),
    ] {
        if n > 0 {
            why.push(format!("{n} {what}"));
        }
    }
    if t.disconnected != fig.orphans {
        why.push(format!(
            "{} clients lost their connection, {} were on the killed node",
            t.disconnected, fig.orphans
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// The table, lines, headline and details.
fn report(r: &mut Report, args: &FailoverArgs, ctx: &Ctx, fig: &Figures, t: &Tally) {
    let nodes = ctx.target.nodes.len();
    let victim = args.kill.unwrap_or(nodes);
    let resumed_ms = ms(fig.kill_ns, t.last_resumed_ns).filter(|_| t.resumed >= fig.orphans);
    let caught_up_ms = ms(fig.kill_ns, t.last_caught_up_ns).filter(|_| t.caught_up >= fig.total);
    let from_resume =
        |to: Option<f64>| to.map(|ms| ms - fig.resume_ns.saturating_sub(fig.kill_ns) as f64 / 1e6);
    let mut table = Table::new(&["measure", "value"]);
    let mut row = |k: &str, v: String| table.row(vec![k.to_string(), v]);
    row(
        "clients (nodes x per node)",
        format!("{} ({nodes} x {})", fig.total, args.clients_per_node),
    );
    row("channels per client", args.channels.to_string());
    row(
        "messages per channel (before + after the kill)",
        format!("{} ({} + {})", fig.expected, args.received, args.pending),
    );
    row("node killed (SIGKILL)", format!("{victim} of {nodes}"));
    row("its clients", fig.orphans.to_string());
    row(
        "kill to pending messages stored, ms",
        cell(ms(fig.kill_ns, fig.published_ns)),
    );
    row("kill to all resumed, ms", cell(resumed_ms));
    row("kill to all caught up, ms", cell(caught_up_ms));
    row(
        "reconnect to all resumed, ms",
        cell(from_resume(resumed_ms)),
    );
    row(
        "reconnect to all caught up, ms",
        cell(from_resume(caught_up_ms)),
    );
    let per_client = crate::stats::LatencyMs::of(&t.resume_times());
    row(
        "per killed client, reconnect to resumed: p50 / p99 / max, ms",
        if t.resumed > 0 {
            format!(
                "{} / {} / {}",
                per_client.p50, per_client.p99, per_client.max
            )
        } else {
            "-".into()
        },
    );
    row(
        "clients resumed / caught up",
        format!("{} / {}", t.resumed, t.caught_up),
    );
    row("messages delivered", t.received.to_string());
    row("messages lost", t.lost.to_string());
    row("duplicates", t.duplicates.to_string());
    row("out of order", t.out_of_order.to_string());
    row("resumes not recovered", t.not_recovered.to_string());
    row(
        "resumed clients with messages pending",
        format!("{} ({} messages)", t.with_pending, t.pending_at_resume),
    );
    row(
        "reconnect attempts (failed)",
        format!("{} ({})", t.reconnect_attempts, t.reconnect_failures),
    );
    r.table = table;
    let on: Vec<String> = t
        .resumed_on
        .iter()
        .map(|(node, n)| format!("{n} on {node}"))
        .collect();
    r.lines.push(format!(
        "the killed node's {} clients resumed: {}",
        fig.orphans,
        if on.is_empty() {
            "none".into()
        } else {
            on.join(", ")
        }
    ));
    if !t.lost_samples.is_empty() {
        r.lines.push(format!(
            "first messages lost: {}",
            t.lost_samples.join(", ")
        ));
    }
    if !t.errors.is_empty() {
        r.lines
            .push(format!("client errors: {}", t.errors.join("; ")));
    }
    let resume_s = from_resume(resumed_ms).map(|ms| ms / 1e3);
    r.headline.failed = t.lost;
    r.headline.latency_ms = (t.resumed > 0).then_some(per_client);
    r.headline.subscriptions_per_sec = resume_s
        .filter(|s| *s > 0.0)
        .map(|s| (t.resumed * args.channels) as f64 / s);
    r.failure = failure(args, fig, t);
    r.detail("clients", fig.total);
    r.detail("clients_per_node", args.clients_per_node);
    r.detail("channels_per_client", args.channels);
    r.detail("messages_per_channel", fig.expected);
    r.detail("killed_node", victim);
    r.detail("killed_node_clients", fig.orphans);
    r.detail("reconnect_at_once", args.reconnect_at_once);
    r.detail(
        "ms",
        json!({
            "kill_to_pending_stored": ms(fig.kill_ns, fig.published_ns),
            "kill_to_all_resumed": resumed_ms,
            "kill_to_all_caught_up": caught_up_ms,
            "reconnect_to_all_resumed": from_resume(resumed_ms),
            "reconnect_to_all_caught_up": from_resume(caught_up_ms),
        }),
    );
    r.detail("accounting", t);
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: FailoverArgs,
    }

    fn args() -> FailoverArgs {
        Cli::parse_from([
            "failover",
            "--spawn-cluster",
            "3",
            "--clients-per-node",
            "10",
        ])
        .args
    }

    fn figures() -> Figures {
        Figures {
            total: 30,
            orphans: 10,
            expected: 5,
            kill_ns: 1,
            published_ns: 2,
            resume_ns: 3,
        }
    }

    #[test]
    fn an_exact_complete_failover_passes() {
        let t = Tally {
            clients: 30,
            caught_up: 30,
            disconnected: 10,
            resumed: 10,
            ..Default::default()
        };
        assert_eq!(failure(&args(), &figures(), &t), None);
    }

    #[test]
    fn a_lost_message_a_duplicate_or_a_client_behind_fails_the_run() {
        let t = Tally {
            clients: 30,
            caught_up: 29,
            disconnected: 10,
            resumed: 10,
            lost: 1,
            lost_samples: vec!["bench/x/f/7/0#4".into()],
            duplicates: 2,
            ..Default::default()
        };
        let why = failure(&args(), &figures(), &t).expect("a failure");
        assert!(
            why.contains("did not complete within --resume-timeout 120 s"),
            "{why}"
        );
        assert!(why.contains("29 of 30 clients caught up"), "{why}");
        assert!(
            why.contains("1 messages not received when the wait ended (first: bench/x/f/7/0#4)"),
            "{why}"
        );
        assert!(why.contains("2 duplicate deliveries"), "{why}");
        // A survivor's client that lost its connection too is named.
        let t = Tally {
            clients: 30,
            caught_up: 30,
            disconnected: 11,
            resumed: 11,
            ..Default::default()
        };
        let why = failure(&args(), &figures(), &t).expect("a failure");
        assert!(
            why.contains("11 clients lost their connection, 10 were on the killed node"),
            "{why}"
        );
        // Every client back and a message still missing: lost.
        let t = Tally {
            clients: 30,
            caught_up: 30,
            disconnected: 10,
            resumed: 10,
            lost: 1,
            lost_samples: vec!["bench/x/f/7/0#4".into()],
            ..Default::default()
        };
        let why = failure(&args(), &figures(), &t).expect("a failure");
        assert_eq!(why, "1 messages lost (first: bench/x/f/7/0#4)");
    }
}
