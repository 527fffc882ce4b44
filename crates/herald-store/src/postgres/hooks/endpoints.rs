//! An app's webhook endpoints: adding, reading, changing, rotating the secret of and deleting
//! one (with its queue and dead letters), each one statement but the creation and the
//! deletion (one transaction the caller opened).

use deadpool_postgres::GenericClient;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_hooks::endpoint::{EndpointId, StoredEndpoint};
use herald_hooks::store::{EndpointPatch, NewEndpoint};

use crate::common::hooks::{channels_json, endpoint_of, events_json, ENDPOINT_COLUMNS};
use crate::postgres::pg_error;

/// The first key of the advisory lock an endpoint's creation takes, the second being its
/// app id's hash (`"hook"` as a big-endian integer; the two-key space, apart from the
/// migrations' one-key lock).
pub(super) const CREATE_LOCK: i32 = 0x686f_6f6b;

/// Adds an endpoint, unless its app already has `max_per_app` (`None`); in the transaction
/// `client` is, which holds the app's creation lock until it ends (see `super`).
pub(super) async fn create(
    client: &impl GenericClient,
    new: &NewEndpoint,
    max_per_app: usize,
) -> Result<Option<StoredEndpoint>, StoreError> {
    client
        .execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))",
            &[&CREATE_LOCK, &new.app.as_str()],
        )
        .await
        .map_err(pg_error)?;
    let of_app: i64 = client
        .query_one(
            "SELECT count(*) FROM hook_endpoints WHERE app = $1",
            &[&new.app.as_str()],
        )
        .await
        .map_err(pg_error)?
        .try_get(0)
        .map_err(pg_error)?;
    if usize::try_from(of_app).unwrap_or(usize::MAX) >= max_per_app {
        return Ok(None);
    }
    let sql = format!(
        "INSERT INTO hook_endpoints (app, url, description, events, channels, enabled,
             offline_delay_ms, created_ms, secret, format)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         RETURNING {ENDPOINT_COLUMNS}"
    );
    let row = client
        .query_one(
            &sql,
            &[
                &new.app.as_str(),
                &new.url,
                &new.description,
                &events_json(new.events),
                &channels_json(&new.channels),
                &new.enabled,
                &i64::from(new.offline_delay_ms),
                &new.created_ms,
                &new.secret,
                &new.format.as_str(),
            ],
        )
        .await
        .map_err(pg_error)?;
    endpoint_of(&row, 0).map(Some)
}

/// Every endpoint (`app`: only that app's), in id order; or the one with id `only` of `app`.
pub(super) async fn read(
    client: &impl GenericClient,
    app: Option<&AppId>,
    only: Option<EndpointId>,
) -> Result<Vec<StoredEndpoint>, StoreError> {
    let rows = client
        .query(
            &format!(
                "SELECT {ENDPOINT_COLUMNS} FROM hook_endpoints
                 WHERE ($1::TEXT IS NULL OR app = $1) AND ($2::BIGINT IS NULL OR id = $2)
                 ORDER BY id"
            ),
            &[&app.map(AppId::as_str), &only],
        )
        .await
        .map_err(pg_error)?;
    rows.iter().map(|r| endpoint_of(r, 0)).collect()
}

/// Applies `patch` to an endpoint of `app`.
pub(super) async fn update(
    client: &impl GenericClient,
    app: &AppId,
    id: EndpointId,
    patch: &EndpointPatch,
) -> Result<Option<StoredEndpoint>, StoreError> {
    let sql = format!(
        "UPDATE hook_endpoints SET url = coalesce($3, url),
             description = coalesce($4, description), events = coalesce($5, events),
             channels = coalesce($6, channels), enabled = coalesce($7, enabled),
             offline_delay_ms = coalesce($8, offline_delay_ms)
         WHERE id = $1 AND app = $2
         RETURNING {ENDPOINT_COLUMNS}"
    );
    let row = client
        .query_opt(
            &sql,
            &[
                &id,
                &app.as_str(),
                &patch.url,
                &patch.description,
                &patch.events.map(events_json),
                &patch.channels.as_deref().map(channels_json),
                &patch.enabled,
                &patch.offline_delay_ms.map(i64::from),
            ],
        )
        .await
        .map_err(pg_error)?;
    row.map(|r| endpoint_of(&r, 0)).transpose()
}

/// Makes `secret` an endpoint's secret, the one it replaces its previous one until
/// `previous_until_ms`.
pub(super) async fn rotate_secret(
    client: &impl GenericClient,
    app: &AppId,
    id: EndpointId,
    secret: &[u8],
    previous_until_ms: i64,
) -> Result<bool, StoreError> {
    let n = client
        .execute(
            "UPDATE hook_endpoints SET previous_secret = secret, previous_until_ms = $4,
                 secret = $3
             WHERE id = $1 AND app = $2",
            &[&id, &app.as_str(), &secret, &previous_until_ms],
        )
        .await
        .map_err(pg_error)?;
    Ok(n == 1)
}

/// Deletes an endpoint of `app`, then its queued events and dead letters (the endpoint first:
/// an `enqueue` holding its row finishes first, and the events it added are deleted too).
pub(super) async fn delete(
    client: &impl GenericClient,
    app: &AppId,
    id: EndpointId,
) -> Result<bool, StoreError> {
    let n = client
        .execute(
            "DELETE FROM hook_endpoints WHERE id = $1 AND app = $2",
            &[&id, &app.as_str()],
        )
        .await
        .map_err(pg_error)?;
    if n == 0 {
        return Ok(false);
    }
    client
        .execute("DELETE FROM hook_events WHERE endpoint = $1", &[&id])
        .await
        .map_err(pg_error)?;
    Ok(true)
}
