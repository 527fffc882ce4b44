//! Reads: a small pool of read-only connections used from tokio's blocking pool, and the queries
//! behind `read`, `state` and `list`.
//!
//! In WAL mode a reader sees every transaction committed before its read transaction starts and
//! never waits for the writer. A semaphore sized to the pool makes callers wait asynchronously
//! for a free connection instead of parking blocking threads.

use std::path::Path;
use std::sync::Arc;

use herald_core::log::{ChannelState, LogSlice, ReadFrom, StoreError};
use herald_core::name::ChannelName;
use parking_lot::Mutex;
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::Semaphore;

use crate::common::log::{channel_state_of, listed_channel_of, message_of, slice_bounds};
use crate::sqlite::{backend, schema};

/// The read-only connections.
pub(crate) struct ReadPool {
    idle: Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
}

impl ReadPool {
    /// Opens `size` (at least 1) read-only connections to the database at `path`.
    pub(crate) fn open(path: &Path, size: usize) -> Result<Arc<Self>, StoreError> {
        let size = size.max(1);
        let idle = (0..size)
            .map(|_| schema::open_reader(path))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(ReadPool {
            idle: Mutex::new(idle),
            permits: Arc::new(Semaphore::new(size)),
        }))
    }

    /// Runs `read` on a pooled connection on the blocking pool.
    pub(crate) async fn run<T, F>(self: &Arc<Self>, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Closed)?;
        let pool = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut lease = Lease {
                conn: pool.idle.lock().pop(),
                pool: &pool,
            };
            let conn = lease
                .conn
                .as_mut()
                .ok_or_else(|| StoreError::failed("read pool has no free connection"))?;
            read(conn)
        })
        .await
        .map_err(|e| StoreError::backend("read task failed", e))?
    }
}

/// A connection taken from the pool; goes back on drop, even if the read panicked.
struct Lease<'a> {
    conn: Option<Connection>,
    pool: &'a ReadPool,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.idle.lock().push(conn);
        }
    }
}

/// The channel's row id and state, or `None` if it has never had a message.
pub(crate) fn channel_state(
    conn: &Connection,
    name: &ChannelName,
) -> Result<Option<(i64, ChannelState)>, StoreError> {
    let row = conn
        .prepare_cached("SELECT id, epoch, last_seq, first_seq FROM channels WHERE name = ?1")
        .and_then(|mut stmt| {
            stmt.query_row([name.as_str()], |row| Ok(channel_state_of(row, name)))
                .optional()
        })
        .map_err(backend)?;
    row.transpose()
}

/// The channel's state and up to `limit` messages from `from`, in seq order, read in one
/// snapshot.
pub(crate) fn read_slice(
    conn: &mut Connection,
    name: &ChannelName,
    from: ReadFrom,
    limit: usize,
) -> Result<LogSlice, StoreError> {
    let tx = conn.transaction().map_err(backend)?;
    let Some((id, state)) = channel_state(&tx, name)? else {
        return Ok(LogSlice {
            state: ChannelState::empty(name.clone()),
            messages: Vec::new(),
        });
    };
    let (bound, count) = slice_bounds(from, limit);
    let sql = match from {
        ReadFrom::After(_) => {
            "SELECT seq, client_id, time, data FROM messages \
             WHERE channel_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"
        }
        ReadFrom::Tail(_) => {
            "SELECT seq, client_id, time, data FROM messages \
             WHERE channel_id = ?1 AND seq >= ?2 ORDER BY seq DESC LIMIT ?3"
        }
    };
    let mut messages = Vec::new();
    {
        let mut stmt = tx.prepare_cached(sql).map_err(backend)?;
        let mut rows = stmt.query(params![id, bound, count]).map_err(backend)?;
        while let Some(row) = rows.next().map_err(backend)? {
            messages.push(message_of(row, name, &state.epoch)?);
        }
    }
    if matches!(from, ReadFrom::Tail(_)) {
        messages.reverse();
    }
    Ok(LogSlice { state, messages })
}

/// Channels in name order after `after`, at most `limit`. Rows whose name no longer parses are
/// skipped with a warning rather than failing the whole listing.
pub(crate) fn list_channels(
    conn: &Connection,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<ChannelState>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn
        .prepare_cached(
            "SELECT name, epoch, last_seq, first_seq FROM channels \
             WHERE name > ?1 ORDER BY name LIMIT ?2",
        )
        .map_err(backend)?;
    let mut rows = stmt
        .query(params![after.unwrap_or(""), limit])
        .map_err(backend)?;
    let mut channels = Vec::new();
    while let Some(row) = rows.next().map_err(backend)? {
        channels.extend(listed_channel_of(row)?);
    }
    Ok(channels)
}
