//! /proc readers: a process's CPU time and memory, a process tree's CPU time (PostgreSQL's
//! postmaster and its backends), the whole machine's CPU, and marks to diff them over a phase.

use std::process::Command;

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
    /// The anonymous part of the resident set (`RssAnon`: the heap and stacks), bytes: the
    /// resident set less the file pages of the binary and its libraries, which vary from run to
    /// run and from build to build with what code was touched, not with connections.
    pub anon_bytes: u64,
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
            anon_bytes: kb("RssAnon:"),
        })
    }
}

/// The fields of /proc/PID/stat after the command name (which may hold spaces): field 3 on.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.get(stat.rfind(')')? + 2..)?;
    Some(after.split_whitespace().map(str::to_owned).collect())
}

/// CPU seconds of a process tree: `root` (its own time plus the time of children it has
/// reaped, so a backend that exits mid-phase still counts) and its live children. PostgreSQL's
/// postmaster forks a backend per connection plus its auxiliary processes.
pub fn tree_cpu_seconds(root: u32) -> Option<f64> {
    let ticks = |f: &[String], from: usize, n: usize| -> f64 {
        f.iter()
            .skip(from)
            .take(n)
            .filter_map(|v| v.parse::<f64>().ok())
            .sum()
    };
    // utime, stime, cutime, cstime are fields 14-17: indexes 11-14 here.
    let root_fields = stat_fields(root)?;
    let mut total = ticks(&root_fields, 11, 4);
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == root {
            continue;
        }
        if let Some(f) = stat_fields(pid) {
            // The parent pid is field 4: index 1 here.
            if f.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(root) {
                total += ticks(&f, 11, 2);
            }
        }
    }
    Some(total / clock_ticks())
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

/// A process whose CPU time a cluster run reports on its own: a node, PostgreSQL, Redis.
#[derive(Debug, Clone)]
pub struct Part {
    /// What it is (`node 1 (http://127.0.0.1:PORT)`, `postgresql`, `redis`).
    pub name: String,
    /// Its pid (the postmaster's, for PostgreSQL).
    pub pid: u32,
    /// Count its children too (PostgreSQL's backends).
    pub tree: bool,
}

impl Part {
    /// CPU seconds used so far.
    pub fn cpu_seconds(&self) -> Option<f64> {
        if self.tree {
            tree_cpu_seconds(self.pid)
        } else {
            ProcStats::read(self.pid).map(|p| p.cpu_seconds)
        }
    }
}

/// Snapshot of everyone's CPU counters, to diff later.
#[derive(Debug, Clone)]
pub struct CpuMark {
    at: std::time::Instant,
    machine: Option<(u64, u64)>,
    server: Option<f64>,
    loadgen: f64,
    /// Each part's CPU seconds at this mark (cluster runs only).
    parts: Vec<(Part, Option<f64>)>,
}

impl CpuMark {
    /// Reads the counters now.
    pub fn now(server: Option<u32>, workers: &[u32]) -> CpuMark {
        let servers: Vec<u32> = server.into_iter().collect();
        CpuMark::of(&servers, workers, &[])
    }

    /// Reads the counters now: `servers` summed as the server (every node of a cluster; none
    /// when unknown), `workers` with this process as the load generator, and each of `parts`
    /// on its own.
    pub fn of(servers: &[u32], workers: &[u32], parts: &[Part]) -> CpuMark {
        let loadgen = std::iter::once(std::process::id())
            .chain(workers.iter().copied())
            .filter_map(ProcStats::read)
            .map(|p| p.cpu_seconds)
            .sum();
        let server = servers
            .iter()
            .map(|pid| ProcStats::read(*pid).map(|p| p.cpu_seconds))
            .sum::<Option<f64>>()
            .filter(|_| !servers.is_empty());
        CpuMark {
            at: std::time::Instant::now(),
            machine: machine_cpu(),
            server,
            loadgen,
            parts: parts.iter().map(|p| (p.clone(), p.cpu_seconds())).collect(),
        }
    }

    /// Each part's CPU seconds between `self` and `later` (parts read at both marks).
    pub fn parts_seconds(&self, later: &CpuMark) -> Vec<(Part, f64)> {
        self.parts
            .iter()
            .zip(&later.parts)
            .filter_map(|((p, a), (_, b))| Some((p.clone(), (*b)? - (*a)?)))
            .collect()
    }

    /// Wall seconds between the two marks.
    pub fn wall_seconds(&self, later: &CpuMark) -> f64 {
        later.at.duration_since(self.at).as_secs_f64().max(1e-6)
    }

    /// CPU use between `self` and `later`.
    pub fn share(&self, later: &CpuMark) -> CpuShare {
        let wall = self.wall_seconds(later);
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

    /// Load generator CPU seconds (this process and its workers) between the two marks.
    pub fn loadgen_seconds(&self, later: &CpuMark) -> f64 {
        later.loadgen - self.loadgen
    }
}
