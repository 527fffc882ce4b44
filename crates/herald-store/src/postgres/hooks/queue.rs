//! Adding events to endpoints' queues (with the debounce of `user.offline`) and leasing
//! endpoints with their next batch, each inside one transaction the caller opened.
//!
//! Adding locks its endpoints' rows first (in id order, so two calls never wait on each other
//! in a circle): their `queued` counts and leases stay as read until it commits. Leasing takes
//! endpoints `FOR UPDATE SKIP LOCKED`: nodes leasing at once get different endpoints without
//! waiting, an endpoint another node just leased is seen leased (PostgreSQL checks the row's
//! new version before locking it), and one being added to is left for the next round.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use herald_core::log::StoreError;
use herald_hooks::endpoint::EndpointId;
use herald_hooks::store::{Enqueue, Enqueued, Hold, LeasedBatch};

use crate::common::hooks::{
    endpoint_of, queued_event_of, Room, ENDPOINT_COLUMNS, ENDPOINT_COLUMN_COUNT, QUEUED_COLUMNS,
};
use crate::postgres::{pg_error, sql_limit};

/// Queues `events` in order (see the module documentation of `crate::sqlite::hooks` for the
/// debounce), then moves each endpoint's `queued` count by what it gained.
pub(super) async fn enqueue(
    client: &impl GenericClient,
    events: &[Enqueue],
    max_queued: u64,
) -> Result<Enqueued, StoreError> {
    let mut ids: Vec<EndpointId> = events.iter().map(|e| e.endpoint).collect();
    ids.sort_unstable();
    ids.dedup();
    let rows = client
        .query(
            "SELECT id, app, queued, lease_until_ms FROM hook_endpoints
             WHERE id = ANY($1) ORDER BY id FOR UPDATE",
            &[&ids],
        )
        .await
        .map_err(pg_error)?;
    let mut rooms: HashMap<EndpointId, Room> = HashMap::with_capacity(rows.len());
    for row in &rows {
        rooms.insert(
            row.try_get(0).map_err(pg_error)?,
            Room {
                app: row.try_get(1).map_err(pg_error)?,
                queued: row.try_get(2).map_err(pg_error)?,
                lease_until_ms: row.try_get(3).map_err(pg_error)?,
                added: 0,
            },
        );
    }
    let withdraw = client
        .prepare_cached(
            "DELETE FROM hook_events WHERE id = (
                 SELECT id FROM hook_events
                 WHERE endpoint = $1 AND hold_user = $2 AND NOT dead AND due_ms > $3
                   AND ($4::BIGINT IS NULL OR due_ms > $4)
                 ORDER BY due_ms DESC, id DESC LIMIT 1)",
        )
        .await
        .map_err(pg_error)?;
    let insert = client
        .prepare_cached(
            "INSERT INTO hook_events (app, endpoint, event_id, kind, due_ms, payload, hold_user)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .await
        .map_err(pg_error)?;
    let mut done = Enqueued::default();
    for event in events {
        let Some(room) = rooms.get_mut(&event.endpoint) else {
            // A withdrawal for a deleted endpoint is nothing to count.
            if !matches!(event.hold, Some(Hold::Withdraw { .. })) {
                done.dropped += 1;
            }
            continue;
        };
        // What the event is: held (an offline), withdrawing (an online: queued too unless it
        // withdrew one; a withdrawal: never queued) or plain.
        let (hold_user, returning, queued_too) = match &event.hold {
            Some(Hold::Offline { user }) => (Some(&**user), None, true),
            Some(Hold::Online { user }) => (None, Some(&**user), true),
            Some(Hold::Withdraw { user }) => (None, Some(&**user), false),
            None => (None, None, true),
        };
        if let Some(user) = returning {
            let withdrawn = client
                .execute(
                    &withdraw,
                    &[&event.endpoint, &user, &event.due_ms, &room.lease_until_ms],
                )
                .await
                .map_err(pg_error)?;
            if withdrawn == 1 {
                room.added -= 1;
                done.withdrawn += 1;
                continue;
            }
        }
        if !queued_too {
            continue;
        }
        if !room.has_room(max_queued) {
            done.dropped += 1;
            continue;
        }
        client
            .execute(
                &insert,
                &[
                    &room.app,
                    &event.endpoint,
                    &event.event_id,
                    &event.kind.as_str(),
                    &event.due_ms,
                    &event.payload,
                    &hold_user,
                ],
            )
            .await
            .map_err(pg_error)?;
        room.added += 1;
        done.queued += 1;
    }
    for (id, room) in &rooms {
        if room.added != 0 {
            client
                .execute(
                    "UPDATE hook_endpoints SET queued = queued + $2 WHERE id = $1",
                    &[id, &room.added],
                )
                .await
                .map_err(pg_error)?;
        }
    }
    Ok(done)
}

/// Leases up to `limit` ready endpoints (not in `paused`, not locked by another transaction),
/// the one with the oldest due event first, each with its batch: its up to `batch_max` oldest
/// events due at `now_ms`.
pub(super) async fn lease(
    client: &impl GenericClient,
    now_ms: i64,
    limit: usize,
    lease_ms: i64,
    batch_max: usize,
    batch_delay_ms: i64,
    paused: &[EndpointId],
) -> Result<Vec<LeasedBatch>, StoreError> {
    // The last subquery is the due time of the endpoint's `batch_max`th queued event: at or
    // before now, a full batch is due.
    let ready = client
        .query(
            "SELECT e.id, e.lease_until_ms FROM hook_endpoints e
             CROSS JOIN LATERAL (
                 SELECT h.due_ms AS oldest FROM hook_events h
                 WHERE h.endpoint = e.id AND NOT h.dead ORDER BY h.due_ms, h.id LIMIT 1) o
             WHERE e.enabled AND e.queued > 0 AND e.next_attempt_ms <= $1
               AND (e.lease_until_ms IS NULL OR e.lease_until_ms <= $1)
               AND e.id <> ALL($2) AND o.oldest <= $1
               AND (o.oldest <= $1 - $3 OR (
                   SELECT h.due_ms FROM hook_events h
                   WHERE h.endpoint = e.id AND NOT h.dead
                   ORDER BY h.due_ms, h.id OFFSET $4 LIMIT 1) <= $1)
             ORDER BY o.oldest, e.id LIMIT $5
             FOR UPDATE OF e SKIP LOCKED",
            &[
                &now_ms,
                &paused,
                &batch_delay_ms,
                &sql_limit(batch_max.saturating_sub(1)),
                &sql_limit(limit),
            ],
        )
        .await
        .map_err(pg_error)?;
    let until = now_ms.saturating_add(lease_ms);
    let take = client
        .prepare_cached(&format!(
            "UPDATE hook_endpoints SET lease_until_ms = $2 WHERE id = $1
             RETURNING {ENDPOINT_COLUMNS}, failures, failing_since_ms"
        ))
        .await
        .map_err(pg_error)?;
    let batch = client
        .prepare_cached(&format!(
            "SELECT {QUEUED_COLUMNS} FROM hook_events
             WHERE endpoint = $1 AND NOT dead AND due_ms <= $2
             ORDER BY due_ms, id LIMIT $3"
        ))
        .await
        .map_err(pg_error)?;
    let mut leased = Vec::with_capacity(ready.len());
    for row in &ready {
        let id: EndpointId = row.try_get(0).map_err(pg_error)?;
        let lease_until: Option<i64> = row.try_get(1).map_err(pg_error)?;
        let taken = client
            .query_one(&take, &[&id, &until])
            .await
            .map_err(pg_error)?;
        let failures: i64 = taken.try_get(ENDPOINT_COLUMN_COUNT).map_err(pg_error)?;
        let events = client
            .query(&batch, &[&id, &now_ms, &sql_limit(batch_max)])
            .await
            .map_err(pg_error)?
            .iter()
            .map(queued_event_of)
            .collect::<Result<Vec<_>, _>>()?;
        if events.is_empty() {
            // Settled by another node between this statement's snapshot and its lock: the
            // endpoint is left as it was.
            client
                .execute(&take, &[&id, &lease_until])
                .await
                .map_err(pg_error)?;
            continue;
        }
        leased.push(LeasedBatch {
            endpoint: endpoint_of(&taken, 0)?,
            lease_until_ms: until,
            events,
            failures: u32::try_from(failures).unwrap_or(u32::MAX),
            failing_since_ms: taken.try_get(ENDPOINT_COLUMN_COUNT + 1).map_err(pg_error)?,
            in_doubt: lease_until.is_some(),
        });
    }
    Ok(leased)
}
