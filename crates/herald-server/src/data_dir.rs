//! The data directory of a one-node server: created readable by its owner only, and held with
//! an exclusive lock for as long as the server runs, so a second `herald serve` on the same
//! directory refuses to start instead of writing over the first one's files.
//!
//! The lock is an advisory `flock` on `<data>/herald.lock`, which also records the holder's
//! process id for the error message. The kernel releases it when the process exits, kill -9
//! included, so a crash never leaves a stale lock behind.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::error::ServerError;

/// Name of the lock file in the data directory.
pub const LOCK_FILE: &str = "herald.lock";

/// An exclusive hold on a data directory, released when dropped.
#[derive(Debug)]
pub(crate) struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Creates `dir` if it is missing (owner-only) and locks it, or says which process holds it.
    pub(crate) fn acquire(dir: &Path) -> Result<DataDirLock, ServerError> {
        create_private_dir(dir).map_err(|source| ServerError::DataDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(LOCK_FILE);
        let lock_error = |source| ServerError::DataDirLock {
            path: path.clone(),
            source,
        };
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&path).map_err(lock_error)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                return Err(ServerError::DataDirInUse {
                    path: dir.to_path_buf(),
                    holder: holder.trim().parse().ok(),
                });
            }
            Err(TryLockError::Error(source)) => return Err(lock_error(source)),
        }
        file.set_len(0).map_err(lock_error)?;
        file.rewind().map_err(lock_error)?;
        writeln!(file, "{}", std::process::id()).map_err(lock_error)?;
        Ok(DataDirLock { _file: file })
    }
}

/// Creates `dir` and its missing parents; a directory this creates is readable by its owner
/// only (an existing one keeps its permissions).
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// The lock file of `dir`, for messages and tests.
pub fn lock_file(dir: &Path) -> PathBuf {
    dir.join(LOCK_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_hold_on_the_same_directory_is_refused_until_the_first_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let first = DataDirLock::acquire(&dir).unwrap();
        match DataDirLock::acquire(&dir) {
            Err(ServerError::DataDirInUse { path, holder }) => {
                assert_eq!(path, dir);
                assert_eq!(holder, Some(std::process::id()));
            }
            other => panic!("expected DataDirInUse, got {other:?}"),
        }
        drop(first);
        DataDirLock::acquire(&dir).expect("the lock is free once dropped");
    }

    #[cfg(unix)]
    #[test]
    fn a_directory_it_creates_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("new/data");
        let _lock = DataDirLock::acquire(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        let mode = std::fs::metadata(lock_file(&dir))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
}
