//! Counters per push (`push_counts`), the rules both stores share: the counter names
//! (`done:RESULT` for finished sends by result, with or without a job row; `queued` for send
//! jobs queued or leased; `dead` for dead letters, sends and expansions; `in_doubt` for send
//! jobs whose send may have been duplicated; `expanding` for expansions queued or leased), what
//! a job's state counts as ([`Standing`]), and a transaction's changes ([`Tally`]; how each
//! change of a job's state moves them is `super::job_state`), which each store applies in the
//! same transaction as the jobs they count (SQLite in
//! `sqlite/jobs/counts.rs`, PostgreSQL as increments in `postgres/jobs/counts.rs`), and how the
//! counters read back as a push's [`PushJobs`] ([`count_into`]).

use std::collections::BTreeMap;

use herald_push::jobs::PushJobs;

/// Finished sends with this result.
pub(crate) fn done(result: &str) -> String {
    format!("done:{result}")
}
/// Send jobs queued or leased.
pub(crate) const QUEUED: &str = "queued";
/// Dead letters.
pub(crate) const DEAD: &str = "dead";
/// Send jobs in doubt.
pub(crate) const IN_DOUBT: &str = "in_doubt";
/// Expansions queued or leased.
pub(crate) const EXPANDING: &str = "expanding";

/// Where a job stands, as the counters see it: its kind, state, result and doubt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Standing<'a> {
    /// `send` or `expand`.
    pub kind: &'a str,
    /// `queued`, `leased`, `done` or `dead`.
    pub state: &'a str,
    /// Its result (read for a finished send only).
    pub result: Option<&'a str>,
    /// Whether it is in doubt (counted for sends only).
    pub in_doubt: bool,
}

impl Standing<'_> {
    /// The counters a job standing like this adds one to.
    fn counters(&self) -> Vec<String> {
        let send = self.kind == "send";
        let mut names = Vec::with_capacity(2);
        match self.state {
            "dead" => names.push(DEAD.to_string()),
            "queued" | "leased" if send => names.push(QUEUED.to_string()),
            "queued" | "leased" => names.push(EXPANDING.to_string()),
            "done" if send => names.push(done(self.result.unwrap_or_default())),
            _ => {}
        }
        if send && self.in_doubt {
            names.push(IN_DOUBT.to_string());
        }
        names
    }
}

/// Changes to counters, applied together by each store's `apply`, in key order (a store that
/// several nodes write takes the counter rows in that order, so two transactions never wait
/// for each other's counters in a cycle).
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) changes: BTreeMap<(String, String, String), i64>,
}

impl Tally {
    /// Adds `n` to `counter` of `(app, push)`.
    pub fn add(&mut self, app: &str, push: &str, counter: &str, n: i64) {
        if n != 0 {
            *self
                .changes
                .entry((app.to_string(), push.to_string(), counter.to_string()))
                .or_default() += n;
        }
    }

    /// A job of `(app, push)` came to stand as `standing`.
    pub fn enter(&mut self, app: &str, push: &str, standing: &Standing<'_>) {
        for counter in standing.counters() {
            self.add(app, push, &counter, 1);
        }
    }

    /// A job of `(app, push)` no longer stands as `standing`.
    pub fn leave(&mut self, app: &str, push: &str, standing: &Standing<'_>) {
        for counter in standing.counters() {
            self.add(app, push, &counter, -1);
        }
    }

    /// A job moved from `from` to `to`.
    pub fn moved(&mut self, app: &str, push: &str, from: &Standing<'_>, to: &Standing<'_>) {
        self.leave(app, push, from);
        self.enter(app, push, to);
    }
}

/// Adds a stored counter (`counter` = `n`, read from `push_counts`) to how a push's jobs stand;
/// a counter at zero or below, or of a name no store writes, adds nothing.
pub(crate) fn count_into(jobs: &mut PushJobs, counter: &str, n: i64) {
    let n = u64::try_from(n).unwrap_or(0);
    if n == 0 {
        return;
    }
    match counter {
        QUEUED => jobs.queued += n,
        DEAD => jobs.dead += n,
        IN_DOUBT => jobs.in_doubt += n,
        EXPANDING => jobs.expanding = true,
        other => {
            if let Some(result) = other.strip_prefix("done:") {
                jobs.done.push((result.to_string(), n));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standing_counts_where_the_grouping_query_did() {
        let s = |kind, state, result, in_doubt| Standing {
            kind,
            state,
            result,
            in_doubt,
        };
        assert_eq!(
            s("send", "leased", None, true).counters(),
            ["queued", "in_doubt"]
        );
        assert_eq!(
            s("send", "done", Some("accepted"), false).counters(),
            ["done:accepted"]
        );
        assert_eq!(s("expand", "dead", None, true).counters(), ["dead"]);
        assert_eq!(s("expand", "queued", None, false).counters(), ["expanding"]);
        assert!(s("expand", "done", Some("expanded"), false)
            .counters()
            .is_empty());
    }

    #[test]
    fn a_tally_nets_changes_and_keeps_key_order() {
        let mut tally = Tally::default();
        tally.add("b", "p", QUEUED, 1);
        tally.add("a", "p", QUEUED, 2);
        tally.add("a", "p", QUEUED, -2);
        tally.add("a", "p", DEAD, 0);
        let keys: Vec<_> = tally
            .changes
            .iter()
            .filter(|(_, n)| **n != 0)
            .map(|((app, _, counter), _)| (app.as_str(), counter.as_str()))
            .collect();
        assert_eq!(keys, [("b", "queued")]);
    }
}
