//! Webhooks as both backends store them (`hook_endpoints`, `hook_events`): the columns an
//! endpoint read selects and how a row becomes a [`StoredEndpoint`], a queued event, a dead
//! letter or an endpoint's depth; how event types and channel patterns are stored (JSON arrays
//! of names); how long a kept failure reason may be; what an endpoint's room in the queue is
//! while events are added ([`Room`]); and when a worker could next lease ([`soonest`]).

use herald_core::log::StoreError;
use herald_hooks::endpoint::{Endpoint, Format, StoredEndpoint};
use herald_hooks::event::{EventSet, EventType};
use herald_hooks::store::{DeadEvent, EndpointDepth, QueuedEvent};

use super::row::StoredRow;
use super::values::app_id;

/// The columns [`endpoint_of`] reads, in order.
pub(crate) const ENDPOINT_COLUMNS: &str = "id, app, url, description, events, channels, enabled, \
     offline_delay_ms, created_ms, secret, previous_secret, previous_until_ms, format";

/// How many columns [`ENDPOINT_COLUMNS`] names (a query's further columns start here).
pub(crate) const ENDPOINT_COLUMN_COUNT: usize = 13;

/// The columns [`queued_event_of`] reads, in order.
pub(crate) const QUEUED_COLUMNS: &str = "id, event_id, payload";

/// The columns [`dead_event_of`] reads, in order.
pub(crate) const DEAD_COLUMNS: &str = "id, endpoint, event_id, kind, payload, reason, died_ms";

/// Most characters of a failure's reason kept (as an endpoint's last error or a dead letter's
/// reason).
pub(crate) const REASON_MAX_CHARS: usize = 256;

/// An endpoint's stored columns ([`ENDPOINT_COLUMNS`], from column `at`) as a
/// [`StoredEndpoint`]. Event type names this build does not know (stored by a newer one) are
/// left out.
pub(crate) fn endpoint_of(r: &impl StoredRow, at: usize) -> Result<StoredEndpoint, StoreError> {
    let get = |i: usize| at + i;
    let id: i64 = r.column(get(0))?;
    let events: String = r.column(get(4))?;
    let channels: String = r.column(get(5))?;
    let delay: i64 = r.column(get(7))?;
    let previous: Option<Vec<u8>> = r.column(get(10))?;
    let previous_until: Option<i64> = r.column(get(11))?;
    let format: String = r.column(get(12))?;
    // A format this build does not know (stored by a newer one) is not sent as another.
    let format = Format::parse(&format).ok_or_else(|| {
        StoreError::failed(format!("unknown format {format:?} of hook endpoint {id}"))
    })?;
    let names: Vec<String> = serde_json::from_str(&events)
        .map_err(|_| StoreError::failed(format!("corrupt event types of hook endpoint {id}")))?;
    let channels: Vec<String> = serde_json::from_str(&channels)
        .map_err(|_| StoreError::failed(format!("corrupt channels of hook endpoint {id}")))?;
    Ok(StoredEndpoint {
        endpoint: Endpoint {
            id,
            app: app_id(r.column(get(1))?)?,
            url: r.column(get(2))?,
            description: r.column(get(3))?,
            events: names.iter().filter_map(|n| EventType::parse(n)).collect(),
            channels,
            enabled: r.column(get(6))?,
            offline_delay_ms: u32::try_from(delay).unwrap_or(u32::MAX),
            created_ms: r.column(get(8))?,
            format,
        },
        secret: r.column(get(9))?,
        previous_secret: previous.map(|secret| (secret, previous_until.unwrap_or(0))),
    })
}

/// A queued event's row ([`QUEUED_COLUMNS`]).
pub(crate) fn queued_event_of(r: &impl StoredRow) -> Result<QueuedEvent, StoreError> {
    Ok(QueuedEvent {
        row: r.column(0)?,
        event_id: r.column(1)?,
        payload: r.column(2)?,
    })
}

/// A dead letter's row ([`DEAD_COLUMNS`]).
pub(crate) fn dead_event_of(r: &impl StoredRow) -> Result<DeadEvent, StoreError> {
    let row: i64 = r.column(0)?;
    let kind: String = r.column(3)?;
    let reason: Option<String> = r.column(5)?;
    let died: Option<i64> = r.column(6)?;
    Ok(DeadEvent {
        row,
        endpoint: r.column(1)?,
        event_id: r.column(2)?,
        kind: stored_kind(row, &kind)?,
        payload: r.column(4)?,
        reason: reason.unwrap_or_default(),
        died_ms: died.unwrap_or_default(),
    })
}

/// An endpoint's depth from a row selected as `id, queued, oldest due, dead count, delivered,
/// failures, failing_since_ms, next_attempt_ms, last_error`.
pub(crate) fn depth_of(r: &impl StoredRow) -> Result<EndpointDepth, StoreError> {
    let count = |i: usize| -> Result<u64, StoreError> {
        let n: i64 = r.column(i)?;
        Ok(u64::try_from(n).unwrap_or(0))
    };
    let failures: i64 = r.column(5)?;
    Ok(EndpointDepth {
        endpoint: r.column(0)?,
        queued: count(1)?,
        oldest_due_ms: r.column(2)?,
        dead: count(3)?,
        delivered: count(4)?,
        failures: u32::try_from(failures).unwrap_or(u32::MAX),
        failing_since_ms: r.column(6)?,
        next_attempt_ms: r.column(7)?,
        last_error: r.column(8)?,
    })
}

/// An event type read from the store (row `row`'s).
fn stored_kind(row: i64, name: &str) -> Result<EventType, StoreError> {
    EventType::parse(name)
        .ok_or_else(|| StoreError::failed(format!("corrupt event type {name:?} of hook row {row}")))
}

/// Event types as stored: a JSON array of their names.
pub(crate) fn events_json(events: EventSet) -> String {
    serde_json::to_string(&events.names()).unwrap_or_default()
}

/// Channel patterns as stored: a JSON array.
pub(crate) fn channels_json(channels: &[String]) -> String {
    serde_json::to_string(channels).unwrap_or_default()
}

/// A failure's reason as kept: its first [`REASON_MAX_CHARS`] characters.
pub(crate) fn reason_excerpt(reason: &str) -> String {
    reason.chars().take(REASON_MAX_CHARS).collect()
}

/// An endpoint's room in the queue while one [`enqueue`](herald_hooks::HookStore::enqueue)
/// adds events to it: what its row said when the call began, and the events the call added
/// (less those it withdrew) so far.
#[derive(Debug, Clone)]
pub(crate) struct Room {
    /// The endpoint's app (its events' rows carry it, so deleting the app finds them).
    pub app: String,
    /// Events queued for it when the call began.
    pub queued: i64,
    /// Added by this call so far (withdrawn ones subtracted).
    pub added: i64,
}

impl Room {
    /// Whether the endpoint has room for one more event under `max_queued`.
    pub(crate) fn has_room(&self, max_queued: u64) -> bool {
        u64::try_from(self.queued + self.added).unwrap_or(0) < max_queued
    }
}

/// When a worker could next lease something, from each enabled endpoint that has events
/// queued: its oldest queued event's due time (`None`: nothing queued after all), its next
/// attempt time, and its lease's end while it is leased. The soonest, each endpoint counted at
/// the latest of its three.
pub(crate) fn soonest(
    endpoints: impl IntoIterator<Item = (Option<i64>, i64, Option<i64>)>,
) -> Option<i64> {
    endpoints
        .into_iter()
        .filter_map(|(oldest, next_attempt, lease_until)| {
            Some(
                oldest?
                    .max(next_attempt)
                    .max(lease_until.unwrap_or(i64::MIN)),
            )
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_cut_by_characters_and_rooms_fill() {
        let long = "é".repeat(300);
        assert_eq!(reason_excerpt(&long).chars().count(), REASON_MAX_CHARS);
        assert_eq!(reason_excerpt("short"), "short");
        let mut room = Room {
            app: "a".into(),
            queued: 1,
            added: 0,
        };
        assert!(room.has_room(2));
        room.added = 1;
        assert!(!room.has_room(2));
    }

    #[test]
    fn soonest_takes_each_endpoints_latest_bound() {
        assert_eq!(soonest([]), None);
        assert_eq!(soonest([(None, 5, None)]), None);
        assert_eq!(
            soonest([(Some(10), 50, None), (Some(30), 0, Some(40))]),
            Some(40)
        );
        assert_eq!(
            soonest([(Some(10), 0, None), (Some(5), 20, None)]),
            Some(10)
        );
    }
}
