//! Adding events to endpoints' queues (with the debounce of `user.offline`) and leasing
//! endpoints with their next batch (its rows marked in flight until the lease's end), each
//! inside one writer transaction.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use herald_core::log::StoreError;
use herald_hooks::endpoint::EndpointId;
use herald_hooks::store::{Batching, Enqueue, Enqueued, Hold, LeasedBatch};
use rusqlite::{params, Connection, OptionalExtension};

use crate::common::hooks::{
    endpoint_of, queued_event_of, Room, ENDPOINT_COLUMNS, ENDPOINT_COLUMN_COUNT, QUEUED_COLUMNS,
};
use crate::common::values::sql_limit;
use crate::sqlite::backend;

/// Queues `events` in order (see the module documentation of `super` for the debounce), then
/// moves each endpoint's `queued` count by what it gained.
pub(super) fn enqueue(
    tx: &Connection,
    events: &[Enqueue],
    max_queued: u64,
) -> Result<Enqueued, StoreError> {
    let mut rooms: HashMap<EndpointId, Option<Room>> = HashMap::new();
    let mut find = tx
        .prepare_cached("SELECT app, queued FROM hook_endpoints WHERE id = ?1")
        .map_err(backend)?;
    let mut withdraw = tx
        .prepare_cached(
            "DELETE FROM hook_events WHERE id = (
                 SELECT id FROM hook_events INDEXED BY hook_events_hold
                 WHERE endpoint = ?1 AND hold_user = ?2 AND dead = 0 AND due_ms > ?3
                   AND (leased_until_ms IS NULL OR leased_until_ms <= ?3)
                 ORDER BY due_ms DESC, id DESC LIMIT 1)",
        )
        .map_err(backend)?;
    let mut latest_offline = tx
        .prepare_cached(
            "SELECT max(due_ms) FROM hook_events INDEXED BY hook_events_hold
             WHERE endpoint = ?1 AND hold_user = ?2 AND dead = 0",
        )
        .map_err(backend)?;
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO hook_events (app, endpoint, event_id, kind, due_ms, payload, hold_user)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(backend)?;
    let mut done = Enqueued::default();
    for event in events {
        let room = match rooms.entry(event.endpoint) {
            Entry::Occupied(known) => known.into_mut(),
            Entry::Vacant(first) => {
                let found = find
                    .query_row([event.endpoint], |r| {
                        Ok(Room {
                            app: r.get(0)?,
                            queued: r.get(1)?,
                            added: 0,
                        })
                    })
                    .optional()
                    .map_err(backend)?;
                first.insert(found)
            }
        };
        let Some(room) = room else {
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
            let withdrawn = withdraw
                .execute(params![event.endpoint, user, event.due_ms])
                .map_err(backend)?;
            if withdrawn == 1 {
                room.added -= 1;
                done.withdrawn += 1;
                continue;
            }
        }
        if !queued_too {
            continue;
        }
        // An online that withdrew nothing follows the user's pending offline.
        let mut due_ms = event.due_ms;
        if let Some(user) = returning {
            let latest: Option<i64> = latest_offline
                .query_row(params![event.endpoint, user], |r| r.get(0))
                .map_err(backend)?;
            due_ms = due_ms.max(latest.unwrap_or(i64::MIN));
        }
        if !room.has_room(max_queued) {
            done.dropped += 1;
            continue;
        }
        insert
            .execute(params![
                room.app,
                event.endpoint,
                event.event_id,
                event.kind.as_str(),
                due_ms,
                event.payload,
                hold_user
            ])
            .map_err(backend)?;
        room.added += 1;
        done.queued += 1;
    }
    let mut count = tx
        .prepare_cached("UPDATE hook_endpoints SET queued = queued + ?2 WHERE id = ?1")
        .map_err(backend)?;
    for (id, room) in &rooms {
        if let Some(room) = room.as_ref().filter(|r| r.added != 0) {
            count.execute(params![id, room.added]).map_err(backend)?;
        }
    }
    Ok(done)
}

/// Leases up to `limit` ready endpoints (not in `paused`), the one with the oldest due event
/// first, each with its batch: its up to `batching.most` oldest events due at `now_ms`.
pub(super) fn lease(
    tx: &Connection,
    now_ms: i64,
    limit: usize,
    lease_ms: i64,
    batching: Batching,
    paused: &[EndpointId],
) -> Result<Vec<LeasedBatch>, StoreError> {
    // `nth` is the due time of the endpoint's `batching.size`th queued event: at or before now,
    // a normal batch is due.
    let ready: Vec<(EndpointId, Option<i64>)> = {
        let mut select = tx
            .prepare_cached(
                "SELECT id, lease_until_ms FROM (
                     SELECT e.id, e.lease_until_ms,
                         (SELECT h.due_ms FROM hook_events h INDEXED BY hook_events_due
                          WHERE h.endpoint = e.id AND h.dead = 0
                          ORDER BY h.due_ms, h.id LIMIT 1) AS oldest,
                         (SELECT h.due_ms FROM hook_events h INDEXED BY hook_events_due
                          WHERE h.endpoint = e.id AND h.dead = 0
                          ORDER BY h.due_ms, h.id LIMIT 1 OFFSET ?3) AS nth
                     FROM hook_endpoints e
                     WHERE e.enabled = 1 AND e.queued > 0 AND e.next_attempt_ms <= ?1
                       AND (e.lease_until_ms IS NULL OR e.lease_until_ms <= ?1))
                 WHERE oldest <= ?1 AND (oldest <= ?1 - ?2 OR nth <= ?1)
                 ORDER BY oldest, id",
            )
            .map_err(backend)?;
        let rows = select
            .query_map(
                params![
                    now_ms,
                    batching.delay_ms,
                    sql_limit(batching.size.saturating_sub(1))
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(backend)?;
        let mut ready = Vec::new();
        for row in rows {
            let (id, lease_until) = row.map_err(backend)?;
            if !paused.contains(&id) {
                ready.push((id, lease_until));
            }
            if ready.len() == limit {
                break;
            }
        }
        ready
    };
    let until = now_ms.saturating_add(lease_ms);
    let mut take = tx
        .prepare_cached(&format!(
            "UPDATE hook_endpoints SET lease_until_ms = ?2 WHERE id = ?1
             RETURNING {ENDPOINT_COLUMNS}, failures, failing_since_ms"
        ))
        .map_err(backend)?;
    let mut batch = tx
        .prepare_cached(&format!(
            "SELECT {QUEUED_COLUMNS} FROM hook_events INDEXED BY hook_events_due
             WHERE endpoint = ?1 AND dead = 0 AND due_ms <= ?2
             ORDER BY due_ms, id LIMIT ?3"
        ))
        .map_err(backend)?;
    let mut in_flight = tx
        .prepare_cached("UPDATE hook_events SET leased_until_ms = ?2 WHERE id = ?1")
        .map_err(backend)?;
    let mut leased = Vec::with_capacity(ready.len());
    for (id, lease_until) in ready {
        let (endpoint, failures, failing_since_ms) = take
            .query_row(params![id, until], |r| {
                Ok((
                    endpoint_of(r, 0),
                    r.get::<_, i64>(ENDPOINT_COLUMN_COUNT)?,
                    r.get::<_, Option<i64>>(ENDPOINT_COLUMN_COUNT + 1)?,
                ))
            })
            .map_err(backend)?;
        let rows = batch
            .query_map(params![id, now_ms, sql_limit(batching.most)], |r| {
                Ok(queued_event_of(r))
            })
            .map_err(backend)?;
        let mut events = Vec::new();
        for row in rows {
            events.push(row.map_err(backend)??);
        }
        for event in &events {
            in_flight
                .execute(params![event.row, until])
                .map_err(backend)?;
        }
        leased.push(LeasedBatch {
            endpoint: endpoint?,
            lease_until_ms: until,
            events,
            failures: u32::try_from(failures).unwrap_or(u32::MAX),
            failing_since_ms,
            in_doubt: lease_until.is_some(),
        });
    }
    Ok(leased)
}
