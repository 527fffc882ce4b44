//! The SQLite store: [`SqliteLog`] implements every store trait over one database file
//! (`herald.db`, WAL mode) on one node.
//!
//! A single writer thread owns the write connection and commits appends in groups (group commit):
//! whatever queued up while the previous transaction was committing goes into the next one, so
//! one fsync covers many appends. Reads go through a small pool of read-only connections on
//! tokio's blocking pool.
//!
//! Modules: [`options`] (sync policy and sizes), `schema` (tables and migrations), `writer` (the
//! writer thread and its batching), `batch` (what one group-commit transaction does), `retention`
//! (trimming old messages), `checkpoint` (background WAL checkpoints), `wal_room` (the
//! write-ahead log kept extended ahead of its writes), `fault` (storage faults), `reader` (the
//! read pool and read queries), `known` (which channels have a log, so reads of the others are
//! skipped), `retained` (each channel's retained message, apart from its history), `app_purge`
//! (a step of deleting what deleted apps left), `log` ([`SqliteLog`]).
//!
//! The same database holds the apps (`tenancy`, `token_keys`, `revocations`), the device
//! registry and receipts (`devices`), the provider job queue (`jobs`), provider
//! credentials (`credentials`), the audit log of admin actions (`audit`), webhook endpoints
//! with their queues (`hooks`), Pusher credentials (`pusher`) and MQTT persistent sessions
//! (`mqtt_sessions`).

mod app_purge;
pub(crate) mod audit;
mod batch;
mod checkpoint;
pub(crate) mod credentials;
mod devices;
mod fault;
mod hooks;
mod jobs;
mod known;
mod log;
mod mqtt_sessions;
pub mod options;
mod pusher;
mod reader;
mod retained;
mod retention;
pub(crate) mod revocations;
mod schema;
pub(crate) mod tenancy;
pub(crate) mod token_keys;
mod wal_room;
mod writer;

pub use log::SqliteLog;
pub use options::{ParseSyncModeError, SqliteOptions, SyncMode};

pub(crate) use crate::common::values::{seq_from_db, seq_to_db};

use herald_core::log::StoreError;

use crate::common::row::{Column, StoredRow};

/// File name of the database inside the data directory.
pub const DB_FILE_NAME: &str = "herald.db";

/// The file SQLite keeps beside the database at `db` under `suffix` (`-wal`, `-shm`), built
/// from the path's bytes, so a data directory whose name is not UTF-8 still names it.
pub(crate) fn db_sibling(db: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

/// Wraps a backend failure (SQLite, I/O) as a [`StoreError::Backend`] with the error as its
/// source.
pub(crate) fn backend(err: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::backend("database error", err)
}

impl StoredRow for rusqlite::Row<'_> {
    fn column<T: Column>(&self, index: usize) -> Result<T, StoreError> {
        self.get(index).map_err(backend)
    }
}
