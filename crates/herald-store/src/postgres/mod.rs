//! The PostgreSQL store: [`PostgresStore`] implements the same traits as [`crate::SqliteLog`]
//! (`ChannelLog`, `Tenancy`, `DeviceRegistry`, `JobQueue`, `CredentialStore`, `HookStore`)
//! over one PostgreSQL database that several Herald nodes share.
//!
//! Appends go through one writer task per store that commits whatever queued while the previous
//! transaction ran in one transaction (group commit, like SQLite's writer thread); each channel's
//! seqs come from its `channels` row, updated in the append's transaction, so they stay gapless
//! and strictly increasing however many nodes append at once (`append` says how). Reads and registry writes take a pooled
//! connection each; PostgreSQL's own commit grouping covers concurrent registry writes.
//!
//! Modules: `connect` (URL, TLS, pool), `schema` (migrations), `writer` (the group-commit task and
//! the age sweep), `gather` (how long the writer waits for more appends), `append` (one batch's
//! transaction), `append_unkeyed` (a batch without idempotency keys in one statement), `read`
//! (`read`/`state`/`list`), `retained` (each channel's retained message, written in the append's
//! transaction), `app_purge` (a step of deleting what deleted apps left),
//! `reachability` (whether writes work, for `/readyz`, without a query per probe), `outage`
//! (the store going down and coming back, said once each in the log), `tenancy`, `devices`,
//! `credentials`, `jobs`, `hooks` (webhook endpoints and their queues).

mod app_purge;
mod append;
mod append_unkeyed;
mod audit;
mod connect;
mod credentials;
mod devices;
mod gather;
mod hooks;
mod jobs;
mod mqtt_sessions;
mod outage;
mod pusher;
mod reachability;
mod read;
mod retained;
mod revocations;
mod schema;
mod tenancy;
mod token_keys;
mod writer;

use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::{Object, Pool, PoolError};
use herald_core::log::{
    Appended, ChannelLog, ChannelState, CommitSink, LogSlice, ReadFrom, Retention, StoreError,
};
use herald_core::message::{now_millis, NewMessage, SharedMessage};
use herald_core::name::ChannelName;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use connect::Target;
use reachability::Reachability;
pub use schema::SCHEMA_VERSION;
use writer::{AppendRequest, Request};

pub(crate) use crate::common::values::sql_limit;

/// How a [`PostgresStore`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// Most pooled connections (the writer task uses one at a time).
    pub max_connections: usize,
    /// Most messages committed in one transaction (a single larger request still goes alone).
    pub max_batch: usize,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            max_connections: 16,
            max_batch: 4096,
        }
    }
}

/// Wraps a PostgreSQL error: [`StoreError::Unavailable`] when the server could not be reached
/// or went away (a lost connection, SQLSTATE class 08 "connection exception", 57P01-57P03 "the
/// server is shutting down or starting"), so the API answers `503` with `Retry-After` and the
/// client retries; [`StoreError::Full`] when the server is out of disk space (SQLSTATE 53100
/// `disk_full`), answered `507 insufficient_storage`; [`StoreError::Backend`] for everything
/// else.
pub(crate) fn pg_error(err: tokio_postgres::Error) -> StoreError {
    if is_unavailable(&err) {
        StoreError::unavailable("PostgreSQL is not reachable", err)
    } else if err.code().is_some_and(|code| is_disk_full(code.code())) {
        StoreError::full("PostgreSQL is out of disk space", err)
    } else {
        StoreError::backend("database error", err)
    }
}

/// Whether an SQLSTATE says the database server has no space left: 53100 `disk_full`.
fn is_disk_full(sqlstate: &str) -> bool {
    sqlstate == tokio_postgres::error::SqlState::DISK_FULL.code()
}

fn is_unavailable(err: &tokio_postgres::Error) -> bool {
    if err.is_closed() {
        return true;
    }
    if let Some(code) = err.code() {
        let code = code.code();
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03");
    }
    // No SQLSTATE: unavailable if the connection itself failed (I/O: refused, reset, timed out).
    let mut source = std::error::Error::source(err);
    while let Some(e) = source {
        if e.is::<std::io::Error>() {
            return true;
        }
        source = e.source();
    }
    false
}

/// A channel log and registry in a PostgreSQL database, with group commit.
pub struct PostgresStore {
    pool: Pool,
    target: Target,
    /// Whether writes work, as the last commit or check found.
    reachability: Arc<Reachability>,
    /// Requests to the writer task; `None` once closed.
    requests: Mutex<Option<mpsc::UnboundedSender<Request>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Checks the store while it is down (`Reachability::watch`); aborted when closed.
    watcher: JoinHandle<()>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to `url`, runs pending migrations and starts the writer task. `sink` receives
    /// every message this store commits. Fails with a message naming the server (never the
    /// password) when it cannot be reached, and when its schema is newer than this build.
    pub async fn open(
        url: &str,
        options: PostgresOptions,
        sink: Arc<dyn CommitSink>,
    ) -> Result<Arc<PostgresStore>, StoreError> {
        let connection = connect::parse(url)?;
        {
            let mut client = connect::connect_once(&connection).await?;
            schema::migrate(&mut client).await?;
        }
        let pool = connect::pool(&connection, options.max_connections)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let reachability = Arc::new(Reachability::new(connection.target.clone()));
        let writer = writer::Writer::new(pool.clone(), sink, reachability.clone(), &options);
        let handle = tokio::spawn(writer.run(rx));
        let watcher = {
            let (reachability, pool) = (reachability.clone(), pool.clone());
            let target = connection.target.clone();
            tokio::spawn(async move { reachability.watch(pool, target).await })
        };
        tracing::info!(target = %connection.target, "postgres store opened");
        Ok(Arc::new(PostgresStore {
            pool,
            target: connection.target,
            reachability,
            requests: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(handle)),
            watcher,
        }))
    }

    /// Runs pending migrations on `url` and answers the schema version found before (for
    /// `herald migrate`).
    pub async fn migrate(url: &str) -> Result<i64, StoreError> {
        let connection = connect::parse(url)?;
        let mut client = connect::connect_once(&connection).await?;
        schema::migrate(&mut client).await
    }

    /// Where this store connects (host, port, database).
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// A pooled connection. Failing to get one because the database cannot be reached (or has
    /// no space) is recorded as the store's fault, as a failed commit would be.
    pub(crate) async fn client(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(|e| {
            let error = pool_error(&self.target, e);
            self.reachability.record_failure(&error);
            error
        })
    }

    /// Sends a request to the writer task and waits for its answer.
    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> Request,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        {
            let requests = self.requests.lock();
            let sender = requests.as_ref().ok_or(StoreError::Closed)?;
            sender.send(make(reply)).map_err(|_| StoreError::Closed)?;
        }
        answer
            .await
            .map_err(|_| StoreError::failed("store writer stopped"))?
    }

    /// Removes expired messages now, as if the time were `now_ms`, and returns how many were
    /// deleted. The writer does this by itself every 30 s; this exists for tests and tools.
    #[doc(hidden)]
    pub async fn trim_expired_at(&self, now_ms: i64) -> Result<usize, StoreError> {
        self.ask(|reply| Request::TrimExpired { now_ms, reply })
            .await
    }

    /// Removes expired messages now.
    #[doc(hidden)]
    pub async fn trim_expired(&self) -> Result<usize, StoreError> {
        self.trim_expired_at(now_millis()).await
    }

    /// Runs one step of the deleted apps' purge now (`common::app_purge`) and returns the rows
    /// it deleted or changed: 0 once no deleted app has anything left. The writer does this by
    /// itself after an app's deletion and at each sweep; this exists for tests and tools.
    #[doc(hidden)]
    pub async fn purge_deleted_apps(&self) -> Result<usize, StoreError> {
        self.ask(|reply| Request::PurgeDeletedApps { reply: Some(reply) })
            .await
    }

    /// Asks the writer to start purging what deleted apps left (`common::app_purge`), without
    /// waiting for it.
    pub(crate) fn want_purge(&self) {
        if let Some(sender) = self.requests.lock().as_ref() {
            let _ = sender.send(Request::PurgeDeletedApps { reply: None });
        }
    }
}

/// What a pool failure is told as: the server named, the driver's error kept as the source.
fn pool_error(target: &Target, err: PoolError) -> StoreError {
    pool_failure(&format!("PostgreSQL at {target}"), err)
}

/// A pool that could not hand out a connection while doing `what`: unavailable (a 503 the
/// client retries) unless the server answered with an error of its own.
pub(crate) fn pool_failure(what: &str, err: PoolError) -> StoreError {
    match err {
        PoolError::Closed => StoreError::Closed,
        PoolError::Backend(e) if e.code().is_some_and(|code| is_disk_full(code.code())) => {
            StoreError::full(format!("{what} is out of disk space"), e)
        }
        PoolError::Backend(e) if !is_unavailable(&e) => {
            StoreError::backend(format!("cannot use {what}"), e)
        }
        PoolError::Backend(e) => StoreError::unavailable(format!("cannot reach {what}"), e),
        other => StoreError::unavailable(format!("no connection for {what}"), other),
    }
}

impl crate::common::row::StoredRow for tokio_postgres::Row {
    fn column<T: crate::common::row::Column>(&self, index: usize) -> Result<T, StoreError> {
        self.try_get(index).map_err(pg_error)
    }
}

#[async_trait]
impl ChannelLog for PostgresStore {
    async fn append(
        &self,
        channel: &ChannelName,
        messages: Vec<NewMessage>,
        retention: Retention,
    ) -> Result<Vec<Appended>, StoreError> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        self.ask(|reply| {
            Request::Append(AppendRequest {
                channel: channel.clone(),
                messages,
                retention,
                reply,
            })
        })
        .await
    }

    async fn read(
        &self,
        channel: &ChannelName,
        from: ReadFrom,
        limit: usize,
    ) -> Result<LogSlice, StoreError> {
        let mut client = self.client().await?;
        read::read_slice(&mut client, channel, from, limit).await
    }

    async fn state(&self, channel: &ChannelName) -> Result<ChannelState, StoreError> {
        let client = self.client().await?;
        Ok(read::channel_state(&client, channel)
            .await?
            .map(|(_, state)| state)
            .unwrap_or_else(|| ChannelState::empty(channel.clone())))
    }

    fn batches_states(&self) -> bool {
        true
    }

    async fn states(&self, channels: &[ChannelName]) -> Result<Vec<ChannelState>, StoreError> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        read::channel_states(&client, channels).await
    }

    async fn list(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ChannelState>, StoreError> {
        let client = self.client().await?;
        read::list_channels(&client, after, limit).await
    }

    async fn retained(
        &self,
        channel: &ChannelName,
        now_ms: u64,
    ) -> Result<Option<SharedMessage>, StoreError> {
        let client = self.client().await?;
        retained::read(&client, channel, now_ms).await
    }

    async fn retained_under(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        now_ms: u64,
    ) -> Result<Vec<SharedMessage>, StoreError> {
        let client = self.client().await?;
        retained::read_under(&client, prefix, after, limit, now_ms).await
    }

    async fn close(&self) {
        self.watcher.abort();
        self.requests.lock().take();
        let handle = self.writer.lock().take();
        if let Some(handle) = handle {
            // The writer finishes every request queued before the sender was dropped.
            if handle.await.is_err() {
                tracing::error!("postgres store writer panicked");
            }
        }
        self.pool.close();
    }

    /// The fault the last commit or check found, if any (`takes_writes` checks again when stale).
    fn write_fault(&self) -> Option<StoreError> {
        self.reachability.last_fault()
    }

    /// As the last commit found, while that was less than a second ago; otherwise after one
    /// check (a pooled connection, and the server not a standby), shared by every caller
    /// meanwhile: at most one query a second however often probes ask (`reachability.rs`).
    async fn takes_writes(&self) -> Result<(), StoreError> {
        self.reachability.check(&self.pool, &self.target).await
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // The writer finishes what is queued and stops once the sender is gone.
        self.requests.lock().take();
        self.watcher.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::is_disk_full;

    #[test]
    fn only_disk_full_is_out_of_space() {
        assert!(is_disk_full("53100"));
        for other in ["53000", "53200", "53300", "58030", "08006", "23505"] {
            assert!(!is_disk_full(other), "{other}");
        }
    }
}
