//! Device and delivery events: [`HookEvent::from_push`], the webhook event of a fact
//! `herald-push` tells ([`PushEvent`]), and [`PushHooks`], the observer that puts them on the
//! node queue.
//!
//! `herald-push` tells each fact once, on the node where it became true, after the store
//! committed it; so each event is queued once, by that node. The observer is called on the
//! task where the fact happened (an API handler, a delivery worker's round): like the
//! lifecycle listener it only looks at the endpoint snapshot ([`PushObserver::wants`]: nothing
//! is built when no enabled endpoint of the app wants the type) and `try_send`s on the bounded
//! node queue; a full queue drops the event, counted as
//! `herald_hook_events_dropped_total{reason="node_queue_full"}` with a WARN at most every few
//! seconds.
//!
//! The events' `data` (docs/hooks.md has the table):
//!
//! ```json
//! {"device":"d1","platform":"apns","user":"alice"}                        // device.registered
//! {"device":"d1","platform":"apns","user":"alice","reason":"apns: Unregistered"}
//! {"push":"p1","device":"d1","platform":"fcm","user":"alice"}             // delivery.acked
//! {"push":"p1","job":42,"broadcast":false,"device":"d1","platform":"fcm","user":"alice",
//!  "attempts":1}                                                          // provider_accepted
//! ```
//!
//! `delivery.failed` adds `result` (the job's end as a send result, `null` when retried),
//! `reason` (the provider's answer), `final`, `retry_at`, `host` (this node's host name) and
//! `arguments` (what the job was asked to send: push, device, provider, the token's hint,
//! delivery, expires, payload_bytes); `delivery.dead_lettered` adds `reason`, `host` and
//! `arguments`, its `attempts` being every attempt the job had.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use herald_core::tenant::AppId;
use herald_outbound::LineLimiter;
use herald_push::push_events::{
    DeliveryFacts, DeviceFacts, JobArguments, PushEvent, PushEventKind, PushObserver,
};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc::error::TrySendError;

use crate::event::{rfc3339_millis, EventId, EventType, HookEvent};
use crate::listener::DROPPED_METRIC;
use crate::service::{now_ms, Hooks};

/// At most one WARN about a full node queue this often.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The webhook type of a push event's kind.
pub fn event_type(kind: PushEventKind) -> EventType {
    match kind {
        PushEventKind::DeviceRegistered => EventType::DeviceRegistered,
        PushEventKind::DeviceDeactivated => EventType::DeviceDeactivated,
        PushEventKind::DeliveryAcked => EventType::DeliveryAcked,
        PushEventKind::DeliveryProviderAccepted => EventType::DeliveryProviderAccepted,
        PushEventKind::DeliveryFailed => EventType::DeliveryFailed,
        PushEventKind::DeliveryDeadLettered => EventType::DeliveryDeadLettered,
    }
}

/// This node's host name, read once (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else
/// `unknown`): what a failure notice names as the node that saw the failure.
pub fn node_host() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown".to_owned())
    })
}

/// A device's fields in an event's `data`.
fn device_fields(data: &mut Map<String, Value>, device: &DeviceFacts) {
    data.insert("device".into(), json!(device.id));
    data.insert("platform".into(), json!(device.platform.as_str()));
    data.insert("user".into(), json!(device.user));
}

/// An attempt's fields in an event's `data`.
fn delivery_fields(delivery: &DeliveryFacts) -> Map<String, Value> {
    let mut data = Map::new();
    data.insert("push".into(), json!(delivery.push));
    data.insert("job".into(), json!(delivery.job));
    data.insert("broadcast".into(), json!(delivery.broadcast));
    device_fields(&mut data, &delivery.device);
    data.insert("attempts".into(), json!(delivery.attempts));
    data
}

/// A failed job's arguments as JSON.
fn arguments_json(arguments: &JobArguments) -> Value {
    json!({
        "push": arguments.push,
        "device": arguments.device,
        "provider": arguments.provider.as_str(),
        "token": arguments.token,
        "delivery": arguments.delivery,
        "expires": rfc3339_millis(arguments.expires_ms),
        "payload_bytes": arguments.payload_bytes,
    })
}

impl HookEvent {
    /// The webhook event of `event` at `at_ms` (its user is the device's, so that a user's
    /// events keep their order).
    pub fn from_push(event: &PushEvent, at_ms: i64) -> HookEvent {
        let mut data = Map::new();
        match event {
            PushEvent::DeviceRegistered { device, .. } => device_fields(&mut data, device),
            PushEvent::DeviceDeactivated { device, reason, .. } => {
                device_fields(&mut data, device);
                data.insert("reason".into(), json!(reason));
            }
            PushEvent::DeliveryAcked { device, push, .. } => {
                data.insert("push".into(), json!(push));
                device_fields(&mut data, device);
            }
            PushEvent::DeliveryProviderAccepted { delivery } => data = delivery_fields(delivery),
            PushEvent::DeliveryFailed {
                delivery,
                result,
                reason,
                retry_at_ms,
                arguments,
            } => {
                data = delivery_fields(delivery);
                data.insert("result".into(), json!(result));
                data.insert("reason".into(), json!(reason));
                data.insert("final".into(), json!(retry_at_ms.is_none()));
                data.insert("retry_at".into(), json!(retry_at_ms.map(rfc3339_millis)));
                data.insert("host".into(), json!(node_host()));
                data.insert("arguments".into(), arguments_json(arguments));
            }
            PushEvent::DeliveryDeadLettered {
                delivery,
                reason,
                arguments,
            } => {
                data = delivery_fields(delivery);
                data.insert("reason".into(), json!(reason));
                data.insert("host".into(), json!(node_host()));
                data.insert("arguments".into(), arguments_json(arguments));
            }
        }
        HookEvent {
            id: EventId::new(at_ms),
            app: event.app().clone(),
            kind: event_type(event.kind()),
            at_ms,
            user: event.device().user.as_deref().map(Into::into),
            channel: None,
            data: Value::Object(data),
        }
    }
}

/// Queues device and delivery events for the app's endpoints (see the
/// [module documentation](self)).
pub struct PushHooks {
    hooks: Arc<Hooks>,
    warnings: LineLimiter<()>,
}

impl PushHooks {
    /// The observer feeding `hooks`' node queue. Reads the host name now, once.
    pub fn new(hooks: Arc<Hooks>) -> Self {
        node_host();
        PushHooks {
            hooks,
            warnings: LineLimiter::new(WARN_EVERY),
        }
    }
}

impl PushObserver for PushHooks {
    fn wants(&self, app: &AppId, kind: PushEventKind) -> bool {
        self.hooks
            .snapshot()
            .wants(app.as_str(), event_type(kind), None)
    }

    fn on_push_event(&self, event: &PushEvent) {
        if !self.wants(event.app(), event.kind()) {
            return;
        }
        match self
            .hooks
            .queue()
            .try_send(HookEvent::from_push(event, now_ms()))
        {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                metrics::counter!(DROPPED_METRIC, "reason" => "node_queue_full").increment(1);
                if let Some(held_back) = self.warnings.admit((), Instant::now()) {
                    tracing::warn!(
                        held_back,
                        "webhooks: the node queue is full (hooks.node_queue); device and \
                         delivery events are dropped until the store takes them \
                         ({DROPPED_METRIC} counts them)"
                    );
                }
            }
            // The service is shutting down.
            Err(TrySendError::Closed(_)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_push::device::Platform;

    fn device() -> DeviceFacts {
        DeviceFacts {
            id: "d1".into(),
            platform: Platform::Fcm,
            user: Some("alice".into()),
        }
    }

    fn delivery(attempts: u32) -> DeliveryFacts {
        DeliveryFacts {
            app: AppId::parse("shop").unwrap(),
            push: "p1".into(),
            job: 42,
            broadcast: false,
            provider: Platform::Fcm,
            device: device(),
            attempts,
        }
    }

    fn arguments() -> JobArguments {
        JobArguments {
            push: "p1".into(),
            device: "d1".into(),
            provider: Platform::Fcm,
            token: "…abcdef".into(),
            delivery: "provider",
            expires_ms: 1_796_000_000_000,
            payload_bytes: 120,
        }
    }

    #[test]
    fn every_push_event_has_its_type_user_and_fields() {
        let shop = AppId::parse("shop").unwrap();
        let registered = HookEvent::from_push(
            &PushEvent::DeviceRegistered {
                app: shop.clone(),
                device: device(),
            },
            0,
        );
        assert_eq!(registered.kind, EventType::DeviceRegistered);
        assert_eq!(registered.user.as_deref(), Some("alice"));
        assert_eq!(registered.channel, None);
        assert_eq!(
            registered.data,
            json!({"device": "d1", "platform": "fcm", "user": "alice"})
        );

        let deactivated = HookEvent::from_push(
            &PushEvent::DeviceDeactivated {
                app: shop.clone(),
                device: device(),
                reason: "fcm: UNREGISTERED".into(),
            },
            0,
        );
        assert_eq!(deactivated.to_json()["type"], "device.deactivated");
        assert_eq!(deactivated.data["reason"], "fcm: UNREGISTERED");

        let acked = HookEvent::from_push(
            &PushEvent::DeliveryAcked {
                app: shop.clone(),
                device: device(),
                push: "p1".into(),
            },
            0,
        );
        assert_eq!(acked.to_json()["type"], "delivery.acked");
        assert_eq!(
            acked.data,
            json!({"push": "p1", "device": "d1", "platform": "fcm", "user": "alice"})
        );

        let accepted = HookEvent::from_push(
            &PushEvent::DeliveryProviderAccepted {
                delivery: delivery(1),
            },
            0,
        );
        assert_eq!(accepted.to_json()["type"], "delivery.provider_accepted");
        assert_eq!(
            accepted.data,
            json!({"push": "p1", "job": 42, "broadcast": false, "device": "d1",
                   "platform": "fcm", "user": "alice", "attempts": 1})
        );

        let failed = HookEvent::from_push(
            &PushEvent::DeliveryFailed {
                delivery: delivery(2),
                result: None,
                reason: "HTTP 503".into(),
                retry_at_ms: Some(1_796_000_000_123),
                arguments: arguments(),
            },
            0,
        );
        assert_eq!(failed.to_json()["type"], "delivery.failed");
        assert_eq!(failed.data["final"], false);
        assert_eq!(failed.data["result"], Value::Null);
        assert_eq!(failed.data["retry_at"], "2026-11-30T00:53:20.123Z");
        assert_eq!(failed.data["host"], node_host());
        assert_eq!(
            failed.data["arguments"],
            json!({"push": "p1", "device": "d1", "provider": "fcm", "token": "…abcdef",
                   "delivery": "provider", "expires": "2026-11-30T00:53:20.000Z",
                   "payload_bytes": 120})
        );

        let dead = HookEvent::from_push(
            &PushEvent::DeliveryDeadLettered {
                delivery: delivery(5),
                reason: "HTTP 500".into(),
                arguments: arguments(),
            },
            0,
        );
        assert_eq!(dead.to_json()["type"], "delivery.dead_lettered");
        assert_eq!(dead.data["attempts"], 5);
        assert_eq!(dead.data["reason"], "HTTP 500");
        assert_eq!(dead.data["host"], node_host());
        assert!(!node_host().is_empty());
        for kind in [EventType::DeviceRegistered, EventType::DeliveryDeadLettered] {
            assert_eq!(EventType::parse(kind.as_str()), Some(kind));
            assert!(!kind.has_channel());
        }
    }
}
