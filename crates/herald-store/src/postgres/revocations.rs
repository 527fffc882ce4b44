//! Revoked client tokens on PostgreSQL, with the SQLite implementation's semantics
//! (`crate::sqlite::revocations`): token ids until their expiry (expired rows deleted whenever one
//! is added), one issue time per app that only moves forward.

use herald_core::log::StoreError;
use herald_core::revoked::{now_secs, RevokedKind, TokenRevocation};

use super::{pg_error, PostgresStore};
use crate::common::revocations::revocation_of;
use crate::common::values::secs;

pub(crate) async fn revoke(store: &PostgresStore, r: &TokenRevocation) -> Result<(), StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await.map_err(pg_error)?;
    let app = r.app.as_str();
    match &r.kind {
        RevokedKind::Jti { jti, expires } => {
            tx.execute(
                "INSERT INTO revoked_tokens (app, jti, expires) VALUES ($1, $2, $3)
                 ON CONFLICT (app, jti) DO UPDATE SET
                     expires = GREATEST(revoked_tokens.expires, excluded.expires)",
                &[&app, jti, &secs(*expires)],
            )
            .await
            .map_err(pg_error)?;
            tx.execute(
                "DELETE FROM revoked_tokens WHERE expires <= $1",
                &[&secs(now_secs())],
            )
            .await
            .map_err(pg_error)?;
        }
        RevokedKind::IssuedBefore(t) => {
            tx.execute(
                "INSERT INTO revoked_before (app, issued_before) VALUES ($1, $2)
                 ON CONFLICT (app) DO UPDATE SET
                     issued_before = GREATEST(revoked_before.issued_before,
                                              excluded.issued_before)",
                &[&app, &secs(*t)],
            )
            .await
            .map_err(pg_error)?;
        }
    }
    tx.commit().await.map_err(pg_error)
}

pub(crate) async fn list(store: &PostgresStore) -> Result<Vec<TokenRevocation>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT app, jti, expires FROM revoked_tokens WHERE expires > $1
             UNION ALL SELECT app, NULL, issued_before FROM revoked_before ORDER BY 1, 2 NULLS FIRST",
            &[&secs(now_secs())],
        )
        .await
        .map_err(pg_error)?;
    rows.iter().map(revocation_of).collect()
}
