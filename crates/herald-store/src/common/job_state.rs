//! Changes of a job's state, as the counters per push see them, written once for both stores:
//! one [`Tally`] method per change a write makes (a lease, a settlement, a live settlement, a
//! replay, a dropped dead letter, a prune, a broadcast page's direct sends, an expansion's end),
//! and the state a [`Settlement`] leaves a leased job in. Each backend's statement makes the
//! change in its table; the method says what it does to the counters.

use std::borrow::Cow;

use herald_push::delivery::record::ACKED;
use herald_push::jobs::{Job, JobKind, Settlement};

use super::job_counts::{done, Standing, Tally, EXPANDING, IN_DOUBT};

/// The state a leased job is in once settled like this.
pub(crate) fn settled_state(settlement: &Settlement) -> &'static str {
    match settlement {
        Settlement::Done { .. } => "done",
        Settlement::Dead { .. } => "dead",
        Settlement::Retry { .. } => "queued",
    }
}

/// The result a queued send job is settled with when its device acknowledged the push: the
/// push side's [`ACKED`] (`live`), which decides which pushes an ack settles
/// (`DeliveryRecord::settled_by_ack`). Both backends' `settle_live` statements write it and
/// [`Tally::settled_live`] counts it.
pub(crate) fn acked_result() -> Cow<'static, str> {
    ACKED.as_text()
}

impl Tally {
    /// A job was leased and now is in doubt or not (`in_doubt`, as the lease left it): a send
    /// that was not in doubt before (its previous lease lapsed) now counts as in doubt.
    pub fn leased(&mut self, job: &Job, in_doubt: bool) {
        let send = matches!(job.job.kind, JobKind::Send { .. });
        if send && in_doubt && !job.in_doubt {
            self.add(job.job.app.as_str(), &job.job.push, IN_DOUBT, 1);
        }
    }

    /// A leased job of `kind` was settled: it now stands in `state` with `result`.
    pub fn settled(
        &mut self,
        (app, push): (&str, &str),
        kind: &str,
        in_doubt: bool,
        state: &str,
        result: &str,
    ) {
        let from = Standing {
            kind,
            state: "leased",
            result: None,
            in_doubt,
        };
        let to = Standing {
            kind,
            state,
            result: Some(result),
            in_doubt,
        };
        self.moved(app, push, &from, &to);
    }

    /// A queued send job was settled as `live` (its device acknowledged the push).
    pub fn settled_live(&mut self, (app, push): (&str, &str), kind: &str, in_doubt: bool) {
        let queued = Standing {
            kind,
            state: "queued",
            result: None,
            in_doubt,
        };
        let acked = acked_result();
        let live = Standing {
            state: "done",
            result: Some(&acked),
            ..queued.clone()
        };
        self.moved(app, push, &queued, &live);
    }

    /// A dead letter was replayed: queued again.
    pub fn replayed(&mut self, (app, push): (&str, &str), kind: &str, in_doubt: bool) {
        let dead = Standing {
            kind,
            state: "dead",
            result: None,
            in_doubt,
        };
        let queued = Standing {
            state: "queued",
            ..dead.clone()
        };
        self.moved(app, push, &dead, &queued);
    }

    /// A dead letter was dropped.
    pub fn dropped_dead(&mut self, (app, push): (&str, &str), kind: &str, in_doubt: bool) {
        let dead = Standing {
            kind,
            state: "dead",
            result: None,
            in_doubt,
        };
        self.leave(app, push, &dead);
    }

    /// A finished send job with `result` was pruned.
    pub fn pruned(&mut self, (app, push): (&str, &str), result: Option<&str>, in_doubt: bool) {
        let done = Standing {
            kind: "send",
            state: "done",
            result,
            in_doubt,
        };
        self.leave(app, push, &done);
    }

    /// A broadcast page's direct sends that need no row finished, `n` with each result.
    pub fn sent_without_rows(&mut self, (app, push): (&str, &str), counted: &[(String, u64)]) {
        for (result, n) in counted {
            self.add(
                app,
                push,
                &done(result),
                i64::try_from(*n).unwrap_or(i64::MAX),
            );
        }
    }

    /// An expansion finished (its last page is added).
    pub fn expansion_finished(&mut self, (app, push): (&str, &str)) {
        self.add(app, push, EXPANDING, -1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ack_settles_a_queued_job_with_the_result_stored_before() {
        // The stored string, the receipts' `live` count and the per-device listing read it.
        assert_eq!(acked_result(), "live");
    }
}
