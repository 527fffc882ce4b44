//! How long the writer gathers requests before a group commit under `sync = batch`.
//!
//! Publishers that wait for each answer before sending again (every HTTP publisher, and every
//! `wrk`-style load) split into two groups under plain group commit: the requests that arrive
//! while commit *k* runs make commit *k + 1*, the publishers commit *k* answered come back while
//! commit *k + 1* runs and make commit *k + 2*, and so on; every publish then waits for about two
//! commits (two fsyncs), and every commit holds half the publishers.
//!
//! So after a commit the writer expects back the publishers it has just answered, on top of the
//! requests that queued during that commit, and before its next commit it waits for that many
//! requests, but never longer than its last commit took (at most [`MAX_WAIT`]): the publishers
//! it waits for would otherwise wait that long for the commit in between, and all of them then
//! share one fsync. A lone publisher is never held (it expects one request, its own), and a
//! wait that the publishers do not fill costs at most that bound.
//! Nothing is answered before its commit, as before; only when the commit starts moves.

use std::time::Duration;

/// The longest the writer holds a commit back for publishers it expects.
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(2);

/// What the writer expects before its next commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gather {
    /// Requests to wait for (those already queued included).
    pub expected: usize,
    /// The longest to wait for them, from when the first is in hand.
    pub wait: Duration,
}

impl Gather {
    /// Expect nothing: commit whatever is queued at once.
    pub(crate) const NONE: Gather = Gather {
        expected: 0,
        wait: Duration::ZERO,
    };

    /// What to expect after a commit that answered `answered` append requests and took
    /// `commit`, when `queued` requests were waiting as it answered; at most `max_requests`.
    pub(crate) fn after_commit(
        answered: usize,
        queued: usize,
        commit: Duration,
        max_requests: usize,
    ) -> Gather {
        // One publisher answered and nobody waiting: no one else to wait for.
        if answered + queued <= 1 {
            return Gather::NONE;
        }
        Gather {
            expected: answered.saturating_add(queued).min(max_requests),
            wait: commit.min(MAX_WAIT),
        }
    }

    /// Whether `have` requests in hand are enough to commit without waiting.
    pub(crate) fn satisfied(&self, have: usize) -> bool {
        have >= self.expected || self.wait.is_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_publisher_is_never_held() {
        let g = Gather::after_commit(1, 0, Duration::from_millis(5), 4096);
        assert_eq!(g, Gather::NONE);
        assert!(g.satisfied(1));
        assert!(Gather::NONE.satisfied(0));
    }

    #[test]
    fn the_answered_publishers_and_the_queued_ones_are_expected() {
        let g = Gather::after_commit(32, 30, Duration::from_millis(3), 4096);
        assert_eq!(g.expected, 62);
        assert_eq!(g.wait, Duration::from_millis(2));
        let g = Gather::after_commit(32, 30, Duration::from_micros(700), 4096);
        assert_eq!(g.wait, Duration::from_micros(700));
        assert!(!g.satisfied(61));
        assert!(g.satisfied(62));
    }

    #[test]
    fn the_wait_is_bounded_and_the_count_capped() {
        let g = Gather::after_commit(5000, 0, Duration::from_secs(1), 4096);
        assert_eq!(g.expected, 4096);
        assert_eq!(g.wait, MAX_WAIT);
        // A commit that took no time (sync = off, or a tiny one) holds nothing back.
        let g = Gather::after_commit(64, 0, Duration::ZERO, 4096);
        assert!(g.satisfied(1));
    }
}

