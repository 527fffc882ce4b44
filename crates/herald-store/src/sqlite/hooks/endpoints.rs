//! An app's webhook endpoints: adding, reading, changing, rotating the secret of and deleting
//! one (with its queue and dead letters). Writes run inside a writer transaction, reads on a
//! pooled read connection.

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_hooks::endpoint::{EndpointId, StoredEndpoint};
use herald_hooks::store::{EndpointPatch, NewEndpoint};
use rusqlite::{params, Connection, OptionalExtension};

use crate::common::hooks::{channels_json, endpoint_of, events_json, ENDPOINT_COLUMNS};
use crate::sqlite::backend;

/// Adds an endpoint, unless its app already has `max_per_app` (`None`).
pub(super) fn create(
    tx: &Connection,
    new: &NewEndpoint,
    max_per_app: usize,
) -> Result<Option<StoredEndpoint>, StoreError> {
    let of_app: i64 = tx
        .query_row(
            "SELECT count(*) FROM hook_endpoints WHERE app = ?1",
            [new.app.as_str()],
            |r| r.get(0),
        )
        .map_err(backend)?;
    if usize::try_from(of_app).unwrap_or(usize::MAX) >= max_per_app {
        return Ok(None);
    }
    let sql = format!(
        "INSERT INTO hook_endpoints (app, url, description, events, channels, enabled,
             offline_delay_ms, created_ms, secret, format)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         RETURNING {ENDPOINT_COLUMNS}"
    );
    tx.query_row(
        &sql,
        params![
            new.app.as_str(),
            new.url,
            new.description,
            events_json(new.events),
            channels_json(&new.channels),
            new.enabled,
            i64::from(new.offline_delay_ms),
            new.created_ms,
            new.secret,
            new.format.as_str(),
        ],
        |r| Ok(endpoint_of(r, 0)),
    )
    .map_err(backend)?
    .map(Some)
}

/// Every endpoint (`app`: only that app's), in id order; or the one with id `only` of `app`.
pub(super) fn read(
    conn: &Connection,
    app: Option<&AppId>,
    only: Option<EndpointId>,
) -> Result<Vec<StoredEndpoint>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {ENDPOINT_COLUMNS} FROM hook_endpoints
             WHERE (?1 IS NULL OR app = ?1) AND (?2 IS NULL OR id = ?2) ORDER BY id"
        ))
        .map_err(backend)?;
    let rows = stmt
        .query_map(params![app.map(AppId::as_str), only], |r| {
            Ok(endpoint_of(r, 0))
        })
        .map_err(backend)?;
    let mut endpoints = Vec::new();
    for row in rows {
        endpoints.push(row.map_err(backend)??);
    }
    Ok(endpoints)
}

/// Applies `patch` to an endpoint of `app`.
pub(super) fn update(
    tx: &Connection,
    app: &AppId,
    id: EndpointId,
    patch: &EndpointPatch,
) -> Result<Option<StoredEndpoint>, StoreError> {
    let sql = format!(
        "UPDATE hook_endpoints SET url = coalesce(?3, url),
             description = coalesce(?4, description), events = coalesce(?5, events),
             channels = coalesce(?6, channels), enabled = coalesce(?7, enabled),
             offline_delay_ms = coalesce(?8, offline_delay_ms)
         WHERE id = ?1 AND app = ?2
         RETURNING {ENDPOINT_COLUMNS}"
    );
    tx.query_row(
        &sql,
        params![
            id,
            app.as_str(),
            patch.url,
            patch.description,
            patch.events.map(events_json),
            patch.channels.as_deref().map(channels_json),
            patch.enabled,
            patch.offline_delay_ms.map(i64::from),
        ],
        |r| Ok(endpoint_of(r, 0)),
    )
    .optional()
    .map_err(backend)?
    .transpose()
}

/// Makes `secret` an endpoint's secret, the one it replaces its previous one until
/// `previous_until_ms`.
pub(super) fn rotate_secret(
    tx: &Connection,
    app: &AppId,
    id: EndpointId,
    secret: &[u8],
    previous_until_ms: i64,
) -> Result<bool, StoreError> {
    let n = tx
        .execute(
            "UPDATE hook_endpoints SET previous_secret = secret, previous_until_ms = ?4,
                 secret = ?3
             WHERE id = ?1 AND app = ?2",
            params![id, app.as_str(), secret, previous_until_ms],
        )
        .map_err(backend)?;
    Ok(n == 1)
}

/// Deletes an endpoint of `app`, then its queued events and dead letters.
pub(super) fn delete(tx: &Connection, app: &AppId, id: EndpointId) -> Result<bool, StoreError> {
    let n = tx
        .execute(
            "DELETE FROM hook_endpoints WHERE id = ?1 AND app = ?2",
            params![id, app.as_str()],
        )
        .map_err(backend)?;
    if n == 0 {
        return Ok(false);
    }
    tx.execute("DELETE FROM hook_events WHERE endpoint = ?1", [id])
        .map_err(backend)?;
    Ok(true)
}
