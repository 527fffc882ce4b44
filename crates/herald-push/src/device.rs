//! Devices: an installation of an app that Herald delivers to, how a registration is validated,
//! and the inbox cursor that records what the device has acknowledged.
//!
//! A device's inbox is two logs read from its cursor: the app's broadcast log (kept where the
//! push's audience admits the device) and the device's own log (see [`crate::logs`]).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use herald_core::device_id::{check_device_id, MAX_DEVICE_ID_LEN};
use herald_core::error::{ErrorCode, HeraldError};
use herald_core::message::Cursor;

use crate::tags::validate_tag;

/// Longest user id, in bytes.
pub const MAX_USER_LEN: usize = 256;
/// Most tags one device may hold.
pub const MAX_TAGS: usize = 100;

/// How a device is reached when it holds no live connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// Live connections only (WebSocket, SSE, long-poll).
    Herald,
    /// Apple Push Notification service.
    Apns,
    /// Firebase Cloud Messaging.
    Fcm,
    /// Web Push (RFC 8030) with a browser push subscription.
    Webpush,
}

impl Platform {
    /// The platform's name as the API and the store spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Herald => "herald",
            Platform::Apns => "apns",
            Platform::Fcm => "fcm",
            Platform::Webpush => "webpush",
        }
    }

    /// Parses a stored or given platform name.
    pub fn parse(s: &str) -> Result<Self, HeraldError> {
        match s {
            "herald" => Ok(Platform::Herald),
            "apns" => Ok(Platform::Apns),
            "fcm" => Ok(Platform::Fcm),
            "webpush" => Ok(Platform::Webpush),
            other => Err(HeraldError::new(
                ErrorCode::DeviceInvalid,
                format!("unknown platform {other:?}: use herald, apns, fcm or webpush"),
            )),
        }
    }
}

/// The keys of a Web Push subscription (base64url, as the browser's `PushSubscription` gives).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebPushKeys {
    /// The client's P-256 public key (65 bytes).
    pub p256dh: String,
    /// The authentication secret (16 bytes).
    pub auth: String,
}

/// A device as registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// Unique within the app.
    pub id: String,
    /// How it is reached when offline.
    pub platform: Platform,
    /// Provider token (APNs device token, FCM registration token, Web Push endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Web Push subscription keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<WebPushKeys>,
    /// The user it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Tags, sorted and distinct.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Locale such as `en-GB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
    /// Whether pushes are delivered to it.
    pub active: bool,
    /// Why it is inactive, when a provider said its token is gone (`apns: Unregistered`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inactive_reason: Option<String>,
    /// Registration time, milliseconds since the Unix epoch.
    pub created: i64,
    /// Last change, milliseconds since the Unix epoch.
    pub updated: i64,
}

/// What a device has acknowledged: a position in the app's broadcast log and in its own log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxCursor {
    /// Position in the app's broadcast log.
    pub app: Cursor,
    /// Position in the device's own log.
    pub device: Cursor,
}

impl InboxCursor {
    /// `EPOCH:SEQ,EPOCH:SEQ` (app log first), the form the store keeps.
    pub fn encode(&self) -> String {
        herald_proto::cursor::encode_inbox(&self.app, &self.device)
    }

    /// Parses [`InboxCursor::encode`]'s form; anything else reads as "nothing acknowledged".
    pub fn decode(s: &str) -> Self {
        let (app, device) = herald_proto::cursor::decode_inbox(s);
        InboxCursor { app, device }
    }
}

/// A registration (`POST /v1/devices`): creates the device or updates it in place.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    /// Device id; derived from the platform and token when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Platform.
    pub platform: Platform,
    /// Provider token (for `webpush`, the subscription endpoint URL).
    #[serde(default)]
    pub token: Option<String>,
    /// Web Push subscription keys.
    #[serde(default)]
    pub keys: Option<WebPushKeys>,
    /// User id.
    #[serde(default)]
    pub user: Option<String>,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Locale.
    #[serde(default)]
    pub locale: Option<String>,
    /// Active unless `false`.
    #[serde(default)]
    pub active: Option<bool>,
}

/// A device to store, and whether to set its `active` flag: a registration that does not say
/// leaves an existing device as active or inactive as it was (activation is explicit).
#[derive(Debug, Clone)]
pub struct DeviceWrite {
    /// The device.
    pub device: Device,
    /// Whether `device.active` is to be stored for an existing device.
    pub set_active: bool,
}

impl Registration {
    /// [`Registration::validate`], remembering whether `active` was given.
    pub fn into_write(self) -> Result<DeviceWrite, HeraldError> {
        let set_active = self.active.is_some();
        Ok(DeviceWrite {
            device: self.validate()?,
            set_active,
        })
    }

    /// Checks every field and returns the device it describes (times are set by the store).
    pub fn validate(mut self) -> Result<Device, HeraldError> {
        check_token(self.platform, self.token.as_deref(), self.keys.as_ref())?;
        let id = match self.id.take() {
            Some(id) => {
                check_device_id(&id)?;
                id
            }
            None => match &self.token {
                Some(token) => derived_id(self.platform, token),
                None => {
                    return Err(invalid(
                        "a herald device needs an \"id\" (an installation id the app keeps)",
                    ))
                }
            },
        };
        if let Some(user) = &self.user {
            check_user(user)?;
        }
        if let Some(locale) = &self.locale {
            check_locale(locale)?;
        }
        let tags = normalize_tags(self.tags)?;
        Ok(Device {
            id,
            platform: self.platform,
            token: self.token,
            keys: self.keys,
            user: self.user,
            tags,
            locale: self.locale,
            active: self.active.unwrap_or(true),
            inactive_reason: None,
            created: 0,
            updated: 0,
        })
    }
}

/// A partial update (`PATCH /v1/devices/{id}`); absent fields are left as they are.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DevicePatch {
    /// New user (`null` removes it).
    #[serde(default, deserialize_with = "herald_proto::strict_json::nullable")]
    pub user: Option<Option<String>>,
    /// Replaces every tag.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// Tags to add.
    #[serde(default)]
    pub add_tags: Vec<String>,
    /// Tags to remove.
    #[serde(default)]
    pub remove_tags: Vec<String>,
    /// New locale (`null` removes it).
    #[serde(default, deserialize_with = "herald_proto::strict_json::nullable")]
    pub locale: Option<Option<String>>,
    /// Activate or deactivate.
    #[serde(default)]
    pub active: Option<bool>,
}

impl DevicePatch {
    /// Applies the patch to `device`, validating what it sets.
    pub fn apply(self, device: &mut Device) -> Result<(), HeraldError> {
        if let Some(user) = self.user {
            if let Some(u) = &user {
                check_user(u)?;
            }
            device.user = user;
        }
        if let Some(locale) = self.locale {
            if let Some(l) = &locale {
                check_locale(l)?;
            }
            device.locale = locale;
        }
        let mut tags = self.tags.unwrap_or_else(|| device.tags.clone());
        tags.extend(self.add_tags);
        for t in &self.remove_tags {
            validate_tag(t)?;
        }
        tags.retain(|t| !self.remove_tags.contains(t));
        device.tags = normalize_tags(tags)?;
        if let Some(active) = self.active {
            device.active = active;
        }
        Ok(())
    }
}

fn invalid(msg: impl Into<String>) -> HeraldError {
    HeraldError::new(ErrorCode::DeviceInvalid, msg)
}

fn check_user(user: &str) -> Result<(), HeraldError> {
    if user.is_empty() || user.len() > MAX_USER_LEN || user.chars().any(char::is_control) {
        return Err(invalid(format!(
            "a user id must be 1 to {MAX_USER_LEN} bytes without control characters"
        )));
    }
    Ok(())
}

fn check_locale(locale: &str) -> Result<(), HeraldError> {
    let ok = !locale.is_empty()
        && locale.len() <= 35
        && locale
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "invalid locale {:?}: expected a language tag such as en-GB",
            locale.chars().take(40).collect::<String>()
        )))
    }
}

/// Sorts, dedupes and validates tags.
pub fn normalize_tags(mut tags: Vec<String>) -> Result<Vec<String>, HeraldError> {
    for t in &tags {
        validate_tag(t)?;
    }
    tags.sort_unstable();
    tags.dedup();
    if tags.len() > MAX_TAGS {
        return Err(HeraldError::new(
            ErrorCode::TagInvalid,
            format!("a device may hold at most {MAX_TAGS} tags"),
        ));
    }
    Ok(tags)
}

/// The id of a device registered without one: a digest of its platform and token, so the same
/// registration repeated finds the same device.
pub fn derived_id(platform: Platform, token: &str) -> String {
    let digest = Sha256::digest(format!("{}:{token}", platform.as_str()).as_bytes());
    hex::encode(&digest[..16])
}

fn is_base64url(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'='))
}

/// Checks the provider token (and Web Push keys) against the platform's format.
fn check_token(
    platform: Platform,
    token: Option<&str>,
    keys: Option<&WebPushKeys>,
) -> Result<(), HeraldError> {
    if keys.is_some() && platform != Platform::Webpush {
        return Err(invalid("\"keys\" is only for webpush devices"));
    }
    match (platform, token) {
        (Platform::Herald, None) => Ok(()),
        (Platform::Herald, Some(_)) => Err(invalid(
            "a herald device has no provider token; give it an \"id\" instead",
        )),
        (_, None) => Err(invalid(format!(
            "a {} device needs its provider \"token\"",
            platform.as_str()
        ))),
        (Platform::Apns, Some(t)) => {
            let ok = (64..=200).contains(&t.len())
                && t.len() % 2 == 0
                && t.bytes().all(|b| b.is_ascii_hexdigit());
            if ok {
                Ok(())
            } else {
                Err(invalid(
                    "an APNs device token is 64 to 200 hexadecimal digits (an even count)",
                ))
            }
        }
        (Platform::Fcm, Some(t)) => {
            let ok = (20..=4096).contains(&t.len())
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':'));
            if ok {
                Ok(())
            } else {
                Err(invalid(
                    "an FCM registration token is 20 to 4096 of A-Z a-z 0-9 _ - :",
                ))
            }
        }
        (Platform::Webpush, Some(t)) => {
            let host_ok = t
                .strip_prefix("https://")
                .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'));
            // A subscription's endpoint is a serialized URL: visible ASCII only (anything else
            // is percent-encoded), so its length in bytes is its length in characters.
            if !host_ok || t.len() > 2048 || !t.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(invalid(
                    "a webpush token is the subscription's https:// endpoint URL (at most 2048 \
                     visible ASCII characters)",
                ));
            }
            let Some(k) = keys else {
                return Err(invalid(
                    "a webpush device needs \"keys\": {\"p256dh\": ..., \"auth\": ...}",
                ));
            };
            // 65 bytes and 16 bytes in unpadded base64url are 87 and 22 characters.
            let p256 = k.p256dh.trim_end_matches('=');
            let auth = k.auth.trim_end_matches('=');
            if p256.len() != 87 || !is_base64url(p256) {
                return Err(invalid(
                    "keys.p256dh must be a base64url P-256 public key (65 bytes)",
                ));
            }
            if auth.len() != 22 || !is_base64url(auth) {
                return Err(invalid("keys.auth must be a base64url 16-byte secret"));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::message::Epoch;

    fn reg(json: &str) -> Result<Device, HeraldError> {
        serde_json::from_str::<Registration>(json)
            .map_err(|e| HeraldError::bad_request(e.to_string()))?
            .validate()
    }

    #[test]
    fn registrations_validate_per_platform() {
        let apns = format!(
            "{{\"platform\":\"apns\",\"token\":\"{}\"}}",
            "ab".repeat(32)
        );
        let d = reg(&apns).unwrap();
        assert_eq!(d.id, reg(&apns).unwrap().id, "derived ids are stable");
        assert!(d.active);
        let e = reg(r#"{"platform":"apns","token":"xyz"}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::DeviceInvalid);
        assert!(e.message.contains("hexadecimal"), "{}", e.message);
        assert!(reg(r#"{"platform":"herald"}"#).is_err());
        let d = reg(r#"{"platform":"herald","id":"phone-1","tags":["b","a","b"]}"#).unwrap();
        assert_eq!(d.tags, vec!["a", "b"]);
        assert!(reg(r#"{"platform":"fcm","token":"short"}"#).is_err());
        assert!(reg(&format!(
            "{{\"platform\":\"fcm\",\"token\":\"{}:APA91b\"}}",
            "x".repeat(30)
        ))
        .is_ok());
        let p = "B".repeat(87);
        let good = format!(
            "{{\"platform\":\"webpush\",\"token\":\"https://push.example/x\",\"keys\":{{\"p256dh\":\"{p}\",\"auth\":\"{}\"}}}}",
            "a".repeat(22)
        );
        assert!(reg(&good).is_ok());
        let unicode = good.replace("https://push.example/x", "https://push.example/caf\u{e9}");
        let e = reg(&unicode).unwrap_err();
        assert!(e.message.contains("visible ASCII"), "{}", e.message);
        assert!(reg(r#"{"platform":"webpush","token":"https://push.example/x"}"#).is_err());
        assert!(
            reg(r#"{"platform":"webpush","token":"http://x","keys":{"p256dh":"","auth":""}}"#)
                .is_err()
        );
        assert!(reg(r#"{"platform":"herald","id":"bad id"}"#).is_err());
        assert!(reg(r#"{"platform":"herald","id":"x","tags":["no spaces"]}"#).is_err());
    }

    #[test]
    fn patch_edits_tags_and_user() {
        let mut d = reg(r#"{"platform":"herald","id":"p","user":"u1","tags":["a","b"]}"#).unwrap();
        let p: DevicePatch =
            serde_json::from_str(r#"{"user":null,"add_tags":["c"],"remove_tags":["a"]}"#).unwrap();
        p.apply(&mut d).unwrap();
        assert_eq!(d.user, None);
        assert_eq!(d.tags, vec!["b", "c"]);
        let p: DevicePatch = serde_json::from_str(r#"{"active":false}"#).unwrap();
        p.apply(&mut d).unwrap();
        assert!(!d.active);
        assert_eq!(d.tags, vec!["b", "c"]);
    }

    #[test]
    fn inbox_cursor_roundtrip() {
        let c = InboxCursor {
            app: Cursor {
                epoch: Epoch::new("ab12"),
                seq: 7,
            },
            device: Cursor {
                epoch: Epoch::new(""),
                seq: 0,
            },
        };
        assert_eq!(InboxCursor::decode(&c.encode()), c);
        assert_eq!(InboxCursor::decode(""), InboxCursor::default());
    }
}
