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
use crate::postgres::pg_error;

/// What a finished expansion's `result` says.
const EXPANDED: &str = "expanded";

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
    let Some(found) = found else {
        return Err(StoreError::failed(format!("expansion job {id} is gone")));
    };
    let (app, push, kind, state): (String, String, String, String) = (
        found.try_get(0).map_err(pg_error)?,
        found.try_get(1).map_err(pg_error)?,
        found.try_get(2).map_err(pg_error)?,
        found.try_get(3).map_err(pg_error)?,
    );
    if kind != "expand" || state != "leased" {
        return Err(StoreError::failed(format!(
            "job {id} is not a running expansion ({kind}, {state})"
        )));
    }
    Ok((app, push))
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
    if let Some(stray) = page
        .jobs
        .iter()
        .find(|j| j.job.app.as_str() != app || j.job.push != push)
    {
        return Err(StoreError::failed(format!(
            "expansion job {id} of push {push:?} was given a job of push {:?} of another app \
             or push",
            stray.job.push
        )));
    }
    let mut tally = Tally::default();
    insert_rows(client, &page.jobs, &mut tally).await?;
    for (result, n) in &page.counted {
        tally.add(
            &app,
            &push,
            &counts::done(result),
            i64::try_from(*n).unwrap_or(i64::MAX),
        );
    }
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
            tally.add(&app, &push, counts::EXPANDING, -1);
            client
                .execute(
                    "UPDATE jobs SET state = 'done', result = $2, lease_until = NULL,
                         finished = $3
                     WHERE id = $1",
                    &[&id, &EXPANDED, &now_millis()],
                )
                .await
        }
    }
    .map_err(pg_error)?;
    counts::apply(tally, client).await
}
