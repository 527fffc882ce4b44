//! The server under test: one started by the bench (`--spawn`, so its CPU time and memory can be
//! read from /proc) or one already running (`--target URL`, with `--server-pid` for the same
//! figures). Also the /proc readers for the load generator's own processes and the machine.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use rand::Rng;

use crate::args::Common;

/// Where the server is and how to talk to it.
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
    /// Server process, when known.
    pub pid: Option<u32>,
    /// Data directory of a spawned server (its disk is where the fsync floor is measured).
    pub data_dir: Option<PathBuf>,
    child: Option<Child>,
    _tmp: Option<tempfile::TempDir>,
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(c.id().to_string())
                .status();
            for _ in 0..100 {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The Meteor configuration a spawned server gets for `--transport meteor`: Deacon's templates.
const DEACON_CONF: &str = include_str!("../../../docs/examples/meteord-deacon.conf");

fn random_key(prefix: &str) -> String {
    let mut rng = rand::thread_rng();
    let s: String = (0..32)
        .map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.gen_range(0..36)]))
        .collect();
    format!("{prefix}{s}")
}

/// Finds the `herald` binary: `--server-bin`, else this executable when it is `herald`, else
/// `herald` beside this executable, else `target/release/herald` of the workspace.
pub fn server_binary(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = flag {
        if p.is_file() {
            return Ok(p.to_path_buf());
        }
        bail!("--server-bin {} does not exist", p.display());
    }
    let exe = std::env::current_exe().context("cannot find the running executable")?;
    if exe.file_stem().and_then(|s| s.to_str()) == Some("herald") {
        return Ok(exe);
    }
    let mut candidates = Vec::new();
    if let Some(dir) = exe.parent() {
        candidates.push(dir.join("herald"));
        if dir.ends_with("deps") {
            if let Some(up) = dir.parent() {
                candidates.push(up.join("herald"));
            }
        }
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    candidates.push(workspace.join("target/release/herald"));
    for c in &candidates {
        if c.is_file() {
            return Ok(c.clone());
        }
    }
    bail!(
        "cannot find the herald server binary (looked at {}); build it with \
         `cargo build --release -p herald` or pass --server-bin PATH",
        candidates
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

impl Target {
    /// Connects to `--target` or starts a server for `--spawn`.
    pub fn open(c: &Common, extra_env: &[(&str, String)]) -> anyhow::Result<Target> {
        match (&c.target, c.spawn) {
            (Some(_), true) => bail!("give either --target URL or --spawn, not both"),
            (None, false) => bail!(
                "say which server to measure: --spawn (start one here) or --target http://HOST:PORT"
            ),
            (Some(url), false) => Target::attach(c, url),
            (None, true) => Target::spawn(c, extra_env),
        }
    }

    fn attach(c: &Common, url: &str) -> anyhow::Result<Target> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| anyhow!("--target must be an http:// URL (got {url:?})"))?;
        let host = rest.split('/').next().unwrap_or(rest).to_string();
        let addr = host
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {host:?}"))?
            .next()
            .ok_or_else(|| anyhow!("{host:?} resolves to no address"))?;
        if !addr.ip().is_loopback() && !c.allow_remote {
            bail!(
                "{url} is not a loopback address; the bench only loads this machine unless \
                 --allow-remote is given"
            );
        }
        Ok(Target {
            addr,
            host,
            url: format!("http://{}", rest.trim_end_matches('/')),
            api_key: c.api_key.clone(),
            token_secret: c.token_secret.clone(),
            token: c.token.clone(),
            meteor: c.meteor_target,
            pid: c.server_pid,
            data_dir: None,
            child: None,
            _tmp: None,
        })
    }

    fn spawn(c: &Common, extra_env: &[(&str, String)]) -> anyhow::Result<Target> {
        let bin = server_binary(c.server_bin.as_deref())?;
        let tmp = tempfile::Builder::new()
            .prefix("herald-bench-")
            .tempdir()
            .context("cannot create a data directory")?;
        let data = tmp.path().join("data");
        let api_key = random_key("hk_bench_");
        let secret = random_key("bench-secret-");
        let mut cmd = Command::new(&bin);
        cmd.arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data")
            .arg(&data)
            .arg("--api-key")
            .arg(&api_key)
            .arg("--token-secret")
            .arg(&secret)
            .arg("--allow-anonymous")
            .env_remove("HERALD_CONFIG")
            .env("HERALD_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(sync) = &c.sync {
            cmd.arg("--sync").arg(sync);
        }
        if c.transport == crate::proto::Transport::Meteor {
            let conf = tmp.path().join("meteord.conf");
            std::fs::write(&conf, DEACON_CONF).context("cannot write meteord.conf")?;
            cmd.arg("--meteor")
                .arg("127.0.0.1:0")
                .arg("--meteor-conf")
                .arg(&conf);
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            let mut meteor = None;
            // The Meteor line comes before the HTTP one.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("herald meteor listening on ") {
                    meteor = addr.trim().parse::<SocketAddr>().ok();
                } else if let Some(addr) = line.strip_prefix("herald listening on http://") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send((addr.trim().to_string(), meteor));
                    }
                }
            }
        });
        let pid = child.id();
        let mut target = Target {
            addr: "127.0.0.1:1".parse().expect("valid"),
            host: String::new(),
            url: String::new(),
            api_key: Some(api_key),
            token_secret: Some(secret),
            token: None,
            meteor: None,
            pid: Some(pid),
            data_dir: Some(data),
            child: Some(child),
            _tmp: Some(tmp),
        };
        let (addr, meteor) = rx
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| anyhow!("{} did not report its address within 30 s", bin.display()))?;
        target.meteor = meteor;
        target.addr = addr.parse().context("server printed a bad address")?;
        target.host = addr.clone();
        target.url = format!("http://{addr}");
        Ok(target)
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
            },
        ))
    }

    /// The API key, or an error saying how to give one.
    pub fn require_api_key(&self) -> anyhow::Result<String> {
        self.api_key.clone().ok_or_else(|| {
            anyhow!("publishing needs the server's API key: --api-key KEY or HERALD_API_KEY")
        })
    }

    /// The server's resource use now, when its pid is known.
    pub fn probe(&self) -> Option<ProcStats> {
        self.pid.and_then(ProcStats::read)
    }
}

/// Clock ticks per second of /proc CPU times.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// CPU time and memory of a process, from /proc.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcStats {
    /// User plus system CPU seconds since the process started.
    pub cpu_seconds: f64,
    /// Resident set size, bytes.
    pub rss_bytes: u64,
    /// Peak resident set size, bytes.
    pub peak_rss_bytes: u64,
}

impl ProcStats {
    /// Reads /proc/PID/stat and /proc/PID/status.
    pub fn read(pid: u32) -> Option<ProcStats> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name (which may hold spaces) start at field 3.
        let after = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kb = |key: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
                * 1024
        };
        Some(ProcStats {
            cpu_seconds: (utime + stime) / clock_ticks(),
            rss_bytes: kb("VmRSS:"),
            peak_rss_bytes: kb("VmHWM:"),
        })
    }
}

/// Open files of a process (entries of /proc/PID/fd).
pub fn open_files(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

/// Busy and total jiffies of the whole machine, from /proc/stat.
pub fn machine_cpu() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// CPU use over an interval, split by who used it.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct CpuShare {
    /// Share of the whole machine that was busy, in percent.
    pub machine_busy_pct: f64,
    /// Cores' worth of CPU the server used.
    pub server_cores: Option<f64>,
    /// Cores' worth the load generator (parent and workers) used.
    pub loadgen_cores: f64,
    /// Cores on the machine.
    pub cores: usize,
}

/// Snapshot of everyone's CPU counters, to diff later.
#[derive(Debug, Clone)]
pub struct CpuMark {
    at: std::time::Instant,
    machine: Option<(u64, u64)>,
    server: Option<f64>,
    loadgen: f64,
}

impl CpuMark {
    /// Reads the counters now.
    pub fn now(server: Option<u32>, workers: &[u32]) -> CpuMark {
        let loadgen = std::iter::once(std::process::id())
            .chain(workers.iter().copied())
            .filter_map(ProcStats::read)
            .map(|p| p.cpu_seconds)
            .sum();
        CpuMark {
            at: std::time::Instant::now(),
            machine: machine_cpu(),
            server: server.and_then(ProcStats::read).map(|p| p.cpu_seconds),
            loadgen,
        }
    }

    /// CPU use between `self` and `later`.
    pub fn share(&self, later: &CpuMark) -> CpuShare {
        let wall = later.at.duration_since(self.at).as_secs_f64().max(1e-6);
        let machine = match (self.machine, later.machine) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                (b1 - b0) as f64 / (t1 - t0) as f64 * 100.0
            }
            _ => 0.0,
        };
        CpuShare {
            machine_busy_pct: crate::stats::round1(machine),
            server_cores: match (self.server, later.server) {
                (Some(a), Some(b)) => Some(crate::stats::round3((b - a) / wall)),
                _ => None,
            },
            loadgen_cores: crate::stats::round3((later.loadgen - self.loadgen) / wall),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// Server CPU seconds between the two marks.
    pub fn server_seconds(&self, later: &CpuMark) -> Option<f64> {
        Some(later.server? - self.server?)
    }
}
