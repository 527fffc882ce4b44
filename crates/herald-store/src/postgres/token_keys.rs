//! What verifies an app's client tokens on PostgreSQL, with the SQLite implementation's
//! semantics (`crate::token_keys`): the secret in the `apps` row, the rest in `app_token_keys`.

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_core::token_keys::AppTokenKeys;

use super::{pg_error, PostgresStore};
use crate::sqlite::token_keys::{from_row, row_params, Row, SELECT};

fn read_row(row: &tokio_postgres::Row) -> Result<Row, StoreError> {
    Ok((
        row.try_get(0).map_err(pg_error)?,
        row.try_get(1).map_err(pg_error)?,
        row.try_get(2).map_err(pg_error)?,
        row.try_get(3).map_err(pg_error)?,
        row.try_get(4).map_err(pg_error)?,
        row.try_get(5).map_err(pg_error)?,
    ))
}

/// [`SELECT`] with PostgreSQL's boolean `deleted`.
fn select() -> String {
    SELECT.replace("a.deleted = 0", "NOT a.deleted")
}

pub(crate) async fn get(
    store: &PostgresStore,
    id: &AppId,
) -> Result<Option<AppTokenKeys>, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt(&format!("{} AND a.id = $1", select()), &[&id.as_str()])
        .await
        .map_err(pg_error)?;
    match row {
        Some(row) => Ok(Some(from_row(read_row(&row)?)?.1)),
        None => Ok(None),
    }
}

pub(crate) async fn list(store: &PostgresStore) -> Result<Vec<(AppId, AppTokenKeys)>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(&format!("{} ORDER BY a.id", select()), &[])
        .await
        .map_err(pg_error)?;
    rows.iter().map(|row| from_row(read_row(row)?)).collect()
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
