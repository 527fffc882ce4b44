//! Reads figures back out of this process's Prometheus text exposition (what `/metrics`
//! serves), so `/v1/overview` reports exactly what the server already measures: plain
//! samples by name and labels, and histograms as cumulative buckets with their sum and count.

use std::collections::HashMap;

use serde::Serialize;

/// The samples of one exposition: (metric name, labels as written) -> value.
pub(crate) struct Samples {
    values: HashMap<(String, String), f64>,
}

/// A histogram: cumulative bucket counts by upper bound (seconds), the sum and the count.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub(crate) struct Histogram {
    /// `[upper bound, observations at or below it]`, ascending, `+Inf` left out.
    pub buckets: Vec<(f64, u64)>,
    /// Sum of every observation, seconds.
    pub sum_seconds: f64,
    /// Observations.
    pub count: u64,
}

impl Samples {
    /// Parses the exposition `text`; lines it does not understand are skipped.
    pub(crate) fn parse(text: &str) -> Samples {
        let mut values = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.strip_suffix('}').unwrap_or(rest)),
                None => (series, ""),
            };
            values.insert((name.to_owned(), labels.to_owned()), value);
        }
        Samples { values }
    }

    /// The sample `name` with exactly these `labels` (as written, e.g. `transport="ws"`), or 0.
    pub(crate) fn value(&self, name: &str, labels: &str) -> f64 {
        self.values
            .get(&(name.to_owned(), labels.to_owned()))
            .copied()
            .unwrap_or(0.0)
    }

    /// A counter or gauge without labels, as a whole number.
    pub(crate) fn count(&self, name: &str, labels: &str) -> u64 {
        let v = self.value(name, labels);
        if v.is_finite() && v > 0.0 {
            v as u64
        } else {
            0
        }
    }

    /// The histogram `name` (without other labels).
    pub(crate) fn histogram(&self, name: &str) -> Histogram {
        let bucket_name = format!("{name}_bucket");
        let mut buckets: Vec<(f64, u64)> = self
            .values
            .iter()
            .filter(|((n, _), _)| *n == bucket_name)
            .filter_map(|((_, labels), v)| {
                let le = labels.strip_prefix("le=\"")?.strip_suffix('"')?;
                let bound: f64 = le.parse().ok()?;
                bound.is_finite().then_some((bound, v.max(0.0) as u64))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Histogram {
            buckets,
            sum_seconds: self.value(&format!("{name}_sum"), ""),
            count: self.count(&format!("{name}_count"), ""),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_samples_and_histograms() {
        let text = "# TYPE herald_connections gauge\n\
            herald_connections{transport=\"ws\"} 3\n\
            herald_connections{transport=\"sse\"} 1\n\
            herald_deliveries_total 42\n\
            herald_delivery_lag_seconds_bucket{le=\"0.001\"} 5\n\
            herald_delivery_lag_seconds_bucket{le=\"0.01\"} 9\n\
            herald_delivery_lag_seconds_bucket{le=\"+Inf\"} 10\n\
            herald_delivery_lag_seconds_sum 0.25\n\
            herald_delivery_lag_seconds_count 10\n\
            garbage line\n";
        let s = Samples::parse(text);
        assert_eq!(s.count("herald_connections", "transport=\"ws\""), 3);
        assert_eq!(s.count("herald_connections", "transport=\"poll\""), 0);
        assert_eq!(s.count("herald_deliveries_total", ""), 42);
        let h = s.histogram("herald_delivery_lag_seconds");
        assert_eq!(h.buckets, vec![(0.001, 5), (0.01, 9)]);
        assert_eq!((h.sum_seconds, h.count), (0.25, 10));
        assert_eq!(s.histogram("nothing"), Histogram::default());
    }
}
