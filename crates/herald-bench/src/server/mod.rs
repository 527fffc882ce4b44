//! The server under test: one started by the bench (`--spawn`, so its CPU time and memory can be
//! read from /proc), a cluster of nodes it starts over PostgreSQL and Redis (`--spawn-cluster
//! N`), or servers already running (`--target URL[,URL...]`, with `--server-pid` for the same
//! figures); or, for `--peer nats`, a `nats-server` (`nats`), and for `--peer mosquitto`, a
//! `mosquitto` (`mosquitto`), and for `--peer sockudo`, a `sockudo` (`sockudo`). Also the /proc readers for the load generator's own processes and
//! the machine.

mod mosquitto;
mod nats;
mod procfs;
mod sockudo;
mod spawn;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, Command};

use anyhow::{anyhow, bail, Context};

use crate::args::Common;
use crate::cluster::Services;

/// The environment variables that turn off every rate limit a spawned server would apply
/// (docs/config.md, "Rate limits"), with the limit each names.
pub const RATE_LIMITS_OFF: [(&str, &str); 6] = [
    ("HERALD_LIMITS_PUBLISH", "publish"),
    ("HERALD_LIMITS_PUSH", "push"),
    ("HERALD_LIMITS_REGISTRATION", "registration"),
    ("HERALD_LIMITS_COMMAND", "command"),
    ("HERALD_LIMITS_CONNECTION", "connection"),
    ("HERALD_LIMITS_LOGIN", "login"),
];

pub use procfs::{machine_cpu, open_files, tree_cpu_seconds, CpuMark, CpuShare, Part, ProcStats};
pub use sockudo::{sockudo_binary, SOCKUDO_BIN_ENV};
pub use spawn::server_binary;

/// One server (node) the clients may connect to.
#[derive(Debug, Clone)]
pub struct Node {
    /// Address to connect to.
    pub addr: SocketAddr,
    /// `Host` header value.
    pub host: String,
    /// Base URL, for reports.
    pub url: String,
    /// Its process, when known.
    pub pid: Option<u32>,
    /// Its MQTT listener, when it has one (spawned with `--transport mqtt`, `--mqtt-target`,
    /// or Mosquitto's own address).
    pub mqtt: Option<SocketAddr>,
}

impl Node {
    /// This node with `--server-pid` applied: one pid names its process; several are refused
    /// (`scheme` names the kind of `--target` in the error).
    fn with_server_pid(mut self, c: &Common, scheme: &str) -> anyhow::Result<Node> {
        match c.server_pid.as_slice() {
            [] => {}
            [pid] => self.pid = Some(*pid),
            _ => bail!("--server-pid names several pids for one {scheme}:// --target"),
        }
        Ok(self)
    }
}

/// Where the server is and how to talk to it. `addr`, `host`, `url` and `pid` are the first
/// node's (the control plane talks to it); [`Target::nodes`] lists every node.
pub struct Target {
    /// Address to connect to.
    pub addr: SocketAddr,
    /// `Host` header value.
    pub host: String,
    /// Base URL, for reports.
    pub url: String,
    /// Publisher API key.
    pub api_key: Option<String>,
    /// Token secret, to mint client tokens.
    pub token_secret: Option<String>,
    /// A ready-made client token.
    pub token: Option<String>,
    /// The Meteor subscriber port (spawned with `--transport meteor`, or `--meteor-target`).
    pub meteor: Option<SocketAddr>,
    /// The app's Pusher key (`--pusher-key`; for a spawned server with `--transport pusher`,
    /// the credentials [`crate::scenario::Ctx::open`] creates).
    pub pusher_key: Option<String>,
    /// The app's Pusher credentials, when the secret is known (a spawned server's, or
    /// `--pusher-app-id`, `--pusher-key` and `--pusher-secret`): the Pusher clients' publishers
    /// then trigger through `POST /apps/{app_id}/events`.
    pub pusher_app: Option<crate::pusher_api::PusherApp>,
    /// Server process, when known.
    pub pid: Option<u32>,
    /// Data directory of a spawned server (its disk is where the fsync floor is measured).
    pub data_dir: Option<PathBuf>,
    /// Every node, the first one first (one entry for a single server).
    pub nodes: Vec<Node>,
    /// Spawned servers, stopped by pid when the target is dropped.
    children: Vec<Child>,
    /// PostgreSQL and Redis of a spawned cluster (stopped after the nodes).
    services: Option<Services>,
    /// The spawned nodes' `workers` (`--node-workers`), when given.
    node_workers: Option<u16>,
    _tmp: Option<tempfile::TempDir>,
}

impl Drop for Target {
    fn drop(&mut self) {
        for c in &mut self.children {
            spawn::stop(c);
        }
        // `services` is dropped after this: PostgreSQL and Redis stop once the nodes are gone.
    }
}

/// The secrets a spawned server or cluster runs with.
struct Secrets {
    api_key: String,
    token_secret: String,
}

/// Parses one `--target` URL into a node.
fn parse_node(url: &str, allow_remote: bool) -> anyhow::Result<Node> {
    let url = url.trim();
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("--target must be http:// URLs (got {url:?})"))?;
    let host = rest.split('/').next().unwrap_or(rest).to_string();
    let addr = host
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host:?}"))?
        .next()
        .ok_or_else(|| anyhow!("{host:?} resolves to no address"))?;
    if !addr.ip().is_loopback() && !allow_remote {
        bail!(
            "{url} is not a loopback address; the bench only loads this machine unless \
             --allow-remote is given"
        );
    }
    Ok(Node {
        addr,
        host,
        url: format!("http://{}", rest.trim_end_matches('/')),
        pid: None,
        mqtt: None,
    })
}

impl Target {
    /// A peer server of one process (NATS, Mosquitto): no Herald credentials, `child` and
    /// `tmp` kept while the run lasts when the bench spawned it.
    fn peer(node: Node, child: Option<Child>, tmp: Option<tempfile::TempDir>) -> Target {
        Target {
            addr: node.addr,
            host: node.host.clone(),
            url: node.url.clone(),
            api_key: None,
            token_secret: None,
            token: None,
            meteor: None,
            pusher_key: None,
            pusher_app: None,
            pid: node.pid,
            data_dir: None,
            nodes: vec![node],
            children: child.into_iter().collect(),
            services: None,
            node_workers: None,
            _tmp: tmp,
        }
    }

    /// Connects to `--target` or starts a server for `--spawn` (or a cluster for
    /// `--spawn-cluster N`), each spawned node with `extra_env` set.
    pub fn open(c: &Common, extra_env: &[(&str, String)]) -> anyhow::Result<Target> {
        let ways = [c.target.is_some(), c.spawn, c.spawn_cluster.is_some()];
        match ways.iter().filter(|w| **w).count() {
            0 => bail!(
                "say which server to measure: --spawn (start one here), --spawn-cluster N \
                 (N nodes over PostgreSQL and Redis) or --target http://HOST:PORT[,...]"
            ),
            1 => {}
            _ => bail!("give one of --target URL, --spawn or --spawn-cluster N"),
        }
        if c.is_nats() {
            return nats::open(c);
        }
        if c.is_mosquitto() {
            return mosquitto::open(c);
        }
        if c.is_sockudo() {
            return sockudo::open(c);
        }
        if let Some(urls) = &c.target {
            return Target::attach(c, urls);
        }
        let mut target = Target::empty(Secrets {
            api_key: spawn::random_key("hk_bench_"),
            token_secret: spawn::random_key("bench-secret-"),
        })?;
        target.pusher_key = c.pusher_key.clone();
        match c.spawn_cluster {
            Some(n) => target.spawn_cluster(c, n, extra_env)?,
            None => target.spawn_one(c, extra_env)?,
        }
        Ok(target)
    }

    fn attach(c: &Common, urls: &str) -> anyhow::Result<Target> {
        let mut nodes = urls
            .split(',')
            .filter(|u| !u.trim().is_empty())
            .map(|u| parse_node(u, c.allow_remote))
            .collect::<anyhow::Result<Vec<Node>>>()?;
        if nodes.is_empty() {
            bail!("--target names no URL");
        }
        if !c.server_pid.is_empty() {
            if c.server_pid.len() != nodes.len() {
                bail!(
                    "--server-pid names {} pids for {} --target URLs; give one per URL, in \
                     the same order",
                    c.server_pid.len(),
                    nodes.len()
                );
            }
            for (node, pid) in nodes.iter_mut().zip(&c.server_pid) {
                node.pid = Some(*pid);
            }
        }
        if !c.mqtt_target.is_empty() {
            if c.mqtt_target.len() != nodes.len() {
                bail!(
                    "--mqtt-target names {} addresses for {} --target URLs; give one per URL, \
                     in the same order",
                    c.mqtt_target.len(),
                    nodes.len()
                );
            }
            for (node, addr) in nodes.iter_mut().zip(&c.mqtt_target) {
                node.mqtt = Some(*addr);
            }
        }
        let first = nodes[0].clone();
        Ok(Target {
            addr: first.addr,
            host: first.host,
            url: first.url,
            api_key: c.api_key.clone(),
            token_secret: c.token_secret.clone(),
            token: c.token.clone(),
            meteor: c.meteor_target,
            pusher_key: c.pusher_key.clone(),
            pusher_app: sockudo::given_app(c),
            pid: first.pid,
            data_dir: None,
            nodes,
            children: Vec::new(),
            services: None,
            node_workers: None,
            _tmp: None,
        })
    }

    /// A target with secrets and a temporary folder but no server yet: what is started is
    /// pushed into it as it starts, so an error half way stops what already runs.
    fn empty(secrets: Secrets) -> anyhow::Result<Target> {
        let tmp = tempfile::Builder::new()
            .prefix("herald-bench-")
            .tempdir()
            .context("cannot create a data directory")?;
        Ok(Target {
            addr: "127.0.0.1:1".parse().expect("valid"),
            host: String::new(),
            url: String::new(),
            api_key: Some(secrets.api_key),
            token_secret: Some(secrets.token_secret),
            token: None,
            meteor: None,
            pusher_key: None,
            pusher_app: None,
            pid: None,
            data_dir: Some(tmp.path().join("data")),
            nodes: Vec::new(),
            children: Vec::new(),
            services: None,
            node_workers: None,
            _tmp: Some(tmp),
        })
    }

    /// `herald serve` on a free loopback port with this run's secrets and `dir` as its data,
    /// with every rate limit off ([`RATE_LIMITS_OFF`]).
    fn serve_command(
        &self,
        c: &Common,
        bin: &std::path::Path,
        dir: &std::path::Path,
        extra_env: &[(&str, String)],
    ) -> Command {
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data")
            .arg(dir)
            .arg("--api-key")
            .arg(self.api_key.as_deref().unwrap_or_default())
            .arg("--token-secret")
            .arg(self.token_secret.as_deref().unwrap_or_default())
            .arg("--allow-anonymous")
            .env_remove("HERALD_CONFIG")
            .env("HERALD_LOG", "warn");
        // The scenarios measure the server's own ceiling (the connect-rate scenario opens
        // thousands of connections a second from 127.0.0.x), so the server they spawn runs
        // with its rate limits off.
        for (name, _) in RATE_LIMITS_OFF {
            cmd.env(name, "off");
        }
        if let Some(sync) = &c.sync {
            cmd.arg("--sync").arg(sync);
        }
        if c.transport == crate::proto::Transport::Mqtt {
            cmd.arg("--mqtt").arg("127.0.0.1:0");
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Records a started node (the first one also as `addr`, `host`, `url`, `pid`).
    fn push_node(&mut self, started: spawn::Started) {
        let node = Node {
            addr: started.addr,
            host: started.addr.to_string(),
            url: format!("http://{}", started.addr),
            pid: Some(started.child.id()),
            mqtt: started.mqtt,
        };
        if self.nodes.is_empty() {
            self.addr = node.addr;
            self.host = node.host.clone();
            self.url = node.url.clone();
            self.pid = node.pid;
            self.meteor = started.meteor;
        }
        self.nodes.push(node);
        self.children.push(started.child);
    }

    fn spawn_one(&mut self, c: &Common, extra_env: &[(&str, String)]) -> anyhow::Result<()> {
        let bin = server_binary(c.server_bin.as_deref())?;
        let tmp = self
            ._tmp
            .as_ref()
            .expect("spawned targets have a folder")
            .path();
        let data = tmp.join("data");
        let mut cmd = self.serve_command(c, &bin, &data, extra_env);
        if c.transport == crate::proto::Transport::Meteor {
            let conf = tmp.join("meteord.conf");
            std::fs::write(&conf, spawn::DEACON_CONF).context("cannot write meteord.conf")?;
            cmd.arg("--meteor")
                .arg("127.0.0.1:0")
                .arg("--meteor-conf")
                .arg(&conf);
        }
        let started = spawn::start_node(cmd, &bin)?;
        self.push_node(started);
        Ok(())
    }

    /// Starts PostgreSQL and Redis, then `n` nodes over them one after the other (the first
    /// one migrates the database and creates the app of `--api-key`).
    fn spawn_cluster(
        &mut self,
        c: &Common,
        n: usize,
        extra_env: &[(&str, String)],
    ) -> anyhow::Result<()> {
        if n == 0 {
            bail!("--spawn-cluster needs at least 1 node");
        }
        if c.transport == crate::proto::Transport::Meteor {
            bail!("--spawn-cluster does not start Meteor ports; use --transport ws, sse or poll");
        }
        let bin = server_binary(c.server_bin.as_deref())?;
        crate::scenario::status(if c.cluster_fsync {
            "starting PostgreSQL (fsync on) and Redis for the cluster"
        } else {
            "starting PostgreSQL (fsync off) and Redis for the cluster"
        });
        let services = Services::start(c.cluster_fsync)?;
        self.node_workers = c.node_workers;
        if let Some(hint) = oversubscribed_hint(n, c.node_workers) {
            crate::scenario::status(&hint);
        }
        let (store, bus) = (services.store_url.clone(), services.bus_url.clone());
        self.services = Some(services);
        let credentials_key = spawn::random_hex_key();
        let tmp = self
            ._tmp
            .as_ref()
            .expect("spawned targets have a folder")
            .path()
            .to_owned();
        for i in 0..n {
            crate::scenario::status(&format!("starting cluster node {} of {n}", i + 1));
            let data = tmp.join(format!("node{}", i + 1));
            let mut cmd = self.serve_command(c, &bin, &data, extra_env);
            cmd.arg("--store")
                .arg(&store)
                .arg("--bus")
                .arg(&bus)
                .env("HERALD_CREDENTIALS_KEY", &credentials_key);
            if let Some(workers) = c.node_workers {
                cmd.env("HERALD_WORKERS", workers.to_string());
            }
            let started = spawn::start_node(cmd, &bin)
                .with_context(|| format!("cluster node {} of {n}", i + 1))?;
            self.push_node(started);
        }
        Ok(())
    }

    /// Whether the cluster's PostgreSQL syncs its commits to disk (`--cluster-fsync`); `None`
    /// when the bench did not start it.
    pub fn cluster_fsync(&self) -> Option<bool> {
        self.services.as_ref().map(|s| s.fsync)
    }

    /// The spawned nodes' `workers` (`--node-workers`); `None` when not given.
    pub fn node_workers(&self) -> Option<u16> {
        self.node_workers
    }

    /// Whether this is a cluster: several nodes, or nodes over PostgreSQL and Redis the bench
    /// started.
    pub fn is_cluster(&self) -> bool {
        self.nodes.len() > 1 || self.services.is_some()
    }

    /// Every node's URL, comma-separated (as `--target` takes them).
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.url.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The node the `i`th client (worker, publisher) connects to: round-robin.
    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i % self.nodes.len()]
    }

    /// Kills node `i` (from 0) with SIGKILL and waits until it is gone: a node the bench started
    /// is reaped, one of `--target` is signalled by its `--server-pid`. From then on the node
    /// has no pid, so CPU marks and [`parts`](Self::parts) leave it out. Returns its pid.
    pub fn kill_node(&mut self, i: usize) -> anyhow::Result<u32> {
        let node = self
            .nodes
            .get_mut(i)
            .ok_or_else(|| anyhow!("there is no node {}", i + 1))?;
        let pid = node.pid.ok_or_else(|| {
            anyhow!(
                "node {} ({}) has no known pid to kill: give --server-pid",
                i + 1,
                node.url
            )
        })?;
        node.pid = None;
        if i == 0 {
            self.pid = None;
        }
        if let Some(at) = self.children.iter().position(|c| c.id() == pid) {
            let mut child = self.children.remove(at);
            let killed = child.kill();
            let reaped = child.wait();
            killed.with_context(|| format!("cannot kill node {} (pid {pid})", i + 1))?;
            reaped.context("cannot reap the killed node")?;
            return Ok(pid);
        }
        let status = Command::new("kill")
            .arg("-KILL")
            .arg(pid.to_string())
            .status()
            .context("cannot run kill")?;
        if !status.success() {
            bail!("kill -KILL {pid} failed ({status})");
        }
        // Not our child: wait until /proc no longer shows it running (a zombie counts as gone).
        for _ in 0..200 {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
            let gone = state
                .as_deref()
                .and_then(|s| s.rsplit_once(") "))
                .is_none_or(|(_, rest)| rest.starts_with('Z'));
            if gone {
                return Ok(pid);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        bail!("node {} (pid {pid}) still runs 2 s after SIGKILL", i + 1)
    }

    /// The pids of the nodes that have one.
    pub fn node_pids(&self) -> Vec<u32> {
        self.nodes.iter().filter_map(|n| n.pid).collect()
    }

    /// The processes a cluster run reports one by one: each node, then PostgreSQL (the
    /// postmaster and its backends) and Redis when the bench started them. Empty for a single
    /// server, whose figures are the server's.
    pub fn parts(&self) -> Vec<Part> {
        if !self.is_cluster() {
            return Vec::new();
        }
        let mut parts: Vec<Part> = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                Some(Part {
                    name: format!("node {} ({})", i + 1, n.url),
                    pid: n.pid?,
                    tree: false,
                })
            })
            .collect();
        if let Some(s) = &self.services {
            parts.extend(s.parts());
        }
        parts
    }

    /// A client token allowed to subscribe and publish everywhere, if one can be had.
    pub fn client_token(&self) -> Option<String> {
        if let Some(t) = &self.token {
            return Some(t.clone());
        }
        let secret = self.token_secret.as_ref()?;
        Some(herald_proto::token::mint(
            secret.as_bytes(),
            &herald_proto::token::ClientClaims {
                sub: "herald-bench".into(),
                exp: None,
                channels: vec!["**".into()],
                publish: vec!["**".into()],
                device: None,
                ..Default::default()
            },
        ))
    }

    /// The API key, or an error saying how to give one.
    pub fn require_api_key(&self) -> anyhow::Result<String> {
        self.api_key.clone().ok_or_else(|| {
            anyhow!("publishing needs the server's API key: --api-key KEY or HERALD_API_KEY")
        })
    }

    /// The server's resource use now, when its pid is known: for several nodes, the sum of
    /// those whose pids are known (CPU, RSS and peak RSS each summed).
    pub fn probe(&self) -> Option<ProcStats> {
        if self.nodes.len() <= 1 {
            return self.pid.and_then(ProcStats::read);
        }
        let all: Vec<ProcStats> = self
            .node_pids()
            .into_iter()
            .filter_map(ProcStats::read)
            .collect();
        if all.is_empty() {
            return None;
        }
        Some(all.iter().fold(ProcStats::default(), |a, p| ProcStats {
            cpu_seconds: a.cpu_seconds + p.cpu_seconds,
            rss_bytes: a.rss_bytes + p.rss_bytes,
            peak_rss_bytes: a.peak_rss_bytes + p.peak_rss_bytes,
            anon_bytes: a.anon_bytes + p.anon_bytes,
        }))
    }
}

/// What to say when `nodes` spawned nodes, each running one worker per CPU in each of its two
/// runtimes (no `--node-workers`), share this machine's cores: nothing for one node or when
/// the workers were given.
fn oversubscribed_hint(nodes: usize, node_workers: Option<u16>) -> Option<String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    oversubscribed(nodes, cpus, node_workers)
}

fn oversubscribed(nodes: usize, cpus: usize, node_workers: Option<u16>) -> Option<String> {
    if nodes < 2 || node_workers.is_some() {
        return None;
    }
    let share = (cpus / nodes).max(1);
    Some(format!(
        "the {nodes} nodes each run {cpus} + {cpus} worker threads on these {cpus} cores; \
         --node-workers {share} gives each its share, as co-located nodes are run (docs/cluster.md)"
    ))
}

#[cfg(test)]
mod oversubscription_tests {
    #[test]
    fn co_located_nodes_are_told_their_share_of_the_cores() {
        assert_eq!(super::oversubscribed(1, 2, None), None);
        assert_eq!(super::oversubscribed(3, 2, Some(1)), None);
        let hint = super::oversubscribed(3, 2, None).expect("three nodes on two cores");
        assert!(hint.contains("--node-workers 1"), "{hint}");
        let hint = super::oversubscribed(3, 16, None).expect("three nodes on sixteen cores");
        assert!(hint.contains("--node-workers 5"), "{hint}");
    }
}
