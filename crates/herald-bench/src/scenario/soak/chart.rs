//! The soak's report: one table row per interval (the CSV), the growth of memory and open
//! files from the first interval to the last (and per hour), and four chart panels drawn one
//! under the other in `soak.svg`: memory, open files, latency, errors.

use hdrhistogram::Histogram;

use super::Sample;
use crate::args::SoakArgs;
use crate::report::{f, Report, Table};
use crate::stats::{self, LatencyMs};
use crate::svg::{Chart, Series};

/// How a figure moved from the first interval to the last.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Growth {
    /// At the end of the first interval.
    pub first: f64,
    /// At the end of the last.
    pub last: f64,
    /// `last - first`.
    pub total: f64,
    /// `total` per hour of the time between the two (`None` with a single interval).
    pub per_hour: Option<f64>,
}

/// The growth of `value` over `samples` (those where it is known).
pub fn growth(samples: &[Sample], value: impl Fn(&Sample) -> Option<f64>) -> Option<Growth> {
    let known: Vec<(f64, f64)> = samples
        .iter()
        .filter_map(|s| value(s).map(|v| (s.t_s, v)))
        .collect();
    let (&(t0, first), &(t1, last)) = (known.first()?, known.last()?);
    let hours = (t1 - t0) / 3600.0;
    Some(Growth {
        first,
        last,
        total: last - first,
        per_hour: (hours > 0.0).then(|| (last - first) / hours),
    })
}

/// The CSV's and the printed table's rows.
fn table(samples: &[Sample]) -> Table {
    let mut table = Table::new(&[
        "t_s",
        "rss_mb",
        "open_files",
        "publishes",
        "publish_p50_ms",
        "publish_p99_ms",
        "deliveries",
        "delivery_p99_ms",
        "reconnects",
        "pushes",
        "errors",
    ]);
    for s in samples {
        table.row(vec![
            f(s.t_s, 1),
            s.rss_mb.map_or(String::new(), |m| f(m, 1)),
            s.open_files.map_or(String::new(), |n| n.to_string()),
            s.publishes.to_string(),
            f(s.publish.p50, 3),
            f(s.publish.p99, 3),
            s.deliveries.to_string(),
            f(s.delivery.p99, 3),
            s.reconnects.to_string(),
            s.pushes.to_string(),
            s.errors.to_string(),
        ]);
    }
    table
}

/// A line of a panel: its legend, its colour and the figure it draws.
type PanelLine<'a> = (&'a str, &'static str, &'a dyn Fn(&Sample) -> Option<f64>);

/// One panel with a line per `(name, colour, value)`, x in minutes.
fn panel(title: &str, y_label: &str, samples: &[Sample], lines: &[PanelLine<'_>]) -> Chart {
    Chart {
        title: title.into(),
        x_label: "minutes".into(),
        y_label: y_label.into(),
        series: lines
            .iter()
            .map(|(name, color, value)| Series::Line {
                name: (*name).into(),
                points: samples
                    .iter()
                    .filter_map(|s| value(s).map(|v| (s.t_s / 60.0, v)))
                    .collect(),
                color,
            })
            .collect(),
    }
}

/// A growth as words: `12.0 -> 13.5 MB (+1.5 MB, +0.9 MB per hour)`.
fn words(g: Option<Growth>, unit: &str) -> String {
    match g {
        None => "unknown (no server pid: --spawn, or --server-pid with --target)".into(),
        Some(g) => format!(
            "{} -> {} {unit} ({:+.1} {unit}{})",
            f(g.first, 1),
            f(g.last, 1),
            g.total,
            g.per_hour
                .map_or(String::new(), |h| format!(", {h:+.1} {unit} per hour"))
        ),
    }
}

/// The whole report of a soak run.
pub fn report(
    args: &SoakArgs,
    samples: &[Sample],
    publish_all: &Histogram<u64>,
    delivery_all: &Histogram<u64>,
) -> Report {
    let mut r = Report::new("soak");
    r.table = table(samples);
    let rss = growth(samples, |s| s.rss_mb);
    let files = growth(samples, |s| s.open_files.map(|n| n as f64));
    let sum = |v: fn(&Sample) -> u64| samples.iter().map(v).sum::<u64>();
    let (publishes, deliveries, errors) = (
        sum(|s| s.publishes),
        sum(|s| s.deliveries),
        sum(|s| s.errors),
    );
    let (reconnects, pushes) = (sum(|s| s.reconnects), sum(|s| s.pushes));
    let seconds = samples.last().map_or(0.0, |s| s.t_s).max(1e-3);
    let publish = LatencyMs::of(publish_all);
    let delivery = LatencyMs::of(delivery_all);
    r.lines
        .push(format!("server memory (RSS): {}", words(rss, "MB")));
    r.lines
        .push(format!("server open files: {}", words(files, "files")));
    r.lines.push(format!(
        "{publishes} publishes (p50 {} ms, p99 {} ms), {deliveries} deliveries (p99 {} ms), \
         {reconnects} reconnects, {pushes} pushes, {errors} errors in {}",
        publish.p50,
        publish.p99,
        delivery.p99,
        humantime::format_duration(std::time::Duration::from_secs(seconds as u64))
    ));
    r.headline.latency_ms = Some(publish);
    r.headline.deliveries_per_sec = Some(stats::round1(deliveries as f64 / seconds));
    r.headline.failed = errors;
    r.detail("interval_s", args.interval.as_secs_f64());
    r.detail("intervals", samples.len());
    r.detail("rate", args.rate);
    r.detail("subscribers", args.subscribers);
    r.detail("channels", args.channels);
    r.detail("churn_s", args.churn.as_secs_f64());
    r.detail("devices", args.devices);
    r.detail("push_rate", args.push_rate);
    r.detail("publishes", publishes);
    r.detail("deliveries", deliveries);
    r.detail("reconnects", reconnects);
    r.detail("pushes", pushes);
    r.detail("errors", errors);
    r.detail("publish_ms", publish);
    r.detail("delivery_ms", delivery);
    let growth_json = |g: Option<Growth>| {
        g.map(|g| {
            serde_json::json!({
                "first": g.first, "last": g.last, "total": stats::round3(g.total),
                "per_hour": g.per_hour.map(stats::round3),
            })
        })
    };
    r.detail("rss_mb", growth_json(rss));
    r.detail("open_files", growth_json(files));
    r.chart = Some(panel(
        "Soak: server memory (RSS)",
        "MB",
        samples,
        &[("RSS", "#1f5fa8", &|s: &Sample| s.rss_mb)],
    ));
    r.charts_below = vec![
        panel(
            "Soak: server open files",
            "files",
            samples,
            &[("open files", "#2a9d5c", &|s: &Sample| {
                s.open_files.map(|n| n as f64)
            })],
        ),
        panel(
            "Soak: latency per interval",
            "ms",
            samples,
            &[
                ("publish p50", "#7fa7d9", &|s: &Sample| Some(s.publish.p50)),
                ("publish p99", "#1f5fa8", &|s: &Sample| Some(s.publish.p99)),
                ("delivery p99", "#d9822b", &|s: &Sample| {
                    Some(s.delivery.p99)
                }),
            ],
        ),
        panel(
            "Soak: errors per interval",
            "errors",
            samples,
            &[("errors", "#c0392b", &|s: &Sample| Some(s.errors as f64))],
        ),
    ];
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_s: f64, rss: Option<f64>) -> Sample {
        Sample {
            t_s,
            rss_mb: rss,
            open_files: Some(10),
            publishes: 1,
            publish: LatencyMs::default(),
            deliveries: 2,
            delivery: LatencyMs::default(),
            reconnects: 0,
            pushes: 0,
            errors: 0,
        }
    }

    #[test]
    fn growth_is_first_to_last_and_per_hour() {
        let samples = [
            at(60.0, Some(20.0)),
            at(120.0, None),
            at(1860.0, Some(21.0)),
        ];
        let g = growth(&samples, |s| s.rss_mb).unwrap();
        assert_eq!((g.first, g.last, g.total), (20.0, 21.0, 1.0));
        assert_eq!(g.per_hour, Some(2.0));
        let one = growth(&samples[..1], |s| s.rss_mb).unwrap();
        assert_eq!(one.per_hour, None);
        assert!(growth(&[], |s| s.rss_mb).is_none());
        assert_eq!(
            words(Some(g), "MB"),
            "20.0 -> 21.0 MB (+1.0 MB, +2.0 MB per hour)"
        );
    }
}
