//! Apps and publisher keys as both backends store them: how an `apps` row becomes an [`App`],
//! how an `api_keys` row becomes a [`KeyInfo`], which key ids can name a stored key, and which
//! tables hold an app's rows (emptied of them when it is deleted).

use herald_core::log::StoreError;
use herald_core::tenancy::{App, KeyInfo};

use super::row::StoredRow;
use super::values::app_id;

/// An `apps` row selected as `id, name, token_secret, created, limits` as an [`App`].
pub(crate) fn app_of(row: &impl StoredRow) -> Result<App, StoreError> {
    let limits: String = row.column(4)?;
    Ok(App {
        id: app_id(row.column(0)?)?,
        name: row.column(1)?,
        token_secret: row.column(2)?,
        limits: serde_json::from_str(&limits).unwrap_or_default(),
        created: row.column(3)?,
    })
}

/// An `api_keys` row selected as `app, hash, label, created` as a [`KeyInfo`]; its id is the
/// hash's first 12 digits.
pub(crate) fn key_of(row: &impl StoredRow) -> Result<KeyInfo, StoreError> {
    let hash: String = row.column(1)?;
    Ok(KeyInfo {
        app: app_id(row.column(0)?)?,
        id: hash.chars().take(12).collect(),
        hash,
        label: row.column(2)?,
        created: row.column(3)?,
    })
}

/// Whether `key_id` can name a stored key (12 lowercase hex digits); any other matches none.
pub(crate) fn is_key_id(key_id: &str) -> bool {
    key_id.len() == 12
        && key_id
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The tables whose rows belong to an app (by their `app` column): deleting the app deletes
/// its rows in each, in this order, in one transaction, before the `apps` row is marked deleted.
/// Its channels, their messages and its retained messages (keyed by channel name, and as many
/// as it published) go after it, a step at a time (`common::app_purge`).
///
/// `hook_endpoints` comes before `hook_events`: on PostgreSQL, an `enqueue` holding an
/// endpoint's row makes the deletion wait for it at the endpoint, so the events it added are
/// there for the next statement to delete.
pub(crate) const APP_TABLES: [&str; 20] = [
    "api_keys",
    "devices",
    "device_tags",
    "device_tombstones",
    "pushes",
    "usage",
    "jobs",
    "push_counts",
    "credentials",
    "revoked_tokens",
    "revoked_before",
    "app_token_keys",
    "hook_endpoints",
    "hook_events",
    "pusher_credentials",
    "mqtt_sessions",
    "mqtt_session_positions",
    "mqtt_session_inflight",
    "mqtt_session_inbound_qos2",
    "mqtt_session_wills",
];
