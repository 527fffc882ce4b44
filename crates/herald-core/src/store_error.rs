//! [`StoreError`]: how a storage failure is reported, with the backend's own error kept as its
//! source, and what a client is told of it.

use std::error::Error;
use std::fmt::Write as _;
use std::sync::Arc;

/// A backend's own error (SQLite, I/O), shared so that one failed group commit can be reported
/// to every request it held.
pub type BackendError = Arc<dyn Error + Send + Sync + 'static>;

/// A storage failure. The operation did not happen (appends are all-or-nothing per request).
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The backing store failed (I/O, corruption, SQL error).
    #[error("store failed: {context}")]
    Backend {
        /// What the store was doing, or what it found wrong.
        context: String,
        /// The backend's error, if one caused this.
        #[source]
        source: Option<BackendError>,
    },
    /// The store cannot be reached now (a networked database refusing connections, a pool
    /// that cannot connect, a connection lost mid-request). Nothing happened; the same request
    /// may succeed once the store is back.
    #[error("store unavailable: {context}")]
    Unavailable {
        /// What the store was doing.
        context: String,
        /// The backend's error.
        #[source]
        source: Option<BackendError>,
    },
    /// The store has no space left (a full disk or quota, a file-size limit, PostgreSQL's
    /// `disk_full`). Nothing happened; writes succeed again once space is freed.
    #[error("store is out of space: {context}")]
    Full {
        /// What the store was doing.
        context: String,
        /// The backend's error.
        #[source]
        source: Option<BackendError>,
    },
    /// The store stopped accepting writes: an fsync failed, so data the operating system said
    /// it had written may be lost, and nothing more is acknowledged until the server restarts
    /// (and recovers from what is really on disk). Nothing happened.
    #[error("store stopped accepting writes: {context}")]
    Halted {
        /// Why, and what to do.
        context: String,
    },
    /// The store is closed (shutting down).
    #[error("store is closed")]
    Closed,
}

impl StoreError {
    /// A failure caused by the backend's error `source`, while doing `context`.
    pub fn backend(
        context: impl Into<String>,
        source: impl Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError::Backend {
            context: context.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// A failure the store found itself (a corrupt row, a stopped thread), with no underlying
    /// error.
    pub fn failed(context: impl Into<String>) -> StoreError {
        StoreError::Backend {
            context: context.into(),
            source: None,
        }
    }

    /// The store could not be reached while doing `context` (see [`StoreError::Unavailable`]).
    pub fn unavailable(
        context: impl Into<String>,
        source: impl Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError::Unavailable {
            context: context.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// The store ran out of space while doing `context` (see [`StoreError::Full`]).
    pub fn full(
        context: impl Into<String>,
        source: impl Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError::Full {
            context: context.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// The store refuses writes until a restart, for the reason `context` (see
    /// [`StoreError::Halted`]).
    pub fn halted(context: impl Into<String>) -> StoreError {
        StoreError::Halted {
            context: context.into(),
        }
    }

    /// Whether only a restart clears this failure ([`StoreError::Halted`]): the one store fault
    /// a liveness probe (`/healthz`) reports, so that an orchestrator restarts the server. Every
    /// other fault clears by itself (space freed, the database back) and a restart would only
    /// drop the live connections.
    pub fn needs_restart(&self) -> bool {
        matches!(self, StoreError::Halted { .. })
    }

    /// This error and each of its sources, joined by `": "`.
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut next = self.source();
        while let Some(cause) = next {
            let _ = write!(text, ": {cause}");
            next = cause.source();
        }
        text
    }
}

impl From<StoreError> for crate::error::HeraldError {
    /// What a client is told of a storage failure: `shutting_down` while the store closes,
    /// `store_unavailable` (503, retry) while it cannot be reached, `insufficient_storage`
    /// (507) while it has no space left, `store_halted` (503) once it stopped accepting writes
    /// after a failed fsync, `store_failed` otherwise, with the whole chain of causes (which is
    /// also logged: at DEBUG for `store_unavailable`, whose outage the store says once).
    fn from(e: StoreError) -> Self {
        use crate::error::{ErrorCode, HeraldError};
        match e {
            StoreError::Closed => HeraldError::new(ErrorCode::ShuttingDown, e.to_string()),
            StoreError::Unavailable { .. } => {
                let chain = e.chain();
                // Every request fails alike while the store is away: the store says the outage
                // once in the log (when it starts, and when it ends), not once per request.
                tracing::debug!(error = %chain, "store unavailable");
                HeraldError::new(ErrorCode::StoreUnavailable, chain)
            }
            StoreError::Full { .. } => {
                let chain = e.chain();
                tracing::warn!(error = %chain, "store out of space");
                HeraldError::new(ErrorCode::InsufficientStorage, chain)
            }
            StoreError::Halted { .. } => HeraldError::new(ErrorCode::StoreHalted, e.chain()),
            StoreError::Backend { .. } => {
                let chain = e.chain();
                tracing::error!(error = %chain, "store failed");
                HeraldError::new(ErrorCode::StoreFailed, chain)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn the_source_is_kept_and_reaches_the_client_message() {
        let io = std::io::Error::other("disk on fire");
        let e = StoreError::backend("database error", io);
        assert_eq!(e.to_string(), "store failed: database error");
        assert_eq!(e.source().unwrap().to_string(), "disk on fire");
        assert_eq!(e.chain(), "store failed: database error: disk on fire");
        let copy = e.clone();
        let told = crate::HeraldError::from(copy);
        assert_eq!(told.code, ErrorCode::StoreFailed);
        assert_eq!(told.message, "store failed: database error: disk on fire");
        let closed = crate::HeraldError::from(StoreError::Closed);
        assert_eq!(closed.code, ErrorCode::ShuttingDown);
    }

    #[test]
    fn no_space_and_a_halted_store_have_codes_of_their_own() {
        let full = StoreError::full("append", std::io::Error::other("No space left on device"));
        let told = crate::HeraldError::from(full);
        assert_eq!(told.code, ErrorCode::InsufficientStorage);
        assert_eq!(told.code.http_status(), 507);
        assert_eq!(
            told.message,
            "store is out of space: append: No space left on device"
        );
        let halted = crate::HeraldError::from(StoreError::halted("an fsync failed"));
        assert_eq!(halted.code, ErrorCode::StoreHalted);
        assert_eq!(halted.code.http_status(), 503);
        assert_eq!(
            halted.message,
            "store stopped accepting writes: an fsync failed"
        );
    }
}
