//! Herald's durable channel log: the SQLite implementation of [`herald_core::log::ChannelLog`].
//!
//! One database file (`herald.db`, WAL mode) holds every channel's messages. A single writer
//! thread owns the write connection and commits appends in groups (group commit): whatever queued
//! up while the previous transaction was committing goes into the next one, so one fsync covers
//! many appends. Reads go through a small pool of read-only connections on tokio's blocking pool.
//!
//! Modules: [`options`] (sync policy and sizes), `schema` (tables and migrations), `writer` (the
//! writer thread and its batching), `batch` (what one group-commit transaction does), `retention`
//! (trimming old messages), `checkpoint` (background WAL checkpoints), `reader` (the read pool and read queries), `known`
//! (which channels have a log, so reads of the others are skipped), `log` ([`SqliteLog`]).
//!
//! The same database holds the apps (`tenancy`), the device registry and receipts (`devices`),
//! the provider job queue (`jobs`), provider credentials (`credentials`) and the audit log of
//! admin actions (`audit`): `SqliteLog` implements `herald_core`'s `Tenancy` and `AuditLog` and
//! `herald_push`'s `DeviceRegistry`, `JobQueue` and `CredentialStore`.
//!
//! [`postgres`] holds the same over a PostgreSQL database that several Herald nodes share:
//! [`PostgresStore`] implements every trait `SqliteLog` does, with the same behaviour.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod audit;
mod batch;
mod checkpoint;
mod credentials;
mod devices;
mod fault;
mod job_counts;
mod jobs;
mod known;
mod log;
pub mod options;
pub mod postgres;
mod reader;
mod retention;
mod revocations;
mod schema;
mod tenancy;
mod token_keys;
mod wal_room;
mod writer;

pub use log::SqliteLog;
pub use options::{ParseSyncModeError, SqliteOptions, SyncMode};
pub use postgres::{PostgresOptions, PostgresStore};

use herald_core::log::StoreError;

/// File name of the database inside the data directory.
pub const DB_FILE_NAME: &str = "herald.db";

/// The file SQLite keeps beside the database at `db` under `suffix` (`-wal`, `-shm`), built
/// from the path's bytes, so a data directory whose name is not UTF-8 still names it.
pub(crate) fn db_sibling(db: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

/// Describes the store's metrics (recorded by the writers of both stores, the checkpoint thread
/// and the write-fault state), so `/metrics` has a `# HELP` line for each. Call it once the
/// recorder is installed.
pub fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_histogram!(
        "herald_store_commit_seconds",
        "Time one group commit took (transaction and fsync), seconds."
    );
    describe_histogram!(
        "herald_store_batch_messages",
        "Messages asked for in one group commit."
    );
    describe_counter!(
        "herald_store_appends_total",
        "Messages appended to the store (duplicates of an idempotency key not counted)."
    );
    describe_gauge!(
        "herald_store_wal_bytes",
        "Size of SQLite's write-ahead log after the last checkpoint, bytes."
    );
    describe_histogram!(
        "herald_store_checkpoint_seconds",
        "Time one SQLite checkpoint took, seconds, by mode."
    );
    describe_gauge!(
        "herald_store_write_fault",
        "Store writes: 0 working, 1 refused for lack of disk space, 2 halted after a failed fsync."
    );
}

/// Wraps a backend failure (SQLite, I/O) as a [`StoreError::Backend`] with the error as its
/// source.
pub(crate) fn backend(err: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::backend("database error", err)
}

/// Converts a seq read from the database; a negative value means the row is corrupt.
pub(crate) fn seq_from_db(value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::failed(format!("corrupt seq {value} in store")))
}

/// Converts a seq for use as an SQL parameter; seqs beyond `i64::MAX` cannot exist in the store,
/// so they are clamped (a read after such a seq simply finds nothing).
pub(crate) fn seq_to_db(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
