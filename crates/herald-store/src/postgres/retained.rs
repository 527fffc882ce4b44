//! Retained messages in PostgreSQL (`retained` table, `common::retained`): the rows a batch's
//! appends with a retain write inside the batch's transaction ([`write`], after the channels'
//! rows are locked, so two nodes' writes to one channel take turns), the reads by channel
//! and by name prefix, and the sweep's steps ([`sweep_step`], on the writer task).

use deadpool_postgres::{GenericClient, Transaction};
use herald_core::log::StoreError;
use herald_core::message::SharedMessage;
use herald_core::name::ChannelName;

use super::pg_error;
use crate::common::retained::{
    current, now_value, retained_of, swept, RetainedRow, CLEARED_KEPT_MS, COLUMNS, PAST_EVERY_NAME,
    SWEEP_PAGE,
};
use crate::common::values::sql_limit;

/// Writes `rows` (one statement each; only MQTT RETAIN publishes have any), each unless the
/// channel's stored row has a higher seq in the same epoch.
pub(crate) async fn write(
    tx: &Transaction<'_>,
    rows: &[RetainedRow<'_>],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let statement = tx
        .prepare_cached(
            "INSERT INTO retained (channel, epoch, seq, client_id, time, data, expires_at_ms, \
             cleared) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (channel) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq, \
             client_id = excluded.client_id, time = excluded.time, data = excluded.data, \
             expires_at_ms = excluded.expires_at_ms, cleared = excluded.cleared \
             WHERE excluded.seq > retained.seq OR excluded.epoch <> retained.epoch",
        )
        .await
        .map_err(pg_error)?;
    for row in rows {
        let data: &[u8] = if row.cleared { &[] } else { row.data };
        tx.execute(
            &statement,
            &[
                &row.channel,
                &row.epoch,
                &row.seq,
                &row.client_id,
                &row.time,
                &data,
                &row.expires_at_ms,
                &row.cleared,
            ],
        )
        .await
        .map_err(pg_error)?;
    }
    Ok(())
}

/// The retained message of `channel` at `now_ms`, if it has one.
pub(crate) async fn read(
    client: &impl GenericClient,
    channel: &ChannelName,
    now_ms: u64,
) -> Result<Option<SharedMessage>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM retained WHERE channel = $1 AND {}",
        current("$2")
    );
    let statement = client.prepare_cached(&sql).await.map_err(pg_error)?;
    let row = client
        .query_opt(&statement, &[&channel.as_str(), &now_value(now_ms)])
        .await
        .map_err(pg_error)?;
    match row {
        Some(row) => retained_of(&row),
        None => Ok(None),
    }
}

/// The retained messages at `now_ms` of the channels whose full names start with `prefix`, in
/// name order after `after`, at most `limit`.
pub(crate) async fn read_under(
    client: &impl GenericClient,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
    now_ms: u64,
) -> Result<Vec<SharedMessage>, StoreError> {
    // Channel names are ASCII: every name starting with `prefix` sorts below `prefix` + DEL
    // (the column's collation is "C").
    let upper = format!("{prefix}\u{7f}");
    let sql = format!(
        "SELECT {COLUMNS} FROM retained WHERE channel >= $1 AND channel < $2 AND channel > $3 \
         AND {} ORDER BY channel LIMIT $5",
        current("$4")
    );
    let statement = client.prepare_cached(&sql).await.map_err(pg_error)?;
    let rows = client
        .query(
            &statement,
            &[
                &prefix,
                &upper,
                &after.unwrap_or(""),
                &now_value(now_ms),
                &sql_limit(limit),
            ],
        )
        .await
        .map_err(pg_error)?;
    let mut found = Vec::with_capacity(rows.len());
    for row in &rows {
        found.extend(retained_of(row)?);
    }
    Ok(found)
}

/// One step of the sweep (`common::retained`): deletes, among the [`SWEEP_PAGE`] rows after
/// channel `after` in key order, those expired at `now_ms` or cleared long enough before it,
/// in one statement (its own transaction: it locks only the rows it deletes, and an append
/// writing one of them meanwhile leaves it, no longer expired or cleared). Returns how many,
/// and the last channel looked at (`None` when the page reached the table's end).
pub(crate) async fn sweep_step(
    client: &impl GenericClient,
    after: &str,
    now_ms: i64,
) -> Result<(usize, Option<String>), StoreError> {
    let page_end = client
        .prepare_cached(
            "SELECT channel FROM retained WHERE channel > $1 ORDER BY channel OFFSET $2 LIMIT 1",
        )
        .await
        .map_err(pg_error)?;
    let last: Option<String> = client
        .query_opt(&page_end, &[&after, &sql_limit(SWEEP_PAGE - 1)])
        .await
        .map_err(pg_error)?
        .map(|row| row.try_get(0))
        .transpose()
        .map_err(pg_error)?;
    let sql = format!(
        "DELETE FROM retained WHERE channel > $1 AND channel <= $2 AND {}",
        swept("$3", "$4")
    );
    let delete = client.prepare_cached(&sql).await.map_err(pg_error)?;
    let upper = last.as_deref().unwrap_or(PAST_EVERY_NAME);
    let cleared_before = now_ms.saturating_sub(CLEARED_KEPT_MS);
    let deleted = client
        .execute(&delete, &[&after, &upper, &now_ms, &cleared_before])
        .await
        .map_err(pg_error)?;
    Ok((usize::try_from(deleted).unwrap_or(usize::MAX), last))
}
