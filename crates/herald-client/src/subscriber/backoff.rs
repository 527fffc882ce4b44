//! How long a subscriber waits before a reconnect: capped exponential backoff with full jitter
//! above a floor, so clients that lost the same server do not all come back at once.

use std::time::Duration;

/// Reconnect waits: attempt `n` (0-based) waits a uniformly spread time in `[min, cap]`, where
/// the cap is `min * 2^n`, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The shortest wait (and the first attempt's cap).
    pub min: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for Backoff {
    /// 100 ms to 5 s, what `herald subscribe` uses.
    fn default() -> Self {
        Backoff {
            min: Duration::from_millis(100),
            max: Duration::from_secs(5),
        }
    }
}

impl Backoff {
    /// The wait before reconnect attempt `attempt` (0-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let max = self.max.max(self.min);
        let cap = self.min.saturating_mul(1u32 << attempt.min(10)).min(max);
        // Jitter without a random number generator: the clock's sub-second part.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let spread = cap.saturating_sub(self.min);
        self.min + spread.mul_f64(f64::from(nanos % 1000) / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_its_cap() {
        let backoff = Backoff::default();
        for attempt in 0..20 {
            let wait = backoff.delay(attempt);
            assert!(wait >= backoff.min && wait <= backoff.max, "{wait:?}");
        }
        let first = backoff.delay(0);
        assert_eq!(first, backoff.min, "the first attempt's cap is the floor");
    }
}
