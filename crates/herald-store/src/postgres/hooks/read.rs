//! The queue's reads, single queries: when a worker could next lease, dead letters, and each
//! endpoint's depth and delivery state.

use deadpool_postgres::GenericClient;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_hooks::endpoint::EndpointId;
use herald_hooks::store::{DeadEvent, EndpointDepth, RowId};

use crate::common::hooks::{dead_event_of, depth_of, soonest, DEAD_COLUMNS};
use crate::common::row::StoredRow;
use crate::postgres::{pg_error, sql_limit};

/// The soonest time a lease could find something ([`soonest`]).
pub(super) async fn next_due(client: &impl GenericClient) -> Result<Option<i64>, StoreError> {
    let rows = client
        .query(
            "SELECT (SELECT h.due_ms FROM hook_events h
                     WHERE h.endpoint = e.id AND NOT h.dead ORDER BY h.due_ms, h.id LIMIT 1),
                 e.next_attempt_ms, e.lease_until_ms
             FROM hook_endpoints e WHERE e.enabled AND e.queued > 0",
            &[],
        )
        .await
        .map_err(pg_error)?;
    let endpoints = rows
        .iter()
        .map(|r| Ok((r.column(0)?, r.column(1)?, r.column(2)?)))
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(soonest(endpoints))
}

/// Dead letters of `app` (`endpoint`: only its), in row order after `after`.
pub(super) async fn dead_letters(
    client: &impl GenericClient,
    app: &AppId,
    endpoint: Option<EndpointId>,
    after: Option<RowId>,
    limit: usize,
) -> Result<Vec<DeadEvent>, StoreError> {
    let rows = client
        .query(
            &format!(
                "SELECT {DEAD_COLUMNS} FROM hook_events
                 WHERE app = $1 AND dead AND ($2::BIGINT IS NULL OR endpoint = $2) AND id > $3
                 ORDER BY id LIMIT $4"
            ),
            &[
                &app.as_str(),
                &endpoint,
                &after.unwrap_or(0),
                &sql_limit(limit),
            ],
        )
        .await
        .map_err(pg_error)?;
    rows.iter().map(dead_event_of).collect()
}

/// Every endpoint's depth and delivery state (`app`: only that app's), in endpoint order.
pub(super) async fn depth(
    client: &impl GenericClient,
    app: Option<&AppId>,
) -> Result<Vec<EndpointDepth>, StoreError> {
    let rows = client
        .query(
            "SELECT e.id, e.queued,
                 (SELECT h.due_ms FROM hook_events h
                  WHERE h.endpoint = e.id AND NOT h.dead ORDER BY h.due_ms, h.id LIMIT 1),
                 (SELECT count(*) FROM hook_events h WHERE h.endpoint = e.id AND h.dead),
                 e.delivered, e.failures, e.failing_since_ms, e.next_attempt_ms, e.last_error
             FROM hook_endpoints e WHERE $1::TEXT IS NULL OR e.app = $1 ORDER BY e.id",
            &[&app.map(AppId::as_str)],
        )
        .await
        .map_err(pg_error)?;
    rows.iter().map(depth_of).collect()
}
