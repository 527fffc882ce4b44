//! The purge of deleted apps on SQLite (`common::app_purge`): one step, run by the writer thread
//! in a transaction of its own between batches ([`step`]).

use herald_core::log::StoreError;
use rusqlite::{params, Transaction};

use crate::common::app_purge::{plan, scope_range, ChannelPurge, PURGE_PAGE};
use crate::common::values::sql_limit;
use crate::sqlite::backend;
use crate::sqlite::batch::ChannelCache;

/// Deletes, of the first deleted app that has anything left, a page of its retained rows, or a
/// page of its messages with the rows of the channels they emptied; the channels touched leave
/// `cache` (their rows are read again if they are ever appended to). Returns the rows deleted or
/// changed (a trimmed channel's row counts as one): 0 when no deleted app has anything left.
pub(crate) fn step(tx: &Transaction<'_>, cache: &mut ChannelCache) -> Result<usize, StoreError> {
    let apps: Vec<String> = tx
        .prepare_cached("SELECT id FROM apps WHERE deleted = 1 ORDER BY id")
        .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
        .map_err(backend)?;
    for app in apps {
        let Some((low, high)) = scope_range(&app) else {
            continue;
        };
        let retained = tx
            .prepare_cached(
                "DELETE FROM retained WHERE channel IN (SELECT channel FROM retained \
                 WHERE channel >= ?1 AND channel < ?2 ORDER BY channel LIMIT ?3)",
            )
            .and_then(|mut stmt| stmt.execute(params![low, high, sql_limit(PURGE_PAGE)]))
            .map_err(backend)?;
        if retained > 0 {
            return Ok(retained);
        }
        let deleted = purge_channels(tx, &low, &high, cache)?;
        if deleted > 0 {
            return Ok(deleted);
        }
    }
    Ok(0)
}

/// One step's messages and channel rows of the app whose channels are `[low, high)`.
fn purge_channels(
    tx: &Transaction<'_>,
    low: &str,
    high: &str,
    cache: &mut ChannelCache,
) -> Result<usize, StoreError> {
    let channels: Vec<(i64, String, i64, i64)> = tx
        .prepare_cached(
            "SELECT id, name, first_seq, last_seq FROM channels \
             WHERE name >= ?1 AND name < ?2 ORDER BY name LIMIT ?3",
        )
        .and_then(|mut stmt| {
            stmt.query_map(params![low, high, sql_limit(PURGE_PAGE)], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })?
            .collect()
        })
        .map_err(backend)?;
    let ranges: Vec<(i64, i64)> = channels.iter().map(|c| (c.2, c.3)).collect();
    let mut deleted = 0;
    for ((id, name, _, _), purge) in channels.iter().zip(plan(&ranges)) {
        if let Ok(name) = herald_core::tenant::parse_full(name) {
            cache.forget(&name);
        }
        deleted += match purge {
            ChannelPurge::Drop => {
                let messages = tx
                    .prepare_cached("DELETE FROM messages WHERE channel_id = ?1")
                    .and_then(|mut stmt| stmt.execute([id]))
                    .map_err(backend)?;
                tx.prepare_cached("DELETE FROM channels WHERE id = ?1")
                    .and_then(|mut stmt| stmt.execute([id]))
                    .map_err(backend)?;
                messages + 1
            }
            ChannelPurge::TrimBelow(first_kept) => {
                let messages = tx
                    .prepare_cached("DELETE FROM messages WHERE channel_id = ?1 AND seq < ?2")
                    .and_then(|mut stmt| stmt.execute(params![id, first_kept]))
                    .map_err(backend)?;
                tx.prepare_cached("UPDATE channels SET first_seq = ?2 WHERE id = ?1")
                    .and_then(|mut stmt| stmt.execute(params![id, first_kept]))
                    .map_err(backend)?;
                messages + 1
            }
        };
    }
    Ok(deleted)
}
