//! What the API shows of endpoints: an endpoint with its queue and delivery state
//! ([`EndpointView`], [`EndpointState`]), what a test request came to ([`TestOutcome`]) and a
//! dead letter ([`dead_json`]), each as the JSON the HTTP API answers. Never a secret.

use serde_json::{json, Value};

use crate::endpoint::Endpoint;
use crate::event::rfc3339_millis;
use crate::store::{DeadEvent, EndpointDepth};
use crate::worker::PAUSE_AFTER;

/// Failed attempts in a row after which an endpoint is reported `paused` (the worker's
/// [`PAUSE_AFTER`]): each further attempt is a probe.
pub const PAUSED_AFTER_FAILURES: u32 = PAUSE_AFTER;

/// How an endpoint is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointState {
    /// Its last attempt succeeded (or none was made).
    Ok,
    /// Its last attempts failed, fewer than [`PAUSED_AFTER_FAILURES`] in a row.
    Failing,
    /// [`PAUSED_AFTER_FAILURES`] or more failures in a row: each further attempt is a probe.
    Paused,
    /// Disabled: told nothing; what was queued waits.
    Disabled,
}

impl EndpointState {
    /// The state of `endpoint` with `failures` failed attempts in a row.
    pub fn of(endpoint: &Endpoint, failures: u32) -> Self {
        if !endpoint.enabled {
            EndpointState::Disabled
        } else if failures >= PAUSED_AFTER_FAILURES {
            EndpointState::Paused
        } else if failures > 0 {
            EndpointState::Failing
        } else {
            EndpointState::Ok
        }
    }

    /// Its name in the API and metrics: `ok`, `failing`, `paused`, `disabled`.
    pub fn as_str(self) -> &'static str {
        match self {
            EndpointState::Ok => "ok",
            EndpointState::Failing => "failing",
            EndpointState::Paused => "paused",
            EndpointState::Disabled => "disabled",
        }
    }
}

/// An endpoint as the API shows it: the endpoint, its queue and delivery state (shared by a
/// cluster's nodes, from the store) and what that makes its state.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointView {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Its queue and delivery state.
    pub depth: EndpointDepth,
    /// How it is doing.
    pub state: EndpointState,
}

impl EndpointView {
    /// The view of `endpoint` with `depth` (`None`: nothing queued or tried yet).
    pub fn new(endpoint: Endpoint, depth: Option<EndpointDepth>) -> Self {
        let depth = depth.unwrap_or(EndpointDepth {
            endpoint: endpoint.id,
            queued: 0,
            oldest_due_ms: None,
            dead: 0,
            delivered: 0,
            failures: 0,
            failing_since_ms: None,
            next_attempt_ms: 0,
            last_error: None,
        });
        let state = EndpointState::of(&endpoint, depth.failures);
        EndpointView {
            endpoint,
            depth,
            state,
        }
    }

    /// The view as the API answers it (`{"id","url",...,"last_error"}`; times RFC 3339).
    pub fn to_json(&self) -> Value {
        let e = &self.endpoint;
        let d = &self.depth;
        json!({
            "id": e.id,
            "url": e.url,
            "description": e.description,
            "events": e.events.names(),
            "channels": e.channels,
            "enabled": e.enabled,
            "offline_delay_ms": e.offline_delay_ms,
            "created": rfc3339_millis(e.created_ms),
            "format": e.format.as_str(),
            "state": self.state.as_str(),
            "queued": d.queued,
            "oldest_queued": d.oldest_due_ms.map(rfc3339_millis),
            "dead": d.dead,
            "delivered": d.delivered,
            "failures": d.failures,
            "failing_since": d.failing_since_ms.map(rfc3339_millis),
            "next_attempt": (d.next_attempt_ms > 0).then(|| rfc3339_millis(d.next_attempt_ms)),
            "last_error": d.last_error,
        })
    }
}

/// What a test request (`hook.test`, sent at once, not queued) came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestOutcome {
    /// Whether the endpoint answered 2xx.
    pub delivered: bool,
    /// The status it answered, when it answered.
    pub status: Option<u16>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// How long the request took, in milliseconds.
    pub latency_ms: u64,
}

impl TestOutcome {
    /// What a test request's `outcome` came to.
    pub fn of(outcome: &crate::sender::SendOutcome) -> TestOutcome {
        use crate::sender::SendResult;
        let status = match &outcome.result {
            SendResult::Ok { status }
            | SendResult::Http { status, .. }
            | SendResult::Redirect { status, .. } => Some(*status),
            SendResult::Timeout | SendResult::Connect(_) | SendResult::Refused(_) => None,
        };
        let delivered = outcome.result.delivered();
        TestOutcome {
            delivered,
            status,
            error: (!delivered).then(|| outcome.result.reason()),
            latency_ms: outcome.latency.as_millis() as u64,
        }
    }

    /// As the API answers it: `{"delivered","status","error","latency_ms"}`.
    pub fn to_json(&self) -> Value {
        json!({
            "delivered": self.delivered,
            "status": self.status,
            "error": self.error,
            "latency_ms": self.latency_ms,
        })
    }
}

/// A dead letter as the API lists it: `{"id","event_id","type","reason","died","event"}`
/// (`event`: the event's JSON as it would have been sent).
pub fn dead_json(dead: &DeadEvent) -> Value {
    let event = serde_json::from_str::<Value>(&dead.payload)
        .unwrap_or_else(|_| Value::String(dead.payload.clone()));
    json!({
        "id": dead.row,
        "event_id": dead.event_id,
        "type": dead.kind.as_str(),
        "reason": dead.reason,
        "died": rfc3339_millis(dead.died_ms),
        "event": event,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventSet, EventType};
    use herald_core::tenant::AppId;

    fn endpoint(enabled: bool) -> Endpoint {
        Endpoint {
            id: 7,
            app: AppId::parse("shop").unwrap(),
            url: "https://example.com/h".into(),
            description: "backend".into(),
            events: EventSet::parse(&["user.offline"]).unwrap(),
            channels: vec!["rooms/*".into()],
            enabled,
            offline_delay_ms: 3_000,
            created_ms: 1_796_000_000_123,
            format: crate::endpoint::Format::Standard,
        }
    }

    #[test]
    fn a_view_shows_the_plans_fields_and_state() {
        let fresh = EndpointView::new(endpoint(true), None).to_json();
        assert_eq!(
            fresh,
            json!({
                "id": 7, "url": "https://example.com/h", "description": "backend",
                "events": ["user.offline"], "channels": ["rooms/*"], "enabled": true,
                "offline_delay_ms": 3000, "created": "2026-11-30T00:53:20.123Z",
                "format": "standard", "state": "ok",
                "queued": 0, "oldest_queued": null, "dead": 0, "delivered": 0, "failures": 0,
                "failing_since": null, "next_attempt": null, "last_error": null,
            })
        );
        let depth = |failures| EndpointDepth {
            endpoint: 7,
            queued: 3,
            oldest_due_ms: Some(0),
            dead: 1,
            delivered: 9,
            failures,
            failing_since_ms: Some(1_000),
            next_attempt_ms: 2_000,
            last_error: Some("HTTP 503".into()),
        };
        let failing = EndpointView::new(endpoint(true), Some(depth(2)));
        assert_eq!(failing.state, EndpointState::Failing);
        let json = failing.to_json();
        assert_eq!(json["oldest_queued"], "1970-01-01T00:00:00.000Z");
        assert_eq!(json["next_attempt"], "1970-01-01T00:00:02.000Z");
        assert_eq!(json["last_error"], "HTTP 503");
        let paused = EndpointView::new(endpoint(true), Some(depth(PAUSED_AFTER_FAILURES)));
        assert_eq!(paused.to_json()["state"], "paused");
        let disabled = EndpointView::new(endpoint(false), Some(depth(9)));
        assert_eq!(disabled.to_json()["state"], "disabled");
        assert!(!json.to_string().contains("secret"));
    }

    #[test]
    fn a_dead_letter_carries_its_event() {
        let dead = DeadEvent {
            row: 4,
            endpoint: 7,
            event_id: "evt_1".into(),
            kind: EventType::UserOffline,
            payload: r#"{"id":"evt_1","type":"user.offline"}"#.into(),
            reason: "HTTP 500".into(),
            died_ms: 0,
        };
        let json = dead_json(&dead);
        assert_eq!(json["id"], 4);
        assert_eq!(json["type"], "user.offline");
        assert_eq!(json["event"]["id"], "evt_1");
        assert_eq!(json["died"], "1970-01-01T00:00:00.000Z");
    }
}
