//! Provider credentials as both backends store them: a `credentials` row as
//! [`StoredCredentials`].

use herald_core::log::StoreError;
use herald_push::credentials::StoredCredentials;

use super::row::StoredRow;
use super::values::stored_platform;

/// A `credentials` row selected as `provider, sealed, public, updated`.
pub(crate) fn credentials_of(row: &impl StoredRow) -> Result<StoredCredentials, StoreError> {
    let provider: String = row.column(0)?;
    Ok(StoredCredentials {
        provider: stored_platform(&provider)?,
        sealed: row.column(1)?,
        public: row.column(2)?,
        updated_ms: row.column(3)?,
    })
}
