//! What verifies an app's client tokens, in SQLite ([`Tenancy::token_keys`] and the methods
//! beside it, called from [`crate::sqlite::tenancy`]): the app's secret is its `apps` row's
//! `token_secret`, the rest one `app_token_keys` row. Secrets arrive sealed by the server and
//! are stored as they arrive.
//!
//! [`Tenancy::token_keys`]: herald_core::tenancy::Tenancy::token_keys

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_core::token_keys::{AppTokenKeys, PreviousSecret};
use rusqlite::{params, OptionalExtension};

use crate::sqlite::revocations::secs;
use crate::sqlite::tenancy::{app_id, to_json};
use crate::sqlite::{backend, SqliteLog};

/// The columns every read selects: app, secret, previous secret, its end, keys, JWKS URL.
pub(crate) const SELECT: &str = "SELECT a.id, a.token_secret, k.previous_secret, \
     k.previous_until, coalesce(k.public_keys, '[]'), k.jwks_url \
     FROM apps a LEFT JOIN app_token_keys k ON k.app = a.id WHERE a.deleted = 0";

/// The columns of one app's keys, as read.
pub(crate) type Row = (
    String,
    Option<String>,
    Option<String>,
    Option<i64>,
    String,
    Option<String>,
);

/// An app's keys from its columns.
pub(crate) fn from_row(
    (app, secret, previous, until, keys, jwks_url): Row,
) -> Result<(AppId, AppTokenKeys), StoreError> {
    let app = app_id(app)?;
    let public_keys = serde_json::from_str(&keys).map_err(|_| {
        StoreError::failed(format!("corrupt public keys of app {app} in the store"))
    })?;
    let previous = match (previous, until) {
        (Some(secret), Some(until)) => Some(PreviousSecret {
            secret,
            until: u64::try_from(until).unwrap_or(0),
        }),
        _ => None,
    };
    Ok((
        app,
        AppTokenKeys {
            secret,
            previous,
            public_keys,
            jwks_url,
        },
    ))
}

/// The parameters of the `app_token_keys` row of `keys`: previous secret, until, keys, URL.
pub(crate) fn row_params(keys: &AppTokenKeys) -> (Option<&str>, Option<i64>, String, Option<&str>) {
    (
        keys.previous.as_ref().map(|p| p.secret.as_str()),
        keys.previous.as_ref().map(|p| secs(p.until)),
        to_json(&keys.public_keys),
        keys.jwks_url.as_deref(),
    )
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
    ))
}

pub(crate) async fn get(log: &SqliteLog, id: &AppId) -> Result<Option<AppTokenKeys>, StoreError> {
    let id = id.as_str().to_owned();
    log.readers()
        .run(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!("{SELECT} AND a.id = ?1"))
                .map_err(backend)?;
            let row = stmt
                .query_row([&id], read_row)
                .optional()
                .map_err(backend)?;
            Ok(row.map(from_row).transpose()?.map(|(_, keys)| keys))
        })
        .await
}

pub(crate) async fn list(log: &SqliteLog) -> Result<Vec<(AppId, AppTokenKeys)>, StoreError> {
    log.readers()
        .run(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!("{SELECT} ORDER BY a.id"))
                .map_err(backend)?;
            let rows = stmt.query_map([], read_row).map_err(backend)?;
            let mut all = Vec::new();
            for row in rows {
                all.push(from_row(row.map_err(backend)?)?);
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
