//! What Herald sends FCM for one push: the v1 `Message` (without its target), rendered from the
//! push's common fields and the options under `"fcm"` in a push body, with FCM's rules checked
//! before anything is queued (data values are strings, reserved data keys, 4 KB).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::common::{Common, PayloadError};

/// FCM's limit on a message's `notification` and `data` together, bytes.
pub const FCM_MAX_PAYLOAD: usize = 4096;

/// The longest TTL FCM takes: four weeks.
const MAX_TTL_SECS: i64 = 28 * 24 * 3600;

const PROVIDER: &str = "fcm";

/// One rendered FCM message: the v1 `Message` object without `token`, which the send adds,
/// and the TTL it carries (`android.ttl`), typed, so a sender that must shorten it
/// ([`FcmNotification::with_ttl_secs`]) reads nothing back out of the JSON. Stored as
/// `{"message": ...}`, the TTL inside it; read back through [`FcmNotification::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct FcmNotification {
    /// The v1 `Message` (`notification`, `data`, `android`), no target. Its `android.ttl` is
    /// [`FcmNotification::ttl_secs`] rendered: change it with [`FcmNotification::with_ttl_secs`].
    pub message: Value,
    /// The TTL rendered in `android.ttl`, seconds (`None`: the message has none this reads).
    ttl_secs: Option<u64>,
}

impl FcmNotification {
    /// A message made elsewhere (by hand, or read back from storage): its TTL is read from its
    /// `android.ttl` (`"SECONDSs"`) once, here.
    pub fn new(message: Value) -> Self {
        let ttl_secs = message["android"]["ttl"]
            .as_str()
            .and_then(|t| t.strip_suffix('s'))
            .and_then(|t| t.parse::<u64>().ok());
        FcmNotification { message, ttl_secs }
    }

    /// The TTL the message carries, seconds.
    pub fn ttl_secs(&self) -> Option<u64> {
        self.ttl_secs
    }

    /// The same message with a TTL of `secs`, rendered into `android.ttl` (a message with no
    /// `android` object is left as it is).
    pub fn with_ttl_secs(&self, secs: u64) -> FcmNotification {
        let mut shorter = self.clone();
        let android = shorter.message.get_mut("android");
        if let Some(android) = android.and_then(Value::as_object_mut) {
            android.insert("ttl".into(), ttl_value(secs));
            shorter.ttl_secs = Some(secs);
        }
        shorter
    }
}

/// The stored form: `{"message": ...}`, as it has always been.
#[derive(Serialize)]
struct StoredRef<'a> {
    message: &'a Value,
}

#[derive(Deserialize)]
struct Stored {
    message: Value,
}

impl Serialize for FcmNotification {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        StoredRef {
            message: &self.message,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for FcmNotification {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Stored::deserialize(d).map(|stored| FcmNotification::new(stored.message))
    }
}

/// FCM's form of a TTL: `"SECONDSs"`.
fn ttl_value(secs: impl std::fmt::Display) -> Value {
    json!(format!("{secs}s"))
}

/// The options under `"fcm"` in a push body; every field overrides what the push's common
/// fields give. Shaped like FCM's own message:
/// `{"notification": {"title", "body", "image"}, "android": {"priority": "high"|"normal",
/// "ttl": secs, "collapse_key", "channel_id", "sound", "tag", "click_action", "color", "icon"},
/// "data": {"key": "string", ...}}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FcmOptions {
    /// Overrides of the notification's title, body and image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification: Option<FcmNotificationOverrides>,
    /// Android delivery and display options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub android: Option<AndroidOptions>,
    /// Extra data keys, string values only (FCM's rule), added beside `herald_id` and `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<BTreeMap<String, String>>,
}

/// `fcm.notification`: what the notification shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FcmNotificationOverrides {
    /// Title instead of the push's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Body instead of the push's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// URL of an image to show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// `fcm.android`: Android delivery and display options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AndroidOptions {
    /// `high` wakes the device; `normal` may wait. Default: from the push's priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<AndroidPriority>,
    /// Seconds FCM keeps the message for an offline device. Default: until the push expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u64>,
    /// Messages with the same key replace each other. Default: the push's collapse key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collapse_key: Option<String>,
    /// The Android notification channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_id: Option<String>,
    /// Sound instead of the push's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sound: Option<String>,
    /// Notifications with the same tag replace each other in the drawer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The intent action a tap starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub click_action: Option<String>,
    /// Icon colour, `#rrggbb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// The drawable to show as the icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
}

/// Android message priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AndroidPriority {
    /// Delivered at once, waking the device.
    High,
    /// May be batched to save battery.
    Normal,
}

impl FcmOptions {
    /// Renders the push for FCM, or says why it cannot be sent there.
    pub fn render(&self, common: &Common) -> Result<FcmNotification, PayloadError> {
        self.render_at(common, crate::common::unix_millis())
    }

    pub(crate) fn render_at(
        &self,
        common: &Common,
        now_ms: i64,
    ) -> Result<FcmNotification, PayloadError> {
        let overrides = self.notification.clone().unwrap_or_default();
        let android = self.android.clone().unwrap_or_default();
        let mut message = Map::new();

        let mut notification = Map::new();
        put(
            &mut notification,
            "title",
            overrides.title.as_deref().or(common.title),
        );
        put(
            &mut notification,
            "body",
            overrides.body.as_deref().or(common.body),
        );
        put(&mut notification, "image", overrides.image.as_deref());
        let notification = Value::Object(notification);

        let data = Value::Object(self.data_map(common)?);

        let size = byte_len(&notification) + byte_len(&data);
        if size > FCM_MAX_PAYLOAD {
            return Err(PayloadError {
                provider: PROVIDER,
                message: format!(
                    "notification and data are {size} bytes, over FCM's limit of {FCM_MAX_PAYLOAD}"
                ),
                too_large: true,
            });
        }
        if notification.as_object().is_some_and(|n| !n.is_empty()) {
            message.insert("notification".into(), notification);
        }
        message.insert("data".into(), data);
        let ttl_secs = match android.ttl {
            Some(secs) => (secs as i64).min(MAX_TTL_SECS),
            None if common.expires_ms <= 0 => 0,
            None => ((common.expires_ms - now_ms + 999) / 1000).clamp(0, MAX_TTL_SECS),
        };
        message.insert(
            "android".into(),
            self.android_config(&android, common, ttl_secs)?,
        );
        Ok(FcmNotification {
            message: Value::Object(message),
            ttl_secs: u64::try_from(ttl_secs).ok(),
        })
    }

    fn data_map(&self, common: &Common) -> Result<Map<String, Value>, PayloadError> {
        let mut data = Map::new();
        data.insert(
            "herald_id".into(),
            Value::String(common.push_id.to_string()),
        );
        if let Some(raw) = common.data {
            data.insert("data".into(), Value::String(raw.get().to_string()));
        }
        for (key, value) in self.data.iter().flatten() {
            let lower = key.to_ascii_lowercase();
            let reserved = ["herald_id", "data", "from", "notification", "message_type"]
                .contains(&lower.as_str())
                || lower.starts_with("google")
                || lower.starts_with("gcm");
            if reserved || key.is_empty() {
                return Err(PayloadError::invalid(
                    PROVIDER,
                    format!("fcm.data may not use the reserved key {key:?}"),
                ));
            }
            data.insert(key.clone(), Value::String(value.clone()));
        }
        Ok(data)
    }

    fn android_config(
        &self,
        android: &AndroidOptions,
        common: &Common,
        ttl_secs: i64,
    ) -> Result<Value, PayloadError> {
        let mut config = Map::new();
        let priority = android.priority.or(common.high_priority.map(|high| {
            if high {
                AndroidPriority::High
            } else {
                AndroidPriority::Normal
            }
        }));
        if let Some(priority) = priority {
            let value = match priority {
                AndroidPriority::High => "HIGH",
                AndroidPriority::Normal => "NORMAL",
            };
            config.insert("priority".into(), json!(value));
        }
        config.insert("ttl".into(), ttl_value(ttl_secs));
        put(
            &mut config,
            "collapse_key",
            android.collapse_key.as_deref().or(common.collapse_key),
        );

        if let Some(color) = &android.color {
            let hex = color.strip_prefix('#').unwrap_or("");
            if hex.len() != 6 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(PayloadError::invalid(
                    PROVIDER,
                    format!("fcm.android.color must be #rrggbb, not {color:?}"),
                ));
            }
        }
        let mut display = Map::new();
        put(&mut display, "channel_id", android.channel_id.as_deref());
        put(
            &mut display,
            "sound",
            android.sound.as_deref().or(common.sound),
        );
        put(&mut display, "tag", android.tag.as_deref());
        put(
            &mut display,
            "click_action",
            android.click_action.as_deref(),
        );
        put(&mut display, "color", android.color.as_deref());
        put(&mut display, "icon", android.icon.as_deref());
        if let Some(badge) = common.badge {
            display.insert("notification_count".into(), json!(badge));
        }
        if !display.is_empty() {
            config.insert("notification".into(), Value::Object(display));
        }
        Ok(Value::Object(config))
    }
}

fn put(map: &mut Map<String, Value>, key: &str, value: Option<&str>) {
    if let Some(value) = value {
        map.insert(key.into(), Value::String(value.to_string()));
    }
}

fn byte_len(value: &Value) -> usize {
    serde_json::to_vec(value).map(|v| v.len()).unwrap_or(0)
}

#[cfg(test)]
#[path = "payload_tests.rs"]
mod tests;
