//! What this crate tells an observer about devices and deliveries ([`PushEvent`]), and the seam
//! it tells it through ([`PushObserver`], held by [`PushEvents`]). Webhooks (`herald-hooks`)
//! are the observer in the server; this crate does not know them.
//!
//! Each fact is told once, on the node where it became true, after the store committed it:
//! - [`PushEvent::DeviceRegistered`]: a registration created a device (an update of an
//!   existing one is not told);
//! - [`PushEvent::DeviceDeactivated`]: a provider said the device's token is gone
//!   (`Unregistered`, `BadDeviceToken`...) and the device was deactivated, with the provider's
//!   reason;
//! - [`PushEvent::DeliveryAcked`]: a device's acknowledgement was stored, one event per push it
//!   newly acknowledged;
//! - [`PushEvent::DeliveryProviderAccepted`], [`PushEvent::DeliveryFailed`],
//!   [`PushEvent::DeliveryDeadLettered`]: a provider send's attempt settled in the job queue
//!   (accepted; failed, retried or for good; its job a dead letter).
//!
//! The observer is called on the task where the fact happened (an API handler, a delivery
//! worker's round): it must only queue. Asked first whether it wants a kind of event for an
//! app ([`PushObserver::wants`]), so that nothing is built for an event nobody wants; with no
//! observer, telling costs one atomic load.
//!
//! A failed or dead-lettered delivery carries the job's arguments ([`JobArguments`]): what the
//! job was asked to send, without the payload itself (it may hold personal data) and without
//! the provider token in full (a token, or a Web Push endpoint URL, is a capability to push to
//! the device): only its last characters, or the push service's origin.

use std::sync::{Arc, OnceLock};

use herald_core::tenant::AppId;
use herald_proto::SendResult;

use crate::delivery::record::DeliveryRecord;
use crate::device::{Device, Platform};
use crate::jobs::{JobId, Settlement};

/// The kinds of [`PushEvent`], for [`PushObserver::wants`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PushEventKind {
    /// [`PushEvent::DeviceRegistered`].
    DeviceRegistered,
    /// [`PushEvent::DeviceDeactivated`].
    DeviceDeactivated,
    /// [`PushEvent::DeliveryAcked`].
    DeliveryAcked,
    /// [`PushEvent::DeliveryProviderAccepted`].
    DeliveryProviderAccepted,
    /// [`PushEvent::DeliveryFailed`].
    DeliveryFailed,
    /// [`PushEvent::DeliveryDeadLettered`].
    DeliveryDeadLettered,
}

/// The device an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFacts {
    /// Its id.
    pub id: String,
    /// Its platform.
    pub platform: Platform,
    /// The user it belongs to, when it has one.
    pub user: Option<String>,
}

impl DeviceFacts {
    /// The facts of `device`.
    pub fn of(device: &Device) -> Self {
        DeviceFacts {
            id: device.id.clone(),
            platform: device.platform,
            user: device.user.clone(),
        }
    }
}

/// One provider send's attempt: whose, which push, which job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFacts {
    /// The app.
    pub app: AppId,
    /// The push's id.
    pub push: String,
    /// The job the attempt ran for: the device's send job, or, for a broadcast page's direct
    /// send (`broadcast`), the broadcast's expansion job.
    pub job: JobId,
    /// Whether the attempt was a broadcast page's direct send.
    pub broadcast: bool,
    /// The provider.
    pub provider: Platform,
    /// The device.
    pub device: DeviceFacts,
    /// Attempts of the job including this one.
    pub attempts: u32,
}

/// What a failed job was asked to send (see the [module documentation](self) for what is left
/// out and why).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobArguments {
    /// The push's id.
    pub push: String,
    /// The device's id.
    pub device: String,
    /// The provider.
    pub provider: Platform,
    /// The token's hint: `…` and its last 6 characters (APNs, FCM), or the push service's
    /// origin and `/…` (Web Push).
    pub token: String,
    /// How the push is delivered (`auto`, `provider`).
    pub delivery: &'static str,
    /// When the push expires, milliseconds since the Unix epoch.
    pub expires_ms: i64,
    /// The size of the provider's payload, bytes.
    pub payload_bytes: usize,
}

impl JobArguments {
    /// The arguments of a send of `record` to `device` (holding `token`) through `provider`.
    pub fn new(
        push: &str,
        device: &str,
        provider: Platform,
        token: &str,
        record: &DeliveryRecord,
    ) -> Self {
        let payload_bytes = match provider {
            Platform::Apns => record.payloads.apns.payload.len(),
            Platform::Fcm => {
                serde_json::to_vec(&record.payloads.fcm.message).map_or(0, |v| v.len())
            }
            Platform::Webpush => record.payloads.webpush.payload.len(),
            Platform::Herald => 0,
        };
        JobArguments {
            push: push.to_owned(),
            device: device.to_owned(),
            provider,
            token: token_hint(provider, token),
            delivery: record.delivery.as_str(),
            expires_ms: record.expires,
            payload_bytes,
        }
    }
}

/// A token as a failure notice shows it: never whole (see [`JobArguments::token`]).
pub fn token_hint(provider: Platform, token: &str) -> String {
    if provider == Platform::Webpush {
        if let Some(rest) = token.strip_prefix("https://") {
            let host = rest.split('/').next().unwrap_or_default();
            return format!("https://{host}/…");
        }
    }
    let chars: Vec<char> = token.chars().collect();
    // A token shorter than twice the hint is shown as its length only.
    if chars.len() < 12 {
        return "…".to_owned();
    }
    let tail: String = chars[chars.len() - 6..].iter().collect();
    format!("…{tail}")
}

/// A fact about devices or deliveries (see the [module documentation](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushEvent {
    /// A registration created a device.
    DeviceRegistered {
        /// The app.
        app: AppId,
        /// The device.
        device: DeviceFacts,
    },
    /// A provider said the device's token is gone, and the device was deactivated.
    DeviceDeactivated {
        /// The app.
        app: AppId,
        /// The device.
        device: DeviceFacts,
        /// The provider and its reason, as the device's `inactive_reason` holds it
        /// (`apns: Unregistered`).
        reason: String,
    },
    /// A device acknowledged a push (its acknowledgement is stored).
    DeliveryAcked {
        /// The app.
        app: AppId,
        /// The device.
        device: DeviceFacts,
        /// The push's id.
        push: String,
    },
    /// The provider accepted a push for a device.
    DeliveryProviderAccepted {
        /// The attempt.
        delivery: DeliveryFacts,
    },
    /// A provider send failed: retried at `retry_at_ms`, or for good (`result` says how).
    DeliveryFailed {
        /// The attempt.
        delivery: DeliveryFacts,
        /// The job's end as a [`SendResult`]'s string form (`rejected:BadTopic`,
        /// `unregistered:Unregistered`, `no_credentials`), `None` when it is retried.
        result: Option<String>,
        /// The provider's answer (its reason, or why the attempt failed: `timeout`,
        /// `HTTP 503`...).
        reason: String,
        /// When the job runs again, milliseconds since the Unix epoch (`None`: it does not).
        retry_at_ms: Option<i64>,
        /// What the job was asked to send.
        arguments: JobArguments,
    },
    /// A job used its last attempt (or cannot run): a dead letter, replayable with
    /// `herald jobs replay`.
    DeliveryDeadLettered {
        /// The attempt (`attempts`: every attempt the job had).
        delivery: DeliveryFacts,
        /// The provider's last answer.
        reason: String,
        /// What the job was asked to send.
        arguments: JobArguments,
    },
}

impl PushEvent {
    /// The event's kind.
    pub fn kind(&self) -> PushEventKind {
        match self {
            PushEvent::DeviceRegistered { .. } => PushEventKind::DeviceRegistered,
            PushEvent::DeviceDeactivated { .. } => PushEventKind::DeviceDeactivated,
            PushEvent::DeliveryAcked { .. } => PushEventKind::DeliveryAcked,
            PushEvent::DeliveryProviderAccepted { .. } => PushEventKind::DeliveryProviderAccepted,
            PushEvent::DeliveryFailed { .. } => PushEventKind::DeliveryFailed,
            PushEvent::DeliveryDeadLettered { .. } => PushEventKind::DeliveryDeadLettered,
        }
    }

    /// The app it is about.
    pub fn app(&self) -> &AppId {
        match self {
            PushEvent::DeviceRegistered { app, .. }
            | PushEvent::DeviceDeactivated { app, .. }
            | PushEvent::DeliveryAcked { app, .. } => app,
            PushEvent::DeliveryProviderAccepted { delivery }
            | PushEvent::DeliveryFailed { delivery, .. }
            | PushEvent::DeliveryDeadLettered { delivery, .. } => &delivery.app,
        }
    }

    /// The device it is about.
    pub fn device(&self) -> &DeviceFacts {
        match self {
            PushEvent::DeviceRegistered { device, .. }
            | PushEvent::DeviceDeactivated { device, .. }
            | PushEvent::DeliveryAcked { device, .. } => device,
            PushEvent::DeliveryProviderAccepted { delivery }
            | PushEvent::DeliveryFailed { delivery, .. }
            | PushEvent::DeliveryDeadLettered { delivery, .. } => &delivery.device,
        }
    }

    /// The event a settled provider send is told as, if any: `accepted` →
    /// provider_accepted; a retry, `unregistered`, `rejected`, `no_credentials` (or a result
    /// this version does not name) → failed; a dead letter → dead_lettered. The ends that made
    /// no provider send for a reason of Herald's (`live`, `expired`, `inactive`, `no_token`)
    /// are not told. `arguments` are built only for a failure.
    pub fn of_settlement(
        delivery: DeliveryFacts,
        settlement: &Settlement,
        arguments: impl FnOnce(&DeliveryFacts) -> JobArguments,
    ) -> Option<PushEvent> {
        match settlement {
            Settlement::Done { result } => match result {
                SendResult::Accepted => Some(PushEvent::DeliveryProviderAccepted { delivery }),
                SendResult::Live
                | SendResult::Expired
                | SendResult::Inactive
                | SendResult::NoToken => None,
                SendResult::Unregistered(reason) | SendResult::Rejected(reason) => {
                    Some(PushEvent::DeliveryFailed {
                        arguments: arguments(&delivery),
                        delivery,
                        result: Some(result.to_string()),
                        reason: reason.clone(),
                        retry_at_ms: None,
                    })
                }
                SendResult::NoCredentials | SendResult::Other(_) => {
                    Some(PushEvent::DeliveryFailed {
                        reason: match result {
                            SendResult::NoCredentials => format!(
                                "the app has no usable {} credentials",
                                delivery.provider.as_str()
                            ),
                            _ => result.to_string(),
                        },
                        arguments: arguments(&delivery),
                        delivery,
                        result: Some(result.to_string()),
                        retry_at_ms: None,
                    })
                }
            },
            Settlement::Retry { due_ms, reason } => Some(PushEvent::DeliveryFailed {
                arguments: arguments(&delivery),
                delivery,
                result: None,
                reason: reason.clone(),
                retry_at_ms: Some(*due_ms),
            }),
            Settlement::Dead { reason } => Some(PushEvent::DeliveryDeadLettered {
                arguments: arguments(&delivery),
                delivery,
                reason: reason.clone(),
            }),
        }
    }
}

/// Told about devices and deliveries (see the [module documentation](self)).
pub trait PushObserver: Send + Sync {
    /// Whether events of `kind` about `app` are wanted now; when not, none is built. Must be
    /// cheap (no lock held long, nothing allocated).
    fn wants(&self, app: &AppId, kind: PushEventKind) -> bool;

    /// A fact became true. Called where it happened: queue it, never block.
    fn on_push_event(&self, event: &PushEvent);
}

/// The observer a part of this crate tells, once one is set ([`PushEvents::observe`]).
#[derive(Default)]
pub struct PushEvents {
    observer: OnceLock<Arc<dyn PushObserver>>,
}

impl PushEvents {
    /// Sets the observer; `false` if one was already set (it stays).
    pub fn observe(&self, observer: Arc<dyn PushObserver>) -> bool {
        self.observer.set(observer).is_ok()
    }

    /// The observer, when one is set and wants events of `kind` about `app`.
    pub fn wanting(&self, app: &AppId, kind: PushEventKind) -> Option<&dyn PushObserver> {
        let observer = self.observer.get()?;
        observer.wants(app, kind).then_some(&**observer)
    }

    /// Whether an observer wants any of `kinds` about `app`.
    pub fn wants_any(&self, app: &AppId, kinds: &[PushEventKind]) -> bool {
        self.observer
            .get()
            .is_some_and(|o| kinds.iter().any(|k| o.wants(app, *k)))
    }

    /// Tells `event` when the observer wants it.
    pub fn tell(&self, event: &PushEvent) {
        if let Some(observer) = self.wanting(event.app(), event.kind()) {
            observer.on_push_event(event);
        }
    }
}

/// A recording observer for tests: every event told, in order.
#[cfg(test)]
#[derive(Default)]
pub struct Recorder {
    /// The events told so far.
    pub events: parking_lot::Mutex<Vec<PushEvent>>,
}

#[cfg(test)]
impl Recorder {
    /// The events told so far.
    pub fn taken(&self) -> Vec<PushEvent> {
        self.events.lock().clone()
    }
}

#[cfg(test)]
impl PushObserver for Recorder {
    fn wants(&self, _app: &AppId, _kind: PushEventKind) -> bool {
        true
    }

    fn on_push_event(&self, event: &PushEvent) {
        self.events.lock().push(event.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_never_shown_whole() {
        let apns = "ab".repeat(32);
        assert_eq!(token_hint(Platform::Apns, &apns), "…ababab");
        assert_eq!(token_hint(Platform::Fcm, "short"), "…");
        assert_eq!(
            token_hint(
                Platform::Webpush,
                "https://fcm.googleapis.com/fcm/send/secret-part"
            ),
            "https://fcm.googleapis.com/…"
        );
    }

    fn facts(attempts: u32) -> DeliveryFacts {
        DeliveryFacts {
            app: AppId::parse("shop").unwrap(),
            push: "p1".into(),
            job: 7,
            broadcast: false,
            provider: Platform::Apns,
            device: DeviceFacts {
                id: "d1".into(),
                platform: Platform::Apns,
                user: Some("al".into()),
            },
            attempts,
        }
    }

    fn arguments(facts: &DeliveryFacts) -> JobArguments {
        JobArguments {
            push: facts.push.clone(),
            device: facts.device.id.clone(),
            provider: facts.provider,
            token: "…abcdef".into(),
            delivery: "provider",
            expires_ms: 1,
            payload_bytes: 2,
        }
    }

    #[test]
    fn each_settlement_is_told_as_its_event_or_not_at_all() {
        let done = |result| Settlement::Done { result };
        let told = |settlement: &Settlement| {
            let mut built = 0;
            let event = PushEvent::of_settlement(facts(3), settlement, |f| {
                built += 1;
                arguments(f)
            });
            (event, built)
        };
        assert_eq!(
            told(&done(SendResult::Accepted)),
            (
                Some(PushEvent::DeliveryProviderAccepted { delivery: facts(3) }),
                0
            ),
            "an accepted send builds no arguments"
        );
        for quiet in [
            SendResult::Live,
            SendResult::Expired,
            SendResult::Inactive,
            SendResult::NoToken,
        ] {
            assert_eq!(told(&done(quiet)), (None, 0));
        }
        let (event, built) = told(&done(SendResult::Unregistered("BadDeviceToken".into())));
        assert_eq!(built, 1);
        assert_eq!(
            event,
            Some(PushEvent::DeliveryFailed {
                delivery: facts(3),
                result: Some("unregistered:BadDeviceToken".into()),
                reason: "BadDeviceToken".into(),
                retry_at_ms: None,
                arguments: arguments(&facts(3)),
            })
        );
        let (event, _) = told(&done(SendResult::NoCredentials));
        let Some(PushEvent::DeliveryFailed { result, reason, .. }) = event else {
            panic!("no_credentials is a failure: {event:?}");
        };
        assert_eq!(result.as_deref(), Some("no_credentials"));
        assert!(reason.contains("apns"), "{reason}");
        let retry = Settlement::Retry {
            due_ms: 99,
            reason: "HTTP 503".into(),
        };
        let (event, _) = told(&retry);
        assert_eq!(
            event,
            Some(PushEvent::DeliveryFailed {
                delivery: facts(3),
                result: None,
                reason: "HTTP 503".into(),
                retry_at_ms: Some(99),
                arguments: arguments(&facts(3)),
            })
        );
        let dead = Settlement::Dead {
            reason: "HTTP 500".into(),
        };
        let (event, _) = told(&dead);
        assert_eq!(
            event,
            Some(PushEvent::DeliveryDeadLettered {
                delivery: facts(3),
                reason: "HTTP 500".into(),
                arguments: arguments(&facts(3)),
            })
        );
        assert_eq!(event.unwrap().device().user.as_deref(), Some("al"));
    }

    #[test]
    fn nothing_is_told_without_an_observer_and_only_what_it_wants() {
        struct OnlyAcks(Recorder);
        impl PushObserver for OnlyAcks {
            fn wants(&self, _app: &AppId, kind: PushEventKind) -> bool {
                kind == PushEventKind::DeliveryAcked
            }
            fn on_push_event(&self, event: &PushEvent) {
                self.0.on_push_event(event)
            }
        }
        let app = AppId::parse("shop").unwrap();
        let device = DeviceFacts {
            id: "d1".into(),
            platform: Platform::Fcm,
            user: Some("al".into()),
        };
        let acked = PushEvent::DeliveryAcked {
            app: app.clone(),
            device: device.clone(),
            push: "p1".into(),
        };
        let registered = PushEvent::DeviceRegistered {
            app: app.clone(),
            device,
        };
        let events = PushEvents::default();
        events.tell(&acked);
        assert!(events.wanting(&app, PushEventKind::DeliveryAcked).is_none());
        let observer = Arc::new(OnlyAcks(Recorder::default()));
        assert!(events.observe(observer.clone()));
        events.tell(&registered);
        events.tell(&acked);
        assert_eq!(observer.0.taken(), vec![acked]);
    }
}
