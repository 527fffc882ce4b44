//! Converting values between Rust and the store's columns, the same on both backends: ids read
//! back, seqs, counts and times as SQL integers, JSON text.

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_push::device::Platform;

/// Converts a seq read from the database; a negative value means the row is corrupt.
pub(crate) fn seq_from_db(value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::failed(format!("corrupt seq {value} in store")))
}

/// Converts a seq for use as an SQL parameter; seqs beyond `i64::MAX` cannot exist in the store,
/// so they are clamped (a read after such a seq simply finds nothing).
pub(crate) fn seq_to_db(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A count or limit as an SQL integer.
pub(crate) fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// A time in seconds as an SQL integer (clamped).
pub(crate) fn secs(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX)
}

/// An app id read from the store.
pub(crate) fn app_id(s: String) -> Result<AppId, StoreError> {
    AppId::parse(&s).map_err(|_| StoreError::failed(format!("corrupt app id {s:?} in store")))
}

/// A value stored as JSON text.
pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Parses a provider name read from the store.
pub(crate) fn stored_platform(name: &str) -> Result<Platform, StoreError> {
    Platform::parse(name)
        .map_err(|_| StoreError::failed(format!("corrupt provider {name:?} in store")))
}
