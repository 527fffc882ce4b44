//! Retention: removing the oldest messages of a channel, by count (amortised, inside each append
//! transaction) and by age (a periodic sweep run by the writer thread).
//!
//! Both only ever delete a prefix of a channel's log, so the retained seqs are always the
//! contiguous range `first_seq..=last_seq`, and `first_seq` is the smallest retained seq (or
//! `last_seq + 1` when nothing is retained).

use herald_core::log::StoreError;
use rusqlite::{params, OptionalExtension, Transaction};

use crate::sqlite::batch::{ChannelCache, ChannelEntry};
use crate::sqlite::{backend, seq_from_db, seq_to_db};

/// Smallest number of extra messages a channel may hold beyond its limit before a count trim
/// runs, so trims delete in chunks rather than one row per append.
const MIN_TRIM_SLACK: u64 = 16;

/// If the channel holds too many messages, the seq that should become its first retained one.
///
/// A trim runs when the channel exceeds `max_messages` by `max(max_messages / 8, 16)`, and then
/// keeps exactly `max_messages` (a limit of 0 is treated as 1).
pub(crate) fn count_trim_target(entry: &ChannelEntry) -> Option<u64> {
    let max = entry.retention.max_messages.max(1);
    let slack = (max / 8).max(MIN_TRIM_SLACK);
    let retained = (entry.last_seq + 1).saturating_sub(entry.first_seq);
    (retained > max.saturating_add(slack)).then(|| entry.last_seq - max + 1)
}

/// Deletes the channel's messages with seq below `first_kept`.
pub(crate) fn delete_before(
    tx: &Transaction<'_>,
    channel_id: i64,
    first_kept: u64,
) -> Result<usize, StoreError> {
    tx.prepare_cached("DELETE FROM messages WHERE channel_id = ?1 AND seq < ?2")
        .and_then(|mut stmt| stmt.execute(params![channel_id, seq_to_db(first_kept)]))
        .map_err(backend)
}

/// A channel whose first retained seq moved during an age sweep.
pub(crate) struct Trimmed {
    /// `channels.name`.
    pub name: String,
    /// The new `first_seq`.
    pub first_seq: u64,
    /// Messages deleted.
    pub deleted: usize,
}

/// Deletes, in every channel with an age limit, the messages older than `now_ms - max_age_ms`,
/// advancing `first_seq`. Messages are removed oldest first and the sweep stops at the first one
/// young enough, so a clock that stepped back never leaves a hole in a log.
pub(crate) fn trim_expired(tx: &Transaction<'_>, now_ms: i64) -> Result<Vec<Trimmed>, StoreError> {
    let candidates: Vec<(i64, String, i64, i64, i64)> = tx
        .prepare_cached(
            "SELECT id, name, last_seq, first_seq, max_age_ms FROM channels \
             WHERE max_age_ms > 0 AND first_seq <= last_seq",
        )
        .and_then(|mut stmt| {
            stmt.query_map([], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                ))
            })?
            .collect()
        })
        .map_err(backend)?;
    let mut trimmed = Vec::new();
    for (id, name, last_seq, first_seq, max_age_ms) in candidates {
        let cutoff = now_ms.saturating_sub(max_age_ms);
        let oldest_kept: Option<i64> = tx
            .prepare_cached(
                "SELECT seq FROM messages WHERE channel_id = ?1 AND time >= ?2 \
                 ORDER BY seq LIMIT 1",
            )
            .and_then(|mut stmt| {
                stmt.query_row(params![id, cutoff], |row| row.get(0))
                    .optional()
            })
            .map_err(backend)?;
        let new_first = match oldest_kept {
            Some(seq) => seq_from_db(seq)?,
            None => seq_from_db(last_seq)? + 1,
        };
        if new_first <= seq_from_db(first_seq)? {
            continue;
        }
        let deleted = delete_before(tx, id, new_first)?;
        tx.prepare_cached("UPDATE channels SET first_seq = ?2 WHERE id = ?1")
            .and_then(|mut stmt| stmt.execute(params![id, seq_to_db(new_first)]))
            .map_err(backend)?;
        trimmed.push(Trimmed {
            name,
            first_seq: new_first,
            deleted,
        });
    }
    Ok(trimmed)
}

/// Applies a committed age sweep to the writer's cache.
pub(crate) fn apply_to_cache(cache: &mut ChannelCache, trimmed: &[Trimmed]) {
    for t in trimmed {
        let Ok(name) = herald_core::tenant::parse_full(&t.name) else {
            continue;
        };
        if let Some(entry) = cache.get_mut(&name) {
            entry.first_seq = entry.first_seq.max(t.first_seq);
        }
    }
}
