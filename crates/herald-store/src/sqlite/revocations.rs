//! Revoked client tokens in SQLite ([`Tenancy::revoke_tokens`] and [`Tenancy::token_revocations`],
//! called from [`crate::sqlite::tenancy`]): `revoked_tokens` holds an app's token ids until their
//! expiry (expired rows are deleted whenever one is added, so the table stays bounded),
//! `revoked_before` one issue time per app, which only moves forward.
//!
//! [`Tenancy::revoke_tokens`]: herald_core::tenancy::Tenancy::revoke_tokens
//! [`Tenancy::token_revocations`]: herald_core::tenancy::Tenancy::token_revocations

use herald_core::log::StoreError;
use herald_core::revoked::{now_secs, RevokedKind, TokenRevocation};
use rusqlite::params;

use crate::common::revocations::revocation_of;
use crate::common::values::secs;
use crate::sqlite::{backend, SqliteLog};

/// The query listing every unexpired revocation: (app, jti or NULL, expires or issued_before).
pub(crate) const LIST: &str = "SELECT app, jti, expires FROM revoked_tokens WHERE expires > ?1
     UNION ALL SELECT app, NULL, issued_before FROM revoked_before ORDER BY 1, 2 NULLS FIRST";

pub(crate) async fn revoke(log: &SqliteLog, r: &TokenRevocation) -> Result<(), StoreError> {
    let r = r.clone();
    log.write(move |tx| {
        let app = r.app.as_str();
        match &r.kind {
            RevokedKind::Jti { jti, expires } => {
                tx.execute(
                    "INSERT INTO revoked_tokens (app, jti, expires) VALUES (?1, ?2, ?3)
                     ON CONFLICT (app, jti) DO UPDATE SET
                         expires = max(expires, excluded.expires)",
                    params![app, jti, secs(*expires)],
                )
                .map_err(backend)?;
                tx.execute(
                    "DELETE FROM revoked_tokens WHERE expires <= ?1",
                    [secs(now_secs())],
                )
                .map_err(backend)?;
            }
            RevokedKind::IssuedBefore(t) => {
                tx.execute(
                    "INSERT INTO revoked_before (app, issued_before) VALUES (?1, ?2)
                     ON CONFLICT (app) DO UPDATE SET
                         issued_before = max(issued_before, excluded.issued_before)",
                    params![app, secs(*t)],
                )
                .map_err(backend)?;
            }
        }
        Ok(())
    })
    .await
}

pub(crate) async fn list(log: &SqliteLog) -> Result<Vec<TokenRevocation>, StoreError> {
    log.readers()
        .run(|conn| {
            let mut stmt = conn.prepare_cached(LIST).map_err(backend)?;
            let rows = stmt
                .query_map([secs(now_secs())], |r| Ok(revocation_of(r)))
                .map_err(backend)?;
            let mut out = Vec::new();
            for row in rows {
                out.push(row.map_err(backend)??);
            }
            Ok(out)
        })
        .await
}
