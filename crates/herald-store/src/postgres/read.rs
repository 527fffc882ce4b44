//! Reads on a pooled connection: the queries behind `read`, `state` and `list`. A read of
//! messages runs in one read-only repeatable-read transaction, so the state it answers and the
//! messages it returns are one snapshot.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use deadpool_postgres::Object;
use herald_core::log::{ChannelState, LogSlice, ReadFrom, StoreError};
use herald_core::name::ChannelName;
use tokio_postgres::IsolationLevel;

use super::{pg_error, sql_limit};
use crate::common::log::{channel_state_of, listed_channel_of, message_of, slice_bounds};

/// The channel's row id and state, or `None` if it has never had a message.
pub(crate) async fn channel_state(
    client: &impl GenericClient,
    name: &ChannelName,
) -> Result<Option<(i64, ChannelState)>, StoreError> {
    let row = client
        .query_opt(
            "SELECT id, epoch, last_seq, first_seq FROM channels WHERE name = $1",
            &[&name.as_str()],
        )
        .await
        .map_err(pg_error)?;
    row.map(|row| channel_state_of(&row, name)).transpose()
}

/// The states of `names` in that order, in one query (an empty state for a channel that has
/// never had a message).
pub(crate) async fn channel_states(
    client: &impl GenericClient,
    names: &[ChannelName],
) -> Result<Vec<ChannelState>, StoreError> {
    let wanted: Vec<&str> = names.iter().map(ChannelName::as_str).collect();
    // Prepared once per connection: a storm of subscribes makes many of these.
    let statement = client
        .prepare_cached(
            "SELECT id, epoch, last_seq, first_seq, name FROM channels WHERE name = ANY($1)",
        )
        .await
        .map_err(pg_error)?;
    let rows = client
        .query(&statement, &[&wanted])
        .await
        .map_err(pg_error)?;
    let mut found = HashMap::with_capacity(rows.len());
    for row in rows {
        let name: String = row.try_get(4).map_err(pg_error)?;
        found.insert(name, row);
    }
    names
        .iter()
        .map(|name| match found.get(name.as_str()) {
            Some(row) => channel_state_of(row, name).map(|(_, state)| state),
            None => Ok(ChannelState::empty(name.clone())),
        })
        .collect()
}

/// The channel's state and up to `limit` messages from `from`, in seq order, in one snapshot.
pub(crate) async fn read_slice(
    client: &mut Object,
    name: &ChannelName,
    from: ReadFrom,
    limit: usize,
) -> Result<LogSlice, StoreError> {
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(pg_error)?;
    let Some((id, state)) = channel_state(&tx, name).await? else {
        return Ok(LogSlice {
            state: ChannelState::empty(name.clone()),
            messages: Vec::new(),
        });
    };
    let (bound, count) = slice_bounds(from, limit);
    let sql = match from {
        ReadFrom::After(_) => {
            "SELECT seq, client_id, time, data FROM messages
             WHERE channel_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        }
        ReadFrom::Tail(_) => {
            "SELECT seq, client_id, time, data FROM messages
             WHERE channel_id = $1 AND seq >= $2 ORDER BY seq DESC LIMIT $3"
        }
    };
    let statement = tx.prepare_cached(sql).await.map_err(pg_error)?;
    let rows = tx
        .query(&statement, &[&id, &bound, &count])
        .await
        .map_err(pg_error)?;
    tx.commit().await.map_err(pg_error)?;
    let mut messages = Vec::with_capacity(rows.len());
    for row in rows {
        messages.push(message_of(&row, name, &state.epoch)?);
    }
    if matches!(from, ReadFrom::Tail(_)) {
        messages.reverse();
    }
    Ok(LogSlice { state, messages })
}

/// Channels in name order after `after`, at most `limit`. Rows whose name no longer parses are
/// skipped with a warning rather than failing the whole listing.
pub(crate) async fn list_channels(
    client: &Object,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<ChannelState>, StoreError> {
    let rows = client
        .query(
            "SELECT name, epoch, last_seq, first_seq FROM channels
             WHERE name > $1 ORDER BY name LIMIT $2",
            &[&after.unwrap_or(""), &sql_limit(limit)],
        )
        .await
        .map_err(pg_error)?;
    let mut channels = Vec::with_capacity(rows.len());
    for row in rows {
        channels.extend(listed_channel_of(&row)?);
    }
    Ok(channels)
}
