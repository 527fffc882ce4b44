//! Herald's durable stores: the implementations of every store trait (`herald_core`'s
//! [`ChannelLog`](herald_core::log::ChannelLog), `Tenancy` and `AuditLog`, `herald_push`'s
//! `DeviceRegistry`, `JobQueue` and `CredentialStore`, `herald_hooks`' `HookStore`,
//! `herald_pusher`'s `PusherCredentialStore`) on two
//! backends.
//!
//! `sqlite` holds [`SqliteLog`], the embedded default: one database file on one node, one writer
//! thread doing group commit, reads on a pool. [`postgres`] holds [`PostgresStore`]: the same
//! traits, with the same behaviour, over a PostgreSQL database that several Herald nodes share.
//! [`options`] is SQLite's sync policy and sizes.
//!
//! `common` holds what both backends share, written once: how a row of either driver becomes
//! a value (`common::row::StoredRow`), the job columns and constants, job state transitions and
//! the counters per push, webhook rows, the writers' request types. Each backend keeps only its SQL and its
//! driver glue. The backend conformance suite (`tests/sqlite_log/backends/`) runs every trait's
//! behaviour on both.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod common;
pub mod postgres;
mod sqlite;

pub use postgres::{PostgresOptions, PostgresStore};
pub use sqlite::options;
pub use sqlite::{ParseSyncModeError, SqliteLog, SqliteOptions, SyncMode, DB_FILE_NAME};

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
