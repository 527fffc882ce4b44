//! What verifies an app's client tokens on PostgreSQL, with the SQLite implementation's semantics
//! (`crate::sqlite::token_keys`; rows read by `crate::common::token_keys`): the secret in the
//! `apps` row, the rest in `app_token_keys`.

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_core::token_keys::AppTokenKeys;

use super::{pg_error, PostgresStore};
use crate::common::token_keys::{row_params, token_keys_of, COLUMNS};

/// A read: [`COLUMNS`] of the apps not deleted, then `tail` (a further condition, an order).
fn select(tail: &str) -> String {
    format!(
        "SELECT {COLUMNS} FROM apps a LEFT JOIN app_token_keys k ON k.app = a.id \
         WHERE NOT a.deleted{tail}"
    )
}

pub(crate) async fn get(
    store: &PostgresStore,
    id: &AppId,
) -> Result<Option<AppTokenKeys>, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt(&select(" AND a.id = $1"), &[&id.as_str()])
        .await
        .map_err(pg_error)?;
    match row {
        Some(row) => Ok(Some(token_keys_of(&row)?.1)),
        None => Ok(None),
    }
}

pub(crate) async fn list(store: &PostgresStore) -> Result<Vec<(AppId, AppTokenKeys)>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(&select(" ORDER BY a.id"), &[])
        .await
        .map_err(pg_error)?;
    rows.iter().map(token_keys_of).collect()
}

pub(crate) async fn set(
    store: &PostgresStore,
    id: &AppId,
    keys: &AppTokenKeys,
) -> Result<bool, StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await.map_err(pg_error)?;
    let n = tx
        .execute(
            "UPDATE apps SET token_secret = $2 WHERE id = $1 AND NOT deleted",
            &[&id.as_str(), &keys.secret],
        )
        .await
        .map_err(pg_error)?;
    if n == 0 {
        return Ok(false);
    }
    let (previous, until, public_keys, jwks_url) = row_params(keys);
    tx.execute(
        "INSERT INTO app_token_keys (app, previous_secret, previous_until, public_keys, jwks_url)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (app) DO UPDATE SET previous_secret = excluded.previous_secret,
             previous_until = excluded.previous_until, public_keys = excluded.public_keys,
             jwks_url = excluded.jwks_url",
        &[&id.as_str(), &previous, &until, &public_keys, &jwks_url],
    )
    .await
    .map_err(pg_error)?;
    tx.commit().await.map_err(pg_error)?;
    Ok(true)
}
