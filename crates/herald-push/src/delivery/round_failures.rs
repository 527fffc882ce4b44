//! The delivery worker while its rounds fail (the store cannot be reached, most often): one
//! WARN when rounds start failing, saying why; then each loop waits longer after each failure
//! in a row ([`retry_delay`]: 1 s, 2 s, 4 s ... [`MAX_RETRY_DELAY`]) instead of polling every
//! `poll`, with the failures meanwhile at DEBUG; and one INFO when a round works again, saying
//! after how long and how many rounds failed meanwhile. The worker's loops share one
//! [`RoundFailures`], so a node says each change once, however many loops it runs.

use std::time::{Duration, Instant};

use herald_core::log::StoreError;
use parking_lot::Mutex;

/// The longest wait between two rounds of a loop whose rounds fail.
pub(super) const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// How long a loop waits before its next round after `in_a_row` failed rounds (1 for the
/// first): 1 s, doubled each time, at most [`MAX_RETRY_DELAY`].
pub(super) fn retry_delay(in_a_row: u32) -> Duration {
    let doublings = in_a_row.saturating_sub(1).min(16);
    Duration::from_secs(1u64 << doublings).min(MAX_RETRY_DELAY)
}

/// Since when rounds fail, and how many did.
struct Failing {
    since: Instant,
    rounds: u64,
}

/// Whether the worker's rounds fail, told in the log (see the module documentation).
#[derive(Default)]
pub(super) struct RoundFailures {
    failing: Mutex<Option<Failing>>,
}

impl RoundFailures {
    /// Whether rounds fail now (the last one failed).
    pub(super) fn is_failing(&self) -> bool {
        self.failing.lock().is_some()
    }

    /// A round failed with `error`, its loop's `in_a_row`th failure in a row: says so if rounds
    /// worked until now, and answers how long that loop waits before its next round.
    pub(super) fn failed(&self, error: &StoreError, in_a_row: u32) -> Duration {
        self.failed_at(error, in_a_row, Instant::now())
    }

    fn failed_at(&self, error: &StoreError, in_a_row: u32, now: Instant) -> Duration {
        let wait = retry_delay(in_a_row);
        let mut failing = self.failing.lock();
        match failing.as_mut() {
            Some(failing) => {
                failing.rounds += 1;
                tracing::debug!(
                    error = %error.chain(),
                    rounds = failing.rounds,
                    wait_ms = wait.as_millis() as u64,
                    "delivery round failed again"
                );
            }
            None => {
                *failing = Some(Failing {
                    since: now,
                    rounds: 1,
                });
                tracing::warn!(
                    "delivery rounds fail: {}; provider pushes wait, and rounds are retried \
                     after 1 s, 2 s, 4 s ... up to {} s until one works",
                    error.chain(),
                    MAX_RETRY_DELAY.as_secs()
                );
            }
        }
        wait
    }

    /// A round worked: says so if rounds failed until now.
    pub(super) fn worked(&self) {
        self.worked_at(Instant::now())
    }

    fn worked_at(&self, now: Instant) {
        let Some(was) = self.failing.lock().take() else {
            return;
        };
        let took = now.saturating_duration_since(was.since);
        tracing::info!(
            down_ms = took.as_millis() as u64,
            failed_rounds = was.rounds,
            "delivery rounds work again after {} s; provider pushes that waited are sent now",
            took.as_secs()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_testkit::logs::capture;
    use tracing::Level;

    #[test]
    fn the_wait_doubles_from_one_second_up_to_thirty() {
        let waits: Vec<u64> = (1..=8).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(retry_delay(0), Duration::from_secs(1));
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY_DELAY);
    }

    #[test]
    fn failing_rounds_are_one_warn_then_one_info_with_the_duration() {
        let failures = RoundFailures::default();
        let start = Instant::now();
        let refused = StoreError::unavailable(
            "cannot reach PostgreSQL at db:5432/herald",
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        );
        let lines = capture(|| {
            failures.worked_at(start);
            for n in 1..=6 {
                let at = start + Duration::from_secs(u64::from(n));
                assert_eq!(failures.failed_at(&refused, n, at), retry_delay(n));
                assert!(failures.is_failing());
            }
            failures.worked_at(start + Duration::from_secs(21));
            failures.worked_at(start + Duration::from_secs(22));
        });
        let said: Vec<_> = lines.iter().filter(|(l, _)| *l <= Level::INFO).collect();
        assert_eq!(said.len(), 2, "{lines:?}");
        assert_eq!(said[0].0, Level::WARN);
        assert!(
            said[0].1.starts_with(
                "delivery rounds fail: store unavailable: cannot reach PostgreSQL at \
                 db:5432/herald: connection refused; provider pushes wait"
            ),
            "{}",
            said[0].1
        );
        assert_eq!(said[1].0, Level::INFO);
        assert!(
            said[1]
                .1
                .starts_with("delivery rounds work again after 20 s"),
            "{}",
            said[1].1
        );
        assert!(said[1].1.contains("failed_rounds=6"), "{}", said[1].1);
        let repeated = lines.iter().filter(|(l, _)| *l == Level::DEBUG).count();
        assert_eq!(repeated, 5, "{lines:?}");
        assert!(!failures.is_failing());
    }
}
