//! What verifies an app's client tokens, in SQLite ([`Tenancy::token_keys`] and the methods
//! beside it, called from [`crate::sqlite::tenancy`]): the app's secret is its `apps` row's
//! `token_secret`, the rest one `app_token_keys` row. Secrets arrive sealed by the server and
//! are stored as they arrive.
//!
//! [`Tenancy::token_keys`]: herald_core::tenancy::Tenancy::token_keys

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_core::token_keys::AppTokenKeys;
use rusqlite::{params, OptionalExtension};

use crate::common::token_keys::{row_params, token_keys_of, COLUMNS};
use crate::sqlite::{backend, SqliteLog};

/// A read: [`COLUMNS`] of the apps not deleted, then `tail` (a further condition, an order).
fn select(tail: &str) -> String {
    format!(
        "SELECT {COLUMNS} FROM apps a LEFT JOIN app_token_keys k ON k.app = a.id \
         WHERE a.deleted = 0{tail}"
    )
}

pub(crate) async fn get(log: &SqliteLog, id: &AppId) -> Result<Option<AppTokenKeys>, StoreError> {
    let id = id.as_str().to_owned();
    log.readers()
        .run(move |conn| {
            let mut stmt = conn
                .prepare_cached(&select(" AND a.id = ?1"))
                .map_err(backend)?;
            let row = stmt
                .query_row([&id], |r| Ok(token_keys_of(r)))
                .optional()
                .map_err(backend)?;
            Ok(row.transpose()?.map(|(_, keys)| keys))
        })
        .await
}

pub(crate) async fn list(log: &SqliteLog) -> Result<Vec<(AppId, AppTokenKeys)>, StoreError> {
    log.readers()
        .run(|conn| {
            let mut stmt = conn
                .prepare_cached(&select(" ORDER BY a.id"))
                .map_err(backend)?;
            let rows = stmt
                .query_map([], |r| Ok(token_keys_of(r)))
                .map_err(backend)?;
            let mut all = Vec::new();
            for row in rows {
                all.push(row.map_err(backend)??);
            }
            Ok(all)
        })
        .await
}

pub(crate) async fn set(
    log: &SqliteLog,
    id: &AppId,
    keys: &AppTokenKeys,
) -> Result<bool, StoreError> {
    let (id, keys) = (id.clone(), keys.clone());
    log.write(move |tx| {
        let n = tx
            .execute(
                "UPDATE apps SET token_secret = ?2 WHERE id = ?1 AND deleted = 0",
                params![id.as_str(), keys.secret],
            )
            .map_err(backend)?;
        if n == 0 {
            return Ok(false);
        }
        let (previous, until, public_keys, jwks_url) = row_params(&keys);
        tx.execute(
            "INSERT INTO app_token_keys (app, previous_secret, previous_until, public_keys,
                 jwks_url) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (app) DO UPDATE SET previous_secret = excluded.previous_secret,
                 previous_until = excluded.previous_until, public_keys = excluded.public_keys,
                 jwks_url = excluded.jwks_url",
            params![id.as_str(), previous, until, public_keys, jwks_url],
        )
        .map_err(backend)?;
        Ok(true)
    })
    .await
}
