//! From a Herald push to an [`ApnsNotification`]: the per-push APNs options ([`ApnsOptions`],
//! the `"apns"` object of a push body), the `aps` dictionary built from them and the shared
//! fields ([`Common`]), and APNs' rules checked before anything is queued: size limits, push
//! type constraints, Live Activity keys, priority and collapse id.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::notification::{ApnsNotification, PushType};
use crate::common::{Common, PayloadError};

const PROVIDER: &str = "apns";
/// The longest `apns-collapse-id` APNs takes, bytes.
pub const MAX_COLLAPSE_ID: usize = 64;
/// Top-level payload keys Herald itself writes.
const RESERVED_KEYS: [&str; 3] = ["aps", "data", "herald_id"];

/// The `"apns"` options a Herald push body may carry; every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApnsOptions {
    /// `apns-push-type`. Default: `alert` when the push shows something (an alert, a sound or
    /// a badge), else `background`: a push that shows nothing is sent to wake the app.
    pub push_type: Option<PushType>,
    /// `apns-priority`: 10, 5 or 1 (default from the push's priority).
    pub priority: Option<u8>,
    /// `apns-expiration`, Unix seconds (default from the push's expiry).
    pub expiration: Option<i64>,
    /// `apns-collapse-id` (default the push's collapse key).
    pub collapse_id: Option<String>,
    /// `thread-id`: groups notifications.
    pub thread_id: Option<String>,
    /// `mutable-content`: let a notification service extension change it.
    pub mutable_content: Option<bool>,
    /// `content-available` on a visible notification (always set for `background`).
    pub content_available: Option<bool>,
    /// `category`: the notification's actions.
    pub category: Option<String>,
    /// Badge, overriding the push's.
    pub badge: Option<u32>,
    /// Sound, overriding the push's.
    pub sound: Option<String>,
    /// `interruption-level`.
    pub interruption_level: Option<InterruptionLevel>,
    /// `relevance-score`, 0 to 1.
    pub relevance_score: Option<f64>,
    /// Live Activity `content-state`.
    pub content_state: Option<Map<String, Value>>,
    /// Live Activity `event`.
    pub event: Option<LiveActivityEvent>,
    /// Live Activity `timestamp`, Unix seconds.
    pub timestamp: Option<i64>,
    /// Live Activity `stale-date`, Unix seconds.
    pub stale_date: Option<i64>,
    /// Live Activity `dismissal-date`, Unix seconds.
    pub dismissal_date: Option<i64>,
    /// Live Activity `attributes-type` (to start one).
    pub attributes_type: Option<String>,
    /// Live Activity `attributes` (to start one).
    pub attributes: Option<Map<String, Value>>,
    /// Alert title, overriding the push's.
    pub title: Option<String>,
    /// Alert subtitle.
    pub subtitle: Option<String>,
    /// Alert body, overriding the push's.
    pub body: Option<String>,
    /// Extra top-level payload keys (not `aps`, `data` or `herald_id`).
    pub custom: Option<Map<String, Value>>,
}

/// `interruption-level` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InterruptionLevel {
    /// Added to the list silently.
    Passive,
    /// Shown at once (the default).
    Active,
    /// Breaks through Focus.
    TimeSensitive,
    /// Plays a sound even when muted (needs an entitlement).
    Critical,
}

/// A Live Activity `event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LiveActivityEvent {
    /// Start a Live Activity.
    Start,
    /// Update its content state.
    Update,
    /// End it.
    End,
}

#[derive(Serialize)]
struct Body<'a> {
    aps: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a RawValue>,
    herald_id: &'a str,
    #[serde(flatten)]
    custom: Map<String, Value>,
}

fn invalid(message: impl Into<String>) -> PayloadError {
    PayloadError::invalid(PROVIDER, message)
}

impl ApnsOptions {
    /// Renders the notification for `common`, checking APNs' rules.
    pub fn render(&self, common: &Common) -> Result<ApnsNotification, PayloadError> {
        let push_type = self.push_type.unwrap_or(if self.shows_something(common) {
            PushType::Alert
        } else {
            // Apple: an `alert` push with nothing to show is neither shown nor wakes the app; a
            // push of data alone is a background notification (`content-available`, priority 5).
            PushType::Background
        });
        let aps = self.aps(common, push_type)?;
        let custom = self.custom.clone().unwrap_or_default();
        if let Some(key) = RESERVED_KEYS.iter().find(|k| custom.contains_key(**k)) {
            return Err(invalid(format!(
                "custom may not hold the key {key:?}; Herald writes it"
            )));
        }
        let body = Body {
            aps,
            data: common.data,
            herald_id: common.push_id,
            custom,
        };
        let payload = serde_json::to_string(&body).map_err(|e| invalid(e.to_string()))?;
        let limit = push_type.max_payload();
        if payload.len() > limit {
            return Err(PayloadError::too_large(PROVIDER, payload.len(), limit));
        }
        Ok(ApnsNotification {
            push_type,
            priority: self.priority(common, push_type)?,
            expiration: self
                .expiration
                .or((common.expires_ms > 0).then(|| common.expires_ms.saturating_add(999) / 1000)),
            collapse_id: self.collapse_id(common)?,
            payload: payload.into(),
        })
    }

    fn priority(&self, common: &Common, push_type: PushType) -> Result<Option<u8>, PayloadError> {
        if let Some(p) = self.priority {
            if !matches!(p, 1 | 5 | 10) {
                return Err(invalid(format!("priority must be 10, 5 or 1, not {p}")));
            }
            if push_type == PushType::Background && p != 5 {
                return Err(invalid(if self.push_type.is_none() {
                    "a push with no alert, sound or badge is sent as a background push, which \
                     must have priority 5 (or give push_type)"
                } else {
                    "a background push must have priority 5"
                }));
            }
            return Ok(Some(p));
        }
        Ok(match (push_type, common.high_priority) {
            (PushType::Background, _) => Some(5),
            (_, Some(true)) => Some(10),
            (_, Some(false)) => Some(5),
            (_, None) => None,
        })
    }

    /// Whether the notification shows anything: an alert (title, subtitle or body), a sound or
    /// a badge, from these options or the push.
    fn shows_something(&self, common: &Common) -> bool {
        self.title.is_some()
            || self.subtitle.is_some()
            || self.body.is_some()
            || self.badge.is_some()
            || self.sound.is_some()
            || common.title.is_some()
            || common.body.is_some()
            || common.badge.is_some()
            || common.sound.is_some()
    }

    fn collapse_id(&self, common: &Common) -> Result<Option<String>, PayloadError> {
        let id = self.collapse_id.as_deref().or(common.collapse_key);
        match id {
            Some(id) if id.len() > MAX_COLLAPSE_ID => Err(invalid(format!(
                "the collapse id is {} bytes; APNs takes at most {MAX_COLLAPSE_ID}",
                id.len()
            ))),
            Some(id) if http::HeaderValue::from_str(id).is_err() => Err(invalid(
                "the collapse id must be visible ASCII (it is sent as a header)",
            )),
            Some(id) => Ok(Some(id.to_string())),
            None => Ok(None),
        }
    }

    fn aps(
        &self,
        common: &Common,
        push_type: PushType,
    ) -> Result<Map<String, Value>, PayloadError> {
        let mut aps = Map::new();
        let mut put = |key: &str, value: Value| {
            aps.insert(key.to_string(), value);
        };
        let title = self.title.as_deref().or(common.title);
        let body = self.body.as_deref().or(common.body);
        let badge = self.badge.or(common.badge);
        let sound = self.sound.as_deref().or(common.sound);
        let visible = title.is_some() || body.is_some() || self.subtitle.is_some();
        if push_type == PushType::Background && (visible || badge.is_some() || sound.is_some()) {
            return Err(invalid(
                "a background push may not carry an alert, a sound or a badge",
            ));
        }
        if visible {
            let mut alert = Map::new();
            for (key, value) in [
                ("title", title),
                ("subtitle", self.subtitle.as_deref()),
                ("body", body),
            ] {
                if let Some(value) = value {
                    alert.insert(key.into(), value.into());
                }
            }
            put("alert", Value::Object(alert));
        }
        if let Some(badge) = badge {
            put("badge", badge.into());
        }
        if let Some(sound) = sound {
            put("sound", sound.into());
        }
        if let Some(thread) = &self.thread_id {
            put("thread-id", thread.as_str().into());
        }
        if let Some(category) = &self.category {
            put("category", category.as_str().into());
        }
        if self.mutable_content == Some(true) {
            put("mutable-content", 1.into());
        }
        if push_type == PushType::Background || self.content_available == Some(true) {
            put("content-available", 1.into());
        }
        if let Some(level) = self.interruption_level {
            put(
                "interruption-level",
                serde_json::to_value(level).unwrap_or_default(),
            );
        }
        if let Some(score) = self.relevance_score {
            if !(0.0..=1.0).contains(&score) {
                return Err(invalid("relevance_score must be between 0 and 1"));
            }
            put("relevance-score", score.into());
        }
        self.live_activity(push_type, &mut aps)?;
        Ok(aps)
    }

    fn live_activity(
        &self,
        push_type: PushType,
        aps: &mut Map<String, Value>,
    ) -> Result<(), PayloadError> {
        let has_any = self.content_state.is_some()
            || self.event.is_some()
            || self.timestamp.is_some()
            || self.stale_date.is_some()
            || self.dismissal_date.is_some()
            || self.attributes_type.is_some()
            || self.attributes.is_some();
        if push_type != PushType::LiveActivity {
            if has_any {
                return Err(invalid(
                    "Live Activity keys need push_type \"liveactivity\"",
                ));
            }
            return Ok(());
        }
        let event = self
            .event
            .ok_or_else(|| invalid("a Live Activity push needs event (start, update or end)"))?;
        let timestamp = self
            .timestamp
            .ok_or_else(|| invalid("a Live Activity push needs timestamp"))?;
        if event != LiveActivityEvent::End && self.content_state.is_none() {
            return Err(invalid(
                "a Live Activity start or update needs content_state",
            ));
        }
        if event == LiveActivityEvent::Start
            && (self.attributes_type.is_none() || self.attributes.is_none())
        {
            return Err(invalid(
                "a Live Activity start needs attributes_type and attributes",
            ));
        }
        let mut put = |key: &str, value: Value| {
            aps.insert(key.to_string(), value);
        };
        put("event", serde_json::to_value(event).unwrap_or_default());
        put("timestamp", timestamp.into());
        if let Some(state) = &self.content_state {
            put("content-state", Value::Object(state.clone()));
        }
        if let Some(date) = self.stale_date {
            put("stale-date", date.into());
        }
        if let Some(date) = self.dismissal_date {
            put("dismissal-date", date.into());
        }
        if let Some(kind) = &self.attributes_type {
            put("attributes-type", kind.as_str().into());
        }
        if let Some(attributes) = &self.attributes {
            put("attributes", Value::Object(attributes.clone()));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "payload_tests.rs"]
mod tests;
