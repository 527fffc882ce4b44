//! Room made ahead of the write-ahead log: the log file is extended with zeros, written and
//! flushed, up to the size it is kept at, so that a commit writes its frames over blocks the
//! file already has. The commit's fsync then flushes only those pages. A commit that extends
//! the file also has to write the file's new size and its new blocks (on ext4, the inode, in a
//! second synchronous write), which made a group commit's fsync about half as long again on
//! this machine's disk (docs/benchmarks.md, "Session 18").
//!
//! SQLite writes the log from its start again after each restarting checkpoint
//! (checkpoint.rs), over the frames of the previous round and whatever else is there: a frame
//! counts only if its salt and checksum match the log's header, so zeros after the last frame
//! are not read as frames, after a crash or otherwise. `journal_size_limit` is set to the same
//! size, so the restart never cuts the room off again.
//!
//! Who writes the file when: SQLite writes the log only on the writer thread, inside a batch, a
//! restart or when the writer closes its connection; the room is made on the checkpoint thread.
//! Both hold [`WalRoom::gate`] while they write, so zeros are only ever appended after the last
//! byte SQLite wrote, never over it. The writer takes the gate once per batch (uncontended,
//! tens of nanoseconds); the filler holds it for one chunk at a time.
//!
//! The room is made only once the log has grown past half its restart size (32 MiB by default),
//! as far as a busy server's log goes within a second or so anyway: a server that publishes
//! little never writes it (a lone publisher's commits add four to six 4 KiB pages each to the
//! log, so a few thousand publishes do reach it). It is not made on a file system that would be
//! left with less than [`MIN_FREE_BYTES`] free.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use parking_lot::{Mutex, MutexGuard};

use crate::sqlite::options::SqliteOptions;

/// Zeros appended per turn of the gate, and flushed before the next: a commit's sync, which
/// flushes every dirty page of the file, never waits for more zeros than this.
const CHUNK_BYTES: u64 = 1 << 20;
/// The room is not made if the file system would be left with less than this free.
const MIN_FREE_BYTES: u64 = 1 << 30;

/// The write-ahead log's room, shared by the writer and the checkpoint thread.
pub(crate) struct WalRoom {
    /// The log file (`herald.db-wal`).
    path: PathBuf,
    /// The size the file is filled to.
    size: u64,
    /// Log bytes after which the room is made.
    start_after: u64,
    /// Held while SQLite may write the log, and while zeros are appended to it.
    gate: Mutex<()>,
    /// Whether the room is made (or given up on) already.
    done: Mutex<bool>,
}

/// What one turn of [`WalRoom::make`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Made {
    /// Nothing to do yet (the log is small, or there is no log file).
    NotYet,
    /// Zeros were appended and flushed; the file is now this long.
    Grown(u64),
    /// The file is as long as it is kept, or the room will not be made.
    Done,
}

impl WalRoom {
    /// Room for the log of the database at `db`: as long as `options` keep the file, made
    /// once the log holds more than half its restart size; none without `wal_preallocate`.
    pub(crate) fn new(db: &Path, options: &SqliteOptions) -> WalRoom {
        WalRoom {
            path: crate::sqlite::db_sibling(db, "-wal"),
            size: options.wal_kept_bytes(),
            start_after: options.wal_restart_bytes / 2,
            gate: Mutex::new(()),
            done: Mutex::new(!options.wal_preallocate),
        }
    }

    /// Taken by the writer for as long as SQLite may write the log.
    pub(crate) fn writing(&self) -> MutexGuard<'_, ()> {
        self.gate.lock()
    }

    /// Makes the room if the log, `log_bytes` long when the last checkpoint counted it, has
    /// passed the size to start at: a chunk at a time until the file is as long as it is kept,
    /// or until `stop`, asked after each chunk, says to stop. Errors are logged and end the
    /// attempt for good: the log works without the room.
    pub(crate) fn make(&self, log_bytes: u64, stop: impl Fn() -> bool) -> Made {
        let mut done = self.done.lock();
        if *done {
            return Made::Done;
        }
        if log_bytes <= self.start_after {
            return Made::NotYet;
        }
        let file = match OpenOptions::new().write(true).open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Made::NotYet,
            Err(e) => return self.give_up(&mut done, "cannot open the write-ahead log", e),
        };
        match self.fill(&file, stop) {
            Ok(Some(len)) => Made::Grown(len),
            Ok(None) => {
                *done = true;
                Made::Done
            }
            Err(e) => self.give_up(&mut done, "cannot extend the write-ahead log", e),
        }
    }

    /// Appends zeros up to the kept size, flushing each chunk; `Ok(None)` once the file is that
    /// long or the disk has no room to spare, else the length reached when `stop` said so.
    fn fill(&self, file: &File, stop: impl Fn() -> bool) -> io::Result<Option<u64>> {
        let len = file.metadata()?.len();
        if len >= self.size {
            return Ok(None);
        }
        let free = free_bytes(&self.path)?;
        if free < (self.size - len).saturating_add(MIN_FREE_BYTES) {
            tracing::info!(
                free_bytes = free,
                wanted_bytes = self.size - len,
                "the write-ahead log is not extended ahead of its writes: the disk is nearly full"
            );
            return Ok(None);
        }
        let zeros = vec![0u8; CHUNK_BYTES as usize];
        loop {
            let reached = {
                let _gate = self.gate.lock();
                let len = file.metadata()?.len();
                let chunk = CHUNK_BYTES.min(self.size.saturating_sub(len));
                if chunk == 0 {
                    tracing::debug!(bytes = len, "write-ahead log extended ahead of its writes");
                    return Ok(None);
                }
                file.write_all_at(&zeros[..chunk as usize], len)?;
                len + chunk
            };
            file.sync_data()?;
            if stop() {
                return Ok(Some(reached));
            }
        }
    }

    fn give_up(&self, done: &mut bool, what: &str, e: io::Error) -> Made {
        *done = true;
        tracing::warn!(error = %e, path = %self.path.display(), "{what}; commits extend it instead");
        Made::Done
    }
}

/// Bytes an unprivileged writer may still use on the file system holding `path`.
fn free_bytes(path: &Path) -> io::Result<u64> {
    let stat = rustix::fs::statvfs(path)?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// The room of `dir/herald.db` whose log restarts past `kept / 2` (so it is `kept` bytes
    /// long when on, and starts past `kept / 4`), on or off.
    fn room(dir: &Path, kept: u64, on: bool) -> (WalRoom, PathBuf) {
        let options = SqliteOptions {
            wal_restart_bytes: kept / 2,
            wal_preallocate: on,
            ..SqliteOptions::default()
        };
        let room = WalRoom::new(&dir.join("herald.db"), &options);
        (room, dir.join("herald.db-wal"))
    }

    #[test]
    fn zeros_go_after_what_is_there_up_to_the_kept_size() {
        let dir = tempfile::tempdir().unwrap();
        let size = 3 * CHUNK_BYTES + 4096;
        let (room, wal) = room(dir.path(), size, true);
        // No log yet, or a small one: nothing to do.
        assert_eq!(room.make(u64::MAX, || false), Made::NotYet);
        let frames = vec![0xabu8; 5000];
        std::fs::write(&wal, &frames).unwrap();
        assert_eq!(room.make(size / 4, || false), Made::NotYet);
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 5000);
        // Past half the restart size: filled to the kept size, frames untouched.
        assert_eq!(room.make(2 << 20, || false), Made::Done);
        let bytes = std::fs::read(&wal).unwrap();
        assert_eq!(bytes.len() as u64, size);
        assert_eq!(&bytes[..5000], &frames[..]);
        assert!(bytes[5000..].iter().all(|&b| b == 0));
        // Done for good, even if the file were cut back.
        std::fs::write(&wal, &frames).unwrap();
        assert_eq!(room.make(2 << 20, || false), Made::Done);
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 5000);
    }

    #[test]
    fn a_stop_leaves_the_rest_for_the_next_turn() {
        let dir = tempfile::tempdir().unwrap();
        let size = 4 * CHUNK_BYTES;
        let (room, wal) = room(dir.path(), size, true);
        std::fs::write(&wal, b"frame").unwrap();
        let turns = Cell::new(0);
        // Asked after each chunk: stop after the second.
        let two_chunks = || {
            turns.set(turns.get() + 1);
            turns.get() == 2
        };
        assert_eq!(
            room.make(2 << 20, two_chunks),
            Made::Grown(5 + 2 * CHUNK_BYTES)
        );
        assert_eq!(room.make(2 << 20, || false), Made::Done);
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), size);
    }

    #[test]
    fn off_means_no_room() {
        let dir = tempfile::tempdir().unwrap();
        let (room, wal) = room(dir.path(), 4 * CHUNK_BYTES, false);
        std::fs::write(&wal, b"frame").unwrap();
        assert_eq!(room.make(u64::MAX, || false), Made::Done);
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 5);
    }
}
