//! Storage faults the SQLite log treats apart from other failures, and the state they leave.
//!
//! - **No space** (SQLite's `SQLITE_FULL`, or a write or truncate that failed with `ENOSPC`,
//!   `EFBIG` from a file-size limit, or `EDQUOT`): the batch fails with [`StoreError::Full`]
//!   (`507 insufficient_storage`), nothing of it is stored, and the next batch tries again, so
//!   writes work again as soon as space is freed.
//! - **A failed fsync** (`SQLITE_IOERR_FSYNC`, `SQLITE_IOERR_DIR_FSYNC`): after one, the kernel
//!   may have dropped pages it had accepted, and a later fsync can succeed without them (the
//!   lesson PostgreSQL learned in 2018). So the log never acknowledges another write: every
//!   write from then on fails with [`StoreError::Halted`] (`503 store_halted`) until the server
//!   restarts and SQLite recovers from what is really on disk.
//!
//! [`WriteFault`] holds the current state for `/healthz`: the writer thread and the checkpoint
//! thread set it, [`super::SqliteLog`] reads it. The gauge `herald_store_write_fault` shows it
//! in `/metrics`: 0 while writes work, 1 while there is no space, 2 once halted.

use parking_lot::Mutex;
use rusqlite::ffi;

use herald_core::log::StoreError;

/// What kind of failure a store error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// No space left: retry once space is freed.
    NoSpace,
    /// An fsync failed: stop acknowledging writes.
    Fsync,
    /// Anything else.
    Other,
}

/// Classifies `err`. `errno` is the thread's `errno` read right after the failing SQLite call
/// (SQLite reports `EFBIG` and `EDQUOT` as a generic write error; the errno tells them apart).
pub(crate) fn classify(err: &StoreError, errno: Option<i32>) -> FaultKind {
    let Some(sqlite) = sqlite_error(err) else {
        return FaultKind::Other;
    };
    let rusqlite::Error::SqliteFailure(failure, _) = sqlite else {
        return FaultKind::Other;
    };
    if failure.code == rusqlite::ErrorCode::DiskFull {
        return FaultKind::NoSpace;
    }
    match failure.extended_code {
        ffi::SQLITE_IOERR_FSYNC | ffi::SQLITE_IOERR_DIR_FSYNC => FaultKind::Fsync,
        ffi::SQLITE_IOERR_WRITE | ffi::SQLITE_IOERR_TRUNCATE | ffi::SQLITE_IOERR_SHMSIZE
            if errno.is_some_and(is_no_space_errno) =>
        {
            FaultKind::NoSpace
        }
        _ => FaultKind::Other,
    }
}

/// Whether `errno` says the file system (or a limit on the process) has no room.
fn is_no_space_errno(errno: i32) -> bool {
    use std::io::ErrorKind;
    matches!(
        std::io::Error::from_raw_os_error(errno).kind(),
        ErrorKind::StorageFull | ErrorKind::FileTooLarge | ErrorKind::QuotaExceeded
    )
}

/// The rusqlite error `err` wraps, if it wraps one.
fn sqlite_error(err: &StoreError) -> Option<&rusqlite::Error> {
    match err {
        StoreError::Backend {
            source: Some(source),
            ..
        } => source.downcast_ref::<rusqlite::Error>(),
        _ => None,
    }
}

/// `err` as the error its kind is reported as: [`StoreError::Full`] for no space (saying the
/// operating system's reason, from `errno`), [`StoreError::Halted`] for a failed fsync, `err`
/// itself otherwise.
pub(crate) fn reclassify(err: StoreError, kind: FaultKind, errno: Option<i32>) -> StoreError {
    match kind {
        FaultKind::NoSpace => match err {
            StoreError::Backend {
                source: Some(source),
                ..
            } => {
                let reason = match errno.filter(|e| is_no_space_errno(*e)) {
                    Some(errno) => std::io::Error::from_raw_os_error(errno).to_string(),
                    None => "no space left".to_string(),
                };
                StoreError::Full {
                    context: format!(
                        "a database write failed ({reason}); writes work again once space is freed"
                    ),
                    source: Some(source),
                }
            }
            other => other,
        },
        FaultKind::Fsync => StoreError::halted(halt_reason(&err)),
        FaultKind::Other => err,
    }
}

/// What a halted store says, with the failure that halted it.
fn halt_reason(err: &StoreError) -> String {
    format!(
        "an fsync failed ({}), so written data may not be on disk; no write is acknowledged \
         until the server is restarted (check the disk and the kernel log first)",
        err.chain()
    )
}

/// Classifies a failure of the SQLite call just made on this thread (reading `errno` first),
/// records it in `fault`, and returns it as the error its kind is reported as.
pub(crate) fn observe(fault: &WriteFault, err: StoreError) -> StoreError {
    let errno = std::io::Error::last_os_error().raw_os_error();
    observe_with_errno(fault, err, errno)
}

/// [`observe`] with `errno` read already.
pub(crate) fn observe_with_errno(
    fault: &WriteFault,
    err: StoreError,
    errno: Option<i32>,
) -> StoreError {
    let kind = classify(&err, errno);
    let err = reclassify(err, kind, errno);
    fault.record(Some((&err, kind)));
    err
}

/// Why writes fail now, shared by the writer and checkpoint threads and the log.
#[derive(Default)]
pub(crate) struct WriteFault {
    state: Mutex<Option<StoreError>>,
}

impl WriteFault {
    /// The error every write fails with now, if any.
    pub(crate) fn current(&self) -> Option<StoreError> {
        self.state.lock().clone()
    }

    /// The error writes fail with until a restart, once the store halted.
    pub(crate) fn halted(&self) -> Option<StoreError> {
        match &*self.state.lock() {
            Some(halted @ StoreError::Halted { .. }) => Some(halted.clone()),
            _ => None,
        }
    }

    /// Records the outcome of a write (`None`: it succeeded; else its error, as [`reclassify`]
    /// made it, and its kind). A halted store stays halted; no space lasts until a write
    /// succeeds. Logs each change once.
    pub(crate) fn record(&self, outcome: Option<(&StoreError, FaultKind)>) {
        let mut state = self.state.lock();
        if matches!(*state, Some(StoreError::Halted { .. })) {
            return;
        }
        let gauge = match outcome {
            None => 0.0,
            Some((_, FaultKind::NoSpace)) => 1.0,
            Some((_, FaultKind::Fsync)) => 2.0,
            Some((_, FaultKind::Other)) => gauge_of(state.as_ref()),
        };
        metrics::gauge!("herald_store_write_fault").set(gauge);
        match outcome {
            None => {
                if state.take().is_some() {
                    tracing::warn!("store writes work again: space was freed");
                }
            }
            Some((err, FaultKind::Fsync)) => {
                let halted = match err {
                    StoreError::Halted { .. } => err.clone(),
                    other => StoreError::halted(halt_reason(other)),
                };
                tracing::error!(error = %halted.chain(), "store halted: refusing every write");
                *state = Some(halted);
            }
            Some((err, FaultKind::NoSpace)) => {
                if state.is_none() {
                    tracing::error!(
                        error = %err.chain(),
                        "store out of space: writes fail with 507 until space is freed"
                    );
                }
                *state = Some(err.clone());
            }
            Some((_, FaultKind::Other)) => {}
        }
    }
}

/// `herald_store_write_fault`'s value for a state: 0 writes work, 1 no space, 2 halted.
fn gauge_of(state: Option<&StoreError>) -> f64 {
    match state {
        None => 0.0,
        Some(StoreError::Halted { .. }) => 2.0,
        Some(_) => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(code: i32) -> StoreError {
        crate::sqlite::backend(rusqlite::Error::SqliteFailure(ffi::Error::new(code), None))
    }

    #[test]
    fn full_disks_file_size_limits_and_fsync_failures_are_told_apart() {
        assert_eq!(
            classify(&sqlite(ffi::SQLITE_FULL), None),
            FaultKind::NoSpace
        );
        let efbig = Some(27);
        let enospc = Some(28);
        let eio = Some(5);
        let write = sqlite(ffi::SQLITE_IOERR_WRITE);
        assert_eq!(classify(&write, efbig), FaultKind::NoSpace);
        assert_eq!(classify(&write, enospc), FaultKind::NoSpace);
        assert_eq!(classify(&write, eio), FaultKind::Other);
        assert_eq!(classify(&write, None), FaultKind::Other);
        let fsync = sqlite(ffi::SQLITE_IOERR_FSYNC);
        assert_eq!(classify(&fsync, eio), FaultKind::Fsync);
        assert_eq!(
            classify(&sqlite(ffi::SQLITE_IOERR_DIR_FSYNC), None),
            FaultKind::Fsync
        );
        assert_eq!(classify(&sqlite(ffi::SQLITE_BUSY), efbig), FaultKind::Other);
        assert_eq!(classify(&StoreError::failed("x"), efbig), FaultKind::Other);
    }

    #[test]
    fn no_space_clears_on_success_and_a_halt_lasts() {
        let fault = WriteFault::default();
        let full = reclassify(
            sqlite(ffi::SQLITE_IOERR_WRITE),
            FaultKind::NoSpace,
            Some(27),
        );
        assert!(matches!(full, StoreError::Full { .. }));
        assert!(full.chain().starts_with(
            "store is out of space: a database write failed (File too large (os error 27)); \
             writes work again once space is freed: "
        ));
        fault.record(Some((&full, FaultKind::NoSpace)));
        assert!(matches!(fault.current(), Some(StoreError::Full { .. })));
        assert!(fault.halted().is_none());
        fault.record(None);
        assert!(fault.current().is_none());
        let fsync = sqlite(ffi::SQLITE_IOERR_FSYNC);
        fault.record(Some((&fsync, FaultKind::Fsync)));
        fault.record(None);
        let halted = fault.halted().expect("halted until restart");
        assert!(
            halted.chain().contains("fsync failed"),
            "{}",
            halted.chain()
        );
        assert!(matches!(fault.current(), Some(StoreError::Halted { .. })));
    }
}
