//! The channel log as both backends store it: how a `channels` row becomes a channel's state
//! (read, or listed), how a `messages` row becomes a stored message, and which messages a read
//! takes. Each backend keeps its statements and its transaction (a snapshot in either).

use std::sync::Arc;

use bytes::Bytes;
use herald_core::log::{ChannelState, ReadFrom, StoreError};
use herald_core::message::{Epoch, SharedMessage, StoredMessage};
use herald_core::name::ChannelName;

use super::row::StoredRow;
use super::values::{seq_from_db, seq_to_db, sql_limit};

/// A `channels` row of `name`, selected as `id, epoch, last_seq, first_seq`: the channel's row
/// id and its state.
pub(crate) fn channel_state_of(
    row: &impl StoredRow,
    name: &ChannelName,
) -> Result<(i64, ChannelState), StoreError> {
    let epoch: String = row.column(1)?;
    Ok((
        row.column(0)?,
        ChannelState {
            name: name.clone(),
            epoch: Epoch::new(&epoch),
            last_seq: seq_from_db(row.column(2)?)?,
            first_seq: seq_from_db(row.column(3)?)?,
        },
    ))
}

/// A `channels` row selected as `name, epoch, last_seq, first_seq`, as a listing shows it;
/// `None` (with a warning) for a row whose name no longer parses.
pub(crate) fn listed_channel_of(row: &impl StoredRow) -> Result<Option<ChannelState>, StoreError> {
    let name: String = row.column(0)?;
    let Ok(name) = herald_core::tenant::parse_full(&name) else {
        tracing::warn!("skipping stored channel with an invalid name");
        return Ok(None);
    };
    let epoch: String = row.column(1)?;
    Ok(Some(ChannelState {
        name,
        epoch: Epoch::new(&epoch),
        last_seq: seq_from_db(row.column(2)?)?,
        first_seq: seq_from_db(row.column(3)?)?,
    }))
}

/// A `messages` row of channel `name` (in `epoch`), selected as `seq, client_id, time, data`.
pub(crate) fn message_of(
    row: &impl StoredRow,
    name: &ChannelName,
    epoch: &Epoch,
) -> Result<SharedMessage, StoreError> {
    let seq = seq_from_db(row.column(0)?)?;
    let client_id: Option<String> = row.column(1)?;
    let time: i64 = row.column(2)?;
    let data: Vec<u8> = row.column(3)?;
    Ok(Arc::new(StoredMessage::new(
        name.clone(),
        epoch.clone(),
        seq,
        client_id,
        time,
        Bytes::from(data),
    )))
}

/// The parameters of a read of at most `limit` messages from `from`: the seq bound and how many
/// rows to take. A read after a seq takes the messages after the bound, oldest first; a tail
/// read takes the newest at or above the bound, newest first, and is reversed once read.
pub(crate) fn slice_bounds(from: ReadFrom, limit: usize) -> (i64, i64) {
    let limit = sql_limit(limit);
    match from {
        ReadFrom::After(seq) => (seq_to_db(seq), limit),
        ReadFrom::Tail(n) => (0, seq_to_db(n).min(limit)),
    }
}
