//! What Herald sends a push service for one push: the plaintext (before RFC 8291 encryption)
//! and the `TTL`, `Urgency` and `Topic` headers, rendered from the push's common fields and the
//! options under `"webpush"` in a push body, with the size limit checked before anything is
//! queued.
//!
//! The plaintext is JSON. By default `{"id": push_id, "notification": {"title", "body", "icon",
//! "navigate"}, "data": ..., "app_badge": n}` for the page's service worker; with
//! `declarative: true` the Declarative Web Push shape Safari shows without a service worker:
//! `{"web_push": 8030, "notification": {"title", "body", "navigate", "icon", "data": {"id",
//! "data"}}, "app_badge": n}` (`title` and `navigate` required).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::ece::ENCRYPTION_OVERHEAD;
use crate::common::{Common, PayloadError};

/// What a push service must accept after encryption (RFC 8030 section 7.2), bytes.
pub const WEBPUSH_MAX_ENCRYPTED: usize = 4096;
/// The largest plaintext that stays within [`WEBPUSH_MAX_ENCRYPTED`] once encrypted.
pub const WEBPUSH_MAX_PLAINTEXT: usize = WEBPUSH_MAX_ENCRYPTED - ENCRYPTION_OVERHEAD;

const PROVIDER: &str = "webpush";

/// One rendered Web Push message, before encryption.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebPushNotification {
    /// The `TTL` header: seconds the push service keeps the message for an offline browser.
    pub ttl_secs: u64,
    /// The `Urgency` header (`very-low`, `low`, `normal`, `high`).
    pub urgency: Option<String>,
    /// The `Topic` header: a newer message with the same topic replaces a stored one.
    pub topic: Option<String>,
    /// The plaintext (JSON) the browser decrypts.
    pub payload: String,
}

/// The options under `"webpush"` in a push body:
/// `{"ttl": secs, "urgency": "very-low"|"low"|"normal"|"high", "topic": "...",
/// "declarative": bool, "notification": {"title", "body", "icon", "navigate"}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebPushOptions {
    /// Seconds the push service keeps the message. Default: until the push expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u64>,
    /// How urgently to deliver. Default: from the push's priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urgency: Option<Urgency>,
    /// At most 32 base64url characters. Default: the push's collapse key (hashed when it is not
    /// a valid topic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// Send the Declarative Web Push payload (`"web_push": 8030`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub declarative: bool,
    /// Overrides of what the notification shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification: Option<WebNotificationOverrides>,
}

/// `webpush.notification`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebNotificationOverrides {
    /// Title instead of the push's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Body instead of the push's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// URL of the icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
    /// The URL a click opens (required when declarative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub navigate: Option<String>,
}

/// RFC 8030 `Urgency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Urgency {
    /// Only on power and Wi-Fi.
    VeryLow,
    /// On power or Wi-Fi.
    Low,
    /// Not on low battery.
    Normal,
    /// At once.
    High,
}

impl Urgency {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Urgency::VeryLow => "very-low",
            Urgency::Low => "low",
            Urgency::Normal => "normal",
            Urgency::High => "high",
        }
    }
}

#[derive(Serialize, Default)]
struct Shown<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    icon: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    navigate: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<HeraldData<'a>>,
}

#[derive(Serialize)]
struct HeraldData<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct ForServiceWorker<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    notification: Option<Shown<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    app_badge: Option<u32>,
}

#[derive(Serialize)]
struct Declarative<'a> {
    web_push: u32,
    notification: Shown<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    app_badge: Option<u32>,
}

impl WebPushOptions {
    /// Renders the push for Web Push, or says why it cannot be sent there.
    pub fn render(&self, common: &Common) -> Result<WebPushNotification, PayloadError> {
        self.render_at(common, crate::common::unix_millis())
    }

    pub(crate) fn render_at(
        &self,
        common: &Common,
        now_ms: i64,
    ) -> Result<WebPushNotification, PayloadError> {
        let overrides = self.notification.clone().unwrap_or_default();
        let mut shown = Shown {
            title: overrides.title.as_deref().or(common.title),
            body: overrides.body.as_deref().or(common.body),
            icon: overrides.icon.as_deref(),
            navigate: overrides.navigate.as_deref(),
            data: None,
        };
        if let Some(url) = shown.navigate {
            check_url(url, "webpush.notification.navigate")?;
        }
        if let Some(url) = shown.icon {
            check_url(url, "webpush.notification.icon")?;
        }
        let payload = if self.declarative {
            if shown.title.is_none() || shown.navigate.is_none() {
                return Err(PayloadError::invalid(
                    PROVIDER,
                    "a declarative Web Push needs a title and webpush.notification.navigate",
                ));
            }
            shown.data = Some(HeraldData {
                id: common.push_id,
                data: common.data,
            });
            serde_json::to_string(&Declarative {
                web_push: 8030,
                notification: shown,
                app_badge: common.badge,
            })
        } else {
            let empty = shown.title.is_none()
                && shown.body.is_none()
                && shown.icon.is_none()
                && shown.navigate.is_none();
            serde_json::to_string(&ForServiceWorker {
                id: common.push_id,
                notification: (!empty).then_some(shown),
                data: common.data,
                app_badge: common.badge,
            })
        }
        .map_err(|e| PayloadError::invalid(PROVIDER, e.to_string()))?;
        if payload.len() > WEBPUSH_MAX_PLAINTEXT {
            return Err(PayloadError {
                provider: PROVIDER,
                message: format!(
                    "the payload is {} bytes, over the limit of {WEBPUSH_MAX_PLAINTEXT} \
                     ({WEBPUSH_MAX_ENCRYPTED} once encrypted)",
                    payload.len()
                ),
                too_large: true,
            });
        }

        let ttl_secs = match self.ttl {
            Some(secs) => secs,
            None if common.expires_ms <= 0 => 0,
            None => ((common.expires_ms - now_ms + 999) / 1000).max(0) as u64,
        };
        let urgency = self.urgency.or(common.high_priority.map(|high| {
            if high {
                Urgency::High
            } else {
                Urgency::Low
            }
        }));
        let topic = match (&self.topic, common.collapse_key) {
            (Some(topic), _) if is_topic(topic) => Some(topic.clone()),
            (Some(topic), _) => {
                return Err(PayloadError::invalid(
                    PROVIDER,
                    format!("webpush.topic must be 1 to 32 base64url characters, not {topic:?}"),
                ))
            }
            (None, Some(key)) if is_topic(key) => Some(key.to_string()),
            (None, Some(key)) => Some(hashed_topic(key)),
            (None, None) => None,
        };
        Ok(WebPushNotification {
            ttl_secs,
            urgency: urgency.map(|u| u.as_str().to_string()),
            topic,
            payload,
        })
    }
}

fn check_url(url: &str, field: &str) -> Result<(), PayloadError> {
    let ok = url
        .parse::<http::Uri>()
        .is_ok_and(|u| matches!(u.scheme_str(), Some("https" | "http")) && u.host().is_some());
    if ok {
        Ok(())
    } else {
        Err(PayloadError::invalid(
            PROVIDER,
            format!("{field} must be an absolute http(s) URL, not {url:?}"),
        ))
    }
}

/// RFC 8030: a topic is at most 32 characters of the URL-safe base64 alphabet.
fn is_topic(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 32
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A valid topic standing for a collapse key that is not one (same key, same topic).
fn hashed_topic(key: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    let mut topic = URL_SAFE_NO_PAD.encode(digest.as_ref());
    topic.truncate(32);
    topic
}

#[cfg(test)]
#[path = "payload_tests.rs"]
mod tests;
