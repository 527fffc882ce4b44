//! What one `enqueue` call does, worked out before any row is written, so PostgreSQL adds a
//! batch in a few statements (`super::queue`) rather than one round trip per event: which
//! stored held offlines the users' returns withdraw, which rows are inserted (in the call's
//! order, each with its due time: an online that withdrew nothing follows its user's pending
//! offline), and what each endpoint's `queued` count gains. The rules are SQLite's, applied
//! event by event there (`crate::sqlite::hooks` says them); here they run over the endpoints'
//! rooms and the stored held offlines of the call's returning users, read first while the
//! endpoints are locked, plus the offlines the call itself queues before a return.

use std::collections::HashMap;

use herald_hooks::endpoint::EndpointId;
use herald_hooks::store::{Enqueue, Enqueued, Hold, RowId};

use crate::common::hooks::Room;

/// A stored held offline of one of the call's returning users, not dead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StoredHeld {
    /// Its row.
    pub row: RowId,
    /// Its endpoint.
    pub endpoint: EndpointId,
    /// Its user.
    pub user: String,
    /// Its due time.
    pub due_ms: i64,
    /// The end of the lease whose batch holds it, if one took it.
    pub leased_until_ms: Option<i64>,
}

/// A row to insert: the call's event at `event`, due at `due_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Insert {
    /// Index of the event in the call.
    pub event: usize,
    /// When it is due.
    pub due_ms: i64,
}

/// What the call does.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Plan {
    /// Stored rows withdrawn.
    pub withdraw: Vec<RowId>,
    /// Rows to insert, in the call's order.
    pub insert: Vec<Insert>,
    /// What each endpoint's `queued` count gains (withdrawn rows subtracted).
    pub added: HashMap<EndpointId, i64>,
    /// The counts the call answers.
    pub done: Enqueued,
}

/// Where a held offline is: stored, or queued by this call (stored rows come first in row
/// order, the call's rows getting later ids in its order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Stored(RowId),
    Queued(usize),
}

#[derive(Debug)]
struct Held {
    due_ms: i64,
    place: Place,
    in_flight_until: Option<i64>,
    withdrawn: bool,
}

/// Works out the call: `events` in order, for the endpoints of `rooms` (those that exist), with
/// the stored held offlines `stored` of the call's returning users.
pub(super) fn plan(
    events: &[Enqueue],
    rooms: &HashMap<EndpointId, Room>,
    stored: Vec<StoredHeld>,
    max_queued: u64,
) -> Plan {
    let mut held: HashMap<(EndpointId, String), Vec<Held>> = HashMap::new();
    for s in stored {
        held.entry((s.endpoint, s.user)).or_default().push(Held {
            due_ms: s.due_ms,
            place: Place::Stored(s.row),
            in_flight_until: s.leased_until_ms,
            withdrawn: false,
        });
    }
    let mut plan = Plan::default();
    // Inserts withdrawn later in the call are `None`.
    let mut inserts: Vec<Option<Insert>> = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let Some(room) = rooms.get(&event.endpoint) else {
            // A withdrawal for a deleted endpoint is nothing to count.
            if !matches!(event.hold, Some(Hold::Withdraw { .. })) {
                plan.done.dropped += 1;
            }
            continue;
        };
        let added = plan.added.entry(event.endpoint).or_insert(0);
        let (hold_user, returning, queued_too) = match &event.hold {
            Some(Hold::Offline { user }) => (Some(&**user), None, true),
            Some(Hold::Online { user }) => (None, Some(&**user), true),
            Some(Hold::Withdraw { user }) => (None, Some(&**user), false),
            None => (None, None, true),
        };
        let mut due_ms = event.due_ms;
        if let Some(user) = returning {
            if let Some(list) = held.get_mut(&(event.endpoint, user.to_string())) {
                let picked = list
                    .iter_mut()
                    .filter(|h| {
                        !h.withdrawn
                            && h.due_ms > event.due_ms
                            && h.in_flight_until.is_none_or(|until| until <= event.due_ms)
                    })
                    .max_by_key(|h| (h.due_ms, h.place));
                if let Some(h) = picked {
                    h.withdrawn = true;
                    match h.place {
                        Place::Stored(row) => plan.withdraw.push(row),
                        Place::Queued(at) => inserts[at] = None,
                    }
                    *added -= 1;
                    plan.done.withdrawn += 1;
                    continue;
                }
                // Withdrew nothing: after the user's latest pending offline.
                let latest = list.iter().filter(|h| !h.withdrawn).map(|h| h.due_ms).max();
                due_ms = due_ms.max(latest.unwrap_or(i64::MIN));
            }
        }
        if !queued_too {
            continue;
        }
        let now = Room {
            added: *added,
            ..room.clone()
        };
        if !now.has_room(max_queued) {
            plan.done.dropped += 1;
            continue;
        }
        if let Some(user) = hold_user {
            held.entry((event.endpoint, user.to_string()))
                .or_default()
                .push(Held {
                    due_ms,
                    place: Place::Queued(inserts.len()),
                    in_flight_until: None,
                    withdrawn: false,
                });
        }
        inserts.push(Some(Insert {
            event: index,
            due_ms,
        }));
        *added += 1;
        plan.done.queued += 1;
    }
    plan.insert = inserts.into_iter().flatten().collect();
    plan.added.retain(|_, n| *n != 0);
    plan
}

#[cfg(test)]
mod tests {
    use herald_hooks::event::EventType;

    use super::*;

    fn event(endpoint: EndpointId, due_ms: i64, hold: Option<Hold>) -> Enqueue {
        Enqueue {
            endpoint,
            event_id: "evt".into(),
            kind: EventType::UserOnline,
            due_ms,
            payload: String::new(),
            hold,
        }
    }

    fn room(queued: i64) -> Room {
        Room {
            app: "shop".into(),
            queued,
            added: 0,
        }
    }

    #[test]
    fn returns_withdraw_stored_and_queued_offlines_not_in_flight() {
        let (off, on) = (
            |u: &str| Some(Hold::Offline { user: u.into() }),
            |u: &str| Some(Hold::Online { user: u.into() }),
        );
        let rooms = HashMap::from([(1, room(3))]);
        let stored = vec![
            StoredHeld {
                row: 7,
                endpoint: 1,
                user: "al".into(),
                due_ms: 4_000,
                leased_until_ms: None,
            },
            StoredHeld {
                row: 8,
                endpoint: 1,
                user: "bo".into(),
                due_ms: 4_000,
                leased_until_ms: Some(30_000),
            },
        ];
        let events = vec![
            event(1, 2_000, on("al")),  // withdraws row 7
            event(1, 2_000, on("bo")),  // row 8 in flight: queued at 4,000
            event(1, 5_000, off("cy")), // queued
            event(1, 3_000, on("cy")),  // withdraws it
            event(1, 1_000, None),      // queued
            event(2, 1_000, None),      // no endpoint: dropped
            event(2, 1_000, on("cy")),  // no endpoint: dropped
            event(1, 1_000, Some(Hold::Withdraw { user: "dy".into() })), // nothing
        ];
        let plan = plan(&events, &rooms, stored, 100);
        assert_eq!(plan.withdraw, [7]);
        assert_eq!(
            plan.insert,
            [
                Insert {
                    event: 1,
                    due_ms: 4_000
                },
                Insert {
                    event: 4,
                    due_ms: 1_000
                }
            ]
        );
        assert_eq!(
            plan.done,
            Enqueued {
                queued: 3,
                withdrawn: 2,
                dropped: 2
            }
        );
        // +1 (bo's online), +1 -1 (cy's offline, withdrawn), +1 (plain), -1 (row 7).
        assert_eq!(plan.added, HashMap::from([(1, 1)]));
    }

    #[test]
    fn a_full_queue_drops_what_withdraws_nothing() {
        let rooms = HashMap::from([(1, room(1))]);
        let events = vec![
            event(1, 1_000, None),
            event(1, 1_000, None),
            event(1, 1_000, Some(Hold::Withdraw { user: "al".into() })),
        ];
        let plan = plan(&events, &rooms, Vec::new(), 2);
        assert_eq!(plan.insert.len(), 1);
        assert_eq!(
            (plan.done.queued, plan.done.dropped),
            (1, 1),
            "{:?}",
            plan.done
        );
        assert_eq!(plan.added, HashMap::from([(1, 1)]));
    }
}
