//! The queue's reads, on a pooled read connection: when a worker could next lease, dead
//! letters, and each endpoint's depth and delivery state.

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_hooks::endpoint::EndpointId;
use herald_hooks::store::{DeadEvent, EndpointDepth, RowId};
use rusqlite::{params, Connection};

use crate::common::hooks::{dead_event_of, depth_of, soonest, DEAD_COLUMNS};
use crate::common::values::sql_limit;
use crate::sqlite::backend;

/// The soonest time a lease could find something ([`soonest`]).
pub(super) fn next_due(conn: &Connection) -> Result<Option<i64>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT (SELECT h.due_ms FROM hook_events h INDEXED BY hook_events_due
                     WHERE h.endpoint = e.id AND h.dead = 0 ORDER BY h.due_ms, h.id LIMIT 1),
                 e.next_attempt_ms, e.lease_until_ms
             FROM hook_endpoints e WHERE e.enabled = 1 AND e.queued > 0",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map_err(backend)?;
    let mut endpoints = Vec::new();
    for row in rows {
        endpoints.push(row.map_err(backend)?);
    }
    Ok(soonest(endpoints))
}

/// Dead letters of `app` (`endpoint`: only its), in row order after `after`.
pub(super) fn dead_letters(
    conn: &Connection,
    app: &AppId,
    endpoint: Option<EndpointId>,
    after: Option<RowId>,
    limit: usize,
) -> Result<Vec<DeadEvent>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {DEAD_COLUMNS} FROM hook_events INDEXED BY hook_events_dead
             WHERE app = ?1 AND dead = 1 AND (?2 IS NULL OR endpoint = ?2) AND id > ?3
             ORDER BY id LIMIT ?4"
        ))
        .map_err(backend)?;
    let rows = stmt
        .query_map(
            params![app.as_str(), endpoint, after.unwrap_or(0), sql_limit(limit)],
            |r| Ok(dead_event_of(r)),
        )
        .map_err(backend)?;
    let mut dead = Vec::new();
    for row in rows {
        dead.push(row.map_err(backend)??);
    }
    Ok(dead)
}

/// Every endpoint's depth and delivery state (`app`: only that app's), in endpoint order.
pub(super) fn depth(
    conn: &Connection,
    app: Option<&AppId>,
) -> Result<Vec<EndpointDepth>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT e.id, e.queued,
                 (SELECT h.due_ms FROM hook_events h INDEXED BY hook_events_due
                  WHERE h.endpoint = e.id AND h.dead = 0 ORDER BY h.due_ms, h.id LIMIT 1),
                 (SELECT count(*) FROM hook_events h INDEXED BY hook_events_due
                  WHERE h.endpoint = e.id AND h.dead = 1),
                 e.delivered, e.failures, e.failing_since_ms, e.next_attempt_ms, e.last_error
             FROM hook_endpoints e WHERE ?1 IS NULL OR e.app = ?1 ORDER BY e.id",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map([app.map(AppId::as_str)], |r| Ok(depth_of(r)))
        .map_err(backend)?;
    let mut depths = Vec::new();
    for row in rows {
        depths.push(row.map_err(backend)??);
    }
    Ok(depths)
}
