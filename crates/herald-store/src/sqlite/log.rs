//! [`SqliteLog`]: the public face of the crate. It opens the database, starts the writer thread,
//! routes appends and API-key writes to it and reads to the read pool, and shuts the writer
//! down on [`ChannelLog::close`] or drop.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use herald_core::log::{
    Appended, ChannelLog, ChannelState, CommitSink, LogSlice, ReadFrom, Retention, StoreError,
};
use herald_core::message::{now_millis, NewMessage, SharedMessage};
use herald_core::name::ChannelName;
use parking_lot::{Mutex, RwLock};
use tokio::sync::oneshot;

use crate::sqlite::checkpoint::Checkpointer;
use crate::sqlite::fault::WriteFault;
use crate::sqlite::known::KnownChannels;
use crate::sqlite::options::SqliteOptions;
use crate::sqlite::reader::{self, ReadPool};
use crate::sqlite::wal_room::WalRoom;
use crate::sqlite::writer::{AppendRequest, Request, WriteJob, Writer};
use crate::sqlite::{schema, DB_FILE_NAME};

/// A channel log in one SQLite database, with group commit.
pub struct SqliteLog {
    /// Requests to the writer thread; `None` once closed.
    requests: RwLock<Option<Sender<Request>>>,
    /// The writer thread, joined on close or drop.
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Read-only connections.
    readers: Arc<ReadPool>,
    /// Background WAL checkpoints; stopped after the writer.
    checkpointer: Mutex<Option<Checkpointer>>,
    /// Why writes fail now, for `/healthz` and `/readyz`.
    fault: Arc<WriteFault>,
    /// When a write was last tried for `/readyz` while out of space ([`SPACE_RETRY`]).
    space_retried: tokio::sync::Mutex<Option<Instant>>,
    /// The channels that may have a log: the others are answered without a read.
    known: Arc<KnownChannels>,
}

/// How often `/readyz` tries a write while the store is out of space: a node that a load
/// balancer took out of rotation may get no other write to find that space came back.
const SPACE_RETRY: Duration = Duration::from_secs(1);

/// Makes the database readable by its owner only: created so when missing (SQLite gives its
/// write-ahead log and shared-memory files the database file's mode), and tightened, with a
/// warning, when an older file (or a restored backup) lets others read it. It holds every app's
/// token secret.
fn owner_only(path: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let error = |e| StoreError::backend(format!("cannot secure {}", path.display()), e);
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(error)?;
        for suffix in ["", "-wal", "-shm"] {
            let file = crate::sqlite::db_sibling(path, suffix);
            let Ok(meta) = std::fs::metadata(&file) else {
                continue;
            };
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode & 0o700))
                    .map_err(error)?;
                tracing::warn!(
                    file = %file.display(),
                    "the store file was readable by other users; made it owner-only"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

impl SqliteLog {
    /// Opens (creating if needed) `dir/herald.db`; creates `dir` if missing. Runs migrations and
    /// starts the writer thread. `sink` receives every newly committed message.
    pub fn open(
        dir: &Path,
        options: SqliteOptions,
        sink: Arc<dyn CommitSink>,
    ) -> Result<Arc<SqliteLog>, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::backend(format!("cannot create data directory {}", dir.display()), e)
        })?;
        let path = dir.join(DB_FILE_NAME);
        owner_only(&path)?;
        let conn = schema::open_writer(&path, options.sync, options.wal_kept_bytes())?;
        let wal_room = Arc::new(WalRoom::new(&path, &options));
        let readers = ReadPool::open(&path, options.read_connections)?;
        // Raised by the checkpoint thread when the write-ahead log should start again; the
        // writer restarts it between two batches.
        let restart_wanted = Arc::new(AtomicBool::new(false));
        let fault = Arc::new(WriteFault::default());
        let checkpointer = Checkpointer::start(
            &path,
            options.wal_restart_bytes,
            restart_wanted.clone(),
            fault.clone(),
            wal_room.clone(),
        )?;
        let known = KnownChannels::new();
        let (tx, rx) = mpsc::channel();
        let writer = Writer::new(
            conn,
            options.sync,
            options.max_batch,
            sink,
            restart_wanted,
            fault.clone(),
            known.clone(),
            wal_room,
        );
        let handle = std::thread::Builder::new()
            .name("herald-store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| StoreError::backend("cannot start store writer", e))?;
        // The writer adds every channel it creates from now on; this adds those stored already.
        known.load_in_background(&path);
        tracing::info!(path = %path.display(), sync = %options.sync, "store opened");
        Ok(Arc::new(SqliteLog {
            requests: RwLock::new(Some(tx)),
            writer: Mutex::new(Some(handle)),
            readers,
            checkpointer: Mutex::new(Some(checkpointer)),
            fault,
            space_retried: tokio::sync::Mutex::new(None),
            known,
        }))
    }

    /// While out of space: one small write (the schema version written back unchanged) at most
    /// every [`SPACE_RETRY`], the callers meanwhile waiting for it; its success clears the
    /// fault, as any write's does. Answers the fault after it.
    async fn retry_write_for_space(&self) -> Result<(), StoreError> {
        let mut last = self.space_retried.lock().await;
        if !last.is_some_and(|at| at.elapsed() < SPACE_RETRY) {
            *last = Some(Instant::now());
            let rewritten = self
                .write(|conn| {
                    let version: i64 = conn
                        .query_row("PRAGMA user_version", [], |row| row.get(0))
                        .map_err(|e| StoreError::backend("reading the schema version", e))?;
                    conn.execute_batch(&format!("PRAGMA user_version = {version}"))
                        .map_err(|e| StoreError::backend("writing the schema version", e))
                })
                .await;
            if let Err(e) = rewritten {
                tracing::debug!(error = %e.chain(), "still no space for a write");
            }
        }
        match self.fault.current() {
            Some(fault) => Err(fault),
            None => Ok(()),
        }
    }

    /// Sends a request to the writer and waits for its answer.
    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> Request,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        {
            let requests = self.requests.read();
            let sender = requests.as_ref().ok_or(StoreError::Closed)?;
            sender.send(make(reply)).map_err(|_| StoreError::Closed)?;
        }
        // The writer drops the reply only if it died; the request's fate is then unknown.
        answer
            .await
            .map_err(|_| StoreError::failed("store writer stopped"))?
    }

    /// Runs a registry write on the writer thread, in the next group commit, and waits until it
    /// is durable.
    pub(crate) async fn write<T, F>(&self, job: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let output = Arc::new(Mutex::new(None));
        let slot = output.clone();
        self.ask(move |reply| {
            Request::Write(WriteJob {
                apply: Box::new(move |conn| {
                    *slot.lock() = Some(job(conn)?);
                    Ok(())
                }),
                done: Box::new(move |result| {
                    let result = result.and_then(|()| {
                        output
                            .lock()
                            .take()
                            .ok_or_else(|| StoreError::failed("the write produced nothing"))
                    });
                    let _ = reply.send(result);
                }),
            })
        })
        .await
    }

    /// The read-only connections.
    pub(crate) fn readers(&self) -> &Arc<ReadPool> {
        &self.readers
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
    /// itself after an app's deletion; this exists for tests and tools.
    #[doc(hidden)]
    pub async fn purge_deleted_apps(&self) -> Result<usize, StoreError> {
        self.ask(|reply| Request::PurgeDeletedApps { reply: Some(reply) })
            .await
    }

    /// Asks the writer to start purging what deleted apps left (`common::app_purge`), without
    /// waiting for it.
    pub(crate) fn want_purge(&self) {
        if let Some(sender) = self.requests.read().as_ref() {
            let _ = sender.send(Request::PurgeDeletedApps { reply: None });
        }
    }

    /// Returns once the channels stored at open are known, so that reads of the others are
    /// skipped (they are read until then). For tests.
    #[doc(hidden)]
    pub async fn stored_channels_known(&self) {
        self.known.wait_loaded().await
    }

    /// Stops accepting requests and hands back the writer thread, if still running.
    fn stop(&self) -> Option<JoinHandle<()>> {
        self.requests.write().take();
        self.writer.lock().take()
    }
}

#[async_trait]
impl ChannelLog for SqliteLog {
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
        if !self.known.may_have_log(channel) {
            return Ok(LogSlice {
                state: ChannelState::empty(channel.clone()),
                messages: Vec::new(),
            });
        }
        let channel = channel.clone();
        self.readers
            .run(move |conn| reader::read_slice(conn, &channel, from, limit))
            .await
    }

    async fn state(&self, channel: &ChannelName) -> Result<ChannelState, StoreError> {
        if !self.known.may_have_log(channel) {
            return Ok(ChannelState::empty(channel.clone()));
        }
        let channel = channel.clone();
        self.readers
            .run(move |conn| {
                Ok(reader::channel_state(conn, &channel)?
                    .map(|(_, state)| state)
                    .unwrap_or_else(|| ChannelState::empty(channel)))
            })
            .await
    }

    async fn list(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ChannelState>, StoreError> {
        let after = after.map(str::to_owned);
        self.readers
            .run(move |conn| reader::list_channels(conn, after.as_deref(), limit))
            .await
    }

    async fn retained(
        &self,
        channel: &ChannelName,
        now_ms: u64,
    ) -> Result<Option<SharedMessage>, StoreError> {
        if !self.known.may_have_log(channel) {
            return Ok(None);
        }
        let channel = channel.clone();
        self.readers
            .run(move |conn| crate::sqlite::retained::read(conn, &channel, now_ms))
            .await
    }

    async fn retained_under(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        now_ms: u64,
    ) -> Result<Vec<SharedMessage>, StoreError> {
        let (prefix, after) = (prefix.to_owned(), after.map(str::to_owned));
        self.readers
            .run(move |conn| {
                crate::sqlite::retained::read_under(conn, &prefix, after.as_deref(), limit, now_ms)
            })
            .await
    }

    async fn close(&self) {
        let Some(handle) = self.stop() else {
            return;
        };
        // The writer finishes every request queued before the sender was dropped, then exits.
        if tokio::task::spawn_blocking(move || handle.join())
            .await
            .map(|joined| joined.is_err())
            .unwrap_or(true)
        {
            tracing::error!("store writer thread panicked");
        }
        let checkpointer = self.checkpointer.lock().take();
        if let Some(mut checkpointer) = checkpointer {
            let _ = tokio::task::spawn_blocking(move || checkpointer.stop()).await;
        }
    }

    fn write_fault(&self) -> Option<StoreError> {
        self.fault.current()
    }

    /// No write fault. While out of space, a write is tried first (at most once a second), so
    /// the answer turns ready once space is back even if nothing else writes.
    async fn takes_writes(&self) -> Result<(), StoreError> {
        match self.fault.current() {
            None => Ok(()),
            Some(StoreError::Full { .. }) => self.retry_write_for_space().await,
            Some(fault) => Err(fault),
        }
    }

    /// The known-channel set answers for them (`known.rs`).
    fn knows_unpublished_channels(&self) -> bool {
        true
    }
}

impl Drop for SqliteLog {
    fn drop(&mut self) {
        let Some(handle) = self.stop() else {
            return;
        };
        // Never join ourselves (the last reference could be dropped by the sink, on the writer).
        if handle.thread().id() != std::thread::current().id() && handle.join().is_err() {
            tracing::error!("store writer thread panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::fault::FaultKind;
    use herald_core::message::SharedMessage;

    struct NoSink;

    impl CommitSink for NoSink {
        fn committed(&self, _: &[SharedMessage]) {}
    }

    /// A store marked out of space with room on its disk: `takes_writes` tries a write, which
    /// succeeds and clears the fault, with no publish. A halted store stays halted.
    #[tokio::test]
    async fn readiness_finds_that_space_came_back_without_a_publish() {
        let dir = tempfile::tempdir().unwrap();
        let log = SqliteLog::open(dir.path(), SqliteOptions::default(), Arc::new(NoSink)).unwrap();
        let full = StoreError::full("a write", std::io::Error::other("No space left on device"));
        log.fault.record(Some((&full, FaultKind::NoSpace)));
        assert!(matches!(log.write_fault(), Some(StoreError::Full { .. })));
        log.takes_writes()
            .await
            .expect("ready once a write went through");
        assert!(log.write_fault().is_none(), "the fault is cleared");

        log.fault.record(Some((
            &StoreError::halted("an fsync failed"),
            FaultKind::Fsync,
        )));
        let halted = log
            .takes_writes()
            .await
            .expect_err("halted until a restart");
        assert!(halted.needs_restart(), "{halted}");
        log.close().await;
    }
}
