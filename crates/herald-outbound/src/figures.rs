//! What the sends to one destination came to, as Urban Airship's queue workers reported it:
//! sends, successes, failures by reason, retries, and the time a send took (mean and 95th
//! percentile, from a log-scale histogram kept in memory). Each user keeps one [`Figures`] per
//! key it reports by (an app and provider, an endpoint) and exports its own metrics.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// Histogram buckets: bucket `i` holds times up to `FIRST_BUCKET_US * GROWTH^i`.
const BUCKETS: usize = 64;
const FIRST_BUCKET_US: f64 = 50.0;
const GROWTH: f64 = 1.25;

/// How one send ended, for the figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended<'a> {
    /// Accepted by the destination.
    Success,
    /// Failed for good with this reason.
    Failure(&'a str),
    /// Will be tried again.
    Retry,
}

/// The running figures of one key.
#[derive(Debug, Default)]
pub struct Figures {
    sends: u64,
    successes: u64,
    failures: BTreeMap<String, u64>,
    retries: u64,
    total_us: u64,
    buckets: Vec<u64>,
}

/// The figures as reported.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Sends that got an answer (or failed to connect).
    pub sends: u64,
    /// Accepted by the destination.
    pub successes: u64,
    /// Failed for good, by reason.
    pub failures: BTreeMap<String, u64>,
    /// Sends that will be tried again.
    pub retries: u64,
    /// Mean time a send took, milliseconds.
    pub avg_ms: f64,
    /// 95th percentile of the time a send took, milliseconds (bucket upper bound, within 25%).
    pub p95_ms: f64,
}

fn bucket_of(us: u64) -> usize {
    let mut bound = FIRST_BUCKET_US;
    for i in 0..BUCKETS {
        if (us as f64) <= bound {
            return i;
        }
        bound *= GROWTH;
    }
    BUCKETS - 1
}

fn bucket_bound_ms(i: usize) -> f64 {
    FIRST_BUCKET_US * GROWTH.powi(i as i32) / 1000.0
}

impl Figures {
    /// Counts one send that took `took` and ended as `ended`.
    pub fn record(&mut self, took: Duration, ended: Ended<'_>) {
        let us = took.as_micros() as u64;
        if self.buckets.is_empty() {
            self.buckets = vec![0; BUCKETS];
        }
        self.sends += 1;
        self.total_us += us;
        self.buckets[bucket_of(us)] += 1;
        match ended {
            Ended::Success => self.successes += 1,
            Ended::Failure(reason) => match self.failures.get_mut(reason) {
                Some(n) => *n += 1,
                None => {
                    self.failures.insert(reason.to_string(), 1);
                }
            },
            Ended::Retry => self.retries += 1,
        }
    }

    /// The figures so far.
    pub fn summary(&self) -> Summary {
        let mut p95_ms = 0.0;
        let target = (self.sends as f64 * 0.95).ceil() as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= target && *n > 0 {
                p95_ms = bucket_bound_ms(i);
                break;
            }
        }
        Summary {
            sends: self.sends,
            successes: self.successes,
            failures: self.failures.clone(),
            retries: self.retries,
            avg_ms: if self.sends == 0 {
                0.0
            } else {
                self.total_us as f64 / self.sends as f64 / 1000.0
            },
            p95_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_percentiles() {
        let mut f = Figures::default();
        for _ in 0..95 {
            f.record(Duration::from_millis(1), Ended::Success);
        }
        for _ in 0..5 {
            f.record(Duration::from_millis(100), Ended::Failure("rejected:x"));
        }
        let s = f.summary();
        assert_eq!((s.sends, s.successes, s.retries), (100, 95, 0));
        assert_eq!(s.failures["rejected:x"], 5);
        assert!(s.p95_ms >= 1.0 && s.p95_ms < 1.25, "{}", s.p95_ms);
        assert!((s.avg_ms - 5.95).abs() < 0.01, "{}", s.avg_ms);
        let mut retried = Figures::default();
        retried.record(Duration::from_millis(3), Ended::Retry);
        assert_eq!(retried.summary().retries, 1);
        assert_eq!(Figures::default().summary(), Summary::default());
    }
}
