//! The provider benchmarks' report: one table row per (threads, connections) pair with Herald's
//! and the raw client's rates, Herald's ratio to raw, CPU per notification of the client and of
//! the mock, and who used the cores; the best row as the headline; Pushy's published figure.

use serde_json::json;

use super::drive::Phase;
use super::{Provider, ProviderArgs, Row};
use crate::report::{f, Report, Table};
use crate::server::CpuShare;
use crate::stats::round3;
use crate::svg::{Chart, Series};

/// Pushy v0.3's best published rate to its mock APNs on a laptop, notifications/s.
const PUSHY_BEST: f64 = 95_200.0;
/// Issue 10's goal for APNs to the local mock, notifications/s.
const APNS_GOAL: f64 = 150_000.0;

/// What the report is made from.
pub(super) struct Inputs<'a> {
    pub provider: Provider,
    pub args: &'a ProviderArgs,
    pub notifications: u64,
    pub rows: &'a [Row],
    pub cpu: CpuShare,
    pub mock_pid: u32,
    pub mock_accepted: Option<u64>,
    /// The mock's CPU seconds over the measured rows.
    pub mock_cpu_seconds: Option<f64>,
    /// The mock's peak resident memory.
    pub mock_peak_rss_bytes: Option<u64>,
    /// Web Push: (wall µs, CPU µs) per encrypted message.
    pub encryption: Option<(f64, f64)>,
    pub stopped_by_time: Option<String>,
    pub duration_s: f64,
}

/// Several rounds' phases of one contender, summed.
#[derive(Debug, Default, Clone, Copy)]
struct Sum {
    accepted: u64,
    failed: u64,
    seconds: f64,
    client_cpu: f64,
    mock_cpu: f64,
    busy_weighted: f64,
    reads: u64,
    writes: u64,
}

impl Sum {
    fn of(phases: &[Phase]) -> Sum {
        let mut s = Sum::default();
        for p in phases {
            s.accepted += p.accepted;
            s.failed += p.failed;
            s.seconds += p.seconds;
            s.client_cpu += p.client_cpu_seconds();
            s.mock_cpu += p.mock_cpu_seconds();
            s.busy_weighted += p.cpu.machine_busy_pct * p.seconds;
            if let Some((reads, writes)) = p.syscalls {
                s.reads += reads;
                s.writes += writes;
            }
        }
        s
    }
    fn per_sec(&self) -> f64 {
        self.accepted as f64 / self.seconds.max(1e-9)
    }
    fn us_each(&self, cpu: f64) -> f64 {
        cpu * 1e6 / (self.accepted.max(1) as f64)
    }
    fn cores(&self, cpu: f64) -> f64 {
        cpu / self.seconds.max(1e-9)
    }
    /// System calls per 100 accepted notifications.
    fn per_100(&self, calls: u64) -> f64 {
        calls as f64 * 100.0 / (self.accepted.max(1) as f64)
    }
    fn busy_pct(&self) -> f64 {
        self.busy_weighted / self.seconds.max(1e-9)
    }
}

/// Builds the report.
pub(super) fn build(i: Inputs<'_>) -> Report {
    let mut r = Report::new(i.provider.name());
    r.target = Some(format!(
        "herald mock {} (pid {})",
        i.provider.name(),
        i.mock_pid
    ));
    r.table = Table::new(&[
        "threads",
        "connections",
        "herald_per_sec",
        "raw_per_sec",
        "herald_to_raw",
        "herald_client_us",
        "raw_client_us",
        "mock_us",
        "herald_client_cores",
        "raw_client_cores",
        "mock_cores_herald",
        "mock_cores_raw",
        "herald_syscalls_per_100",
        "raw_syscalls_per_100",
        "machine_busy_pct",
        "failed",
    ]);
    let mut rows_json = Vec::new();
    let mut best: Option<(usize, f64)> = None;
    let mut failed = 0;
    let mut measured_accepted = 0;
    let mut first_errors = Vec::new();
    let (mut herald_points, mut raw_points) = (Vec::new(), Vec::new());
    for (n, row) in i.rows.iter().enumerate() {
        let (h, w) = (Sum::of(&row.herald), Sum::of(&row.raw));
        let ratio = h.per_sec() / w.per_sec().max(1e-9);
        failed += h.failed + w.failed;
        measured_accepted += h.accepted + w.accepted + row.warm_accepted;
        for (who, phases) in [("Herald", &row.herald), ("raw", &row.raw)] {
            if let Some(e) = phases.iter().find_map(|p| p.first_error.clone()) {
                first_errors.push(format!(
                    "{who} at {} threads, {} connections: {e}",
                    row.threads, row.connections
                ));
            }
        }
        if best.is_none_or(|(_, rate)| h.per_sec() > rate) {
            best = Some((n, h.per_sec()));
        }
        herald_points.push(((n + 1) as f64, h.per_sec()));
        raw_points.push(((n + 1) as f64, w.per_sec()));
        r.table.row(vec![
            row.threads.to_string(),
            row.connections.to_string(),
            f(h.per_sec(), 0),
            f(w.per_sec(), 0),
            f(ratio, 3),
            f(h.us_each(h.client_cpu), 2),
            f(w.us_each(w.client_cpu), 2),
            f(h.us_each(h.mock_cpu), 2),
            f(h.cores(h.client_cpu), 2),
            f(w.cores(w.client_cpu), 2),
            f(h.cores(h.mock_cpu), 2),
            f(w.cores(w.mock_cpu), 2),
            f(h.per_100(h.reads + h.writes), 1),
            f(w.per_100(w.reads + w.writes), 1),
            f(h.busy_pct(), 0),
            (h.failed + w.failed).to_string(),
        ]);
        let rounds =
            |phases: &[Phase]| -> Vec<f64> { phases.iter().map(|p| round3(p.per_sec())).collect() };
        rows_json.push(json!({
            "threads": row.threads,
            "connections": row.connections,
            "herald_per_sec": round3(h.per_sec()),
            "raw_per_sec": round3(w.per_sec()),
            "herald_to_raw": round3(ratio),
            "herald_rounds_per_sec": rounds(&row.herald),
            "raw_rounds_per_sec": rounds(&row.raw),
            "herald_client_us_per_notification": round3(h.us_each(h.client_cpu)),
            "raw_client_us_per_notification": round3(w.us_each(w.client_cpu)),
            "mock_us_per_notification_herald": round3(h.us_each(h.mock_cpu)),
            "mock_us_per_notification_raw": round3(w.us_each(w.mock_cpu)),
            "herald_client_cores": round3(h.cores(h.client_cpu)),
            "raw_client_cores": round3(w.cores(w.client_cpu)),
            "mock_cores_herald": round3(h.cores(h.mock_cpu)),
            "mock_cores_raw": round3(w.cores(w.mock_cpu)),
            "machine_busy_pct_herald": round3(h.busy_pct()),
            "machine_busy_pct_raw": round3(w.busy_pct()),
            "herald_client_reads_per_100": round3(h.per_100(h.reads)),
            "herald_client_writes_per_100": round3(h.per_100(h.writes)),
            "raw_client_reads_per_100": round3(w.per_100(w.reads)),
            "raw_client_writes_per_100": round3(w.per_100(w.writes)),
            "failed": h.failed + w.failed,
        }));
    }
    r.headline.failed = failed;
    // The "server" of these scenarios is the mock provider.
    r.headline.server_cpu_seconds = i.mock_cpu_seconds.map(round3);
    r.headline.server_peak_rss_bytes = i.mock_peak_rss_bytes;
    r.lines.push(format!(
        "each row: {} round(s) of {} notifications per client, alternating Herald then raw, {} in flight; \
         *_us = CPU microseconds per accepted notification; cores = CPU seconds / wall seconds; \
         syscalls_per_100 = the client's read and write system calls per 100 notifications",
        i.args.rounds, i.notifications, i.args.in_flight
    ));
    if let Some((n, rate)) = best {
        let row = &i.rows[n];
        let raw = Sum::of(&row.raw).per_sec();
        let mut line = format!(
            "best: Herald {rate:.0} notifications/s at {} threads, {} connections; raw h2 {raw:.0}/s in the same row (Herald/raw {:.3})",
            row.threads,
            row.connections,
            rate / raw.max(1e-9)
        );
        if i.provider == Provider::Apns {
            line.push_str(&format!(
                "; Pushy v0.3's best: {PUSHY_BEST:.0}/s; goal: {APNS_GOAL:.0}/s"
            ));
        }
        r.lines.push(line);
        r.detail(
            "best",
            json!({"threads": row.threads, "connections": row.connections,
                   "herald_per_sec": round3(rate), "raw_per_sec": round3(raw),
                   "herald_to_raw": round3(rate / raw.max(1e-9))}),
        );
    }
    r.lines.push(format!(
        "the mock is a separate process on the same {} cores as this client: over the whole run it used {} cores, this process {:.2} cores, the machine was {:.0}% busy",
        i.cpu.cores,
        i.cpu.server_cores.map_or("?".into(), |c| format!("{c:.2}")),
        i.cpu.loadgen_cores,
        i.cpu.machine_busy_pct
    ));
    match i.mock_accepted {
        Some(n) => r.lines.push(format!(
            "the mock says it accepted {n} notifications in all; the clients counted {measured_accepted} (warm-ups included)"
        )),
        None => r
            .lines
            .push("the mock did not say how many it accepted on its way out".into()),
    }
    if let Some((wall, cpu)) = i.encryption {
        r.lines.push(format!(
            "encryption alone (RFC 8291 aes128gcm, one thread, {} messages): {cpu:.1} µs CPU per message ({wall:.1} µs wall)",
            i.args.encryptions
        ));
        r.detail(
            "encryption_us_per_message",
            json!({"cpu": round3(cpu), "wall": round3(wall), "messages": i.args.encryptions}),
        );
    }
    for e in first_errors.iter().take(5) {
        r.lines.push(format!("first failure: {e}"));
    }
    r.detail("provider", i.provider.name());
    r.detail("notifications_per_round", i.notifications);
    r.detail("rounds", i.args.rounds);
    r.detail("in_flight", i.args.in_flight);
    r.detail("rows", rows_json);
    r.detail("mock_pid", i.mock_pid);
    r.detail("mock_accepted_in_all", i.mock_accepted);
    r.detail("clients_counted_accepted", measured_accepted);
    r.detail("error_samples", &first_errors);
    if i.provider == Provider::Apns {
        r.detail("pushy_v03_best_per_sec", PUSHY_BEST);
    }
    r.cpu = Some(i.cpu);
    r.duration_s = i.duration_s;
    r.limited_by = match i.stopped_by_time {
        Some(why) => why,
        None if i.cpu.machine_busy_pct >= 85.0 => format!(
            "CPU: the machine was {:.0}% busy ({} cores: mock {} cores, client {:.2} cores)",
            i.cpu.machine_busy_pct,
            i.cpu.cores,
            i.cpu.server_cores.map_or("?".into(), |c| format!("{c:.2}")),
            i.cpu.loadgen_cores
        ),
        None => "count".into(),
    };
    r.chart = Some(Chart {
        title: format!(
            "herald bench {}: notifications/s per row (threads x connections, table order)",
            i.provider.name()
        ),
        x_label: "row".into(),
        y_label: "notifications/s".into(),
        series: vec![
            Series::Line {
                name: "Herald".into(),
                points: herald_points,
                color: "#1f5fa8",
            },
            Series::Line {
                name: "raw h2".into(),
                points: raw_points,
                color: "#d9822b",
            },
        ],
    });
    r
}
