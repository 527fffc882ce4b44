//! A channel message as the event frame a Pusher subscriber is sent, encoded once per message
//! in a frame slot of its own (`pusher event`) and shared by every Pusher connection that
//! sends it.
//!
//! The event comes from the message's data (docs/design/pusher.md, "Events are messages"):
//!
//! - a `$pusher` envelope ([`crate::event`]) is its event: `{"event","channel","data"}` with
//!   the data string as the trigger sent it (and `user_id`, the sender of a presence
//!   channel's client event, when the envelope has one), and the socket the envelope names
//!   skipped
//!   (a trigger's `socket_id`, a client event's sender);
//! - an `$mqtt` envelope (an MQTT publish kept with its flags or properties, or a payload that
//!   is not JSON) is the event `message` with the payload as data: its `json` as JSON text,
//!   its `text`, or its `base64` decoded when that is UTF-8 (else the stored JSON as it is);
//! - any other data (a Herald publish, an MQTT JSON payload) is the event `message` with the
//!   data's JSON text as its data string.
//!
//! The slot holds the excluded socket id (one length byte, then its bytes, empty for none)
//! followed by the whole WebSocket text frame, so a connection checks the exclusion and copies
//! the frame without parsing anything. A message of a channel with no Pusher name (`/` or `:`
//! in it) encodes to nothing and is not sent.

use std::sync::LazyLock;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use herald_core::message::FrameSlot;
use herald_core::StoredMessage;
use herald_edge::ws::frame::{self, Opcode};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::channel_map::pusher_name;
use crate::event::PusherEvent;

/// Where a message keeps its Pusher event frame.
static SLOT: LazyLock<FrameSlot> = LazyLock::new(|| FrameSlot::reserve("pusher event"));

/// Reserves the frame slot (done when the first connection starts).
pub(crate) fn reserve_slot() {
    LazyLock::force(&SLOT);
}

/// A message as one connection sends it: the WebSocket frame, unless the message excludes
/// `socket_id` or has no Pusher event (`None`).
pub(crate) fn frame_for<'a>(message: &'a StoredMessage, socket_id: &str) -> Option<&'a [u8]> {
    let shared = message.frame_ref(*SLOT, encode);
    let (&len, rest) = shared.split_first()?;
    let (excluded, frame) = rest.split_at_checked(usize::from(len))?;
    (excluded != socket_id.as_bytes()).then_some(frame)
}

#[derive(Serialize)]
struct ChannelEvent<'a> {
    event: &'a str,
    channel: &'a str,
    data: &'a str,
    /// The sender of a presence channel's client event.
    #[serde(skip_serializing_if = "Option::is_none")]
    user_id: Option<&'a serde_json::Value>,
}

/// The slot's bytes for `message` (see the module docs); empty when it is not sent.
fn encode(message: &StoredMessage) -> Bytes {
    let Some(channel) = pusher_name(&message.channel) else {
        return Bytes::new();
    };
    let (event, data, excluded, user_id) = match PusherEvent::from_data(&message.data) {
        Some(e) => (e.event, e.data, e.socket_id.unwrap_or_default(), e.user_id),
        None => (
            "message".to_owned(),
            plain_data(&message.data),
            String::new(),
            None,
        ),
    };
    let Ok(excluded_len) = u8::try_from(excluded.len()) else {
        return Bytes::new();
    };
    let json = serde_json::to_vec(&ChannelEvent {
        event: &event,
        channel: &channel,
        data: &data,
        user_id: user_id.as_ref(),
    })
    .expect("strings always serialize");
    let mut out = Vec::with_capacity(1 + excluded.len() + frame::encoded_len(json.len()));
    out.push(excluded_len);
    out.extend_from_slice(excluded.as_bytes());
    frame::encode(&mut out, Opcode::Text, &json);
    Bytes::from(out)
}

/// The data string of a message that is no Pusher event: an MQTT envelope's payload, else
/// the data's JSON text.
fn plain_data(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    mqtt_payload(&text).unwrap_or_else(|| text.trim().to_owned())
}

/// The payload of an `$mqtt` envelope, as text, if `text` is one whose payload is text.
fn mqtt_payload(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(rename = "$mqtt", borrow)]
        mqtt: std::collections::HashMap<String, &'a RawValue>,
    }
    let envelope: Envelope = serde_json::from_str(text).ok()?;
    let field = |name: &str| envelope.mqtt.get(name).map(|raw| raw.get());
    if let Some(json) = field("json") {
        return Some(json.to_owned());
    }
    if let Some(Value::String(text)) = field("text").and_then(|t| serde_json::from_str(t).ok()) {
        return Some(text);
    }
    let Value::String(encoded) = serde_json::from_str(field("base64")?).ok()? else {
        return None;
    };
    String::from_utf8(BASE64.decode(encoded).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::{ChannelName, Epoch};

    fn message(channel: &str, data: &str) -> StoredMessage {
        StoredMessage::new(
            ChannelName::parse(channel).unwrap(),
            Epoch::new("e"),
            1,
            None,
            0,
            Bytes::copy_from_slice(data.as_bytes()),
        )
    }

    /// The JSON of the frame `socket` is sent, if any.
    fn sent(m: &StoredMessage, socket: &str) -> Option<Value> {
        let frame = frame_for(m, socket)?;
        // A server frame of under 126 bytes: two header bytes.
        assert!(frame.len() < 128);
        Some(serde_json::from_slice(&frame[2..]).unwrap())
    }

    #[test]
    fn an_envelope_is_its_event_and_skips_its_socket() {
        let data = r#"{"$pusher":{"event":"order","data":"{\"id\":1}","socket_id":"1.2"}}"#;
        let m = message("private-shop", data);
        assert_eq!(
            sent(&m, "3.4").unwrap(),
            serde_json::json!({"event":"order","channel":"private-shop","data":"{\"id\":1}"})
        );
        assert_eq!(sent(&m, "1.2"), None);
    }

    #[test]
    fn a_presence_client_event_names_its_sender() {
        let data = r#"{"$pusher":{"event":"client-x","data":"1","socket_id":"1.2","user_id":"7"}}"#;
        let m = message("presence-room", data);
        assert_eq!(
            sent(&m, "3.4").unwrap(),
            serde_json::json!({"event":"client-x","channel":"presence-room","data":"1","user_id":"7"})
        );
    }

    #[test]
    fn other_data_is_the_message_event() {
        let m = message("news", r#"{"t":21.5}"#);
        assert_eq!(
            sent(&m, "1.2").unwrap(),
            serde_json::json!({"event":"message","channel":"news","data":"{\"t\":21.5}"})
        );
        for (data, payload) in [
            (r#"{"$mqtt":{"text":"ON","retain":true}}"#, "ON"),
            (r#"{"$mqtt":{"json":{"a":[1, 2]}}}"#, r#"{"a":[1, 2]}"#),
            (r#"{"$mqtt":{"base64":"aGk="}}"#, "hi"),
        ] {
            let m = message("sensors", data);
            assert_eq!(sent(&m, "1.2").unwrap()["data"], payload, "{data}");
        }
        // Bytes that are not text stay the stored JSON.
        let m = message("sensors", r#"{"$mqtt":{"base64":"/w=="}}"#);
        assert_eq!(
            sent(&m, "1.2").unwrap()["data"],
            r#"{"$mqtt":{"base64":"/w=="}}"#
        );
    }

    #[test]
    fn a_channel_pusher_cannot_name_is_not_sent() {
        let m = message("chat/room", "1");
        assert_eq!(sent(&m, "1.2"), None);
    }

    #[test]
    fn another_apps_channel_is_named_without_its_scope() {
        let shop = herald_core::tenant::AppId::parse("shop").unwrap();
        let channel = crate::channel_map::app_channel(&shop, "private-a,b").unwrap();
        let m = StoredMessage::new(channel, Epoch::new("e"), 1, None, 0, Bytes::from("1"));
        assert_eq!(sent(&m, "1.2").unwrap()["channel"], "private-a,b");
    }

    #[test]
    fn a_topic_encoded_channel_has_its_pusher_name() {
        let m = message("=a=2Cb", "1");
        assert_eq!(sent(&m, "1.2").unwrap()["channel"], "a,b");
    }
}
