//! A broadcast expansion's writes on PostgreSQL: marking the devices of the pages it is about to
//! send to as in flight (before the sends), and, once a page's sends have answered, adding the
//! page's job rows and counts and moving the expansion's cursor past the page, in one
//! transaction (the caller's).

use deadpool_postgres::GenericClient;
use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_push::jobs::{ExpandedPage, JobId};

use super::counts::{self, Tally};
use super::insert::insert_rows;
use crate::common::jobs as common;
use crate::postgres::pg_error;

/// Fails unless `id` is a leased expansion; returns its app and push. Locks its row until the
/// transaction ends, so no other node settles or expands it meanwhile.
async fn running_expansion(
    client: &impl GenericClient,
    id: JobId,
) -> Result<(String, String), StoreError> {
    let found = client
        .query_opt(
            "SELECT app, push, kind, state FROM jobs WHERE id = $1 FOR UPDATE",
            &[&id],
        )
        .await
        .map_err(pg_error)?;
    common::running_expansion(id, found.as_ref())
}

/// Moves expansion `id`'s in-flight mark forward to `until` (never back; compared by bytes, as
/// device ids are) and renews its lease.
pub(super) async fn mark_in_flight(
    client: &impl GenericClient,
    id: JobId,
    until: &str,
    now_ms: i64,
    lease_ms: i64,
) -> Result<(), StoreError> {
    let until_ms = now_ms.saturating_add(lease_ms);
    let n = client
        .execute(
            r#"UPDATE jobs SET
                 in_flight_until = nullif(greatest(coalesce(in_flight_until, ''),
                                                   $2::text COLLATE "C"), ''),
                 due = $3, lease_until = $3
             WHERE id = $1 AND kind = 'expand' AND state = 'leased'"#,
            &[&id, &until, &until_ms],
        )
        .await
        .map_err(pg_error)?;
    if n == 1 {
        Ok(())
    } else {
        running_expansion(client, id).await.map(|_| ())
    }
}

/// Adds a page's job rows and counts and moves expansion `id`'s cursor to `next`, or finishes
/// it when `next` is `None`, renewing its lease. Refuses a job that is not a leased expansion
/// and rows for another app or push.
pub(super) async fn expand_page(
    client: &impl GenericClient,
    id: JobId,
    page: &ExpandedPage,
    next: Option<String>,
    now_ms: i64,
    lease_ms: i64,
) -> Result<(), StoreError> {
    let (app, push) = running_expansion(client, id).await?;
    common::check_page(id, (&app, &push), page)?;
    let mut tally = Tally::default();
    insert_rows(client, &page.jobs, &mut tally).await?;
    tally.sent_without_rows((&app, &push), &page.counted);
    let until = now_ms.saturating_add(lease_ms);
    match next {
        Some(after) => {
            client
                .execute(
                    "UPDATE jobs SET expand_after = $2, due = $3, lease_until = $3
                     WHERE id = $1",
                    &[&id, &after, &until],
                )
                .await
        }
        None => {
            tally.expansion_finished((&app, &push));
            client
                .execute(
                    "UPDATE jobs SET state = 'done', result = $2, lease_until = NULL,
                         finished = $3
                     WHERE id = $1",
                    &[&id, &common::EXPANDED, &now_millis()],
                )
                .await
        }
    }
    .map_err(pg_error)?;
    counts::apply(tally, client).await
}
