//! Cluster runs (`--spawn-cluster N`, or `--target` with several URLs): the PostgreSQL and Redis
//! servers the bench starts for the nodes (with `herald-testkit`: temporary folders, free
//! loopback ports, stopped by pid when dropped), and the report's per-process section: each
//! node's, PostgreSQL's and Redis's CPU over the measured phase, per unit of work.

use anyhow::Context;
use serde_json::json;

use crate::report::{f, Report, Table};
use crate::server::{CpuMark, Part, ProcStats, Target};

/// The database name the nodes share.
const DATABASE: &str = "herald";

/// PostgreSQL and Redis for a spawned cluster; both stop when this is dropped.
pub struct Services {
    /// The nodes' `--store`.
    pub store_url: String,
    /// The nodes' `--bus`.
    pub bus_url: String,
    /// Whether PostgreSQL syncs its commits to disk (`--cluster-fsync`).
    pub fsync: bool,
    postgres: herald_testkit::Postgres,
    redis: herald_testkit::Redis,
}

impl Services {
    /// Starts both (PostgreSQL with an empty `herald` database; syncing its commits to disk
    /// when `fsync`, else not, as the tests run it) and waits until they answer.
    pub fn start(fsync: bool) -> anyhow::Result<Services> {
        let postgres = if fsync {
            herald_testkit::Postgres::start_durable()
        } else {
            herald_testkit::Postgres::start()
        }
        .context("cannot start PostgreSQL")?;
        let store_url = postgres
            .create_database(DATABASE)
            .context("cannot create the cluster's database")?;
        let redis = herald_testkit::Redis::start().context("cannot start Redis")?;
        Ok(Services {
            bus_url: redis.url(),
            store_url,
            fsync,
            postgres,
            redis,
        })
    }

    /// PostgreSQL (the postmaster and its children) and Redis, as parts of a CPU mark.
    pub fn parts(&self) -> Vec<Part> {
        let mut parts = Vec::new();
        if let Some(pid) = self.postgres.pid() {
            parts.push(Part {
                name: "postgresql".into(),
                pid,
                tree: true,
            });
        }
        if let Some(pid) = self.redis.pid() {
            parts.push(Part {
                name: "redis".into(),
                pid,
                tree: false,
            });
        }
        parts
    }
}

/// Adds the per-process section of a cluster run to `r`: for every part of `target` (nodes,
/// PostgreSQL, Redis), its CPU seconds between `before` and `after`, the cores that makes, the
/// CPU microseconds per `unit` (`units` of them in the phase: deliveries, subscriptions,
/// publishes) and its memory now. Nothing for a single server.
pub fn report_parts(
    r: &mut Report,
    target: &Target,
    before: &CpuMark,
    after: &CpuMark,
    unit: &str,
    units: u64,
) {
    let parts = before.parts_seconds(after);
    if parts.is_empty() {
        return;
    }
    let wall = before.wall_seconds(after);
    let per_unit = |cpu: f64| (units > 0).then(|| cpu / units as f64 * 1e6);
    let mut table = Table::new(&[
        "process",
        "cpu_s",
        "cores",
        &format!("cpu_us_per_{unit}"),
        "rss_mb",
        "peak_rss_mb",
    ]);
    let mut rows = Vec::new();
    let (mut nodes_cpu, mut all_cpu) = (0.0, 0.0);
    for (part, cpu) in &parts {
        all_cpu += cpu;
        if part.name.starts_with("node ") {
            nodes_cpu += cpu;
        }
        // A process tree's memory is mostly shared pages: its sum would mislead, so none.
        let mem = (!part.tree).then(|| ProcStats::read(part.pid)).flatten();
        table.row(vec![
            part.name.clone(),
            f(*cpu, 2),
            f(cpu / wall, 2),
            per_unit(*cpu).map_or("-".into(), |u| f(u, 1)),
            mem.map_or("-".into(), |m| f(m.rss_bytes as f64 / 1e6, 1)),
            mem.map_or("-".into(), |m| f(m.peak_rss_bytes as f64 / 1e6, 1)),
        ]);
        rows.push(json!({
            "process": part.name,
            "cpu_seconds": crate::stats::round3(*cpu),
            "cores": crate::stats::round3(cpu / wall),
            "cpu_us_per_unit": per_unit(*cpu).map(crate::stats::round3),
            "rss_bytes": mem.map(|m| m.rss_bytes),
            "peak_rss_bytes": mem.map(|m| m.peak_rss_bytes),
        }));
    }
    table.row(vec![
        "all of the above".into(),
        f(all_cpu, 2),
        f(all_cpu / wall, 2),
        per_unit(all_cpu).map_or("-".into(), |u| f(u, 1)),
        "-".into(),
        "-".into(),
    ]);
    let plural = match unit.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{unit}s"),
    };
    let fsync = match target.cluster_fsync() {
        Some(true) => ", PostgreSQL with fsync on",
        Some(false) => ", PostgreSQL with fsync off",
        None => "",
    };
    let workers = target.node_workers().map_or(String::new(), |n| {
        format!(", {n} worker{} a node", if n == 1 { "" } else { "s" })
    });
    r.lines.push(format!(
        "cluster of {} nodes ({}{fsync}{workers}), CPU over the measured {:.2} s ({units} {plural}):",
        target.nodes.len(),
        target.urls(),
        wall
    ));
    r.lines
        .extend(table.text().lines().map(|l| format!("  {l}")));
    r.detail(
        "cluster",
        json!({
            "nodes": target.nodes.iter().map(|n| n.url.clone()).collect::<Vec<_>>(),
            "postgres_fsync": target.cluster_fsync(),
            "node_workers": target.node_workers(),
            "unit": unit,
            "units": units,
            "seconds": crate::stats::round3(wall),
            "processes": rows,
            "nodes_cpu_us_per_unit": per_unit(nodes_cpu).map(crate::stats::round3),
            "all_cpu_us_per_unit": per_unit(all_cpu).map(crate::stats::round3),
        }),
    );
}
