//! The syncer thread (`sync = batch` only): fsyncs the write-ahead log after group commits and
//! only then hands their messages to the [`CommitSink`] and answers their requests.
//!
//! Under `sync = batch` the write connection runs with `synchronous=NORMAL`: a commit writes its
//! frames to the write-ahead log without waiting for the disk, and the writer passes the
//! committed batch here and starts building the next one at once. This thread takes every batch
//! committed so far, fsyncs the log file once for all of them, then feeds the sink and replies,
//! batch by batch in commit order. So the writer's next transaction and this fsync overlap,
//! instead of each publish waiting for a build and an fsync one after the other; nothing is
//! acknowledged (nor delivered live) before an fsync that started after its commit returned.
//! A reader of the database may see a message up to one fsync before it is acknowledged.
//!
//! While the syncer has batches in hand and nothing is queued, the writer keeps its next
//! transaction open until the syncer says their fsync is done, then takes in whatever queued
//! meanwhile and commits: those requests would wait for the next fsync anyway, and so share one
//! commit as well as one fsync, and none of them wakes the writer.
//!
//! A failed fsync halts the store as a failed commit fsync does ([`crate::fault`]): the batches
//! it covered, and every one after, are answered with the halt.

use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use herald_core::log::{Appended, CommitSink, StoreError};
use herald_core::message::SharedMessage;

use crate::fault::{FaultKind, WriteFault};
use crate::writer::{Reply, WriteDone};

/// A group commit whose transaction has committed, waiting for its fsync.
pub(crate) struct Committed {
    /// Newly stored messages, in commit order, for the sink.
    pub new_messages: Vec<SharedMessage>,
    /// Each append request's answer.
    pub appends: Vec<(Reply<Vec<Appended>>, Vec<Appended>)>,
    /// Each registry write's outcome.
    pub writes: Vec<(WriteDone, Result<(), StoreError>)>,
}

impl Committed {
    /// Answers every request of the batch with `err`; the sink hears nothing.
    pub(crate) fn fail(self, err: &StoreError) {
        for (reply, _) in self.appends {
            let _ = reply.send(Err(err.clone()));
        }
        for (done, _) in self.writes {
            done(Err(err.clone()));
        }
    }
}

/// The writer's side of the syncer.
pub(crate) struct SyncerLink {
    /// Committed batches, in commit order.
    batches: Sender<Committed>,
    /// Batches sent and not yet fsynced.
    in_flight: Arc<AtomicUsize>,
    /// A token each time every batch sent is fsynced.
    idle: Receiver<()>,
}

impl SyncerLink {
    /// Whether batches sent are still waiting for their fsync.
    pub(crate) fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    /// Sends a committed batch; hands it back if the syncer is gone.
    pub(crate) fn send(&self, batch: Committed) -> Result<(), Committed> {
        // Tokens of earlier idle moments: dropped, so they never pile up.
        while self.idle.try_recv().is_ok() {}
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.batches.send(batch).map_err(|unsent| {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            unsent.0
        })
    }

    /// Blocks until every batch sent is fsynced (or the syncer is gone).
    pub(crate) fn wait_idle(&self) {
        while self.busy() {
            if self.idle.recv().is_err() {
                return;
            }
        }
    }
}

/// What the syncer thread works with.
struct Syncer {
    wal: PathBuf,
    sink: Arc<dyn CommitSink>,
    fault: Arc<WriteFault>,
    in_flight: Arc<AtomicUsize>,
    idle: Sender<()>,
}

/// Starts the syncer thread for the database at `db_path`; it exits once the returned link is
/// dropped and every batch sent through it is answered.
pub(crate) fn start(
    db_path: &Path,
    sink: Arc<dyn CommitSink>,
    fault: Arc<WriteFault>,
) -> Result<(SyncerLink, JoinHandle<()>), StoreError> {
    let mut wal = db_path.as_os_str().to_owned();
    wal.push("-wal");
    let in_flight = Arc::new(AtomicUsize::new(0));
    let (idle, idle_rx) = std::sync::mpsc::channel();
    let syncer = Syncer {
        wal: PathBuf::from(wal),
        sink,
        fault,
        in_flight: in_flight.clone(),
        idle,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("herald-store-sync".into())
        .spawn(move || syncer.run(rx))
        .map_err(|e| StoreError::backend("cannot start the store's syncer", e))?;
    let link = SyncerLink {
        batches: tx,
        in_flight,
        idle: idle_rx,
    };
    Ok((link, handle))
}

impl Syncer {
    fn run(self, batches: Receiver<Committed>) {
        while let Ok(first) = batches.recv() {
            let mut ready = vec![first];
            ready.extend(batches.try_iter());
            let synced = self.sync();
            if self.in_flight.fetch_sub(ready.len(), Ordering::AcqRel) == ready.len() {
                // All synced: a transaction the writer holds open may commit now, while these
                // are answered.
                let _ = self.idle.send(());
            }
            match synced {
                Ok(()) => self.answer(ready),
                Err(err) => ready.into_iter().for_each(|batch| batch.fail(&err)),
            }
        }
        tracing::debug!("store syncer stopped");
    }

    /// One fsync of the log; a failure halts the store, and the error is the halt.
    fn sync(&self) -> Result<(), StoreError> {
        if let Some(halted) = self.fault.halted() {
            return Err(halted);
        }
        let started = Instant::now();
        // Opened by name each time: the file SQLite writes now, whatever it did to it before.
        let synced = File::open(&self.wal).and_then(|file| file.sync_data());
        metrics::histogram!("herald_store_fsync_seconds").record(started.elapsed().as_secs_f64());
        synced.map_err(|err| {
            let err = StoreError::backend(format!("fsync of {} failed", self.wal.display()), err);
            self.fault.record(Some((&err, FaultKind::Fsync)));
            self.fault.halted().unwrap_or(err)
        })
    }

    /// Each batch's sink call and answers, in commit order.
    fn answer(&self, ready: Vec<Committed>) {
        for batch in ready {
            if !batch.new_messages.is_empty()
                && catch_unwind(AssertUnwindSafe(|| {
                    self.sink.committed(&batch.new_messages)
                }))
                .is_err()
            {
                tracing::error!("commit sink panicked; the messages are stored");
            }
            for (reply, result) in batch.appends {
                let _ = reply.send(Ok(result));
            }
            for (done, result) in batch.writes {
                done(result);
            }
        }
    }
}
