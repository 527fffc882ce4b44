//! Background WAL checkpoints. The writer connection never checkpoints (its automatic
//! checkpoint is off), because a checkpoint copies pages into the database file and fsyncs it,
//! which on the writer thread would stall every publish waiting for the next group commit. A
//! thread of its own runs a passive checkpoint (which never blocks the writer or readers) every
//! second, and a truncating one when the store closes.
//!
//! A passive checkpoint alone does not bound the log under steady writes: SQLite starts the log
//! again from the beginning only when a commit begins while every frame has been copied, and
//! with commits arriving every millisecond some always arrive during the copy, so the file
//! grew by the whole write rate (350 MB in 20 s of publishing). So once the log holds more than
//! the configured size, the thread asks the writer for a restarting checkpoint, which the writer
//! runs between two batches (where it holds no lock, so it cannot miss its turn): it copies
//! what the passive pass missed (little), waits for readers to leave the log, and the next
//! commit then writes from the start of the file again.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use rusqlite::Connection;

use herald_core::log::StoreError;

use crate::sqlite::backend;
use crate::sqlite::fault::{self, WriteFault};
use crate::sqlite::wal_room::WalRoom;

/// The write-ahead log's header, and each frame's before its page (SQLite's WAL format).
const WAL_HEADER_BYTES: i64 = 32;
const FRAME_HEADER_BYTES: i64 = 24;

/// How often the WAL is checkpointed.
const INTERVAL: Duration = Duration::from_secs(1);

/// How long a checkpoint waits for the writer or readers (the final one at close).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a restarting checkpoint waits for readers to leave the log (commits wait
/// meanwhile); if they have not, it gives up and is asked again after the next pass.
pub(crate) const RESTART_WAIT: Duration = Duration::from_millis(100);

/// The checkpoint thread; stopping (or dropping) it runs a final checkpoint.
pub(crate) struct Checkpointer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts checkpointing the database at `path` on a connection of its own. Past
    /// `restart_bytes` of log it sets `restart_wanted`, which the writer acts on and clears.
    pub(crate) fn start(
        path: &Path,
        restart_bytes: u64,
        restart_wanted: Arc<AtomicBool>,
        fault: Arc<WriteFault>,
        wal_room: Arc<WalRoom>,
    ) -> Result<Checkpointer, StoreError> {
        let conn = Connection::open(path).map_err(backend)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(backend)?;
        let page_size: i64 = conn
            .query_row("PRAGMA page_size", [], |row| row.get(0))
            .map_err(backend)?;
        let restart_pages = (restart_bytes / page_size.max(512) as u64) as i64;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let pass = Pass {
            stop: stop.clone(),
            restart_wanted,
            restart_pages,
            page_size,
            fault,
            wal_room,
        };
        let handle = std::thread::Builder::new()
            .name("herald-store-checkpoint".into())
            .spawn(move || pass.run(conn))
            .map_err(|e| StoreError::backend("cannot start checkpointer", e))?;
        Ok(Checkpointer {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops the thread after a final checkpoint.
    pub(crate) fn stop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the checkpoint thread needs.
struct Pass {
    stop: Arc<(Mutex<bool>, Condvar)>,
    restart_wanted: Arc<AtomicBool>,
    restart_pages: i64,
    page_size: i64,
    /// Where a failed fsync is recorded (it halts writes).
    fault: Arc<WriteFault>,
    /// The log's room ahead of its writes, made after a pass once the log is large enough.
    wal_room: Arc<WalRoom>,
}

impl Pass {
    fn run(self, conn: Connection) {
        loop {
            {
                let mut stopped = self.stop.0.lock();
                if !*stopped {
                    self.stop.1.wait_for(&mut stopped, INTERVAL);
                }
                if *stopped {
                    break;
                }
            }
            if let Some(pages) = checkpoint(&conn, "PASSIVE", &self.fault) {
                metrics::gauge!("herald_store_wal_bytes").set((pages * self.page_size) as f64);
                if pages > self.restart_pages {
                    self.restart_wanted.store(true, Ordering::Relaxed);
                }
                let log_bytes =
                    WAL_HEADER_BYTES + pages.max(0) * (self.page_size + FRAME_HEADER_BYTES);
                self.wal_room.make(log_bytes as u64, || *self.stop.0.lock());
            }
        }
        checkpoint(&conn, "TRUNCATE", &self.fault);
    }
}

/// Runs one checkpoint on `conn`; returns how many pages the log held. A failed fsync is
/// recorded in `fault`, which halts writes (see [`crate::sqlite::fault`]).
pub(crate) fn checkpoint(conn: &Connection, mode: &'static str, fault: &WriteFault) -> Option<i64> {
    let started = std::time::Instant::now();
    let result = conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, i64>(2)?,
        ))
    });
    match result {
        Ok((busy, wal_pages, copied)) => {
            metrics::histogram!("herald_store_checkpoint_seconds", "mode" => mode)
                .record(started.elapsed().as_secs_f64());
            tracing::trace!(busy, wal_pages, copied, mode, "checkpoint");
            Some(wal_pages)
        }
        Err(e) => {
            let errno = std::io::Error::last_os_error().raw_os_error();
            let err = backend(e);
            if fault::classify(&err, errno) == fault::FaultKind::Fsync {
                fault.record(Some((&err, fault::FaultKind::Fsync)));
            }
            tracing::warn!(error = %err.chain(), mode, "WAL checkpoint failed");
            None
        }
    }
}
