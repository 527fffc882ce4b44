//! The scenarios, and what they share: the run context ([`Ctx`]: the server under test, the
//! floors, the time limit, progress display) and the publishers.

pub mod all_to_all;
pub mod auto;
pub mod broadcast;
pub mod connections;
pub mod devices;
pub mod failover;
pub mod fanout;
pub mod hooks;
pub mod mock_apns;
pub mod provider_api;
pub mod provider_broadcast;
pub mod providers;
pub mod publisher;
pub mod reconnect;
pub mod soak;
pub mod sqlite_floor;
pub mod steps;
pub mod storm;

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::args::Common;
use crate::baseline::{self, Floors};
use crate::pool::{self, Pool};
use crate::proto::WorkerConfig;
use crate::report::Report;
use crate::server::{CpuMark, ProcStats, Target};

/// Worker processes per core that [`Ctx::reader_pool`] starts at least: with two, the clients
/// of an unpaced fan-out read as fast as a two-core machine's server writes (`herald bench
/// fanout --spawn --publishers 4 --messages 1000 --subscribers 10000`: p99 220-237 ms with 4
/// workers, 233-247 ms with 8, 455-460 ms with 1; docs/benchmarks.md, "Session 15", item 3).
pub const READERS_PER_CORE: u64 = 2;

/// How many workers hold `connections` when `--workers` is not given: enough at `per_worker`
/// each, at least `min_workers` but never more than one per connection; with several nodes a
/// multiple of them (each worker connects to one node), or one per connection when there are
/// fewer connections than nodes.
fn default_workers(connections: u64, per_worker: u64, nodes: u64, min_workers: u64) -> usize {
    let enough = connections
        .div_ceil(per_worker.max(1))
        .max(min_workers.min(connections))
        .max(1);
    if connections >= nodes {
        enough.max(nodes).next_multiple_of(nodes) as usize
    } else {
        enough.max(connections) as usize
    }
}

/// What every scenario works with.
pub struct Ctx {
    /// The flags.
    pub common: Common,
    /// The server under test.
    pub target: Target,
    /// Floors measured at the start.
    pub baseline: Option<Floors>,
    /// When the scenario started (after the baseline).
    pub started: Instant,
    /// When it must stop.
    pub deadline: Instant,
    /// A random tag in channel names, so runs against one server do not mix.
    pub run: String,
    server_cpu_start: Option<f64>,
}

impl Ctx {
    /// Opens the target (starting a server for `--spawn`, with `env` set) and measures the
    /// floors unless `--no-baseline`.
    pub async fn open(common: &Common, env: &[(&str, String)]) -> anyhow::Result<Ctx> {
        let mut target = Target::open(common, env)?;
        let mut common = common.clone();
        if common.is_nats() {
            // The workers' subscribers speak NATS (Target::open checked --transport was left out).
            common.transport = crate::proto::Transport::Nats;
        }
        if common.is_mosquitto() {
            common.transport = crate::proto::Transport::Mqtt;
        }
        if common.is_sockudo() {
            // Sockudo speaks the Pusher protocol (Target::open checked --transport).
            common.transport = crate::proto::Transport::Pusher;
        }
        if common.transport == crate::proto::Transport::Pusher && target.pusher_key.is_none() {
            let app = create_pusher_credentials(&target).await?;
            target.pusher_key = Some(app.key.clone());
            target.pusher_app = Some(app);
        }
        if common.transport == crate::proto::Transport::Mqtt
            && target.nodes.iter().any(|n| n.mqtt.is_none())
        {
            anyhow::bail!(
                "--transport mqtt needs the server's MQTT listener: --mqtt-target ADDR for a \
                 --target server (a --spawn server gets one)"
            );
        }
        let baseline = if common.no_baseline {
            None
        } else {
            status("measuring the baseline floors");
            let dir = target
                .data_dir
                .clone()
                .filter(|d| d.is_dir())
                .unwrap_or_else(std::env::temp_dir);
            let mut floors = baseline::measure_async(0.3, &dir).await?;
            floors.write_series.clear();
            Some(floors)
        };
        let run: String = (0..6)
            .map(|_| char::from(b'a' + rand::random::<u8>() % 26))
            .collect();
        let started = Instant::now();
        Ok(Ctx {
            deadline: started + Duration::from_secs(common.time_limit),
            common,
            server_cpu_start: target.probe().map(|p| p.cpu_seconds),
            target,
            baseline,
            started,
            run,
        })
    }

    /// Starts enough workers for `connections` connections. With several nodes, worker `i`
    /// connects to node `i % nodes`, and (unless `--workers` says how many) the workers are a
    /// multiple of the nodes, or one per connection when there are fewer connections than
    /// nodes, so the connections spread evenly over the nodes.
    pub async fn pool(&self, connections: u64) -> anyhow::Result<Pool> {
        self.pool_of_at_least(connections, 1).await
    }

    /// Like [`pool`](Self::pool), for a scenario whose clients must read as fast as the machine
    /// can deliver (`fanout` without `--rate`): unless `--workers` says otherwise, at least
    /// [`READERS_PER_CORE`] workers per core of this machine. Each worker reads its sockets on
    /// one thread, and the kernel shares the cores between threads, not processes: one worker
    /// reading 10,000 sockets against the server's busier threads gets about 0.6 of a core and
    /// reads late, so the latency it reports includes its own backlog (data the server had
    /// written long before, waiting unread in its sockets). A real client reads on its own
    /// device.
    pub async fn reader_pool(&self, connections: u64) -> anyhow::Result<Pool> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        self.pool_of_at_least(connections, READERS_PER_CORE * cores)
            .await
    }

    /// Starts `--workers` workers, or enough for `connections` and at least `min_workers`
    /// (never more than one per connection).
    async fn pool_of_at_least(&self, connections: u64, min_workers: u64) -> anyhow::Result<Pool> {
        let nodes = self.target.nodes.len().max(1) as u64;
        let n = self.common.workers.unwrap_or_else(|| {
            default_workers(connections, self.common.per_worker, nodes, min_workers)
        });
        let n = n.max(1);
        let token = self.target.client_token();
        let t = &self.target;
        Pool::start(n, |i| WorkerConfig {
            index: i,
            transport: self.common.transport,
            addr: t.node(i).addr,
            host: t.node(i).host.clone(),
            token: token.clone(),
            api_key: t.api_key.clone(),
            token_secret: t.token_secret.clone(),
            source_ip: pool::source_ip(i, t.node(i).addr.ip()),
            meteor_addr: t.meteor,
            meteor_mode: self.common.meteor_mode.clone(),
            rcvbuf: self.common.rcvbuf,
            nodes: t.nodes.iter().map(|n| n.addr).collect(),
            mqtt: self.mqtt_config(i),
            pusher_key: t.pusher_key.clone(),
        })
        .await
    }

    /// Where and how MQTT connections to node `i % nodes` connect, when the clients speak
    /// MQTT: Herald's listener with the run's client token as the password (the user name left
    /// empty: the app the token belongs to), or Mosquitto, anonymously.
    pub fn mqtt_config(&self, i: usize) -> Option<crate::mqtt::MqttConfig> {
        if self.common.transport != crate::proto::Transport::Mqtt {
            return None;
        }
        let node = self.target.node(i);
        let herald = !self.common.is_mosquitto();
        Some(crate::mqtt::MqttConfig {
            addr: node.mqtt?,
            version: self.common.mqtt_version,
            qos: self.common.mqtt_qos,
            username: herald.then(String::new),
            password: if herald {
                self.target.client_token()
            } else {
                None
            },
            session_expiry: self.common.mqtt_session_expiry,
        })
    }

    /// The name of this run's channel (or channel prefix) `rest`: `bench/{run}/{rest}`, or for
    /// Pusher clients, which cannot name a channel with `/`, `bench-{run}-{rest}` with every
    /// `/` written `-`.
    pub fn channel_name(&self, rest: &str) -> String {
        let name = format!("bench/{}/{rest}", self.run);
        if self.common.transport == crate::proto::Transport::Pusher {
            name.replace('/', "-")
        } else {
            name
        }
    }

    /// A typed client of the server's publisher API with `key`, for the control plane (calls
    /// that are not timed as load: receipts, setup).
    pub fn publisher(&self, key: &str) -> herald_client::api::Publisher {
        herald_client::api::Publisher::new(&self.target.url, Some(key))
    }

    /// A keep-alive HTTP client for the server's API (connects on first use), for requests
    /// timed as load.
    pub fn http(&self) -> crate::client::HttpClient {
        crate::client::HttpClient::new(self.target.addr, &self.target.host, None)
    }

    /// Time left before the limit.
    pub fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// CPU counters of the server (every node), this process and the workers, and of each
    /// node, PostgreSQL and Redis on their own for a cluster.
    pub fn mark(&self, pool: &Pool) -> CpuMark {
        CpuMark::of(&self.target.node_pids(), &pool.pids(), &self.target.parts())
    }

    /// A keep-alive HTTP client for the server's API on node `i % nodes`, for requests timed
    /// as load spread over a cluster's nodes.
    pub fn http_to(&self, i: usize) -> crate::client::HttpClient {
        let node = self.target.node(i);
        crate::client::HttpClient::new(node.addr, &node.host, None)
    }

    /// Adds a cluster's per-process CPU between `before` and `after` to `r`, per `unit` of
    /// work (`units` of them); nothing for a single server.
    pub fn report_parts(
        &self,
        r: &mut Report,
        before: &CpuMark,
        after: &CpuMark,
        unit: &str,
        units: u64,
    ) {
        crate::cluster::report_parts(r, &self.target, before, after, unit, units);
    }

    /// CPU counters of the server and this process (no workers).
    pub fn mark_server(&self) -> CpuMark {
        CpuMark::of(&self.target.node_pids(), &[], &[])
    }

    /// The server's resource use now.
    pub fn probe(&self) -> Option<ProcStats> {
        self.target.probe()
    }

    /// Fills in what every report carries: transport, target, floors, server totals, time.
    pub fn finish(&self, r: &mut Report) {
        if let Some(cfg) = self.mqtt_config(0) {
            r.lines.push(mqtt_line(&cfg));
            r.detail("mqtt", mqtt_details(&cfg));
        }
        r.transport = Some(self.common.transport.as_str());
        r.target = Some(self.target.urls());
        r.baseline = self.baseline.clone();
        if let Some(p) = self.probe() {
            r.headline.server_cpu_seconds = self
                .server_cpu_start
                .map(|s| crate::stats::round3(p.cpu_seconds - s));
            r.headline.server_peak_rss_bytes = Some(p.peak_rss_bytes);
        }
        r.duration_s = self.started.elapsed().as_secs_f64();
    }
}

/// How the MQTT subscribers of a run connected, in a report line: the version, the QoS of their
/// subscriptions (at 1 every delivery counted was acknowledged with a `PUBACK` as it was read),
/// and their sessions.
fn mqtt_line(cfg: &crate::mqtt::MqttConfig) -> String {
    let qos = if cfg.qos == 1 {
        "subscriptions at QoS 1 (every delivery acknowledged with a PUBACK as it is read)"
    } else {
        "subscriptions at QoS 0"
    };
    let session = match cfg.session_expiry {
        Some(s) if cfg.version == crate::mqtt::Version::V5 => {
            format!("persistent sessions (Clean Start 0, Session Expiry Interval {s} s)")
        }
        Some(_) => "persistent sessions (Clean Session 0)".to_string(),
        None => "clean sessions".to_string(),
    };
    format!(
        "MQTT {} subscribers: {qos}, {session}",
        cfg.version.as_str()
    )
}

/// The report's `details.mqtt`: version, QoS and session expiry of the subscribers (no address
/// or credentials).
fn mqtt_details(cfg: &crate::mqtt::MqttConfig) -> serde_json::Value {
    serde_json::json!({
        "version": cfg.version.as_str(),
        "qos": cfg.qos,
        "session_expiry": cfg.session_expiry,
    })
}

/// Gives the `default` app Pusher credentials through `POST /v1/apps/default/pusher` with the
/// API key (for `--transport pusher` without `--pusher-key`); returns them.
async fn create_pusher_credentials(
    target: &Target,
) -> anyhow::Result<crate::pusher_api::PusherApp> {
    let api_key = target.require_api_key()?;
    let mut http = crate::client::HttpClient::new(target.addr, &target.host, None);
    let (status, body) = http
        .post("/v1/apps/default/pusher", &api_key, b"{}")
        .await
        .map_err(|e| anyhow::anyhow!("creating the app's Pusher credentials: {e}"))?;
    let text = String::from_utf8_lossy(&body);
    match status {
        201 => {}
        409 => anyhow::bail!(
            "the default app has Pusher credentials already: give its key with --pusher-key \
             ({text})"
        ),
        _ => anyhow::bail!("creating the app's Pusher credentials: HTTP {status} {text}"),
    }
    serde_json::from_slice(&body).map_err(|e| {
        anyhow::anyhow!("the Pusher credentials answer lacks app_id, key or secret ({e}): {text}")
    })
}

/// A line of progress on stderr when stdout is not a terminal (terminals get bars instead).
pub fn status(msg: &str) {
    if !std::io::stdout().is_terminal() {
        eprintln!("herald bench: {msg}");
    }
}

/// A progress bar on a terminal; nothing otherwise.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar counting to `len`.
    pub fn new(len: u64, msg: &str) -> Progress {
        status(msg);
        if !std::io::stdout().is_terminal() {
            return Progress(None);
        }
        let bar = ProgressBar::new(len);
        bar.set_style(
            ProgressStyle::with_template("{msg:32} [{bar:40}] {pos}/{len} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_message(msg.to_string());
        Progress(Some(bar))
    }

    /// Sets the position.
    pub fn set(&self, pos: u64) {
        if let Some(b) = &self.0 {
            b.set_position(pos);
        }
    }

    /// Moves the bar to `done` every 200 ms until it reaches `len` (or the task is aborted).
    pub fn follow(
        &self,
        done: std::sync::Arc<std::sync::atomic::AtomicU64>,
        len: u64,
    ) -> tokio::task::JoinHandle<()> {
        let bar = Progress(self.0.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let n = done.load(std::sync::atomic::Ordering::Relaxed);
                bar.set(n);
                if n >= len {
                    return;
                }
            }
        })
    }

    /// Removes the bar.
    pub fn done(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

/// Opens `count` subscribers of one shared `channel` across the pool, with a progress bar
/// labelled `label`; fails if none could connect. Returns (opened, failed, errors).
pub async fn open_shared(
    pool: &mut Pool,
    count: u64,
    channel: &str,
    label: &str,
) -> anyhow::Result<(u64, u64, Vec<String>)> {
    let bar = Progress::new(count, label);
    let plan = crate::proto::Plan::Shared {
        channel: channel.to_owned(),
    };
    let (n, failed, errors) = pool.open(count, plan, |d, _| bar.set(d)).await?;
    bar.done();
    if n == 0 {
        anyhow::bail!("no subscriber could connect: {}", errors.join("; "));
    }
    Ok((n, failed, errors))
}

/// Why opening connections failed, in a reader's words: the server's or our file limit, or
/// the errors themselves.
pub fn open_failure(ctx: &Ctx, errors: &[String]) -> String {
    let text = errors.join("; ");
    let fds = ctx.target.pid.and_then(crate::server::open_files);
    if text.contains("Too many open files") || text.contains("os error 24") {
        return format!("fd limit: a process ran out of open files ({text})");
    }
    if let Some(n) = fds {
        if n + 50 >= 20_000 {
            return format!("fd limit: the server holds {n} open files (limit 20,000): {text}");
        }
    }
    format!("connect failures: {text}")
}

/// Records the CPU split of a run over worker connections and what bounded it: connections
/// that could not open (`failed_conns`, with `errors`), else the CPU, else `otherwise`.
pub fn bound(
    ctx: &Ctx,
    r: &mut Report,
    cpu: crate::server::CpuShare,
    failed_conns: u64,
    errors: &[String],
    otherwise: &str,
) {
    r.detail("failed_connections", failed_conns);
    r.cpu = Some(cpu);
    r.limited_by = if failed_conns > 0 {
        open_failure(ctx, errors)
    } else {
        cpu_bound(&cpu, otherwise)
    };
}

/// Classifies a throughput run's bound from CPU use.
pub fn cpu_bound(cpu: &crate::server::CpuShare, otherwise: &str) -> String {
    if cpu.machine_busy_pct >= 85.0 {
        format!(
            "CPU: the machine was {:.0}% busy ({} cores: server {} cores, load generator {:.2} cores)",
            cpu.machine_busy_pct,
            cpu.cores,
            cpu.server_cores
                .map_or("?".to_string(), |s| format!("{s:.2}")),
            cpu.loadgen_cores
        )
    } else {
        otherwise.to_string()
    }
}

/// Publishes one stamped message to each channel in `names` through `POST /v1/batch`, 1,000
/// messages per request, spread over `clients` working concurrently. Returns how many messages
/// the server refused and a sample error.
pub async fn publish_to_all(
    clients: &mut [crate::client::HttpClient],
    names: &[String],
    key: &str,
) -> (u64, Option<String>) {
    use crate::wire::{self, now_ns};
    const BATCH: usize = 1000;
    let lanes = clients.len().max(1);
    let batches: Vec<&[String]> = names.chunks(BATCH).collect();
    let mut futures = Vec::new();
    for (lane, client) in clients.iter_mut().enumerate() {
        let mine: Vec<&[String]> = batches
            .iter()
            .enumerate()
            .filter(|(i, _)| i % lanes == lane)
            .map(|(_, b)| *b)
            .collect();
        futures.push(async move {
            let mut refused = 0u64;
            let mut sample = None;
            for batch in mine {
                let stamp = wire::stamp(now_ns());
                let items: Vec<String> = batch
                    .iter()
                    .map(|c| format!("{{\"channel\":\"{c}\",\"data\":{stamp}}}"))
                    .collect();
                let body = format!("{{\"messages\":[{}]}}", items.join(","));
                match client.post("/v1/batch", key, body.as_bytes()).await {
                    Ok((200, _)) => {}
                    Ok((status, b)) => {
                        refused += batch.len() as u64;
                        sample = Some(format!(
                            "batch publish: HTTP {status} {}",
                            String::from_utf8_lossy(&b[..b.len().min(200)])
                        ));
                    }
                    Err(e) => {
                        refused += batch.len() as u64;
                        sample = Some(e);
                    }
                }
            }
            (refused, sample)
        });
    }
    let mut refused = 0;
    let mut sample = None;
    for (r, s) in futures_util::future::join_all(futures).await {
        refused += r;
        sample = sample.or(s);
    }
    (refused, sample)
}

#[cfg(test)]
mod tests {
    use super::default_workers;

    #[test]
    fn workers_are_enough_for_the_connections() {
        assert_eq!(default_workers(10_000, 15_000, 1, 1), 1);
        assert_eq!(default_workers(19_500, 15_000, 1, 1), 2);
        assert_eq!(default_workers(45_001, 15_000, 1, 1), 4);
    }

    #[test]
    fn reader_pools_have_a_floor_but_never_more_workers_than_connections() {
        assert_eq!(default_workers(10_000, 15_000, 1, 4), 4);
        assert_eq!(default_workers(100_000, 15_000, 1, 4), 7);
        assert_eq!(default_workers(3, 15_000, 1, 4), 3);
        assert_eq!(default_workers(1, 15_000, 1, 4), 1);
    }

    #[test]
    fn workers_are_a_multiple_of_the_nodes() {
        assert_eq!(default_workers(10_000, 15_000, 3, 1), 3);
        assert_eq!(default_workers(10_000, 15_000, 3, 4), 6);
        assert_eq!(default_workers(2, 15_000, 3, 4), 2);
    }
}
