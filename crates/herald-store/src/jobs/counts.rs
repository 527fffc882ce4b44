//! Counters per push (`push_counts`): how its provider jobs stand, changed in the same
//! transaction as the jobs they count, so a receipt reads a handful of rows whatever the size
//! of the audience.
//!
//! Counter names: `done:RESULT` (finished sends by result, with or without a job row),
//! `queued` (send jobs queued or leased), `dead` (dead letters, sends and expansions),
//! `in_doubt` (send jobs whose send may have been duplicated), `expanding` (expansions queued
//! or leased). A write collects its changes in a [`Tally`] and applies them once, one row per
//! counter touched.

use std::collections::HashMap;

use herald_core::log::StoreError;
use herald_push::jobs::PushJobs;
use rusqlite::{params, Connection};

use crate::backend;

/// Finished sends with this result.
pub(super) fn done(result: &str) -> String {
    format!("done:{result}")
}
/// Send jobs queued or leased.
pub(super) const QUEUED: &str = "queued";
/// Dead letters.
pub(super) const DEAD: &str = "dead";
/// Send jobs in doubt.
pub(super) const IN_DOUBT: &str = "in_doubt";
/// Expansions queued or leased.
pub(super) const EXPANDING: &str = "expanding";

/// Where a job stands, as the counters see it: its kind, state, result and doubt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Standing<'a> {
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

/// Changes to counters, applied together.
#[derive(Debug, Default)]
pub(super) struct Tally {
    changes: HashMap<(String, String, String), i64>,
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

    /// Writes the changes; a counter that reaches zero is deleted.
    pub fn apply(self, tx: &Connection) -> Result<(), StoreError> {
        let mut upsert = tx
            .prepare_cached(
                "INSERT INTO push_counts (app, push, counter, n) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (app, push, counter) DO UPDATE SET n = n + excluded.n",
            )
            .map_err(backend)?;
        let mut drop_zero = tx
            .prepare_cached(
                "DELETE FROM push_counts WHERE app = ?1 AND push = ?2 AND counter = ?3 AND n = 0",
            )
            .map_err(backend)?;
        for ((app, push, counter), n) in self.changes {
            if n == 0 {
                continue;
            }
            upsert
                .execute(params![app, push, counter, n])
                .map_err(backend)?;
            if n < 0 {
                drop_zero
                    .execute(params![app, push, counter])
                    .map_err(backend)?;
            }
        }
        Ok(())
    }
}

/// How a push's jobs stand, from its counters.
pub(super) fn read(conn: &Connection, app: &str, push: &str) -> Result<PushJobs, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT counter, n FROM push_counts WHERE app = ?1 AND push = ?2 ORDER BY counter",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map(params![app, push], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .map_err(backend)?;
    let mut jobs = PushJobs::default();
    for row in rows {
        let (counter, n) = row.map_err(backend)?;
        let n = u64::try_from(n).unwrap_or(0);
        if n == 0 {
            continue;
        }
        match counter.as_str() {
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
    Ok(jobs)
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
}
