//! Adding job rows in one statement (`unnest` of each column): jobs a publisher's push queues,
//! and a broadcast page's rows in the state their direct send left them; each row added is
//! counted on its push ([`super::counts`]) in the caller's transaction.

use deadpool_postgres::GenericClient;
use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_push::jobs::{NewJob, PageJob};

use super::counts::{self, Standing, Tally};
use crate::common::jobs::{untried, NewJobRow};
use crate::postgres::pg_error;

/// Adds jobs as queued, counting them. A send job for a device the push already has a job for
/// is left out, so adding the same jobs twice adds them once.
pub(super) async fn insert(client: &impl GenericClient, jobs: &[NewJob]) -> Result<(), StoreError> {
    let rows = untried(jobs);
    let mut tally = Tally::default();
    insert_rows(client, &rows, &mut tally).await?;
    counts::apply(tally, client).await
}

/// Adds job rows in one statement, untried (queued until due) or after one attempt (done,
/// queued for a retry, or dead), counting each row added in `tally`. A send job for a device
/// the push already has a job for is left out.
pub(super) async fn insert_rows(
    client: &impl GenericClient,
    rows: &[PageJob],
    tally: &mut Tally,
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let now = now_millis();
    let rows: Vec<NewJobRow<'_>> = rows.iter().map(|row| NewJobRow::of(row, now)).collect();
    let mut columns = JobColumns::default();
    for row in &rows {
        columns.app.push(row.app);
        columns.push.push(row.push);
        columns.provider.push(row.provider);
        columns.kind.push(row.kind);
        columns.device.push(row.device);
        columns.after.push(row.after);
        columns.state.push(row.state);
        columns.due.push(row.due);
        columns.seq.push(row.seq);
        columns.attempts.push(row.attempts);
        columns.result.push(row.result.as_deref());
        columns.in_doubt.push(row.in_doubt);
        columns.finished.push(row.finished);
    }
    let c = &columns;
    let added = client
        .query(
            "INSERT INTO jobs (app, push, provider, kind, device, expand_after, state, due,
                 created, seq, attempts, result, in_doubt, finished)
             SELECT a, p, pr, k, d, af, st, du, $9, s, at, r, dbt, f
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                         $6::text[], $7::bigint[], $8::bigint[], $10::text[], $11::bigint[],
                         $12::text[], $13::boolean[], $14::bigint[])
                 AS j(a, p, pr, k, d, af, du, s, st, at, r, dbt, f)
             ON CONFLICT (app, push, device) DO NOTHING
             RETURNING app, push, kind, state, result, in_doubt",
            &[
                &c.app,
                &c.push,
                &c.provider,
                &c.kind,
                &c.device,
                &c.after,
                &c.due,
                &c.seq,
                &now,
                &c.state,
                &c.attempts,
                &c.result,
                &c.in_doubt,
                &c.finished,
            ],
        )
        .await
        .map_err(pg_error)?;
    for row in added {
        let (app, push, kind, state): (String, String, String, String) = (
            row.try_get(0).map_err(pg_error)?,
            row.try_get(1).map_err(pg_error)?,
            row.try_get(2).map_err(pg_error)?,
            row.try_get(3).map_err(pg_error)?,
        );
        let result: Option<String> = row.try_get(4).map_err(pg_error)?;
        let standing = Standing {
            kind: &kind,
            state: &state,
            result: result.as_deref(),
            in_doubt: row.try_get(5).map_err(pg_error)?,
        };
        tally.enter(&app, &push, &standing);
    }
    Ok(())
}

/// Job rows to insert, column by column (for `unnest`).
#[derive(Default)]
struct JobColumns<'a> {
    app: Vec<&'a str>,
    push: Vec<&'a str>,
    provider: Vec<Option<&'a str>>,
    kind: Vec<&'a str>,
    device: Vec<Option<&'a str>>,
    after: Vec<Option<&'a str>>,
    state: Vec<&'a str>,
    due: Vec<i64>,
    seq: Vec<i64>,
    attempts: Vec<i64>,
    result: Vec<Option<&'a str>>,
    in_doubt: Vec<bool>,
    finished: Vec<Option<i64>>,
}
