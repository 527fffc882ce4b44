//! The purge of deleted apps on PostgreSQL (`common::app_purge`): one step, run by the writer
//! task between batches ([`step`]): a statement for a page of retained rows, or a transaction
//! that locks a page of channels' rows (in name order, as appends lock them) and deletes their
//! messages and the rows of those it emptied.

use deadpool_postgres::Object;
use herald_core::log::StoreError;

use super::pg_error;
use crate::common::app_purge::{plan, scope_range, ChannelPurge, PURGE_PAGE};
use crate::common::values::sql_limit;

/// Deletes, of the first deleted app that has anything left, a page of its retained rows, or a
/// page of its messages with the rows of the channels they emptied. Returns the rows deleted or
/// changed (a trimmed channel's row counts as one): 0 when no deleted app has anything left.
pub(crate) async fn step(client: &mut Object) -> Result<usize, StoreError> {
    let apps = client
        .query("SELECT id FROM apps WHERE deleted ORDER BY id", &[])
        .await
        .map_err(pg_error)?;
    for app in apps {
        let app: String = app.try_get(0).map_err(pg_error)?;
        let Some((low, high)) = scope_range(&app) else {
            continue;
        };
        let retained = client
            .prepare_cached(
                "DELETE FROM retained WHERE channel IN (SELECT channel FROM retained \
                 WHERE channel >= $1 AND channel < $2 ORDER BY channel LIMIT $3)",
            )
            .await
            .map_err(pg_error)?;
        let n = client
            .execute(&retained, &[&low, &high, &sql_limit(PURGE_PAGE)])
            .await
            .map_err(pg_error)?;
        if n > 0 {
            return Ok(usize::try_from(n).unwrap_or(usize::MAX));
        }
        let deleted = purge_channels(client, &low, &high).await?;
        if deleted > 0 {
            return Ok(deleted);
        }
    }
    Ok(0)
}

/// One step's messages and channel rows of the app whose channels are `[low, high)`, in one
/// transaction.
async fn purge_channels(client: &mut Object, low: &str, high: &str) -> Result<usize, StoreError> {
    let tx = client.transaction().await.map_err(pg_error)?;
    let rows = tx
        .query(
            "SELECT id, first_seq, last_seq FROM channels WHERE name >= $1 AND name < $2 \
             ORDER BY name LIMIT $3 FOR UPDATE",
            &[&low, &high, &sql_limit(PURGE_PAGE)],
        )
        .await
        .map_err(pg_error)?;
    let mut channels = Vec::with_capacity(rows.len());
    for row in &rows {
        let id: i64 = row.try_get(0).map_err(pg_error)?;
        let first_seq: i64 = row.try_get(1).map_err(pg_error)?;
        let last_seq: i64 = row.try_get(2).map_err(pg_error)?;
        channels.push((id, (first_seq, last_seq)));
    }
    let ranges: Vec<(i64, i64)> = channels.iter().map(|c| c.1).collect();
    let (mut dropped, mut dropped_from) = (Vec::new(), Vec::new());
    let mut deleted = 0;
    for (&(id, (first_seq, _)), purge) in channels.iter().zip(plan(&ranges)) {
        match purge {
            ChannelPurge::Drop => {
                dropped.push(id);
                dropped_from.push(first_seq);
            }
            ChannelPurge::TrimBelow(first_kept) => {
                // From the first retained seq: rows deleted before stay in the index until a
                // vacuum, and an unbounded `seq < $3` would walk them again.
                let n = tx
                    .execute(
                        "DELETE FROM messages WHERE channel_id = $1 AND seq >= $2 AND seq < $3",
                        &[&id, &first_seq, &first_kept],
                    )
                    .await
                    .map_err(pg_error)?;
                tx.execute(
                    "UPDATE channels SET first_seq = $2 WHERE id = $1",
                    &[&id, &first_kept],
                )
                .await
                .map_err(pg_error)?;
                deleted += usize::try_from(n).unwrap_or(usize::MAX) + 1;
            }
        }
    }
    if !dropped.is_empty() {
        let n = tx
            .execute(
                "DELETE FROM messages m USING unnest($1::bigint[], $2::bigint[]) AS d(id, first)
                 WHERE m.channel_id = d.id AND m.seq >= d.first",
                &[&dropped, &dropped_from],
            )
            .await
            .map_err(pg_error)?;
        let rows = tx
            .execute("DELETE FROM channels WHERE id = ANY($1)", &[&dropped])
            .await
            .map_err(pg_error)?;
        deleted += usize::try_from(n + rows).unwrap_or(usize::MAX);
    }
    tx.commit().await.map_err(pg_error)?;
    Ok(deleted)
}
