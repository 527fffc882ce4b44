//! Adding events to endpoints' queues (with the debounce of `user.offline`) and leasing
//! endpoints with their next batch, each inside one transaction the caller opened.
//!
//! Adding locks its endpoints' rows first (in id order, so two calls never wait on each other
//! in a circle): their `queued` counts, and their held offlines (a lease or a settlement of
//! them locks the endpoint first), stay as read until it commits. Leasing marks the batch's
//! rows in flight until the lease's end. Leasing takes
//! endpoints `FOR UPDATE SKIP LOCKED`: nodes leasing at once get different endpoints without
//! waiting, an endpoint another node just leased is seen leased (PostgreSQL checks the row's
//! new version before locking it), and one being added to is left for the next round.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use herald_core::log::StoreError;
use herald_hooks::endpoint::EndpointId;
use herald_hooks::store::{Batching, Enqueue, Enqueued, Hold, LeasedBatch, RowId};

use super::plan::{self, StoredHeld};
use crate::common::hooks::{
    endpoint_of, queued_event_of, Room, ENDPOINT_COLUMNS, ENDPOINT_COLUMN_COUNT, QUEUED_COLUMNS,
};
use crate::postgres::{pg_error, sql_limit};

/// Queues `events` in order (see the module documentation of `crate::sqlite::hooks` for the
/// debounce) in a few statements whatever their number: the endpoints locked and read, the
/// stored held offlines of the call's returning users read, the call worked out
/// ([`super::plan`]), then the withdrawn rows deleted, the new rows inserted in the call's
/// order (one `INSERT ... SELECT FROM unnest(...)`, ids following that order) and the
/// endpoints' `queued` counts moved.
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
            "SELECT id, app, queued FROM hook_endpoints
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
                added: 0,
            },
        );
    }
    let stored = stored_held(client, events, &rooms).await?;
    let plan = plan::plan(events, &rooms, stored, max_queued);
    if !plan.withdraw.is_empty() {
        client
            .execute(
                "DELETE FROM hook_events WHERE id = ANY($1)",
                &[&plan.withdraw],
            )
            .await
            .map_err(pg_error)?;
    }
    if !plan.insert.is_empty() {
        let n = plan.insert.len();
        let (mut apps, mut endpoints, mut event_ids, mut kinds, mut dues, mut payloads, mut holds) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for insert in &plan.insert {
            let event = &events[insert.event];
            apps.push(rooms[&event.endpoint].app.as_str());
            endpoints.push(event.endpoint);
            event_ids.push(event.event_id.as_str());
            kinds.push(event.kind.as_str());
            dues.push(insert.due_ms);
            payloads.push(event.payload.as_str());
            holds.push(match &event.hold {
                Some(Hold::Offline { user }) => Some(&**user),
                _ => None,
            });
        }
        client
            .execute(
                "INSERT INTO hook_events (app, endpoint, event_id, kind, due_ms, payload, hold_user)
                 SELECT app, endpoint, event_id, kind, due_ms, payload, hold_user
                 FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[],
                             $6::text[], $7::text[])
                     WITH ORDINALITY AS r(app, endpoint, event_id, kind, due_ms, payload,
                                          hold_user, n)
                 ORDER BY n",
                &[
                    &apps, &endpoints, &event_ids, &kinds, &dues, &payloads, &holds,
                ],
            )
            .await
            .map_err(pg_error)?;
    }
    if !plan.added.is_empty() {
        let (counted, added): (Vec<EndpointId>, Vec<i64>) = plan.added.iter().unzip();
        client
            .execute(
                "UPDATE hook_endpoints e SET queued = e.queued + d.added
                 FROM unnest($1::bigint[], $2::bigint[]) AS d(id, added)
                 WHERE e.id = d.id",
                &[&counted, &added],
            )
            .await
            .map_err(pg_error)?;
    }
    Ok(plan.done)
}

/// The stored held offlines (not dead) of the users that `events` return, on their endpoints
/// of `rooms`: what their returns may withdraw or must follow. No statement when none returns.
async fn stored_held(
    client: &impl GenericClient,
    events: &[Enqueue],
    rooms: &HashMap<EndpointId, Room>,
) -> Result<Vec<StoredHeld>, StoreError> {
    let mut pairs: Vec<(EndpointId, &str)> = events
        .iter()
        .filter(|e| rooms.contains_key(&e.endpoint))
        .filter_map(|e| match &e.hold {
            Some(Hold::Online { user } | Hold::Withdraw { user }) => Some((e.endpoint, &**user)),
            _ => None,
        })
        .collect();
    if pairs.is_empty() {
        return Ok(Vec::new());
    }
    pairs.sort_unstable();
    pairs.dedup();
    let (endpoints, users): (Vec<EndpointId>, Vec<&str>) = pairs.into_iter().unzip();
    let rows = client
        .query(
            "SELECT h.id, h.endpoint, h.hold_user, h.due_ms, h.leased_until_ms
             FROM unnest($1::bigint[], $2::text[]) AS r(endpoint, hold_user)
             JOIN hook_events h ON h.endpoint = r.endpoint AND h.hold_user = r.hold_user
             WHERE NOT h.dead",
            &[&endpoints, &users],
        )
        .await
        .map_err(pg_error)?;
    rows.iter()
        .map(|row| {
            Ok(StoredHeld {
                row: row.try_get(0).map_err(pg_error)?,
                endpoint: row.try_get(1).map_err(pg_error)?,
                user: row.try_get(2).map_err(pg_error)?,
                due_ms: row.try_get(3).map_err(pg_error)?,
                leased_until_ms: row.try_get(4).map_err(pg_error)?,
            })
        })
        .collect()
}

/// Leases up to `limit` ready endpoints (not in `paused`, not locked by another transaction),
/// the one with the oldest due event first, each with its batch: its up to `batching.most`
/// oldest events due at `now_ms`.
pub(super) async fn lease(
    client: &impl GenericClient,
    now_ms: i64,
    limit: usize,
    lease_ms: i64,
    batching: Batching,
    paused: &[EndpointId],
) -> Result<Vec<LeasedBatch>, StoreError> {
    // The last subquery is the due time of the endpoint's `batching.size`th queued event: at
    // or before now, a normal batch is due.
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
                &batching.delay_ms,
                &sql_limit(batching.size.saturating_sub(1)),
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
    let in_flight = client
        .prepare_cached("UPDATE hook_events SET leased_until_ms = $2 WHERE id = ANY($1)")
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
            .query(&batch, &[&id, &now_ms, &sql_limit(batching.most)])
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
        let rows: Vec<RowId> = events.iter().map(|e| e.row).collect();
        client
            .execute(&in_flight, &[&rows, &until])
            .await
            .map_err(pg_error)?;
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
