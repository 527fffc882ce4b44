//! The writer thread: the only owner of the write connection. It blocks for the first request,
//! drains whatever else queued up meanwhile (up to `max_batch` messages), commits it all in one
//! transaction, hands the new messages to the [`CommitSink`] and only then replies. There is no
//! artificial delay: batches form from requests that arrived while the previous commit ran.
//!
//! Between batches it sweeps expired messages about every 30 s, and in the same sweep (each in
//! transactions of its own) deletes expired and old cleared retained messages, a page at a
//! time (`common::retained`), and a chunk of finished provider jobs of long-expired pushes. It exits when every sender is
//! gone, after finishing what was queued.
//!
//! Between batches it also purges what deleted apps left (their channels, messages and
//! retained messages), a step in a transaction of its own at a time, every 250 ms while steps
//! find something (`common::app_purge`).
//!
//! A failed batch fails every request it held and the thread goes on with the next one. A batch
//! that failed for lack of space or on an fsync is recorded in the shared [`WriteFault`]; once
//! an fsync failed, every later request is refused without touching the database (see
//! [`crate::sqlite::fault`]).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use herald_core::log::{Appended, CommitSink, StoreError};
use herald_core::message::now_millis;
use rusqlite::{Connection, TransactionBehavior};

use crate::common::app_purge::PurgeSchedule;
use crate::common::jobs::{DONE_JOBS_KEPT_AFTER_EXPIRY_MS, PRUNE_CHUNK};
use crate::common::retained::{SweepCursor, SWEEP_PAGES};
use crate::common::writer::{committed, AGE_TRIM_INTERVAL};
pub(crate) use crate::common::writer::{AppendRequest, Reply};
use crate::sqlite::batch::{self, Batch, ChannelCache};
use crate::sqlite::fault::{self, WriteFault};
use crate::sqlite::known::KnownChannels;
use crate::sqlite::options::SyncMode;
use crate::sqlite::wal_room::WalRoom;
use crate::sqlite::{app_purge, backend, checkpoint, jobs, retained, retention, schema};

/// Work for the writer thread.
pub(crate) enum Request {
    /// Append messages to a channel.
    Append(AppendRequest),
    /// Sweep expired messages now, as if the time were `now_ms`; replies with rows deleted.
    TrimExpired { now_ms: i64, reply: Reply<usize> },
    /// A registry write (apps, keys, devices, receipts, usage).
    Write(WriteJob),
    /// Purge what deleted apps left: one step now, answering the rows it deleted or changed
    /// (`Some`), or steps from now on until nothing is left (`None`).
    PurgeDeletedApps { reply: Option<Reply<usize>> },
}

/// Applies a registry write on the write connection.
pub(crate) type WriteApply = Box<dyn FnOnce(&Connection) -> Result<(), StoreError> + Send>;

/// Told the outcome of a registry write once its transaction has committed or failed.
pub(crate) type WriteDone = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// A registry write. It joins the group commit of whatever appends and writes are queued with
/// it, inside a savepoint of its own so that its failure undoes only itself; `done` hears the
/// outcome once the transaction has committed (or failed), never before.
pub(crate) struct WriteJob {
    /// Applies the write.
    pub apply: WriteApply,
    /// Told the outcome after the commit.
    pub done: WriteDone,
}

/// A request that can join a group commit.
enum Grouped {
    Append(AppendRequest),
    Write(WriteJob),
}

/// What to tell the requests of a batch once it commits.
#[derive(Default)]
struct Replies {
    appends: Vec<Reply<Vec<Appended>>>,
    writes: Vec<(WriteDone, Result<(), StoreError>)>,
}

/// State owned by the writer thread.
pub(crate) struct Writer {
    conn: Connection,
    sync: SyncMode,
    max_batch: usize,
    sink: Arc<dyn CommitSink>,
    cache: ChannelCache,
    /// Set by the checkpoint thread when the write-ahead log should start again.
    restart_wanted: Arc<AtomicBool>,
    /// Why writes fail now (no space, or halted after a failed fsync).
    fault: Arc<WriteFault>,
    /// Held while SQLite may write the log, so the checkpoint thread's zeros never meet a
    /// frame (wal_room.rs).
    wal_room: Arc<WalRoom>,
    /// Where the next sweep of the retained messages goes on from.
    retained_sweep: SweepCursor,
    /// When the next step of the deleted apps' purge runs.
    purge: PurgeSchedule,
}

impl Writer {
    // Each is a separate part shared with another thread or the log; one call site (log.rs).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        conn: Connection,
        sync: SyncMode,
        max_batch: usize,
        sink: Arc<dyn CommitSink>,
        restart_wanted: Arc<AtomicBool>,
        fault: Arc<WriteFault>,
        known: Arc<KnownChannels>,
        wal_room: Arc<WalRoom>,
    ) -> Self {
        Writer {
            conn,
            sync,
            max_batch: max_batch.max(1),
            sink,
            cache: ChannelCache::new(known),
            restart_wanted,
            fault,
            wal_room,
            retained_sweep: SweepCursor::default(),
            purge: PurgeSchedule::default(),
        }
    }

    /// Restarts the write-ahead log if the checkpoint thread asked (see checkpoint.rs). Between
    /// batches this connection holds no lock, so the checkpoint never waits for a writer.
    fn restart_log_if_wanted(&mut self) {
        if !self.restart_wanted.swap(false, Ordering::Relaxed) {
            return;
        }
        let _ = self.conn.busy_timeout(checkpoint::RESTART_WAIT);
        checkpoint::checkpoint(&self.conn, "RESTART", &self.fault);
        let _ = self.conn.busy_timeout(schema::BUSY_TIMEOUT);
    }

    /// The thread's main loop; returns when the request channel is closed and drained.
    pub(crate) fn run(mut self, requests: Receiver<Request>) {
        let mut pending: Option<Request> = None;
        let mut next_trim = Instant::now() + AGE_TRIM_INTERVAL;
        let wal_room = self.wal_room.clone();
        loop {
            let first = match pending.take() {
                Some(request) => request,
                None => match requests.recv_timeout(
                    (self.purge.earlier(next_trim)).saturating_duration_since(Instant::now()),
                ) {
                    Ok(request) => request,
                    Err(RecvTimeoutError::Timeout) => {
                        let _writing = wal_room.writing();
                        if Instant::now() >= next_trim {
                            if self.fault.halted().is_none() {
                                let _ = self.sweep(now_millis());
                            }
                            next_trim = Instant::now() + AGE_TRIM_INTERVAL;
                        }
                        self.purge_if_due();
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                },
            };
            if let Some(halted) = self.fault.halted() {
                refuse(first, halted);
                continue;
            }
            let _writing = wal_room.writing();
            match first {
                Request::Append(append) => {
                    self.commit_batch(Grouped::Append(append), &requests, &mut pending)
                }
                Request::Write(write) => {
                    self.commit_batch(Grouped::Write(write), &requests, &mut pending)
                }
                Request::TrimExpired { now_ms, reply } => {
                    let _ = reply.send(self.sweep(now_ms));
                }
                Request::PurgeDeletedApps { reply: Some(reply) } => {
                    let _ = reply.send(self.purge_step());
                }
                Request::PurgeDeletedApps { reply: None } => self.purge.want(),
            }
            self.restart_log_if_wanted();
            if Instant::now() >= next_trim {
                let _ = self.sweep(now_millis());
                next_trim = Instant::now() + AGE_TRIM_INTERVAL;
            }
            self.purge_if_due();
        }
        // Closing the connection may checkpoint and truncate the log.
        let _writing = wal_room.writing();
        drop(self);
        tracing::debug!("store writer stopped");
    }

    /// Commits `first` and whatever appends and registry writes queue up behind it (up to
    /// `max_batch` messages, a write counting as one) in one transaction, then feeds the sink,
    /// then replies to every request of the batch.
    ///
    /// The queue is drained while the transaction is being built, so requests that arrive while
    /// earlier ones are applied still join this commit. A request that would overflow the batch,
    /// or one that cannot be grouped, is left in `pending` for next time. `SyncMode::Always`
    /// never groups.
    fn commit_batch(
        &mut self,
        first: Grouped,
        requests: &Receiver<Request>,
        pending: &mut Option<Request>,
    ) {
        let mut replies = Replies::default();
        let result = self.transact(first, requests, pending, &mut replies);
        // Read at once: SQLite reports a write that failed with EFBIG or EDQUOT as a plain
        // write error, and only errno tells that it was for lack of space.
        let errno = std::io::Error::last_os_error().raw_os_error();
        match result {
            Ok(batch) => {
                self.fault.record(None);
                batch::finish(&mut self.cache);
                committed(&*self.sink, batch.requested, &batch.new_messages);
                for (reply, result) in replies.appends.into_iter().zip(batch.results) {
                    let _ = reply.send(Ok(result));
                }
                for (done, result) in replies.writes {
                    done(result);
                }
            }
            Err(err) => {
                self.cache.forget_touched();
                let err = fault::observe_with_errno(&self.fault, err, errno);
                let requests = replies.appends.len() + replies.writes.len();
                if matches!(err, StoreError::Backend { .. }) {
                    tracing::error!(error = %err, requests, "store batch failed");
                }
                for reply in replies.appends {
                    let _ = reply.send(Err(err.clone()));
                }
                for (done, _) in replies.writes {
                    done(Err(err.clone()));
                }
            }
        }
    }

    /// Builds and commits the batch's transaction; `replies` collects every request taken in,
    /// whether or not the transaction succeeds.
    fn transact(
        &mut self,
        first: Grouped,
        requests: &Receiver<Request>,
        pending: &mut Option<Request>,
        replies: &mut Replies,
    ) -> Result<Batch, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate);
        let mut tx = match tx {
            Ok(tx) => tx,
            Err(err) => {
                match first {
                    Grouped::Append(a) => replies.appends.push(a.reply),
                    Grouped::Write(w) => replies.writes.push((w.done, Ok(()))),
                }
                return Err(backend(err));
            }
        };
        let now_ms = now_millis();
        let mut batch = Batch::default();
        let mut size = 0;
        let mut next = Some(first);
        while let Some(request) = next.take() {
            match request {
                Grouped::Append(request) => {
                    replies.appends.push(request.reply);
                    size += request.messages.len();
                    batch.add(
                        &tx,
                        &mut self.cache,
                        &request.channel,
                        request.messages,
                        request.retention,
                        now_ms,
                    )?;
                }
                Grouped::Write(write) => {
                    size += 1;
                    let result = apply_in_savepoint(&mut tx, write.apply)
                        .map_err(|err| fault::observe(&self.fault, err));
                    replies.writes.push((write.done, result));
                }
            }
            if self.sync == SyncMode::Always || size >= self.max_batch {
                break;
            }
            match requests.try_recv() {
                Ok(Request::Append(more)) if size + more.messages.len() <= self.max_batch => {
                    next = Some(Grouped::Append(more));
                }
                Ok(Request::Write(write)) => next = Some(Grouped::Write(write)),
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

    /// Runs an age sweep in its own transaction and updates the cache once it commits.
    fn sweep(&mut self, now_ms: i64) -> Result<usize, StoreError> {
        let trimmed = (|| {
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
        let errno = std::io::Error::last_os_error().raw_os_error();
        let result = match trimmed {
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
                let err = fault::observe_with_errno(&self.fault, err, errno);
                tracing::error!(error = %err, "expired-message sweep failed");
                Err(err)
            }
        };
        self.sweep_retained(now_ms);
        self.prune_jobs(now_ms);
        // What deleted apps left, should a restart have stopped their purge.
        self.purge.want();
        result
    }

    /// Runs the deleted apps' purge step if one is due (none while the store is halted).
    fn purge_if_due(&mut self) {
        if !self.purge.is_due() {
            return;
        }
        if self.fault.halted().is_some() {
            self.purge.stepped(None);
            return;
        }
        let _ = self.purge_step();
    }

    /// One step of the deleted apps' purge in its own transaction (`common::app_purge`): the
    /// rows it deleted or changed; the next step is planned from what it found.
    fn purge_step(&mut self) -> Result<usize, StoreError> {
        let cache = &mut self.cache;
        let result = (|| {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(backend)?;
            let deleted = app_purge::step(&tx, cache)?;
            tx.commit().map_err(backend)?;
            Ok::<_, StoreError>(deleted)
        })();
        match &result {
            Ok(0) => {}
            Ok(deleted) => tracing::debug!(deleted, "rows of deleted apps removed"),
            Err(err) => {
                let err = fault::observe(&self.fault, err.clone());
                tracing::error!(error = %err, "deleted apps' purge failed");
            }
        }
        self.purge.stepped(result.as_ref().ok().copied());
        result
    }

    /// Deletes the retained messages expired at `now_ms` and the old cleared markers, a page
    /// at a time, each page in its own transaction, at most [`SWEEP_PAGES`] of them
    /// (`common::retained`); a failure is logged and left for the next sweep.
    fn sweep_retained(&mut self, now_ms: i64) {
        let mut deleted = 0;
        for _ in 0..SWEEP_PAGES {
            let step = (|| {
                let tx = self
                    .conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(backend)?;
                let step = retained::sweep_step(&tx, self.retained_sweep.after(), now_ms)?;
                tx.commit().map_err(backend)?;
                Ok::<_, StoreError>(step)
            })();
            match step {
                Ok((n, last)) => {
                    deleted += n;
                    if !self.retained_sweep.stepped(last) {
                        break;
                    }
                }
                Err(err) => {
                    tracing::error!(error = %err, "retained-message sweep failed");
                    break;
                }
            }
        }
        if deleted > 0 {
            tracing::debug!(deleted, "expired and cleared retained messages removed");
        }
    }

    /// Deletes a chunk of finished send jobs of pushes that expired more than a day before
    /// `now_ms`, in its own transaction; a failure is logged and left for the next sweep.
    fn prune_jobs(&mut self, now_ms: i64) {
        let result = (|| {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(backend)?;
            let before = now_ms.saturating_sub(DONE_JOBS_KEPT_AFTER_EXPIRY_MS);
            let pruned = jobs::prune_expired_chunk(&tx, before, PRUNE_CHUNK)?;
            tx.commit().map_err(backend)?;
            Ok::<_, StoreError>(pruned)
        })();
        match result {
            Ok(0) => {}
            Ok(pruned) => tracing::debug!(pruned, "finished jobs of expired pushes removed"),
            Err(err) => tracing::error!(error = %err, "finished-job prune failed"),
        }
    }
}

/// Answers a request the halted store will not run.
fn refuse(request: Request, halted: StoreError) {
    match request {
        Request::Append(append) => {
            let _ = append.reply.send(Err(halted));
        }
        Request::Write(write) => (write.done)(Err(halted)),
        Request::TrimExpired { reply, .. } => {
            let _ = reply.send(Err(halted));
        }
        Request::PurgeDeletedApps { reply } => {
            if let Some(reply) = reply {
                let _ = reply.send(Err(halted));
            }
        }
    }
}

/// Runs one registry write in a savepoint of `tx`: kept if it succeeds, undone alone if it fails
/// or panics.
fn apply_in_savepoint(
    tx: &mut rusqlite::Transaction<'_>,
    apply: WriteApply,
) -> Result<(), StoreError> {
    let savepoint = tx.savepoint().map_err(backend)?;
    match catch_unwind(AssertUnwindSafe(|| apply(&savepoint))) {
        Ok(Ok(())) => savepoint.commit().map_err(backend),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            tracing::error!("a registry write panicked; it was rolled back");
            Err(StoreError::failed("the write failed inside the server"))
        }
    }
}
