//! Ending leases (a batch delivered, to retry: its rows no longer in flight, or dead) and the dead letters' writes (replayed,
//! dropped), each inside one transaction the caller opened; each moves the endpoint's `queued`
//! count in the same transaction.

use deadpool_postgres::GenericClient;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_hooks::endpoint::EndpointId;
use herald_hooks::store::{RowId, Settlement};

use crate::common::hooks::reason_excerpt;
use crate::postgres::pg_error;

/// Settles leased batches, each by its endpoint and lease token; one whose lease is no longer
/// that token is left alone. Endpoints are settled in id order, the order `enqueue` locks them
/// in, so the two never wait on each other in a circle.
pub(super) async fn settle(
    client: &impl GenericClient,
    now_ms: i64,
    settled: &[(EndpointId, i64, Settlement)],
) -> Result<(), StoreError> {
    let mut ordered: Vec<&(EndpointId, i64, Settlement)> = settled.iter().collect();
    ordered.sort_by_key(|(endpoint, _, _)| *endpoint);
    for (endpoint, token, settlement) in ordered {
        let released = client
            .execute(
                "UPDATE hook_endpoints SET lease_until_ms = NULL
                 WHERE id = $1 AND lease_until_ms = $2",
                &[endpoint, token],
            )
            .await
            .map_err(pg_error)?;
        if released == 0 {
            continue;
        }
        match settlement {
            Settlement::Delivered { rows } => {
                let n = client
                    .execute(
                        "DELETE FROM hook_events WHERE id = ANY($1) AND endpoint = $2 AND NOT dead",
                        &[rows, endpoint],
                    )
                    .await
                    .map_err(pg_error)?;
                client
                    .execute(
                        "UPDATE hook_endpoints SET failures = 0, failing_since_ms = NULL,
                             last_error = NULL, next_attempt_ms = 0,
                             delivered = delivered + $2, queued = queued - $2
                         WHERE id = $1",
                        &[endpoint, &(n as i64)],
                    )
                    .await
                    .map_err(pg_error)?;
            }
            Settlement::Retry {
                next_attempt_ms,
                reason,
            } => {
                // The batch is no longer in flight.
                client
                    .execute(
                        "UPDATE hook_events SET leased_until_ms = NULL
                         WHERE endpoint = $1 AND NOT dead AND leased_until_ms = $2",
                        &[endpoint, token],
                    )
                    .await
                    .map_err(pg_error)?;
                client
                    .execute(
                        "UPDATE hook_endpoints SET next_attempt_ms = $2, failures = failures + 1,
                             failing_since_ms = coalesce(failing_since_ms, $3), last_error = $4
                         WHERE id = $1",
                        &[endpoint, next_attempt_ms, &now_ms, &reason_excerpt(reason)],
                    )
                    .await
                    .map_err(pg_error)?;
            }
            Settlement::Dead { rows, reason } => {
                let reason = reason_excerpt(reason);
                let n = client
                    .execute(
                        "UPDATE hook_events SET dead = TRUE, reason = $3, died_ms = $4,
                             hold_user = NULL, leased_until_ms = NULL
                         WHERE id = ANY($1) AND endpoint = $2 AND NOT dead",
                        &[rows, endpoint, &reason, &now_ms],
                    )
                    .await
                    .map_err(pg_error)?;
                client
                    .execute(
                        "UPDATE hook_endpoints SET next_attempt_ms = 0, failures = failures + 1,
                             failing_since_ms = coalesce(failing_since_ms, $3), last_error = $4,
                             queued = queued - $2
                         WHERE id = $1",
                        &[endpoint, &(n as i64), &now_ms, &reason],
                    )
                    .await
                    .map_err(pg_error)?;
            }
        }
    }
    Ok(())
}

/// Queues a dead letter of `app` again, due at `now_ms`.
pub(super) async fn replay(
    client: &impl GenericClient,
    app: &AppId,
    row: RowId,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let revived = client
        .query_opt(
            "UPDATE hook_events SET dead = FALSE, due_ms = $3, reason = NULL, died_ms = NULL
             WHERE id = $1 AND app = $2 AND dead
             RETURNING endpoint",
            &[&row, &app.as_str(), &now_ms],
        )
        .await
        .map_err(pg_error)?;
    let Some(revived) = revived else {
        return Ok(false);
    };
    let endpoint: EndpointId = revived.try_get(0).map_err(pg_error)?;
    client
        .execute(
            "UPDATE hook_endpoints SET queued = queued + 1 WHERE id = $1",
            &[&endpoint],
        )
        .await
        .map_err(pg_error)?;
    Ok(true)
}

/// Deletes a dead letter of `app`.
pub(super) async fn drop_dead(
    client: &impl GenericClient,
    app: &AppId,
    row: RowId,
) -> Result<bool, StoreError> {
    let n = client
        .execute(
            "DELETE FROM hook_events WHERE id = $1 AND app = $2 AND dead",
            &[&row, &app.as_str()],
        )
        .await
        .map_err(pg_error)?;
    Ok(n == 1)
}
