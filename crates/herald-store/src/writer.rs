//! The writer thread: the only owner of the write connection. It blocks for the first request,
//! drains whatever else queued up meanwhile (up to `max_batch` messages), commits it all in one
//! transaction, hands the new messages to the [`CommitSink`] and only then replies. There is no
//! artificial delay: batches form from requests that arrived while the previous commit ran.
//!
//! Between batches it sweeps expired messages about every 30 s. It exits when every sender is
//! gone, after finishing what was queued.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_core::log::{Appended, CommitSink, Retention, StoreError};
use herald_core::message::{now_millis, NewMessage};
use herald_core::name::ChannelName;
use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::oneshot;

use crate::batch::{self, Batch, ChannelCache};
use crate::options::SyncMode;
use crate::{backend, retention};

/// How often expired messages are swept.
pub(crate) const AGE_TRIM_INTERVAL: Duration = Duration::from_secs(30);

/// Where a request's answer goes.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// One append call.
pub(crate) struct AppendRequest {
    pub channel: ChannelName,
    pub messages: Vec<NewMessage>,
    pub retention: Retention,
    pub reply: Reply<Vec<Appended>>,
}

/// Work for the writer thread.
pub(crate) enum Request {
    /// Append messages to a channel.
    Append(AppendRequest),
    /// Store an API key hash (no-op if present).
    AddApiKey {
        hash: String,
        label: String,
        reply: Reply<()>,
    },
    /// Sweep expired messages now, as if the time were `now_ms`; replies with rows deleted.
    TrimExpired { now_ms: i64, reply: Reply<usize> },
    /// A registry write (apps, keys, devices, receipts, usage): runs on the write connection in
    /// its own transaction and replies by itself.
    Exec(Box<dyn FnOnce(&mut Connection) + Send>),
}

/// State owned by the writer thread.
pub(crate) struct Writer {
    conn: Connection,
    sync: SyncMode,
    max_batch: usize,
    sink: Arc<dyn CommitSink>,
    cache: ChannelCache,
}

impl Writer {
    pub(crate) fn new(
        conn: Connection,
        sync: SyncMode,
        max_batch: usize,
        sink: Arc<dyn CommitSink>,
    ) -> Self {
        Writer {
            conn,
            sync,
            max_batch: max_batch.max(1),
            sink,
            cache: ChannelCache::default(),
        }
    }

    /// The thread's main loop; returns when the request channel is closed and drained.
    pub(crate) fn run(mut self, requests: Receiver<Request>) {
        let mut pending: Option<Request> = None;
        let mut next_trim = Instant::now() + AGE_TRIM_INTERVAL;
        loop {
            let first = match pending.take() {
                Some(request) => request,
                None => match requests
                    .recv_timeout(next_trim.saturating_duration_since(Instant::now()))
                {
                    Ok(request) => request,
                    Err(RecvTimeoutError::Timeout) => {
                        let _ = self.sweep(now_millis());
                        next_trim = Instant::now() + AGE_TRIM_INTERVAL;
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                },
            };
            match first {
                Request::Append(append) => self.commit_appends(append, &requests, &mut pending),
                Request::AddApiKey { hash, label, reply } => {
                    let _ = reply.send(self.add_api_key(&hash, &label));
                }
                Request::TrimExpired { now_ms, reply } => {
                    let _ = reply.send(self.sweep(now_ms));
                }
                Request::Exec(job) => {
                    if catch_unwind(AssertUnwindSafe(|| job(&mut self.conn))).is_err() {
                        tracing::error!("a registry write panicked; it was rolled back");
                    }
                }
            }
            if Instant::now() >= next_trim {
                let _ = self.sweep(now_millis());
                next_trim = Instant::now() + AGE_TRIM_INTERVAL;
            }
        }
        tracing::debug!("store writer stopped");
    }

    /// Commits `first` and whatever appends queue up behind it (up to `max_batch` messages) in
    /// one transaction, then feeds the sink, then replies to every request of the batch.
    ///
    /// The queue is drained while the transaction is being built, so requests that arrive while
    /// earlier ones are applied still join this commit. A request that would overflow the batch,
    /// or one that is not an append, is left in `pending` for next time. `SyncMode::Always`
    /// never groups.
    fn commit_appends(
        &mut self,
        first: AppendRequest,
        requests: &Receiver<Request>,
        pending: &mut Option<Request>,
    ) {
        let mut replies = Vec::new();
        match self.transact_appends(first, requests, pending, &mut replies) {
            Ok(batch) => {
                batch::finish(&mut self.cache);
                let new = &batch.new_messages;
                metrics::histogram!("herald_store_batch_messages").record(batch.requested as f64);
                metrics::counter!("herald_store_appends_total").increment(new.len() as u64);
                if !new.is_empty() {
                    let sink = &self.sink;
                    if catch_unwind(AssertUnwindSafe(|| sink.committed(new))).is_err() {
                        tracing::error!("commit sink panicked; the messages are stored");
                    }
                }
                for (reply, result) in replies.into_iter().zip(batch.results) {
                    let _ = reply.send(Ok(result));
                }
            }
            Err(err) => {
                self.cache.forget_touched();
                tracing::error!(error = %err, requests = replies.len(), "append batch failed");
                for reply in replies {
                    let _ = reply.send(Err(err.clone()));
                }
            }
        }
    }

    /// Builds and commits the batch's transaction; `replies` collects every request taken in,
    /// whether or not the transaction succeeds.
    fn transact_appends(
        &mut self,
        first: AppendRequest,
        requests: &Receiver<Request>,
        pending: &mut Option<Request>,
        replies: &mut Vec<Reply<Vec<Appended>>>,
    ) -> Result<Batch, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate);
        let tx = match tx {
            Ok(tx) => tx,
            Err(err) => {
                replies.push(first.reply);
                return Err(backend(err));
            }
        };
        let now_ms = now_millis();
        let mut batch = Batch::default();
        let mut next = Some(first);
        while let Some(request) = next.take() {
            replies.push(request.reply);
            batch.add(
                &tx,
                &mut self.cache,
                &request.channel,
                request.messages,
                request.retention,
                now_ms,
            )?;
            if self.sync == SyncMode::Always || batch.requested >= self.max_batch {
                break;
            }
            match requests.try_recv() {
                Ok(Request::Append(more))
                    if batch.requested + more.messages.len() <= self.max_batch =>
                {
                    next = Some(more);
                }
                Ok(other) => *pending = Some(other),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
            }
        }
        batch::write_back_touched(&tx, &mut self.cache)?;
        let started = Instant::now();
        tx.commit().map_err(backend)?;
        metrics::histogram!("herald_store_commit_seconds").record(started.elapsed().as_secs_f64());
        Ok(batch)
    }

    fn add_api_key(&mut self, hash: &str, label: &str) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT OR IGNORE INTO api_keys (hash, label, created) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut stmt| stmt.execute(rusqlite::params![hash, label, now_millis()]))
            .map_err(backend)?;
        Ok(())
    }

    /// Runs an age sweep in its own transaction and updates the cache once it commits.
    fn sweep(&mut self, now_ms: i64) -> Result<usize, StoreError> {
        let result = (|| {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(backend)?;
            let trimmed = retention::trim_expired(&tx, now_ms)?;
            let started = Instant::now();
            tx.commit().map_err(backend)?;
            metrics::histogram!("herald_store_commit_seconds")
                .record(started.elapsed().as_secs_f64());
            Ok(trimmed)
        })();
        match result {
            Ok(trimmed) => {
                retention::apply_to_cache(&mut self.cache, &trimmed);
                let deleted = trimmed.iter().map(|t| t.deleted).sum();
                if deleted > 0 {
                    tracing::debug!(
                        deleted,
                        channels = trimmed.len(),
                        "expired messages removed"
                    );
                }
                Ok(deleted)
            }
            Err(err) => {
                tracing::error!(error = %err, "expired-message sweep failed");
                Err(err)
            }
        }
    }
}
