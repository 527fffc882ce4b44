//! Targeted pushes: what a publisher asks for (`POST /v1/push`), how it is validated, the
//! envelope stored in a push log, and how a stored push decides which device it reaches.
//!
//! A push to the whole app or to a tag expression is stored once in the app's broadcast log with
//! its audience; a push to a device (or a user's devices) is stored in each device's own log.
//! A device keeps a broadcast push when the audience admits its tags, and never receives a push
//! whose TTL has passed.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use herald_core::error::{ErrorCode, HeraldError};
use herald_core::hub::Admit;
use herald_core::message::{now_millis, SharedMessage, StoredMessage};

use crate::audience::Audience;
use crate::delivery::payloads::{Payloads, PlatformOptions};
use crate::delivery::{Delivery, MAX_ACK_WINDOW};
use crate::device::check_device_id;
use crate::tags::TagExpr;

/// Longest TTL a push may ask for (and the default): 28 days, in seconds.
pub const MAX_TTL_SECS: u64 = 28 * 24 * 3600;

/// Who a push is for: exactly one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One device.
    Device(String),
    /// Every active device of a user.
    User(String),
    /// Every active device whose tags satisfy the expression.
    Tags(TagExpr),
    /// Every active device of the app.
    App,
}

impl Target {
    /// Who a push stored in the app's broadcast log reaches (a tag or app push), from the
    /// expression parsed when the push was accepted; `None` for a device or user push.
    pub fn audience(&self) -> Option<Audience> {
        match self {
            Target::Tags(expr) => Some(Audience::Tags(expr.clone())),
            Target::App => Some(Audience::All),
            Target::Device(_) | Target::User(_) => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetBody {
    #[serde(default)]
    device: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    tags: Option<String>,
    #[serde(default)]
    app: Option<bool>,
}

/// Notification fields for providers and for clients that show them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Notification {
    /// Title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Body text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Badge count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub badge: Option<u32>,
    /// Sound name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sound: Option<String>,
}

/// Delivery priority, as providers understand it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Wake the device now.
    High,
    /// May be delayed to save power.
    Normal,
}

/// A field whose value is any JSON value: present (even `null`) is `Some`.
fn present_value<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

/// The body of `POST /v1/push`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushBody {
    target: TargetBody,
    /// Any JSON value, `null` included (delivered as `null`); absent is none.
    #[serde(default, deserialize_with = "present_value")]
    data: Option<Box<RawValue>>,
    #[serde(default)]
    notification: Option<Notification>,
    #[serde(default)]
    ttl: Option<u64>,
    #[serde(default)]
    collapse_key: Option<String>,
    #[serde(default)]
    priority: Option<Priority>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    delivery: Option<Delivery>,
    /// Seconds (fractions allowed).
    #[serde(default)]
    ack_window: Option<f64>,
    #[serde(default)]
    apns: Option<herald_providers::apns::ApnsOptions>,
    #[serde(default)]
    fcm: Option<herald_providers::fcm::FcmOptions>,
    #[serde(default)]
    webpush: Option<herald_providers::webpush::WebPushOptions>,
}

/// A validated push, ready to store.
#[derive(Debug, Clone)]
pub struct Push {
    /// Who it is for.
    pub target: Target,
    /// The push id: the publisher's idempotency key, or generated.
    pub id: String,
    /// When it was accepted, milliseconds since the Unix epoch (the clock `expires` counts from).
    pub created: i64,
    /// When it expires, milliseconds since the Unix epoch.
    pub expires: i64,
    /// The envelope stored in the log and delivered to devices as the message `data`.
    pub envelope: Bytes,
    /// How it is delivered.
    pub delivery: Delivery,
    /// Its own ack window, milliseconds (`None`: the app's or the default).
    pub ack_window_ms: Option<u64>,
    /// Provider payloads (`None` for a `live` push).
    pub payloads: Option<Payloads>,
}

#[derive(Serialize)]
struct Envelope<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notification: Option<&'a Notification>,
    expires: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    collapse_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<Priority>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audience: Option<String>,
}

impl PushBody {
    /// Takes the idempotency key from an `Idempotency-Key` header; it must agree with a body
    /// `id` if both are given.
    pub fn set_id(&mut self, key: &str) -> Result<(), HeraldError> {
        match &self.id {
            Some(id) if id != key => Err(HeraldError::bad_request(
                "Idempotency-Key header and body \"id\" differ; send one",
            )),
            _ => {
                self.id = Some(key.to_string());
                Ok(())
            }
        }
    }

    /// Validates the push; `max_data_bytes` bounds the envelope.
    pub fn validate(self, max_data_bytes: usize, now_ms: i64) -> Result<Push, HeraldError> {
        let t = self.target;
        let given = [
            t.device.is_some(),
            t.user.is_some(),
            t.tags.is_some(),
            t.app == Some(true),
        ];
        if given.iter().filter(|g| **g).count() != 1 || t.app == Some(false) {
            return Err(HeraldError::bad_request(
                "\"target\" must name exactly one of \"device\", \"user\", \"tags\" or \
                 \"app\": true",
            ));
        }
        let target = if let Some(d) = t.device {
            check_device_id(&d)?;
            Target::Device(d)
        } else if let Some(u) = t.user {
            if u.is_empty() || u.len() > crate::device::MAX_USER_LEN {
                return Err(HeraldError::bad_request(
                    "target.user must be 1 to 256 bytes",
                ));
            }
            Target::User(u)
        } else if let Some(expr) = t.tags {
            Target::Tags(TagExpr::parse(&expr)?)
        } else {
            Target::App
        };
        if self.data.is_none() && self.notification.is_none() {
            return Err(HeraldError::bad_request(
                "a push needs \"data\", a \"notification\", or both",
            ));
        }
        let ttl = self.ttl.unwrap_or(MAX_TTL_SECS);
        if ttl == 0 || ttl > MAX_TTL_SECS {
            return Err(HeraldError::bad_request(format!(
                "\"ttl\" must be 1 to {MAX_TTL_SECS} seconds"
            )));
        }
        if let Some(k) = &self.collapse_key {
            if k.is_empty() || k.len() > 256 {
                return Err(HeraldError::bad_request(
                    "\"collapse_key\" must be 1 to 256 bytes",
                ));
            }
        }
        if let Some(id) = &self.id {
            herald_core::engine::check_message_id(id)?;
        }
        let id = self
            .id
            .unwrap_or_else(|| format!("p-{}", hex::encode(rand::random::<[u8; 12]>())));
        let delivery = self.delivery.unwrap_or(if self.notification.is_some() {
            Delivery::Auto
        } else {
            Delivery::Live
        });
        let ack_window_ms = match self.ack_window {
            None => None,
            Some(s) if s > 0.0 && s <= MAX_ACK_WINDOW.as_secs_f64() => Some((s * 1000.0) as u64),
            Some(_) => {
                return Err(HeraldError::bad_request(format!(
                    "\"ack_window\" must be more than 0 and at most {} seconds",
                    MAX_ACK_WINDOW.as_secs()
                )))
            }
        };
        let expires = now_ms.saturating_add((ttl * 1000) as i64);
        let platforms = PlatformOptions {
            apns: self.apns,
            fcm: self.fcm,
            webpush: self.webpush,
        };
        let payloads = if delivery == Delivery::Live {
            let p = &platforms;
            if p.apns.is_some() || p.fcm.is_some() || p.webpush.is_some() {
                return Err(HeraldError::bad_request(
                    "\"apns\", \"fcm\" and \"webpush\" options need \"delivery\": \"auto\" or \"provider\"",
                ));
            }
            None
        } else {
            let n = self.notification.as_ref();
            let common = herald_providers::common::Common {
                title: n.and_then(|n| n.title.as_deref()),
                body: n.and_then(|n| n.body.as_deref()),
                badge: n.and_then(|n| n.badge),
                sound: n.and_then(|n| n.sound.as_deref()),
                data: self.data.as_deref(),
                collapse_key: self.collapse_key.as_deref(),
                high_priority: self.priority.map(|p| p == Priority::High),
                expires_ms: expires,
                push_id: &id,
            };
            Some(Payloads::render(&platforms, &common)?)
        };
        let envelope = serde_json::to_vec(&Envelope {
            data: self.data.as_deref(),
            notification: self.notification.as_ref(),
            expires,
            collapse_key: self.collapse_key.as_deref(),
            priority: self.priority,
            audience: target.audience().and_then(|a| a.stored_text()),
        })
        .map_err(|e| HeraldError::new(ErrorCode::Internal, e.to_string()))?;
        if envelope.len() > max_data_bytes {
            return Err(HeraldError::new(
                ErrorCode::TooLarge,
                format!(
                    "the push is {} bytes encoded; the limit is {max_data_bytes}",
                    envelope.len()
                ),
            ));
        }
        Ok(Push {
            target,
            id,
            created: now_ms,
            expires,
            envelope: Bytes::from(envelope),
            delivery,
            ack_window_ms,
            payloads,
        })
    }
}

/// What delivery needs to know of a stored push, read from its envelope once per message.
#[derive(Debug, Clone)]
pub struct PushMeta {
    /// Expiry, milliseconds since the Unix epoch (`None`: never).
    pub expires: Option<i64>,
    /// Collapse key.
    pub collapse_key: Option<String>,
    /// Who a broadcast-log push is for ([`Audience::All`] when the envelope names no tags).
    pub audience: Audience,
}

#[derive(Deserialize)]
struct MetaFields {
    #[serde(default)]
    expires: Option<i64>,
    #[serde(default)]
    collapse_key: Option<String>,
    #[serde(default)]
    audience: Option<String>,
}

impl PushMeta {
    /// The metadata of `message`, parsed the first time it is asked for and kept with the
    /// message (its extension slot), so every subscriber shares one parse. A message that is
    /// not a push envelope has none (it never expires and reaches every device).
    pub fn of(message: &StoredMessage) -> Option<&PushMeta> {
        message.extension(|message| {
            let f: MetaFields = serde_json::from_slice(&message.data).ok()?;
            Some(PushMeta {
                expires: f.expires,
                collapse_key: f.collapse_key,
                // As it always has, an envelope whose audience no longer parses reaches
                // every device its filter is asked about.
                audience: Audience::from_stored(f.audience.as_deref()).unwrap_or(Audience::All),
            })
        })
    }

    /// Whether the push has expired at `now_ms`.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.expires.is_some_and(|e| e <= now_ms)
    }

    /// Whether the push has expired now; reads the clock only for a push that can expire
    /// (the admit filters run once per message and device, and most pushes never expire).
    pub fn expired_now(&self) -> bool {
        self.expires.is_some_and(|e| e <= now_millis())
    }
}

/// The filter of an active device's subscription to its app's broadcast log (an inactive
/// device opens no inbox): unexpired pushes whose audience reaches a device holding `tags`
/// (sorted), by [`Audience::reaches`].
pub fn broadcast_admit(tags: Arc<Vec<String>>) -> Admit {
    Arc::new(move |m: &StoredMessage| match PushMeta::of(m) {
        None => true,
        Some(meta) => !meta.expired_now() && meta.audience.reaches_tags(true, &tags),
    })
}

/// The filter of a device's subscription to its own log: unexpired pushes.
pub fn direct_admit() -> Admit {
    Arc::new(|m: &StoredMessage| PushMeta::of(m).is_none_or(|meta| !meta.expired_now()))
}

/// Drops every message of `messages` (in log order) that a later one with the same collapse
/// key replaces.
pub fn collapse(messages: &mut Vec<SharedMessage>) {
    let mut seen = std::collections::HashSet::new();
    let mut keep = vec![true; messages.len()];
    for (i, m) in messages.iter().enumerate().rev() {
        if let Some(key) = PushMeta::of(m).and_then(|meta| meta.collapse_key.as_deref()) {
            if !seen.insert(key.to_string()) {
                keep[i] = false;
            }
        }
    }
    let mut i = 0;
    messages.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::message::Epoch;
    use herald_core::name::ChannelName;

    fn body(json: &str) -> Result<Push, HeraldError> {
        serde_json::from_str::<PushBody>(json)
            .map_err(|e| HeraldError::bad_request(e.to_string()))?
            .validate(4096, 1_000)
    }

    fn stored(seq: u64, envelope: &Bytes) -> SharedMessage {
        Arc::new(StoredMessage::new(
            ChannelName::parse("c").unwrap(),
            Epoch::new("e"),
            seq,
            None,
            0,
            envelope.clone(),
        ))
    }

    #[test]
    fn targets_are_exactly_one() {
        assert!(matches!(
            body(r#"{"target":{"device":"d1"},"data":1}"#)
                .unwrap()
                .target,
            Target::Device(_)
        ));
        assert!(matches!(
            body(r#"{"target":{"app":true},"notification":{"title":"t"}}"#)
                .unwrap()
                .target,
            Target::App
        ));
        for bad in [
            r#"{"target":{},"data":1}"#,
            r#"{"target":{"device":"d","user":"u"},"data":1}"#,
            r#"{"target":{"app":false},"data":1}"#,
            r#"{"target":{"device":"d"}}"#,
            r#"{"target":{"device":"d"},"data":1,"ttl":0}"#,
        ] {
            assert_eq!(body(bad).unwrap_err().code, ErrorCode::BadRequest, "{bad}");
        }
        assert_eq!(
            body(r#"{"target":{"tags":"a AND"},"data":1}"#)
                .unwrap_err()
                .code,
            ErrorCode::TagExpressionInvalid
        );
        let big = format!(
            r#"{{"target":{{"app":true}},"data":"{}"}}"#,
            "x".repeat(5000)
        );
        assert_eq!(body(&big).unwrap_err().code, ErrorCode::TooLarge);
    }

    #[test]
    fn audience_and_expiry_decide_delivery() {
        let p =
            body(r#"{"target":{"tags":"sports AND NOT muted"},"data":{"x":1},"ttl":5}"#).unwrap();
        assert_eq!(p.expires, 6_000);
        let m = stored(1, &p.envelope);
        let meta = PushMeta::of(&m).unwrap();
        assert!(meta.expired(6_000) && !meta.expired(5_999));
        let fan = broadcast_admit(Arc::new(vec!["sports".into(), "uk".into()]));
        let muted = broadcast_admit(Arc::new(vec!["muted".into(), "sports".into()]));
        // expired long ago (the test clock is the real one)
        assert!(!fan(&m));
        let live = PushBody::validate(
            serde_json::from_str(r#"{"target":{"tags":"sports AND NOT muted"},"data":1}"#).unwrap(),
            4096,
            now_millis(),
        )
        .unwrap();
        let m = stored(2, &live.envelope);
        assert!(fan(&m));
        assert!(!muted(&m));
        assert!(direct_admit()(&m));
    }

    #[test]
    fn later_pushes_replace_earlier_ones_with_the_same_collapse_key() {
        let mk = |key: Option<&str>, seq| {
            let json = match key {
                Some(k) => {
                    format!(r#"{{"target":{{"app":true}},"data":{seq},"collapse_key":"{k}"}}"#)
                }
                None => format!(r#"{{"target":{{"app":true}},"data":{seq}}}"#),
            };
            stored(seq, &body(&json).unwrap().envelope)
        };
        let mut list = vec![
            mk(Some("score"), 1),
            mk(None, 2),
            mk(Some("score"), 3),
            mk(Some("other"), 4),
        ];
        collapse(&mut list);
        let seqs: Vec<u64> = list.iter().map(|m| m.seq).collect();
        assert_eq!(seqs, vec![2, 3, 4]);
    }
}
