//! Options of the SQLite log: the sync policy (`always | batch | off`) and the sizes of the write
//! batch and of the read pool.

use std::fmt;
use std::str::FromStr;

/// When a commit is made durable (fsync) and how appends are grouped into transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// One transaction per append request, each fsynced (`synchronous=FULL`). Slowest.
    Always,
    /// Appends queued while the previous commit ran share one transaction; every commit is
    /// fsynced (`synchronous=FULL`). Durable and fast under concurrency.
    #[default]
    Batch,
    /// Grouped like `Batch` but never fsynced (`synchronous=OFF`): an OS crash or power loss
    /// can lose recent appends (a process crash cannot).
    Off,
}

impl SyncMode {
    /// The mode's config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncMode::Always => "always",
            SyncMode::Batch => "batch",
            SyncMode::Off => "off",
        }
    }
}

impl fmt::Display for SyncMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A sync mode string that is not `always`, `batch` or `off`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid sync mode {0:?}: expected \"always\", \"batch\" or \"off\"")]
pub struct ParseSyncModeError(pub String);

impl FromStr for SyncMode {
    type Err = ParseSyncModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "always" => Ok(SyncMode::Always),
            "batch" => Ok(SyncMode::Batch),
            "off" => Ok(SyncMode::Off),
            other => Err(ParseSyncModeError(other.chars().take(64).collect())),
        }
    }
}

/// [`SqliteOptions::wal_restart_bytes`] unless configured: 64 MiB.
pub const DEFAULT_WAL_RESTART_BYTES: u64 = 64 << 20;

/// How the SQLite log is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    /// Durability and grouping policy.
    pub sync: SyncMode,
    /// Most messages committed in one transaction (a single larger request still goes alone).
    pub max_batch: usize,
    /// Read-only connections in the read pool (at least 1 is used).
    pub read_connections: usize,
    /// Once the write-ahead log holds more than this, the writer restarts it between two
    /// batches (after the background checkpoint has copied it), so the file stops growing; a
    /// file grown past this is cut back to it then. Under steady writes the log is never
    /// otherwise fully copied at the moment a commit starts, so without this it would grow
    /// without bound.
    pub wal_restart_bytes: u64,
    /// Whether the write-ahead log file is extended with zeros ahead of its writes, to twice
    /// `wal_restart_bytes`, once it has grown past half of that (see `wal_room.rs`): a
    /// commit then overwrites blocks the file has and its fsync writes no file metadata. Off,
    /// commits extend the file and it is kept at `wal_restart_bytes`.
    pub wal_preallocate: bool,
}

impl SqliteOptions {
    /// The size the write-ahead log file is kept at: a restart cuts a longer file back to it.
    pub fn wal_kept_bytes(&self) -> u64 {
        if self.wal_preallocate {
            self.wal_restart_bytes.saturating_mul(2)
        } else {
            self.wal_restart_bytes
        }
    }
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            sync: SyncMode::Batch,
            max_batch: 4096,
            read_connections: 4,
            wal_restart_bytes: DEFAULT_WAL_RESTART_BYTES,
            wal_preallocate: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_mode_round_trips() {
        for mode in [SyncMode::Always, SyncMode::Batch, SyncMode::Off] {
            assert_eq!(mode.to_string().parse::<SyncMode>(), Ok(mode));
        }
        assert_eq!(SyncMode::default(), SyncMode::Batch);
    }

    #[test]
    fn bad_sync_mode_says_what_is_allowed() {
        let err = "fast".parse::<SyncMode>().unwrap_err();
        let text = err.to_string();
        assert!(text.contains("\"fast\""), "{text}");
        assert!(text.contains("always") && text.contains("batch") && text.contains("off"));
        assert!(
            "Batch".parse::<SyncMode>().is_err(),
            "case-sensitive like the config docs"
        );
    }

    #[test]
    fn default_options() {
        let o = SqliteOptions::default();
        assert_eq!(
            (o.sync, o.max_batch, o.read_connections),
            (SyncMode::Batch, 4096, 4)
        );
    }
}
