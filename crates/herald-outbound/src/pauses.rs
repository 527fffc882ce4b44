//! Pauses per destination: after a failure of a destination as a whole (a rate limit, an
//! outage, credentials refused), none of its jobs is leased until the pause ends, while other
//! destinations go on.
//!
//! A pause lasts the destination's `Retry-After` when it gave one, otherwise a step of
//! backoff: 2 s after the first failure, doubled at each pause in a row, at most
//! [`LONGEST_STEP`] (2, 4, 8 ... 256 s). Only the first failure of a pause takes a step: the
//! other sends that failed with it (or were already under way) do not lengthen it, except by a
//! `Retry-After` of their own; a pause is never shortened. A pause that ended is remembered,
//! with its count of pauses in a row, until a send to the destination succeeds
//! ([`Pauses::resume`]), so the next failure waits longer: backoff, not 2 s every time.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use parking_lot::Mutex;

/// The longest pause a step of backoff makes (a `Retry-After` may say longer).
pub const LONGEST_STEP: Duration = Duration::from_secs(300);

/// Doublings of the first step at most (2 s doubled 7 times: 256 s).
const MOST_DOUBLINGS: u32 = 8;

/// One destination's pause.
#[derive(Debug, Clone, Copy)]
struct Pause {
    /// Its jobs wait until then, milliseconds since the Unix epoch.
    until_ms: i64,
    /// Pauses in a row without a send going through: the backoff's step.
    consecutive: u32,
}

/// The paused destinations (see the module documentation).
#[derive(Debug)]
pub struct Pauses<D> {
    by: Mutex<HashMap<D, Pause>>,
}

impl<D> Default for Pauses<D> {
    fn default() -> Self {
        Pauses {
            by: Mutex::new(HashMap::new()),
        }
    }
}

impl<D: Clone + Eq + Hash> Pauses<D> {
    /// The destinations paused at `now_ms` (what a lease skips).
    pub fn paused(&self, now_ms: i64) -> Vec<D> {
        self.by
            .lock()
            .iter()
            .filter(|(_, p)| p.until_ms > now_ms)
            .map(|(d, _)| d.clone())
            .collect()
    }

    /// Whether `destination` is paused at `now_ms`.
    pub fn is_paused(&self, destination: &D, now_ms: i64) -> bool {
        self.by
            .lock()
            .get(destination)
            .is_some_and(|p| p.until_ms > now_ms)
    }

    /// `destination` failed as a whole at `now_ms`, saying `retry_after` or not: pauses it
    /// (or lengthens its pause) and answers how long this failure asked it to wait.
    pub fn pause(&self, destination: &D, now_ms: i64, retry_after: Option<Duration>) -> Duration {
        let mut by = self.by.lock();
        let pause = by.entry(destination.clone()).or_insert(Pause {
            until_ms: now_ms,
            consecutive: 0,
        });
        if pause.until_ms <= now_ms {
            pause.consecutive += 1;
        }
        let wait = retry_after.unwrap_or_else(|| {
            Duration::from_secs(1 << pause.consecutive.min(MOST_DOUBLINGS)).min(LONGEST_STEP)
        });
        pause.until_ms = pause
            .until_ms
            .max(now_ms.saturating_add(wait.as_millis() as i64));
        wait
    }

    /// A send to `destination` went through: it is no longer paused, and its backoff starts
    /// again. Answers whether it had been paused (to say once that it works again).
    pub fn resume(&self, destination: &D) -> bool {
        let mut by = self.by.lock();
        if by.is_empty() {
            return false;
        }
        by.remove(destination).is_some_and(|p| p.consecutive > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1000;

    #[test]
    fn a_paused_destination_waits_until_its_time_and_the_others_do_not() {
        let pauses = Pauses::default();
        let wait = pauses.pause(&"apns", 0, None);
        assert_eq!(wait, Duration::from_secs(2));
        assert_eq!(pauses.paused(0), ["apns"]);
        assert_eq!(pauses.paused(2 * S - 1), ["apns"]);
        assert!(pauses.is_paused(&"apns", S) && !pauses.is_paused(&"fcm", S));
        // Its time came: leased again (but remembered for the backoff).
        assert!(pauses.paused(2 * S).is_empty());
        assert!(!pauses.is_paused(&"apns", 2 * S));
    }

    #[test]
    fn each_pause_in_a_row_doubles_and_a_success_starts_again() {
        let pauses = Pauses::default();
        let mut now = 0;
        let mut waits = Vec::new();
        for _ in 0..10 {
            let wait = pauses.pause(&"d", now, None);
            waits.push(wait.as_secs());
            // The other failures of the same round take no step of their own.
            assert_eq!(pauses.pause(&"d", now, None), wait);
            now += wait.as_millis() as i64;
        }
        assert_eq!(waits, [2, 4, 8, 16, 32, 64, 128, 256, 256, 256]);
        assert!(pauses.resume(&"d"));
        assert!(!pauses.resume(&"d"), "said once");
        assert_eq!(pauses.pause(&"d", now, None), Duration::from_secs(2));
    }

    #[test]
    fn a_retry_after_sets_the_pause_and_never_shortens_one() {
        let pauses = Pauses::default();
        assert_eq!(
            pauses.pause(&"d", 0, Some(Duration::from_secs(60))),
            Duration::from_secs(60)
        );
        assert_eq!(pauses.paused(59 * S), ["d"]);
        // A shorter hint during the pause leaves its end where it was.
        pauses.pause(&"d", S, Some(Duration::from_secs(5)));
        assert_eq!(pauses.paused(59 * S), ["d"]);
        // A longer one moves it.
        pauses.pause(&"d", S, Some(Duration::from_secs(600)));
        assert_eq!(pauses.paused(600 * S), ["d"]);
        assert!(pauses.paused(601 * S).is_empty());
    }
}
