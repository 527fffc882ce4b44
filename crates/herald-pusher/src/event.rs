//! A Pusher event ↔ a Herald message's JSON data: the `$pusher` envelope
//! (docs/design/pusher.md, "Events are messages").
//!
//! A trigger's event is stored as `{"$pusher":{"event":"<name>","data":"<the data string as
//! sent>"}}`, with `"socket_id"` when the trigger excludes a socket (and, later, `"user_id"` on
//! a presence channel's client event). Herald's own subscribers see that JSON as the message's
//! data; Pusher subscribers are sent the event it describes.

use serde::{Deserialize, Serialize};

/// The longest event name, in characters (Pusher's documented limit).
pub const MAX_EVENT_NAME_LEN: usize = 200;

/// One Pusher event as a message carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PusherEvent {
    /// The event's name (`my-event`, `client-typing`).
    pub event: String,
    /// Its data, the string the publisher sent (usually JSON text, kept as it is).
    pub data: String,
    /// The socket the event is not sent to (a trigger's `socket_id`; a client event's sender).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_id: Option<String>,
    /// The sender's user id on a presence channel's client event, as the JSON it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    #[serde(rename = "$pusher")]
    pusher: T,
}

impl PusherEvent {
    /// The message data that carries this event: the `$pusher` envelope as JSON text.
    pub fn to_data(&self) -> String {
        serde_json::to_string(&Envelope { pusher: self })
            .expect("an event of strings always serializes")
    }

    /// The event a message's data carries, if it is a `$pusher` envelope.
    pub fn from_data(data: &[u8]) -> Option<PusherEvent> {
        serde_json::from_slice::<Envelope<PusherEvent>>(data)
            .ok()
            .map(|e| e.pusher)
    }
}

/// Checks an event name: 1 to [`MAX_EVENT_NAME_LEN`] characters. The error is the answer's
/// text.
pub fn check_event_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Invalid event name: it is empty".into());
    }
    let len = name.chars().count();
    if len > MAX_EVENT_NAME_LEN {
        return Err(format!(
            "Event name too long: {len} characters; the limit is {MAX_EVENT_NAME_LEN}"
        ));
    }
    Ok(())
}

/// Checks a socket id: Pusher's form, two numbers joined by a dot (`123.456`).
pub fn check_socket_id(socket_id: &str) -> Result<(), String> {
    let valid = socket_id.split_once('.').is_some_and(|(a, b)| {
        let digits =
            |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
        digits(a) && digits(b)
    });
    if valid {
        Ok(())
    } else {
        Err(format!(
            "Invalid socket id {socket_id:?}: a socket id is two numbers joined by a dot (123.456)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_keeps_the_data_string_as_sent() {
        let event = PusherEvent {
            event: "my-event".into(),
            data: r#"{"message":"hi"}"#.into(),
            socket_id: Some("123.456".into()),
            user_id: None,
        };
        let data = event.to_data();
        assert_eq!(
            data,
            r#"{"$pusher":{"event":"my-event","data":"{\"message\":\"hi\"}","socket_id":"123.456"}}"#
        );
        assert_eq!(PusherEvent::from_data(data.as_bytes()), Some(event));
        let plain = PusherEvent {
            event: "e".into(),
            data: "text".into(),
            socket_id: None,
            user_id: None,
        };
        assert_eq!(
            plain.to_data(),
            r#"{"$pusher":{"event":"e","data":"text"}}"#
        );
        assert_eq!(PusherEvent::from_data(br#"{"data":1}"#), None);
    }

    #[test]
    fn names_and_socket_ids_are_checked() {
        assert!(check_event_name("e").is_ok());
        assert!(check_event_name(&"e".repeat(200)).is_ok());
        assert!(check_event_name(&"e".repeat(201))
            .unwrap_err()
            .contains("201"));
        assert!(check_event_name("").is_err());
        assert!(check_socket_id("123.456").is_ok());
        for bad in ["123", "a.1", "1.", ".1", "1.2.3", "1.2 "] {
            assert!(check_socket_id(bad).is_err(), "{bad}");
        }
    }
}
