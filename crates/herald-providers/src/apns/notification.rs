//! A rendered APNs notification (everything a request carries but the device token) and the
//! push types APNs knows, with the topic suffix each one needs.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// `apns-push-type` values. An unknown value is a deserialize error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PushType {
    /// A visible notification: alert, sound or badge.
    #[default]
    Alert,
    /// Wakes the app to fetch content, shows nothing (`content-available`).
    Background,
    /// A VoIP call (PushKit), topic `<bundle>.voip`.
    Voip,
    /// An update to a Live Activity, topic `<bundle>.push-type.liveactivity`.
    LiveActivity,
    /// A watchOS complication update, topic `<bundle>.complication`.
    Complication,
    /// A File Provider change, topic `<bundle>.pushkit.fileprovider`.
    FileProvider,
    /// A Push to Talk update, topic `<bundle>.voip-ptt`.
    PushToTalk,
    /// A location query, topic `<bundle>.location-query`.
    Location,
    /// A widget reload, topic `<bundle>.push-type.widgets`.
    Widgets,
    /// A device-management wake-up; the topic is the MDM certificate's topic.
    Mdm,
}

impl PushType {
    /// The `apns-push-type` header value.
    pub fn as_str(self) -> &'static str {
        match self {
            PushType::Alert => "alert",
            PushType::Background => "background",
            PushType::Voip => "voip",
            PushType::LiveActivity => "liveactivity",
            PushType::Complication => "complication",
            PushType::FileProvider => "fileprovider",
            PushType::PushToTalk => "pushtotalk",
            PushType::Location => "location",
            PushType::Widgets => "widgets",
            PushType::Mdm => "mdm",
        }
    }

    /// The push type named `value` in `apns-push-type`.
    pub fn parse(value: &str) -> Option<PushType> {
        serde_json::from_value(serde_json::Value::String(value.to_string())).ok()
    }

    /// What APNs requires after the bundle id in `apns-topic` for this push type.
    pub fn topic_suffix(self) -> &'static str {
        match self {
            PushType::Voip => ".voip",
            PushType::LiveActivity => ".push-type.liveactivity",
            PushType::Complication => ".complication",
            PushType::FileProvider => ".pushkit.fileprovider",
            PushType::PushToTalk => ".voip-ptt",
            PushType::Location => ".location-query",
            PushType::Widgets => ".push-type.widgets",
            PushType::Alert | PushType::Background | PushType::Mdm => "",
        }
    }

    /// The largest payload APNs takes for this push type, bytes.
    pub fn max_payload(self) -> usize {
        match self {
            PushType::Voip => 5120,
            _ => 4096,
        }
    }
}

/// A rendered notification: everything but the device token. The lead stores it once per push
/// as JSON and sends it to many devices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApnsNotification {
    /// `apns-push-type`.
    pub push_type: PushType,
    /// `apns-priority`: 10 (now), 5 (power-considerate), 1 (lowest); `None`: APNs' default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// `apns-expiration`, Unix seconds; 0: deliver once or never. `None`: APNs' default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration: Option<i64>,
    /// `apns-collapse-id` (at most 64 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collapse_id: Option<String>,
    /// The JSON body (with its `aps` dictionary), UTF-8. `Bytes`, so that sending it to many
    /// devices shares one buffer; serialized as a JSON string, as when it was a `String`.
    #[serde(with = "payload_text")]
    pub payload: Bytes,
}

/// The payload as a JSON string in serialized notifications.
mod payload_text {
    use bytes::Bytes;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(payload: &Bytes, serializer: S) -> Result<S::Ok, S::Error> {
        let text = std::str::from_utf8(payload).map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Bytes, D::Error> {
        String::deserialize(deserializer).map(Bytes::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_types_round_trip_their_header_values() {
        for t in [
            PushType::Alert,
            PushType::Background,
            PushType::Voip,
            PushType::LiveActivity,
            PushType::Complication,
            PushType::FileProvider,
            PushType::PushToTalk,
            PushType::Location,
            PushType::Widgets,
            PushType::Mdm,
        ] {
            assert_eq!(PushType::parse(t.as_str()), Some(t));
        }
        assert_eq!(PushType::parse("sms"), None);
        assert!(serde_json::from_str::<PushType>("\"Alert\"").is_err());
    }

    #[test]
    fn the_payload_serializes_as_the_string_it_was() {
        let stored = r#"{"push_type":"alert","payload":"{\"aps\":{}}"}"#;
        let notification: ApnsNotification = serde_json::from_str(stored).unwrap();
        assert_eq!(&notification.payload[..], br#"{"aps":{}}"#);
        assert_eq!(serde_json::to_string(&notification).unwrap(), stored);
    }
}
