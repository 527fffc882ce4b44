//! Retained messages as both backends store them (`retained` table): per channel (its full
//! name) the message last appended with [`Retain::Keep`], or the clear ([`Retain::Clear`]) that
//! ended it, kept as a row marked `cleared` so that a write with a lower seq (another node's,
//! committed later) never brings an older message back. Each backend writes its row in the
//! append's own transaction and keeps the one with the higher seq (a channel's log reset to a
//! new epoch starts again).
//!
//! Reads skip cleared rows and those whose expiry has passed. The store's periodic sweep (each
//! backend's writer, with the history's age sweep) deletes them: an expired row at once, a
//! cleared marker once it is [`CLEARED_KEPT_MS`] old. It walks the table in key order a page of
//! [`SWEEP_PAGE`] rows at a time, one short statement (SQLite: one transaction) each, at most
//! [`SWEEP_PAGES`] pages a sweep, going on from where the last one stopped ([`SweepCursor`]), so
//! a large table never holds the writer or a lock for long.
//!
//! **Why a cleared marker may go.** It exists so that a retained write with a lower seq than the
//! clear, committed after it, cannot bring an older message back. No such write can come: a
//! retained row is written in the transaction that takes its message's seq, under the channel's
//! lock (SQLite: the one writer; PostgreSQL: the channel's row, locked until the commit), so
//! every write with a lower seq committed before the clear's seq was taken, and a retry of an
//! earlier publish (a duplicate idempotency key) writes no row. Once committed, the marker is
//! read exactly as no row at all. [`CLEARED_KEPT_MS`] is a margin on top of that, not a need:
//! an hour, longer than any transaction lives.

use std::sync::Arc;

use bytes::Bytes;
use herald_core::log::StoreError;
use herald_core::message::{Epoch, Retain, SharedMessage, StoredMessage};

use super::row::StoredRow;
use super::values::{seq_from_db, seq_to_db};

/// The columns a read selects, in [`retained_of`]'s order.
pub(crate) const COLUMNS: &str = "channel, epoch, seq, client_id, time, data";

/// The condition of a current (not cleared, not expired) row, with the time as parameter `now`
/// (`?N` or `$N`).
pub(crate) fn current(now: &str) -> String {
    format!("cleared = FALSE AND (expires_at_ms IS NULL OR expires_at_ms > {now})")
}

/// How long a cleared marker is kept after its clear was stored (ms) before the sweep deletes
/// it (see the module doc).
pub(crate) const CLEARED_KEPT_MS: i64 = 60 * 60 * 1000;

/// Rows of the table one sweep step looks at.
pub(crate) const SWEEP_PAGE: usize = 1000;

/// Steps of one sweep: with [`SWEEP_PAGE`], 16,000 rows a sweep (every 30 s), so a table of
/// a million rows is walked in about half an hour; one of ten thousand at each sweep.
pub(crate) const SWEEP_PAGES: usize = 16;

/// The condition of a row the sweep deletes at `now` (a parameter, `?N` or `$N`): expired, or
/// cleared at or before `cleared_before` (`now` minus [`CLEARED_KEPT_MS`]).
pub(crate) fn swept(now: &str, cleared_before: &str) -> String {
    format!(
        "((expires_at_ms IS NOT NULL AND expires_at_ms <= {now}) \
         OR (cleared = TRUE AND time <= {cleared_before}))"
    )
}

/// Sorts after every channel name (they are ASCII, DEL excluded; PostgreSQL's column has the
/// "C" collation): a sweep step's upper bound at the table's end.
pub(crate) const PAST_EVERY_NAME: &str = "\u{7f}";

/// Where the next sweep step starts: after the channel `after` (from the table's first row
/// when empty).
#[derive(Debug, Default)]
pub(crate) struct SweepCursor {
    after: String,
}

impl SweepCursor {
    /// The channel the next step starts after (`""`: the first).
    pub(crate) fn after(&self) -> &str {
        &self.after
    }

    /// A step looked at the rows up to `last` (`None`: to the table's end; the next step
    /// starts again from the first row). Whether the sweep may take another step now.
    pub(crate) fn stepped(&mut self, last: Option<String>) -> bool {
        match last {
            Some(last) => {
                self.after = last;
                true
            }
            None => {
                self.after.clear();
                false
            }
        }
    }
}

/// One retained row to write: the values of an appended message, and what its retain does.
pub(crate) struct RetainedRow<'a> {
    /// The channel's full name.
    pub channel: &'a str,
    pub epoch: &'a str,
    pub seq: i64,
    pub client_id: Option<&'a str>,
    pub time: i64,
    pub data: &'a [u8],
    /// Its expiry (ms), if it has one; `None` for a clear too.
    pub expires_at_ms: Option<i64>,
    pub cleared: bool,
}

impl<'a> RetainedRow<'a> {
    /// The row `message`, appended with `retain`, writes; `None` when it leaves the retained
    /// message alone.
    pub(crate) fn of(message: &'a StoredMessage, retain: Retain) -> Option<Self> {
        let (expires_at_ms, cleared) = match retain {
            Retain::Untouched => return None,
            Retain::Keep { expires_at_ms } => (expires_at_ms, false),
            Retain::Clear => (None, true),
        };
        Some(RetainedRow {
            channel: message.channel.as_str(),
            epoch: message.epoch.as_str(),
            seq: seq_to_db(message.seq),
            client_id: message.client_id.as_deref(),
            time: message.time,
            data: &message.data,
            expires_at_ms: expires_at_ms.map(|at| i64::try_from(at).unwrap_or(i64::MAX)),
            cleared,
        })
    }
}

/// A `retained` row selected as [`COLUMNS`]: the retained message; `None` (with a warning) for a
/// row whose channel name no longer parses.
pub(crate) fn retained_of(row: &impl StoredRow) -> Result<Option<SharedMessage>, StoreError> {
    let name: String = row.column(0)?;
    let Ok(channel) = herald_core::tenant::parse_full(&name) else {
        tracing::warn!("skipping a retained message of a channel with an invalid name");
        return Ok(None);
    };
    let epoch: String = row.column(1)?;
    let seq = seq_from_db(row.column(2)?)?;
    let client_id: Option<String> = row.column(3)?;
    let time: i64 = row.column(4)?;
    let data: Vec<u8> = row.column(5)?;
    Ok(Some(Arc::new(StoredMessage::new(
        channel,
        Epoch::new(&epoch),
        seq,
        client_id,
        time,
        Bytes::from(data),
    ))))
}

/// The time `now_ms` as a column value.
pub(crate) fn now_value(now_ms: u64) -> i64 {
    i64::try_from(now_ms).unwrap_or(i64::MAX)
}
