//! A broadcast expansion's writes: marking the devices of the pages it is about to send to as
//! in flight (before the sends), and, once a page's sends have answered, adding the page's job
//! rows and counts and moving the expansion's cursor past the page, in one transaction.

use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_push::jobs::{ExpandedPage, JobId};
use rusqlite::{params, Connection};

use super::counts::{self, Tally};
use super::write::insert_rows;
use crate::common::jobs as common;
use crate::sqlite::backend;

/// Fails unless `id` is a leased expansion; returns its app and push.
fn running_expansion(tx: &Connection, id: JobId) -> Result<(String, String), StoreError> {
    let mut stmt = tx
        .prepare_cached("SELECT app, push, kind, state FROM jobs WHERE id = ?1")
        .map_err(backend)?;
    let mut rows = stmt.query([id]).map_err(backend)?;
    let found = rows.next().map_err(backend)?;
    common::running_expansion(id, found)
}

/// Moves expansion `id`'s in-flight mark forward to `until` (never back) and renews its lease.
pub(super) fn mark_in_flight(
    tx: &Connection,
    id: JobId,
    until: &str,
    now_ms: i64,
    lease_ms: i64,
) -> Result<(), StoreError> {
    let until_ms = now_ms.saturating_add(lease_ms);
    let n = tx
        .prepare_cached(
            "UPDATE jobs SET in_flight_until = nullif(max(coalesce(in_flight_until, ''), ?2), ''),
                 due = ?3, lease_until = ?3
             WHERE id = ?1 AND kind = 'expand' AND state = 'leased'",
        )
        .and_then(|mut stmt| stmt.execute(params![id, until, until_ms]))
        .map_err(backend)?;
    if n == 1 {
        Ok(())
    } else {
        running_expansion(tx, id).map(|_| ())
    }
}

/// Adds a page's job rows and counts and moves expansion `id`'s cursor to `next`, or finishes
/// it when `next` is `None`, renewing its lease.
pub(super) fn expand_page(
    tx: &Connection,
    id: JobId,
    page: &ExpandedPage,
    next: Option<String>,
    now_ms: i64,
    lease_ms: i64,
) -> Result<(), StoreError> {
    let (app, push) = running_expansion(tx, id)?;
    common::check_page(id, (&app, &push), page)?;
    let mut tally = Tally::default();
    insert_rows(tx, &page.jobs, &mut tally)?;
    tally.sent_without_rows((&app, &push), &page.counted);
    let until = now_ms.saturating_add(lease_ms);
    match next {
        Some(after) => tx.execute(
            "UPDATE jobs SET expand_after = ?2, due = ?3, lease_until = ?3 WHERE id = ?1",
            params![id, after, until],
        ),
        None => {
            tally.expansion_finished((&app, &push));
            tx.execute(
                "UPDATE jobs SET state = 'done', result = ?2, lease_until = NULL, finished = ?3
                 WHERE id = ?1",
                params![id, common::EXPANDED, now_millis()],
            )
        }
    }
    .map_err(backend)?;
    counts::apply(tally, tx)
}
