//! Counters per push (`push_counts`) on PostgreSQL: how a push's provider jobs stand, changed in
//! the same transaction as the jobs they count, with the names and rules of SQLite's
//! (`crate::jobs::counts`): `done:RESULT`, `queued`, `dead`, `in_doubt`, `expanding`.
//!
//! Several nodes move the same counters at once, so a change is never read, modified and
//! written back: a write collects its changes in a [`Tally`] and applies them as increments
//! (`INSERT ... ON CONFLICT DO UPDATE SET n = push_counts.n + excluded.n`), one row per counter
//! touched, in key order. Every transaction takes its counter rows last and in that order, so
//! two transactions never wait for each other's counters in a cycle.

use std::collections::BTreeMap;

use deadpool_postgres::GenericClient;
use herald_core::log::StoreError;
use herald_push::jobs::PushJobs;

use crate::postgres::pg_error;

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

/// Changes to counters, applied together, in key order.
#[derive(Debug, Default)]
pub(super) struct Tally {
    changes: BTreeMap<(String, String, String), i64>,
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

    /// Writes the changes as increments (one statement), then deletes the counters a decrease
    /// brought to zero (a second one, only if something decreased). `client` must be inside
    /// the transaction that moved the jobs.
    pub async fn apply(self, client: &impl GenericClient) -> Result<(), StoreError> {
        let (mut apps, mut pushes, mut counters, mut amounts) = (
            Vec::with_capacity(self.changes.len()),
            Vec::with_capacity(self.changes.len()),
            Vec::with_capacity(self.changes.len()),
            Vec::with_capacity(self.changes.len()),
        );
        let mut decreased = false;
        for ((app, push, counter), n) in &self.changes {
            if *n == 0 {
                continue;
            }
            decreased |= *n < 0;
            apps.push(app.as_str());
            pushes.push(push.as_str());
            counters.push(counter.as_str());
            amounts.push(*n);
        }
        if apps.is_empty() {
            return Ok(());
        }
        client
            .execute(
                "INSERT INTO push_counts (app, push, counter, n)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
                 ON CONFLICT (app, push, counter) DO UPDATE SET n = push_counts.n + excluded.n",
                &[&apps, &pushes, &counters, &amounts],
            )
            .await
            .map_err(pg_error)?;
        if decreased {
            client
                .execute(
                    "DELETE FROM push_counts c
                     USING unnest($1::text[], $2::text[], $3::text[]) AS t(app, push, counter)
                     WHERE c.app = t.app AND c.push = t.push AND c.counter = t.counter
                       AND c.n = 0",
                    &[&apps, &pushes, &counters],
                )
                .await
                .map_err(pg_error)?;
        }
        Ok(())
    }
}

/// How a push's jobs stand, from its counters.
pub(super) async fn read(
    client: &impl GenericClient,
    app: &str,
    push: &str,
) -> Result<PushJobs, StoreError> {
    let rows = client
        .query(
            "SELECT counter, n FROM push_counts WHERE app = $1 AND push = $2 ORDER BY counter",
            &[&app, &push],
        )
        .await
        .map_err(pg_error)?;
    let mut jobs = PushJobs::default();
    for row in rows {
        let counter: String = row.try_get(0).map_err(pg_error)?;
        let n: i64 = row.try_get(1).map_err(pg_error)?;
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
    fn a_standing_counts_as_on_sqlite() {
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
