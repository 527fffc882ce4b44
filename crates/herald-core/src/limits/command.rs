//! The per-connection command budget: a GCRA (the algorithm `governor` implements) held in 16
//! bytes inside the connection's session, because a governor limiter per connection would cost
//! tens of bytes more on every idle connection and a shared keyed map would need an id per
//! connection and pruning. The budget's rate is server-wide ([`CommandRate`]); the state is
//! the connection's "theoretical arrival time" in microseconds since the process's rate clock
//! started, and how many commands in a row it refused.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::Rate;

/// Microseconds since this process's rate clock started (the first call).
fn now_micros() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// The server-wide command rate, in the units [`CommandBudget`] counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandRate {
    /// Microseconds one command's allowance takes to come back; 0 when off.
    interval_us: u64,
    /// `interval_us` times the burst: how far ahead of now the budget may run.
    window_us: u64,
    /// Commands refused in a row after which the connection is closed.
    flood: u32,
}

impl CommandRate {
    /// The budget of `rate` (off when `rate` is).
    pub fn new(rate: Rate) -> CommandRate {
        if rate.is_off() {
            return CommandRate {
                interval_us: 0,
                window_us: 0,
                flood: 0,
            };
        }
        let interval_us = u64::try_from(rate.interval().as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        CommandRate {
            interval_us,
            window_us: interval_us.saturating_mul(u64::from(rate.burst())),
            flood: rate.burst().max(1),
        }
    }

    /// Whether the limit is off.
    pub fn is_off(&self) -> bool {
        self.interval_us == 0
    }
}

/// What the budget says about one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Run it.
    Run,
    /// Refuse it with `rate_limited`; the client may retry after this long.
    Refuse(Duration),
    /// Refuse it and close the connection: the client went on sending through a whole burst
    /// of refusals.
    Disconnect,
}

/// One connection's command budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommandBudget {
    /// When the budget is next full again, in microseconds of the rate clock (0: full).
    full_at: u64,
    /// Commands refused since the last one that ran.
    refused: u32,
}

impl CommandBudget {
    /// Counts one command against `rate`.
    pub fn admit(&mut self, rate: &CommandRate) -> Admission {
        if rate.is_off() {
            return Admission::Run;
        }
        self.admit_at(rate, now_micros())
    }

    /// Whether the budget is as full as a new connection's (nothing spent that has not come
    /// back, nothing refused): a connection may then drop it and start again from
    /// [`CommandBudget::default`] without being allowed one command more.
    pub fn is_fresh(&self, rate: &CommandRate) -> bool {
        rate.is_off() || self.is_fresh_at(now_micros())
    }

    fn is_fresh_at(&self, now: u64) -> bool {
        self.full_at <= now && self.refused == 0
    }

    fn admit_at(&mut self, rate: &CommandRate, now: u64) -> Admission {
        let next = self.full_at.max(now).saturating_add(rate.interval_us);
        let ahead = next - now;
        if ahead <= rate.window_us {
            self.full_at = next;
            self.refused = 0;
            return Admission::Run;
        }
        self.refused = self.refused.saturating_add(1);
        if self.refused > rate.flood {
            return Admission::Disconnect;
        }
        Admission::Refuse(Duration::from_micros(ahead - rate.window_us))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_runs_then_commands_are_refused_until_the_budget_refills() {
        let rate = CommandRate::new(Rate::per_second(1, 3));
        let mut b = CommandBudget::default();
        let t = 10_000_000;
        for _ in 0..3 {
            assert_eq!(b.admit_at(&rate, t), Admission::Run);
        }
        assert_eq!(
            b.admit_at(&rate, t),
            Admission::Refuse(Duration::from_secs(1))
        );
        assert_eq!(b.admit_at(&rate, t + 1_000_000), Admission::Run);
        assert!(matches!(
            b.admit_at(&rate, t + 1_000_000),
            Admission::Refuse(_)
        ));
    }

    #[test]
    fn a_budget_is_fresh_again_once_what_it_spent_came_back() {
        let rate = CommandRate::new(Rate::per_second(1, 2));
        let mut b = CommandBudget::default();
        let t = 7_000_000;
        assert!(b.is_fresh_at(t), "a new budget");
        assert_eq!(b.admit_at(&rate, t), Admission::Run);
        assert!(!b.is_fresh_at(t), "one command spent");
        assert!(!b.is_fresh_at(t + 999_999));
        assert!(b.is_fresh_at(t + 1_000_000), "the second it took came back");
        assert_eq!(b.admit_at(&rate, t), Admission::Run);
        assert!(matches!(b.admit_at(&rate, t), Admission::Refuse(_)));
        assert!(
            !b.is_fresh_at(t + 10_000_000),
            "a refusal is remembered until a command runs"
        );
        assert!(CommandBudget::default().is_fresh(&CommandRate::new(Rate::OFF)));
    }

    #[test]
    fn flooding_through_a_burst_of_refusals_disconnects() {
        let rate = CommandRate::new(Rate::per_second(1, 2));
        let mut b = CommandBudget::default();
        let t = 5_000_000;
        assert_eq!(b.admit_at(&rate, t), Admission::Run);
        assert_eq!(b.admit_at(&rate, t), Admission::Run);
        assert!(matches!(b.admit_at(&rate, t), Admission::Refuse(_)));
        assert!(matches!(b.admit_at(&rate, t), Admission::Refuse(_)));
        assert_eq!(b.admit_at(&rate, t), Admission::Disconnect);
    }

    #[test]
    fn off_runs_everything_and_the_budget_is_small() {
        let off = CommandRate::new(Rate::OFF);
        let mut b = CommandBudget::default();
        for _ in 0..10_000 {
            assert_eq!(b.admit(&off), Admission::Run);
        }
        assert!(size_of::<CommandBudget>() <= 16);
    }
}
