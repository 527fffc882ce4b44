//! Retained messages in SQLite (`retained` table, `common::retained`): the row an append with
//! a retain writes inside the batch's transaction ([`write`]), the reads by channel and by
//! name prefix (read on the read pool, like the log), and the sweep's steps ([`sweep_step`],
//! on the writer).

use herald_core::log::StoreError;
use herald_core::message::SharedMessage;
use herald_core::name::ChannelName;
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use crate::common::retained::{
    current, now_value, retained_of, swept, RetainedRow, CLEARED_KEPT_MS, COLUMNS, PAST_EVERY_NAME,
    SWEEP_PAGE,
};
use crate::common::values::sql_limit;
use crate::sqlite::backend;

/// Writes `row` unless the channel's stored one has a higher seq in the same epoch.
pub(crate) fn write(tx: &Transaction<'_>, row: &RetainedRow<'_>) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO retained (channel, epoch, seq, client_id, time, data, expires_at_ms, \
         cleared) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
         ON CONFLICT (channel) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq, \
         client_id = excluded.client_id, time = excluded.time, data = excluded.data, \
         expires_at_ms = excluded.expires_at_ms, cleared = excluded.cleared \
         WHERE excluded.seq > retained.seq OR excluded.epoch <> retained.epoch",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            row.channel,
            row.epoch,
            row.seq,
            row.client_id,
            row.time,
            if row.cleared { &[][..] } else { row.data },
            row.expires_at_ms,
            row.cleared,
        ])
    })
    .map_err(backend)?;
    Ok(())
}

/// The retained message of `channel` at `now_ms`, if it has one.
pub(crate) fn read(
    conn: &Connection,
    channel: &ChannelName,
    now_ms: u64,
) -> Result<Option<SharedMessage>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM retained WHERE channel = ?1 AND {}",
        current("?2")
    );
    let found = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| {
            stmt.query_row(params![channel.as_str(), now_value(now_ms)], |row| {
                Ok(retained_of(row))
            })
            .optional()
        })
        .map_err(backend)?;
    Ok(found.transpose()?.flatten())
}

/// The retained messages at `now_ms` of the channels whose full names start with `prefix`, in
/// name order after `after`, at most `limit`.
pub(crate) fn read_under(
    conn: &Connection,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
    now_ms: u64,
) -> Result<Vec<SharedMessage>, StoreError> {
    // Channel names are ASCII: every name starting with `prefix` sorts below `prefix` + DEL.
    let upper = format!("{prefix}\u{7f}");
    let sql = format!(
        "SELECT {COLUMNS} FROM retained WHERE channel >= ?1 AND channel < ?2 AND channel > ?3 \
         AND {} ORDER BY channel LIMIT ?5",
        current("?4")
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(backend)?;
    let mut rows = stmt
        .query(params![
            prefix,
            upper,
            after.unwrap_or(""),
            now_value(now_ms),
            sql_limit(limit)
        ])
        .map_err(backend)?;
    let mut found = Vec::new();
    while let Some(row) = rows.next().map_err(backend)? {
        found.extend(retained_of(row)?);
    }
    Ok(found)
}

/// One step of the sweep (`common::retained`): deletes, among the [`SWEEP_PAGE`] rows after
/// channel `after` in key order, those expired at `now_ms` or cleared long enough before it.
/// Returns how many, and the last channel looked at (`None` when the page reached the table's
/// end).
pub(crate) fn sweep_step(
    conn: &Connection,
    after: &str,
    now_ms: i64,
) -> Result<(usize, Option<String>), StoreError> {
    // The page's last channel, if the table goes on that far.
    let last: Option<String> = conn
        .prepare_cached(
            "SELECT channel FROM retained WHERE channel > ?1 ORDER BY channel LIMIT 1 OFFSET ?2",
        )
        .and_then(|mut stmt| {
            stmt.query_row(params![after, sql_limit(SWEEP_PAGE - 1)], |row| row.get(0))
                .optional()
        })
        .map_err(backend)?;
    let sql = format!(
        "DELETE FROM retained WHERE channel > ?1 AND channel <= ?2 AND {}",
        swept("?3", "?4")
    );
    let deleted = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| {
            stmt.execute(params![
                after,
                last.as_deref().unwrap_or(PAST_EVERY_NAME),
                now_ms,
                now_ms.saturating_sub(CLEARED_KEPT_MS)
            ])
        })
        .map_err(backend)?;
    Ok((deleted, last))
}
