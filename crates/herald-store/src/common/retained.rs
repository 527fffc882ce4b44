//! Retained messages as both backends store them (`retained` table): per channel (its full
//! name) the message last appended with [`Retain::Keep`], or the clear ([`Retain::Clear`]) that
//! ended it, kept as a row marked `cleared` so that a write with a lower seq (another node's,
//! committed later) never brings an older message back. Each backend writes its row in the
//! append's own transaction and keeps the one with the higher seq (a channel's log reset to a
//! new epoch starts again).
//!
//! Reads skip cleared rows and those whose expiry has passed; a sweep may delete both.

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
