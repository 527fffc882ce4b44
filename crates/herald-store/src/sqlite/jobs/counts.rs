//! Counters per push (`push_counts`) in SQLite: how its provider jobs stand, changed in the
//! same transaction as the jobs they count, so a receipt reads a handful of rows whatever the
//! size of the audience. The counter names and rules are shared with PostgreSQL
//! (`crate::common::job_counts`): a write collects its changes in a [`Tally`] and applies them
//! here once, one row per counter touched.

use herald_core::log::StoreError;
use herald_push::jobs::PushJobs;
use rusqlite::{params, Connection};

use crate::sqlite::backend;

use crate::common::job_counts::count_into;
pub(super) use crate::common::job_counts::Tally;

/// Writes a [`Tally`]'s changes; a counter that reaches zero is deleted.
pub(super) fn apply(tally: Tally, tx: &Connection) -> Result<(), StoreError> {
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
    for ((app, push, counter), n) in tally.changes {
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
        count_into(&mut jobs, &counter, n);
    }
    Ok(jobs)
}
