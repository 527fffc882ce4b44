//! A scenario's results and how they are shown: a table on stdout, and with `--out DIR` the
//! same table as CSV, `summary.json` with the headline figures, and an SVG chart.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::baseline::Floors;
use crate::server::CpuShare;
use crate::stats::LatencyMs;
use crate::svg::Chart;

/// The figures every summary.json carries (null where they do not apply).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Headline {
    /// Messages delivered to subscribers per second.
    pub deliveries_per_sec: Option<f64>,
    /// Subscriptions acknowledged per second.
    pub subscriptions_per_sec: Option<f64>,
    /// Devices registered per second (through the batch API).
    pub devices_per_sec: Option<f64>,
    /// Expected deliveries, acknowledgements or connections that did not happen.
    pub failed: u64,
    /// Server memory per connection (RSS delta / connections).
    pub bytes_per_connection: Option<f64>,
    /// Latency percentiles.
    pub latency_ms: Option<LatencyMs>,
    /// Server CPU time used during the scenario.
    pub server_cpu_seconds: Option<f64>,
    /// Server peak resident memory (VmHWM).
    pub server_peak_rss_bytes: Option<u64>,
}

/// Rows of a table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Column names (also the CSV header).
    pub headers: Vec<String>,
    /// Cells.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Aligned text for a terminal.
    pub fn text(&self) -> String {
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.len()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if i < width.len() {
                    width[i] = width[i].max(c.len());
                }
            }
        }
        let line = |cells: &[String]| -> String {
            cells
                .iter()
                .enumerate()
                .map(|(i, c)| format!("{c:>w$}", w = width.get(i).copied().unwrap_or(0)))
                .collect::<Vec<_>>()
                .join("  ")
        };
        let mut out = line(&self.headers);
        out.push('\n');
        out.push_str(&"-".repeat(out.trim_end().len()));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }

    /// RFC 4180 CSV.
    pub fn csv(&self) -> String {
        let cell = |c: &String| {
            if c.contains([',', '"', '\n']) {
                format!("\"{}\"", c.replace('"', "\"\""))
            } else {
                c.clone()
            }
        };
        let mut out = String::new();
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            out.push_str(&r.iter().map(cell).collect::<Vec<_>>().join(","));
            out.push('\n');
        }
        out
    }
}

/// Everything a scenario found.
#[derive(Debug, Clone)]
pub struct Report {
    /// Scenario name.
    pub scenario: &'static str,
    /// Transport used.
    pub transport: Option<&'static str>,
    /// Server URL.
    pub target: Option<String>,
    /// Headline figures.
    pub headline: Headline,
    /// For `subscribers` and `channels`: one object per step.
    pub steps: Option<Vec<Value>>,
    /// The main table.
    pub table: Table,
    /// The CSV's table when it is not the printed one (e.g. a time series).
    pub csv_override: Option<Table>,
    /// Extra lines printed under the table.
    pub lines: Vec<String>,
    /// The chart.
    pub chart: Option<Chart>,
    /// Charts drawn under `chart` in the same SVG document (a soak's panels).
    pub charts_below: Vec<Chart>,
    /// Floors measured in the same run.
    pub baseline: Option<Floors>,
    /// What stopped the run or bounded its figures.
    pub limited_by: String,
    /// CPU use while measuring.
    pub cpu: Option<CpuShare>,
    /// Scenario-specific figures.
    pub details: Map<String, Value>,
    /// Wall time of the scenario, seconds.
    pub duration_s: f64,
    /// Why the run failed its own check (`hooks`: an expected event missing), after the report
    /// was printed and written: the bench then exits non-zero.
    pub failure: Option<String>,
}

impl Report {
    /// A report with nothing in it yet.
    pub fn new(scenario: &'static str) -> Report {
        Report {
            scenario,
            transport: None,
            target: None,
            headline: Headline::default(),
            steps: None,
            table: Table::default(),
            csv_override: None,
            lines: Vec::new(),
            chart: None,
            charts_below: Vec::new(),
            baseline: None,
            limited_by: String::new(),
            cpu: None,
            details: Map::new(),
            duration_s: 0.0,
            failure: None,
        }
    }

    /// Adds a scenario-specific figure.
    pub fn detail(&mut self, key: &str, v: impl Serialize) {
        self.details.insert(
            key.to_string(),
            serde_json::to_value(v).unwrap_or(Value::Null),
        );
    }

    /// The figures as ratios to the floors measured in the same run.
    pub fn ratios(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let Some(b) = &self.baseline else {
            return m;
        };
        let mut put = |k: &str, v: Option<f64>| {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                m.insert(k.to_string(), json!(crate::stats::round3(v)));
            }
        };
        let h = &self.headline;
        let per = |x: Option<f64>, floor: f64| x.filter(|_| floor > 0.0).map(|x| x / floor);
        put(
            "deliveries_per_tcp_write",
            per(h.deliveries_per_sec, b.tcp_writes_per_sec),
        );
        put(
            "subscriptions_per_tcp_write",
            per(h.subscriptions_per_sec, b.tcp_writes_per_sec),
        );
        put(
            "devices_per_tcp_write",
            per(h.devices_per_sec, b.tcp_writes_per_sec),
        );
        let f = |k: &str| self.details.get(k).and_then(Value::as_f64);
        put(
            "connections_per_connect",
            per(f("connections_per_sec"), b.connects_per_sec),
        );
        put(
            "publishes_per_fsync",
            per(f("publishes_per_sec"), b.fsyncs_per_sec),
        );
        if let Some(l) = &h.latency_ms {
            if b.fsyncs_per_sec > 0.0 {
                let fsync_ms = 1000.0 / b.fsyncs_per_sec;
                put("p50_in_fsyncs", Some(l.p50 / fsync_ms));
                put("p99_in_fsyncs", Some(l.p99 / fsync_ms));
            }
        }
        m
    }

    /// summary.json.
    pub fn summary(&self, command: &str) -> Value {
        let mut v = json!({
            "scenario": self.scenario,
            "transport": self.transport,
            "target": self.target,
            "command": command,
            "duration_s": crate::stats::round3(self.duration_s),
        });
        let obj = v.as_object_mut().expect("object");
        if let Value::Object(h) = serde_json::to_value(&self.headline).unwrap_or(Value::Null) {
            obj.extend(h);
        }
        if let Some(steps) = &self.steps {
            obj.insert("steps".into(), Value::Array(steps.clone()));
        }
        obj.insert("limited_by".into(), json!(self.limited_by));
        obj.insert("cpu".into(), json!(self.cpu));
        obj.insert("baseline".into(), json!(self.baseline));
        obj.insert("ratios".into(), Value::Object(self.ratios()));
        obj.insert("details".into(), Value::Object(self.details.clone()));
        v
    }

    /// Prints the human report on stdout.
    pub fn print(&self) {
        let mut out = String::new();
        out.push_str(&format!(
            "\n== herald bench {}{} ==\n",
            self.scenario,
            self.transport
                .map(|t| format!(" ({t})"))
                .unwrap_or_default()
        ));
        if let Some(t) = &self.target {
            out.push_str(&format!("server: {t}\n"));
        }
        if let Some(b) = &self.baseline {
            out.push_str(&format!(
                "baseline: {:.0} loopback writes/s, {:.0} connects/s, {:.0} fsyncs/s\n",
                b.tcp_writes_per_sec, b.connects_per_sec, b.fsyncs_per_sec
            ));
        }
        out.push('\n');
        out.push_str(&self.table.text());
        out.push('\n');
        for l in &self.lines {
            out.push_str(l);
            out.push('\n');
        }
        let h = &self.headline;
        let mut head = Vec::new();
        if let Some(d) = h.deliveries_per_sec {
            head.push(format!("deliveries/s {d:.0}"));
        }
        if let Some(s) = h.subscriptions_per_sec {
            head.push(format!("subscriptions/s {s:.0}"));
        }
        if let Some(d) = h.devices_per_sec {
            head.push(format!("devices registered/s {d:.0}"));
        }
        if let Some(b) = h.bytes_per_connection {
            head.push(format!("bytes/connection {b:.0}"));
        }
        if let Some(l) = &h.latency_ms {
            head.push(format!(
                "latency p50 {} ms, p99 {} ms, max {} ms",
                l.p50, l.p99, l.max
            ));
        }
        head.push(format!("failed {}", h.failed));
        out.push_str(&head.join(" | "));
        out.push('\n');
        if let (Some(c), Some(p)) = (h.server_cpu_seconds, h.server_peak_rss_bytes) {
            out.push_str(&format!(
                "server: {c:.2} CPU s, peak RSS {:.1} MB\n",
                p as f64 / 1e6
            ));
        }
        if let Some(c) = &self.cpu {
            out.push_str(&format!(
                "cpu while measuring: machine {:.0}% busy of {} cores; server {} cores; load generator {:.2} cores\n",
                c.machine_busy_pct,
                c.cores,
                c.server_cores.map_or("?".into(), |s| format!("{s:.2}")),
                c.loadgen_cores
            ));
        }
        let ratios = self.ratios();
        if !ratios.is_empty() {
            let r: Vec<String> = ratios.iter().map(|(k, v)| format!("{k} {v}")).collect();
            out.push_str(&format!("ratios to baseline: {}\n", r.join(", ")));
        }
        out.push_str(&format!("limited by: {}\n", self.limited_by));
        print!("{out}");
    }

    /// Writes `<scenario>.csv`, `summary.json` and `<scenario>.svg` into `dir`.
    pub fn write(&self, dir: &Path, command: &str) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let csv = dir.join(format!("{}.csv", self.scenario));
        std::fs::write(
            &csv,
            self.csv_override.as_ref().unwrap_or(&self.table).csv(),
        )
        .with_context(|| format!("cannot write {}", csv.display()))?;
        let summary = dir.join("summary.json");
        std::fs::write(
            &summary,
            serde_json::to_string_pretty(&self.summary(command))? + "\n",
        )
        .with_context(|| format!("cannot write {}", summary.display()))?;
        if let Some(chart) = &self.chart {
            let svg = dir.join(format!("{}.svg", self.scenario));
            let drawing = if self.charts_below.is_empty() {
                chart.render()
            } else {
                let mut all = vec![chart.clone()];
                all.extend(self.charts_below.iter().cloned());
                crate::svg::stack(&all)
            };
            std::fs::write(&svg, drawing)
                .with_context(|| format!("cannot write {}", svg.display()))?;
        }
        Ok(())
    }
}

/// Formats a float with `d` decimals.
pub fn f(x: f64, d: usize) -> String {
    format!("{x:.d$}")
}
