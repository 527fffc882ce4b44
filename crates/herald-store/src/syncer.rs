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
//! A failed fsync halts the store as a failed commit fsync does ([`crate::fault`]): the batches
//! it covered, and every one after, are answered with the halt.

use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
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

/// Starts the syncer thread for the database at `db_path`; it exits once every sender of the
/// returned channel is gone and what they sent is answered.
pub(crate) fn start(
    db_path: &Path,
    sink: Arc<dyn CommitSink>,
    fault: Arc<WriteFault>,
) -> Result<(Sender<Committed>, JoinHandle<()>), StoreError> {
    let mut wal = db_path.as_os_str().to_owned();
    wal.push("-wal");
    let wal = PathBuf::from(wal);
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("herald-store-sync".into())
        .spawn(move || run(&wal, sink.as_ref(), &fault, rx))
        .map_err(|e| StoreError::backend("cannot start the store's syncer", e))?;
    Ok((tx, handle))
}

fn run(wal: &Path, sink: &dyn CommitSink, fault: &WriteFault, batches: Receiver<Committed>) {
    while let Ok(first) = batches.recv() {
        let mut ready = vec![first];
        ready.extend(batches.try_iter());
        if let Some(halted) = fault.halted() {
            ready.into_iter().for_each(|batch| batch.fail(&halted));
            continue;
        }
        let started = Instant::now();
        // Opened by name each time: the file SQLite writes now, whatever it did to it before.
        let synced = File::open(wal).and_then(|file| file.sync_data());
        metrics::histogram!("herald_store_fsync_seconds").record(started.elapsed().as_secs_f64());
        if let Err(err) = synced {
            let err = StoreError::backend(format!("fsync of {} failed", wal.display()), err);
            fault.record(Some((&err, FaultKind::Fsync)));
            let halted = fault.halted().unwrap_or(err);
            ready.into_iter().for_each(|batch| batch.fail(&halted));
            continue;
        }
        for batch in ready {
            if !batch.new_messages.is_empty()
                && catch_unwind(AssertUnwindSafe(|| sink.committed(&batch.new_messages))).is_err()
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
    tracing::debug!("store syncer stopped");
}
