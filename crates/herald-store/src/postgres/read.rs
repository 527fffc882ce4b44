//! Reads on a pooled connection: the queries behind `read`, `state` and `list`. A read of
//! messages runs in one read-only repeatable-read transaction, so the state it answers and the
//! messages it returns are one snapshot.

use std::sync::Arc;

use bytes::Bytes;
use deadpool_postgres::GenericClient;
use deadpool_postgres::Object;
use herald_core::log::{ChannelState, LogSlice, ReadFrom, StoreError};
use herald_core::message::{Epoch, StoredMessage};
use herald_core::name::ChannelName;
use tokio_postgres::IsolationLevel;

use super::{pg_error, sql_limit};
use crate::common::values::{seq_from_db, seq_to_db};

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
    let Some(row) = row else {
        return Ok(None);
    };
    let epoch: String = row.try_get(1).map_err(pg_error)?;
    Ok(Some((
        row.try_get(0).map_err(pg_error)?,
        ChannelState {
            name: name.clone(),
            epoch: Epoch::new(&epoch),
            last_seq: seq_from_db(row.try_get(2).map_err(pg_error)?)?,
            first_seq: seq_from_db(row.try_get(3).map_err(pg_error)?)?,
        },
    )))
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
    let limit = sql_limit(limit);
    let (sql, bound, count) = match from {
        ReadFrom::After(seq) => (
            "SELECT seq, client_id, time, data FROM messages
             WHERE channel_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            seq_to_db(seq),
            limit,
        ),
        ReadFrom::Tail(n) => (
            "SELECT seq, client_id, time, data FROM messages
             WHERE channel_id = $1 AND seq >= $2 ORDER BY seq DESC LIMIT $3",
            0,
            seq_to_db(n).min(limit),
        ),
    };
    let statement = tx.prepare_cached(sql).await.map_err(pg_error)?;
    let rows = tx
        .query(&statement, &[&id, &bound, &count])
        .await
        .map_err(pg_error)?;
    tx.commit().await.map_err(pg_error)?;
    let mut messages = Vec::with_capacity(rows.len());
    for row in rows {
        let data: Vec<u8> = row.try_get(3).map_err(pg_error)?;
        messages.push(Arc::new(StoredMessage::new(
            name.clone(),
            state.epoch.clone(),
            seq_from_db(row.try_get(0).map_err(pg_error)?)?,
            row.try_get(1).map_err(pg_error)?,
            row.try_get(2).map_err(pg_error)?,
            Bytes::from(data),
        )));
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
        let name: String = row.try_get(0).map_err(pg_error)?;
        let Ok(name) = herald_core::tenant::parse_full(&name) else {
            tracing::warn!("skipping stored channel with an invalid name");
            continue;
        };
        let epoch: String = row.try_get(1).map_err(pg_error)?;
        channels.push(ChannelState {
            name,
            epoch: Epoch::new(&epoch),
            last_seq: seq_from_db(row.try_get(2).map_err(pg_error)?)?,
            first_seq: seq_from_db(row.try_get(3).map_err(pg_error)?)?,
        });
    }
    Ok(channels)
}
