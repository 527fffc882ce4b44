//! What verifies an app's client tokens, as both backends store it: the app's secret in its
//! `apps` row, the rest in one `app_token_keys` row. Secrets arrive sealed by the server and are
//! stored as they arrive.

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_core::token_keys::{AppTokenKeys, PreviousSecret};

use super::row::StoredRow;
use super::values::{app_id, secs, to_json};

/// The columns every read selects (each backend's `SELECT` names them in this order): app,
/// secret, previous secret, its end, keys (JSON, `[]` when the app has no row), JWKS URL.
pub(crate) const COLUMNS: &str = "a.id, a.token_secret, k.previous_secret, k.previous_until, \
     coalesce(k.public_keys, '[]'), k.jwks_url";

/// An app's keys from a row of [`COLUMNS`].
pub(crate) fn token_keys_of(row: &impl StoredRow) -> Result<(AppId, AppTokenKeys), StoreError> {
    let (app, secret, previous, until, keys, jwks_url): (
        String,
        Option<String>,
        Option<String>,
        Option<i64>,
        String,
        Option<String>,
    ) = (
        row.column(0)?,
        row.column(1)?,
        row.column(2)?,
        row.column(3)?,
        row.column(4)?,
        row.column(5)?,
    );
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
