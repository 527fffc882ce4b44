//! Revoked client tokens as both backends store them: `revoked_tokens` (a token id until its
//! expiry) and `revoked_before` (one issue time per app), read back together as
//! [`TokenRevocation`]s.

use herald_core::log::StoreError;
use herald_core::revoked::{RevokedKind, TokenRevocation};

use super::row::StoredRow;
use super::values::app_id;

/// A row of the listing query (`app, jti or NULL, expires or issued_before`) as a revocation.
pub(crate) fn revocation_of(row: &impl StoredRow) -> Result<TokenRevocation, StoreError> {
    let (app, jti, time): (String, Option<String>, i64) =
        (row.column(0)?, row.column(1)?, row.column(2)?);
    let time = u64::try_from(time).unwrap_or(0);
    Ok(TokenRevocation {
        app: app_id(app)?,
        kind: match jti {
            Some(jti) => RevokedKind::Jti { jti, expires: time },
            None => RevokedKind::IssuedBefore(time),
        },
    })
}
