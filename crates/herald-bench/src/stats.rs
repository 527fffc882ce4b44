//! Latency histograms (microseconds, via `hdrhistogram`), their transport between worker
//! processes and the parent (V2 serialisation, base64), and the summaries the reports print.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest latency a histogram records, in microseconds (10 minutes); longer ones saturate.
const MAX_US: u64 = 600_000_000;

/// A new latency histogram in microseconds, 3 significant figures.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds")
}

/// Records a latency given in nanoseconds (clamped to the histogram's range).
pub fn record_ns(h: &mut Histogram<u64>, ns: u64) {
    let us = (ns / 1000).clamp(1, MAX_US);
    h.saturating_record(us);
}

/// Serialises a histogram for the trip from a worker to the parent.
pub fn encode(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut bytes)
        .expect("serialising to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Reads a histogram a worker sent.
pub fn decode(s: &str) -> anyhow::Result<Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s)?;
    let h: Histogram<u64> = Deserializer::new().deserialize(&mut bytes.as_slice())?;
    Ok(h)
}

/// Adds `other` into `into`.
pub fn merge(into: &mut Histogram<u64>, other: &Histogram<u64>) {
    // Both come from `histogram()`, so the bounds match and `add` cannot fail.
    let _ = into.add(other);
}

/// Latency percentiles in milliseconds, as every report and `summary.json` carries them.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencyMs {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Worst case.
    pub max: f64,
}

impl LatencyMs {
    /// The summary of a histogram (all zero when it is empty).
    pub fn of(h: &Histogram<u64>) -> LatencyMs {
        if h.is_empty() {
            return LatencyMs::default();
        }
        let ms = |us: u64| round3(us as f64 / 1000.0);
        LatencyMs {
            p50: ms(h.value_at_quantile(0.50)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
        }
    }
}

/// Rounds to 3 decimals (for tables and JSON).
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Rounds to 1 decimal.
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_merge() {
        let mut a = histogram();
        for ms in 1..=100 {
            record_ns(&mut a, ms * 1_000_000);
        }
        let b = decode(&encode(&a)).unwrap();
        assert_eq!(b.len(), 100);
        let mut c = histogram();
        merge(&mut c, &a);
        merge(&mut c, &b);
        assert_eq!(c.len(), 200);
        let l = LatencyMs::of(&c);
        assert!((l.p50 - 50.0).abs() < 0.1, "{l:?}");
        assert!((l.max - 100.0).abs() < 0.1, "{l:?}");
    }
}
