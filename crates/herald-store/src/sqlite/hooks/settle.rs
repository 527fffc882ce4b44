//! Ending leases (a batch delivered, to retry: its rows no longer in flight, or dead) and the
//! dead letters' writes (replayed, dropped), each inside one writer transaction; each moves the
//! endpoint's `queued` count in the same transaction.

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_hooks::endpoint::EndpointId;
use herald_hooks::store::{RowId, Settlement};
use rusqlite::{params, Connection, OptionalExtension};

use crate::common::hooks::reason_excerpt;
use crate::sqlite::backend;

/// Settles leased batches, each by its endpoint and lease token; one whose lease is no longer
/// that token is left alone.
pub(super) fn settle(
    tx: &Connection,
    now_ms: i64,
    settled: &[(EndpointId, i64, Settlement)],
) -> Result<(), StoreError> {
    let mut release = tx
        .prepare_cached(
            "UPDATE hook_endpoints SET lease_until_ms = NULL
             WHERE id = ?1 AND lease_until_ms = ?2",
        )
        .map_err(backend)?;
    let mut delete = tx
        .prepare_cached("DELETE FROM hook_events WHERE id = ?1 AND endpoint = ?2 AND dead = 0")
        .map_err(backend)?;
    let mut kill = tx
        .prepare_cached(
            "UPDATE hook_events SET dead = 1, reason = ?3, died_ms = ?4, hold_user = NULL,
                 leased_until_ms = NULL
             WHERE id = ?1 AND endpoint = ?2 AND dead = 0",
        )
        .map_err(backend)?;
    for (endpoint, token, settlement) in settled {
        if release.execute(params![endpoint, token]).map_err(backend)? == 0 {
            continue;
        }
        match settlement {
            Settlement::Delivered { rows } => {
                let mut n = 0i64;
                for row in rows {
                    n += delete.execute(params![row, endpoint]).map_err(backend)? as i64;
                }
                tx.execute(
                    "UPDATE hook_endpoints SET failures = 0, failing_since_ms = NULL,
                         last_error = NULL, next_attempt_ms = 0, delivered = delivered + ?2,
                         queued = queued - ?2
                     WHERE id = ?1",
                    params![endpoint, n],
                )
                .map_err(backend)?;
            }
            Settlement::Retry {
                next_attempt_ms,
                reason,
            } => {
                // The batch is no longer in flight.
                tx.execute(
                    "UPDATE hook_events INDEXED BY hook_events_due SET leased_until_ms = NULL
                     WHERE endpoint = ?1 AND dead = 0 AND leased_until_ms = ?2",
                    params![endpoint, token],
                )
                .map_err(backend)?;
                tx.execute(
                    "UPDATE hook_endpoints SET next_attempt_ms = ?2, failures = failures + 1,
                         failing_since_ms = coalesce(failing_since_ms, ?3), last_error = ?4
                     WHERE id = ?1",
                    params![endpoint, next_attempt_ms, now_ms, reason_excerpt(reason)],
                )
                .map_err(backend)?;
            }
            Settlement::Dead { rows, reason } => {
                let reason = reason_excerpt(reason);
                let mut n = 0i64;
                for row in rows {
                    n += kill
                        .execute(params![row, endpoint, reason, now_ms])
                        .map_err(backend)? as i64;
                }
                tx.execute(
                    "UPDATE hook_endpoints SET next_attempt_ms = 0, failures = failures + 1,
                         failing_since_ms = coalesce(failing_since_ms, ?3), last_error = ?4,
                         queued = queued - ?2
                     WHERE id = ?1",
                    params![endpoint, n, now_ms, reason],
                )
                .map_err(backend)?;
            }
        }
    }
    Ok(())
}

/// Queues a dead letter of `app` again, due at `now_ms`.
pub(super) fn replay(
    tx: &Connection,
    app: &AppId,
    row: RowId,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let endpoint: Option<EndpointId> = tx
        .query_row(
            "UPDATE hook_events SET dead = 0, due_ms = ?3, reason = NULL, died_ms = NULL
             WHERE id = ?1 AND app = ?2 AND dead = 1
             RETURNING endpoint",
            params![row, app.as_str(), now_ms],
            |r| r.get(0),
        )
        .optional()
        .map_err(backend)?;
    let Some(endpoint) = endpoint else {
        return Ok(false);
    };
    tx.execute(
        "UPDATE hook_endpoints SET queued = queued + 1 WHERE id = ?1",
        [endpoint],
    )
    .map_err(backend)?;
    Ok(true)
}

/// Deletes a dead letter of `app`.
pub(super) fn drop_dead(tx: &Connection, app: &AppId, row: RowId) -> Result<bool, StoreError> {
    let n = tx
        .execute(
            "DELETE FROM hook_events WHERE id = ?1 AND app = ?2 AND dead = 1",
            params![row, app.as_str()],
        )
        .map_err(backend)?;
    Ok(n == 1)
}
