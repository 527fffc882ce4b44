//! `herald bench`: Herald's load generator and burn-in suite. Each scenario reproduces a test the
//! systems Herald replaces published (Deacon's subscriber and channel counts, the iPush subscribe
//! storm, Urban Airship's broadcast rate) or a footprint goal, against a server it starts
//! (`--spawn`) or one already running (`--target`). It spreads client connections over worker
//! processes (this same binary, hidden `worker` subcommand) and 127.0.0.x source addresses, and
//! reports a table, CSV, `summary.json` and an SVG chart, with every figure also as a ratio to the
//! raw floors of the machine measured in the same run. docs/benchmarks.md describes it all.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod args;
pub mod baseline;
pub mod client;
pub mod cluster;
pub mod ledger;
pub mod meteor;
pub mod mqtt;
pub mod nats;
pub mod pool;
pub mod proto;
pub mod pusher_api;
pub mod report;
pub mod scenario;
pub mod server;
pub mod stats;
pub mod svg;
#[cfg(test)]
mod vectors;
pub mod wire;
pub mod worker;

use std::path::PathBuf;
use std::sync::OnceLock;

use args::{
    AllToAllArgs, AutoArgs, BaselineArgs, BroadcastArgs, ConnectionsArgs, FailoverArgs, FanoutArgs,
    HooksArgs, ReconnectArgs, SoakArgs, StepArgs, StormArgs,
};

const EXAMPLES: &str = "\
Examples:
  herald bench baseline
  herald bench subscribers --spawn --step 1000 --max-subscribers 10000 --out bench-out
  herald bench channels --spawn --step 1000 --max-subscribers 5000
  herald bench all-to-all --spawn --subscribers 300
  herald bench subscribe-storm --spawn --users 100 --subjects 1000
  herald bench fanout --spawn --publishers 8 --messages 20000 --subscribers 100
  herald bench fanout --spawn-cluster 3 --publishers 1 --messages 1000 --subscribers 3000
  herald bench connections --spawn --connections 10000 --channels 1
  herald bench broadcast --spawn --devices 1000000 --messages 20
  herald bench broadcast --spawn --devices 1000000 --provider apns
  herald bench auto --spawn --devices 10000
  herald bench reconnect-storm --spawn --devices 10000 --pending 100
  herald bench soak --spawn --duration 10m --out soak-out
  herald bench hooks --spawn --clients 10000 --rounds 3
  herald bench failover --spawn-cluster 3 --clients-per-node 6000
  herald bench apns --threads 1,2 --connections 1,2,4
  herald bench fanout --target http://127.0.0.1:7070 --api-key KEY --token-secret SECRET
  herald bench fanout --spawn --peer nats --publishers 4 --messages 1000 --subscribers 10000
  herald bench fanout --spawn --transport mqtt --publishers 4 --messages 1000 --subscribers 10000
  herald bench fanout --spawn --peer mosquitto --publishers 4 --messages 1000 --subscribers 10000
  herald bench subscribe-storm --spawn --transport mqtt --users 100 --subjects 1000
  herald bench fanout --spawn --transport mqtt --mqtt-qos 1 --mqtt-session-expiry 3600 --subscribers 1000
  herald bench connections --spawn --transport pusher --connections 6000
  herald bench fanout --spawn --peer sockudo --server-bin PATH --publishers 4 --messages 1000 --subscribers 10000
  herald bench subscribe-storm --target nats://127.0.0.1:4222 --server-pid PID --distinct

Every scenario is bounded in count and time (--time-limit) and loads loopback addresses only
unless --allow-remote. See docs/benchmarks.md for the flags, the outputs and results.";

const HOOKS_EXAMPLES: &str = "\
Examples:
  herald bench hooks --spawn --clients 10000 --rounds 3
  herald bench hooks --spawn --clients 10000 --rounds 3 --batch-max 100 --batch-delay 1s
  herald bench hooks --spawn --clients 10000 --rounds 3 --no-hooks
  herald bench hooks --spawn --clients 10000 --rounds 3 --hooks-matching-nothing
  herald bench hooks --target http://127.0.0.1:7070 --api-key KEY --token-secret SECRET

The spawned server gets outbound_allow = 127.0.0.1 (so it may reach the receiver) and inherits
the environment (HERALD_HOOKS_NODE_QUEUE=... and the like apply). A --target server must allow
127.0.0.1 in outbound_allow. Every expected event is counted from what the clients did: per
round and client one client.connected, client.subscribed, channel.occupied, client.unsubscribed,
channel.vacated and client.disconnected; per client at least one user.online and as many
user.offline, never an offline before its online (a reconnect within --offline-delay-ms
withdraws the pending offline and the online after it, unless the endpoint's leased batch may
hold that offline: then both are sent). The run exits non-zero when an expected event is
missing after --wait, a request fails its signature check, or (with --hooks-matching-nothing)
any event arrives. Compare --no-hooks with --hooks-matching-nothing A B A B on the server CPU
per connection (server_cpu_us_per_connection: the churn; ..._all: the churn and the 2 s after
it, where the server's hook writer finishes) and the churn rate.";

const FAILOVER_EXAMPLES: &str = "\
Examples:
  herald bench failover --spawn-cluster 3
  herald bench failover --spawn-cluster 3 --clients-per-node 2000 --received 2 --pending 3
  herald bench failover --spawn-cluster 3 --clients-per-node 2000 --reconnect-at-once
  herald bench failover --target http://127.0.0.1:7071,http://127.0.0.1:7072,http://127.0.0.1:7073 \\
    --server-pid P1,P2,P3 --api-key KEY --token-secret SECRET --kill 3

Sequence: every client subscribes (over the WebSocket, to --channels channels of its own, on its
node); --received messages are published to every channel and every client receives them; the
--kill node (default: the last) is killed with SIGKILL; --pending messages are published to every
channel through the surviving nodes; then the killed node's clients reconnect to the other nodes,
round-robin (the next one after a refusal, with the SDK's backoff), and resubscribe from the last
message they received (`since` its epoch and seq), as Herald's SDKs do. With --reconnect-at-once
they reconnect as soon as they see the loss, racing the pending publishes.

Reported: the time from the kill to the pending messages stored, to every killed client resumed
(each subscription answered) and to every client caught up (every message of every channel
received); messages lost (the first few named as channel#seq), duplicates, deliveries out of order,
resumes answered recovered: false, clients with messages pending at resume; the surviving nodes',
PostgreSQL's and Redis's CPU from the kill and from the reconnects to all caught up. The run fails
(non-zero exit, after the report) when a message is lost, duplicated or out of order, a resume is
not exact, or not every client caught up within --resume-timeout. PostgreSQL's and Redis's CPU are
reported only for --spawn-cluster; a --target node is killed by its --server-pid (the bench never
restarts it). The clients spread over worker processes of at most --per-worker connections each,
every worker on one node; after the failover each surviving node holds its own clients and its share
of the killed node's (9,000 at 6,000 per node on three nodes), which must stay under the 20,000
files one process may hold (about 13,000 clients per node on three nodes).";

/// Flags of `herald bench`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct BenchArgs {
    /// The scenario to run.
    #[command(subcommand)]
    pub scenario: Scenario,
}

/// The scenarios.
#[derive(Debug, clap::Subcommand)]
pub enum Scenario {
    /// Raw floors of this machine: loopback small-write rate, connect+accept rate, fsync rate.
    #[command(
        after_help = "Examples:\n  herald bench baseline\n  herald bench baseline --out results/baseline"
    )]
    Baseline(BaselineArgs),
    /// Deacon's Simultaneous Subscribers Test: subscribers of one channel added in steps.
    #[command(
        after_help = "Examples:\n  herald bench subscribers --spawn --step 2000 --max-subscribers 20000\n  herald bench subscribers --spawn --transport sse --step 1000 --max-subscribers 10000 --out results/sse"
    )]
    Subscribers(StepArgs),
    /// Deacon's Channel Count Test: each new subscriber on its own channel.
    #[command(
        after_help = "Examples:\n  herald bench channels --spawn --step 1000 --max-subscribers 10000"
    )]
    Channels(StepArgs),
    /// Every subscriber publishes once to a shared channel at the same moment (N x N).
    #[command(after_help = "Examples:\n  herald bench all-to-all --spawn --subscribers 1000")]
    AllToAll(AllToAllArgs),
    /// The iPush benchmark: U users each subscribe to S channels at once.
    #[command(
        after_help = "Examples:\n  herald bench subscribe-storm --spawn --users 100 --subjects 1000\n  herald bench subscribe-storm --spawn --users 1000 --subjects 1000 --prepublish"
    )]
    SubscribeStorm(StormArgs),
    /// Throughput: P publishers, M messages, N subscribers of one channel.
    #[command(
        after_help = "Examples:\n  herald bench fanout --spawn --publishers 16 --messages 20000 --subscribers 1000\n  herald bench fanout --spawn --publishers 4 --messages 10000 --rate 500 --subscribers 1000"
    )]
    Fanout(FanoutArgs),
    /// Idle footprint: N connections with K subscriptions each.
    #[command(
        after_help = "Examples:\n  herald bench connections --spawn --connections 10000\n  herald bench connections --spawn --connections 2000 --channels 10 --transport sse"
    )]
    Connections(ConnectionsArgs),
    /// Urban Airship's broadcast: register N devices through the batch API, then push to all.
    #[command(
        after_help = "Examples:\n  herald bench broadcast --spawn --devices 1000000 --messages 20\n  herald bench broadcast --spawn --devices 100000 --batch 500 --concurrency 8"
    )]
    Broadcast(BroadcastArgs),
    /// The `auto` state machine's cost: N connected `apns` devices ack an `auto` push in time
    /// (no provider push), against the same push with `"delivery":"live"`.
    #[command(
        after_help = "Examples:\n  herald bench auto --spawn --devices 10000\n  herald bench auto --spawn --devices 1000 --ack-window 10"
    )]
    Auto(AutoArgs),
    /// N offline devices with P pending messages each reconnect at once and catch up.
    #[command(
        after_help = "Examples:\n  herald bench reconnect-storm --spawn --devices 10000 --pending 100\n  herald bench reconnect-storm --spawn --devices 2000 --pending 50 --direct 10 --transport sse"
    )]
    ReconnectStorm(ReconnectArgs),
    /// A steady load for a bounded time (at most 24h): publishes, subscribers that reconnect,
    /// device pushes; the server's memory, open files, latency and errors every interval.
    #[command(
        after_help = "Examples:\n  herald bench soak --spawn --duration 10m --out soak-out\n  herald bench soak --spawn --duration 2h --interval 5m --rate 200 --subscribers 500"
    )]
    Soak(SoakArgs),
    /// Webhooks under connection churn: N clients (a token each) connect, subscribe to a
    /// channel of their own and disconnect, R rounds, with an endpoint for every event type on a
    /// receiver in the bench that verifies every signature; reports events received, distinct,
    /// duplicates, missing (any missing fails the run), HTTP requests, events per request,
    /// server CPU per event and per connection, and the churn rate.
    #[command(after_help = HOOKS_EXAMPLES)]
    Hooks(HooksArgs),
    /// Failover of a cluster node: N clients per node (WebSocket, channels of their own, with
    /// messages received and pending), one node killed with SIGKILL, its clients resuming on
    /// the others; reports the time to all resumed and caught up, messages lost (must be 0),
    /// duplicates, out-of-order deliveries, and the surviving nodes', PostgreSQL's and Redis's
    /// CPU.
    #[command(after_help = FAILOVER_EXAMPLES)]
    Failover(FailoverArgs),
    /// Pushy's benchmark: Herald's APNs client against a raw h2 client, to the mock APNs.
    #[command(
        after_help = "Examples:\n  herald bench apns --threads 1,2 --connections 1,2,4\n  herald bench apns --threads 2 --connections 4 --notifications 500000 --out results/apns"
    )]
    Apns(scenario::providers::ProviderArgs),
    /// Herald's FCM client against a raw h2 client, to the mock FCM.
    #[command(after_help = "Examples:\n  herald bench fcm --threads 1,2 --connections 1,2,4")]
    Fcm(scenario::providers::ProviderArgs),
    /// Herald's Web Push client (encrypting each message) against raw h2 posts, to the mock.
    #[command(
        after_help = "Examples:\n  herald bench webpush --threads 2 --connections 1,2 --notifications 20000"
    )]
    Webpush(scenario::providers::ProviderArgs),
    /// Internal: a load-generating worker process driven over stdin/stdout.
    #[command(hide = true)]
    Worker,
}

/// The command line as typed, with secrets redacted (for summary.json).
fn command_line() -> String {
    let mut out = Vec::new();
    let mut redact_next = false;
    for (i, a) in std::env::args().enumerate() {
        if i == 0 {
            let name = std::path::Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or(a);
            out.push(name);
            continue;
        }
        if redact_next {
            out.push("REDACTED".into());
            redact_next = false;
            continue;
        }
        let secret = ["--api-key", "--token-secret", "--token"];
        if secret.contains(&a.as_str()) {
            redact_next = true;
        } else if let Some((k, _)) = a.split_once('=') {
            if secret.contains(&k) {
                out.push(format!("{k}=REDACTED"));
                continue;
            }
        }
        out.push(a);
    }
    out.join(" ")
}

/// Runs `herald bench apns|fcm|webpush`, giving the report and its `--out` folder.
async fn providers(
    a: scenario::providers::ProviderArgs,
    provider: scenario::providers::Provider,
) -> anyhow::Result<(report::Report, Option<PathBuf>)> {
    let out = a.out.clone();
    Ok((scenario::providers::run(a, provider).await?, out))
}

/// The program the bench runs in, which decides how it starts its own worker processes and
/// which server binary `--spawn` starts when `--server-bin` is not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// The `herald` binary's `bench` subcommand: workers are `<exe> bench worker`, and the
    /// server spawned is this same executable, whatever its file is called.
    Herald,
    /// The `herald-bench` binary: workers are `<exe> worker`; the server is found beside it or
    /// in the workspace.
    Standalone,
}

static HOST: OnceLock<Host> = OnceLock::new();

/// The program the bench runs in (set by [`run`]; [`Host::Standalone`] before that).
pub fn host() -> Host {
    HOST.get().copied().unwrap_or(Host::Standalone)
}

/// Runs `herald bench <scenario>` inside `host`. SIGINT or SIGTERM ends the run early: the
/// scenario is dropped, which stops every server, database and worker it started, by pid.
pub async fn run(args: BenchArgs, host: Host) -> anyhow::Result<()> {
    let _ = HOST.set(host);
    if let Scenario::Worker = args.scenario {
        return worker::main().await;
    }
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let (report, out) = tokio::select! {
        done = run_scenario(args.scenario) => done?,
        _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted (SIGINT); stopped what the run started"),
        _ = terminate.recv() => anyhow::bail!("terminated (SIGTERM); stopped what the run started"),
    };
    report.print();
    if let Some(dir) = out {
        report.write(&dir, &command_line())?;
        let svg = if report.chart.is_some() {
            format!(" and {}/{}.svg", dir.display(), report.scenario)
        } else {
            String::new()
        };
        println!(
            "wrote {0}/{1}.csv, {0}/summary.json{svg}",
            dir.display(),
            report.scenario
        );
    }
    if let Some(why) = report.failure {
        anyhow::bail!("{} failed its check: {why}", report.scenario);
    }
    Ok(())
}

/// Refuses a peer or a client protocol for a scenario that has no counterpart there:
/// `--peer nats` runs fanout, subscribe-storm and connections; MQTT clients (`--transport mqtt`,
/// `--peer mosquitto`) run fanout, subscribers, subscribe-storm and connections; Pusher clients (`--transport pusher`, `--peer
/// sockudo`) run fanout, subscribers, subscribe-storm and connections.
fn check_peer(scenario: &Scenario) -> anyhow::Result<()> {
    let (name, common) = match scenario {
        Scenario::Subscribers(a) => ("subscribers", &a.common),
        Scenario::Channels(a) => ("channels", &a.common),
        Scenario::AllToAll(a) => ("all-to-all", &a.common),
        Scenario::SubscribeStorm(a) => ("subscribe-storm", &a.common),
        Scenario::Fanout(a) => ("fanout", &a.common),
        Scenario::Connections(a) => ("connections", &a.common),
        Scenario::Broadcast(a) => ("broadcast", &a.common),
        Scenario::Auto(a) => ("auto", &a.common),
        Scenario::ReconnectStorm(a) => ("reconnect-storm", &a.common),
        Scenario::Soak(a) => ("soak", &a.common),
        Scenario::Hooks(a) => ("hooks", &a.common),
        Scenario::Failover(a) => ("failover", &a.common),
        _ => return Ok(()),
    };
    if common.is_nats() && !["fanout", "subscribe-storm", "connections"].contains(&name) {
        anyhow::bail!(
            "{name} has no NATS counterpart: --peer nats runs fanout, subscribe-storm and \
             connections"
        );
    }
    let mqtt_runs = ["fanout", "subscribers", "subscribe-storm", "connections"];
    if common.is_mosquitto() && !mqtt_runs.contains(&name) {
        anyhow::bail!(
            "{name} has no Mosquitto counterpart: --peer mosquitto runs fanout, subscribers, \
             subscribe-storm and connections"
        );
    }
    let pusher_runs = ["fanout", "connections", "subscribers", "subscribe-storm"];
    if common.is_sockudo() && !pusher_runs.contains(&name) {
        anyhow::bail!(
            "{name} has no Sockudo counterpart: --peer sockudo runs fanout, subscribers, \
             subscribe-storm and connections"
        );
    }
    let transport = common.transport;
    if transport == proto::Transport::Mqtt && !mqtt_runs.contains(&name) {
        anyhow::bail!(
            "{name} does not run over --transport mqtt: MQTT clients run fanout, subscribers, \
             subscribe-storm and connections"
        );
    }
    if common.mqtt_session_expiry.is_some() && !common.is_mqtt() {
        anyhow::bail!(
            "--mqtt-session-expiry is for MQTT clients (--transport mqtt, --peer mosquitto)"
        );
    }
    if transport == proto::Transport::Pusher && !pusher_runs.contains(&name) {
        anyhow::bail!(
            "{name} does not run over --transport pusher: Pusher clients run fanout, \
             subscribers, subscribe-storm and connections"
        );
    }
    Ok(())
}

/// Runs one scenario, giving its report and its `--out` folder.
async fn run_scenario(scenario: Scenario) -> anyhow::Result<(report::Report, Option<PathBuf>)> {
    check_peer(&scenario)?;
    Ok(match scenario {
        Scenario::Worker => anyhow::bail!("the worker is not a scenario"),
        Scenario::Baseline(a) => {
            let out = a.out.clone();
            (baseline::run(a).await?, out)
        }
        Scenario::Subscribers(a) => {
            let out = a.common.out.clone();
            (scenario::steps::run(a, false).await?, out)
        }
        Scenario::Channels(a) => {
            let out = a.common.out.clone();
            (scenario::steps::run(a, true).await?, out)
        }
        Scenario::AllToAll(a) => {
            let out = a.common.out.clone();
            (scenario::all_to_all::run(a).await?, out)
        }
        Scenario::SubscribeStorm(a) => {
            let out = a.common.out.clone();
            (scenario::storm::run(a).await?, out)
        }
        Scenario::Fanout(a) => {
            let out = a.common.out.clone();
            (scenario::fanout::run(a).await?, out)
        }
        Scenario::Connections(a) => {
            let out = a.common.out.clone();
            (scenario::connections::run(a).await?, out)
        }
        Scenario::Broadcast(a) => {
            let out = a.common.out.clone();
            (scenario::broadcast::run(a).await?, out)
        }
        Scenario::Auto(a) => {
            let out = a.common.out.clone();
            (scenario::auto::run(a).await?, out)
        }
        Scenario::ReconnectStorm(a) => {
            let out = a.common.out.clone();
            (scenario::reconnect::run(a).await?, out)
        }
        Scenario::Soak(a) => {
            let out = a.common.out.clone();
            (scenario::soak::run(a).await?, out)
        }
        Scenario::Hooks(a) => {
            let out = a.common.out.clone();
            (scenario::hooks::run(a).await?, out)
        }
        Scenario::Failover(a) => {
            let out = a.common.out.clone();
            (scenario::failover::run(a).await?, out)
        }
        Scenario::Apns(a) => providers(a, scenario::providers::Provider::Apns).await?,
        Scenario::Fcm(a) => providers(a, scenario::providers::Provider::Fcm).await?,
        Scenario::Webpush(a) => providers(a, scenario::providers::Provider::WebPush).await?,
    })
}
