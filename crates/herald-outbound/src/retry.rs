//! How a failed job is retried: exponential backoff with jitter, a destination's `Retry-After`
//! honoured, and a dead letter after [`MAX_ATTEMPTS`].
//!
//! Retries wait twice as long each time, with jitter (a random wait between half and all of
//! the step), so jobs that failed together do not come back together.

use std::time::Duration;

use rand::Rng;

/// Attempts before a job becomes a dead letter.
pub const MAX_ATTEMPTS: u32 = 8;
/// First retry delay (before jitter).
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// Longest retry delay.
pub const BACKOFF_CAP: Duration = Duration::from_secs(3600);

/// How failed jobs are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts before a job becomes a dead letter.
    pub max_attempts: u32,
    /// First retry delay (before jitter).
    pub base: Duration,
    /// Longest retry delay.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: MAX_ATTEMPTS,
            base: BACKOFF_BASE,
            cap: BACKOFF_CAP,
        }
    }
}

impl RetryPolicy {
    /// When attempt `attempts` (1 for the first) should be retried: `retry_after` when the
    /// destination gave one, otherwise exponential backoff from `base` capped at `cap`, with
    /// jitter (between half and all of the step). `None` when the job has had `max_attempts`
    /// and should become a dead letter.
    pub fn next_attempt(&self, attempts: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if attempts >= self.max_attempts {
            return None;
        }
        if let Some(after) = retry_after {
            return Some(after.min(self.cap));
        }
        let ceiling = self
            .base
            .saturating_mul(1u32 << attempts.saturating_sub(1).min(20))
            .min(self.cap);
        let ms = ceiling.as_millis() as u64;
        Some(Duration::from_millis(
            rand::thread_rng().gen_range(ms / 2..=ms.max(1)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_gives_up() {
        for attempts in 1..MAX_ATTEMPTS {
            let ceiling = BACKOFF_BASE * (1 << (attempts - 1));
            for _ in 0..50 {
                let d = RetryPolicy::default().next_attempt(attempts, None).unwrap();
                assert!(d <= ceiling && d >= ceiling / 2, "{attempts}: {d:?}");
            }
        }
        let policy = RetryPolicy::default();
        assert_eq!(policy.next_attempt(MAX_ATTEMPTS, None), None);
        assert_eq!(
            policy.next_attempt(1, Some(Duration::from_secs(30))),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            policy.next_attempt(1, Some(Duration::from_secs(1 << 20))),
            Some(BACKOFF_CAP)
        );
    }

    #[test]
    fn the_cap_bounds_the_backoff_and_jitter_spreads_it() {
        let policy = RetryPolicy {
            max_attempts: 40,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
        };
        let mut seen = std::collections::BTreeSet::new();
        for attempts in [7, 12, 30, 39] {
            for _ in 0..200 {
                let d = policy.next_attempt(attempts, None).unwrap();
                assert!(
                    d >= Duration::from_secs(30) && d <= Duration::from_secs(60),
                    "{d:?}"
                );
                seen.insert(d);
            }
        }
        // Jitter: jobs that failed together do not all come back at the same time.
        assert!(seen.len() > 10, "{seen:?}");
        assert_eq!(policy.next_attempt(40, Some(Duration::from_secs(1))), None);
    }

    #[test]
    fn a_retry_after_is_honoured_as_given_up_to_the_cap() {
        let policy = RetryPolicy::default();
        for attempts in 1..MAX_ATTEMPTS {
            assert_eq!(
                policy.next_attempt(attempts, Some(Duration::from_millis(1500))),
                Some(Duration::from_millis(1500))
            );
        }
        // Even a zero wait: the destination said it may be tried again at once.
        assert_eq!(
            policy.next_attempt(3, Some(Duration::ZERO)),
            Some(Duration::ZERO)
        );
    }
}
