//! Counters per push (`push_counts`) on PostgreSQL: how a push's provider jobs stand, changed in
//! the same transaction as the jobs they count, with the names and rules both stores share
//! (`crate::common::job_counts`): `done:RESULT`, `queued`, `dead`, `in_doubt`, `expanding`.
//!
//! Several nodes move the same counters at once, so a change is never read, modified and
//! written back: a write collects its changes in a [`Tally`] and applies them as increments
//! (`INSERT ... ON CONFLICT DO UPDATE SET n = push_counts.n + excluded.n`), one row per counter
//! touched, in key order. Every transaction takes its counter rows last and in that order, so
//! two transactions never wait for each other's counters in a cycle.

use deadpool_postgres::GenericClient;
use herald_core::log::StoreError;
use herald_push::jobs::PushJobs;

use crate::postgres::pg_error;

use crate::common::job_counts::count_into;
pub(super) use crate::common::job_counts::{Standing, Tally};

/// Writes a [`Tally`]'s changes as increments (one statement), then deletes the counters a
/// decrease brought to zero (a second one, only if something decreased). `client` must be
/// inside the transaction that moved the jobs.
pub(super) async fn apply(tally: Tally, client: &impl GenericClient) -> Result<(), StoreError> {
    let (mut apps, mut pushes, mut counters, mut amounts) = (
        Vec::with_capacity(tally.changes.len()),
        Vec::with_capacity(tally.changes.len()),
        Vec::with_capacity(tally.changes.len()),
        Vec::with_capacity(tally.changes.len()),
    );
    let mut decreased = false;
    for ((app, push, counter), n) in &tally.changes {
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
        count_into(&mut jobs, &counter, row.try_get(1).map_err(pg_error)?);
    }
    Ok(jobs)
}
