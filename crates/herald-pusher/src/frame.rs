//! The client protocol's JSON frames both ways (Pusher Channels protocol 7): what a client
//! sends ([`ClientFrame::parse`]: `pusher:ping`, `pusher:pong`, `pusher:subscribe`,
//! `pusher:unsubscribe`, `pusher:signin`, `client-*` events) and what the server sends (the builders below:
//! `pusher:connection_established`, `pusher:error`, `pusher:ping`/`pusher:pong`,
//! `pusher_internal:subscription_succeeded`, `pusher:subscription_error`, `pusher:cache_miss`,
//! `pusher:signin_success`),
//! and Pusher's error
//! codes ([`codes`]).
//!
//! Every frame is one JSON object with an `event`; `data` is an object for the `pusher:*`
//! commands a client sends (a JSON string holding an object is accepted too, as Pusher accepts
//! it) and a JSON-encoded string in what the server sends, except `pusher:error`'s and
//! `pusher:subscription_error`'s, which are objects (as Pusher and pusher-js have them).
//! Parsing is strict about what it uses and ignores fields it does not know.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::resume::ResumeAsk;

/// Pusher's error and close codes (the protocol's "Error Codes"): 4000-4099 the client must
/// not reconnect, 4100-4199 reconnect after a while, 4200-4299 reconnect at once, 4300-4399
/// other errors.
pub mod codes {
    /// The app key is unknown.
    pub const APP_NOT_FOUND: u16 = 4001;
    /// The app is disabled (here: deleted while connected).
    pub const APP_DISABLED: u16 = 4003;
    /// The app is over its connection quota.
    pub const OVER_QUOTA: u16 = 4004;
    /// The request's path is not `/app/{key}`.
    pub const PATH_NOT_FOUND: u16 = 4005;
    /// The protocol version is not one this server speaks.
    pub const UNSUPPORTED_PROTOCOL: u16 = 4007;
    /// No protocol version was given.
    pub const NO_PROTOCOL: u16 = 4008;
    /// The connection is not authorised (its access was revoked).
    pub const UNAUTHORIZED: u16 = 4009;
    /// Over capacity: reconnect after a while (a slow consumer, the store unavailable).
    pub const OVER_CAPACITY: u16 = 4100;
    /// Reconnect at once (the server is going away).
    pub const RECONNECT: u16 = 4200;
    /// The server's ping got no answer in time.
    pub const PONG_NOT_RECEIVED: u16 = 4201;
    /// A client event over the connection's rate, or a connection that keeps sending over
    /// its command limit.
    pub const CLIENT_EVENT_RATE_LIMIT: u16 = 4301;
}

/// The protocol versions served (Pusher's current is 7; 5 and 6 differ from it in nothing
/// this server sends).
pub const PROTOCOLS: std::ops::RangeInclusive<u32> = 5..=7;

/// What a client sent, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientFrame {
    /// `pusher:ping`: answer `pusher:pong`.
    Ping,
    /// `pusher:pong`: the answer to the server's ping.
    Pong,
    /// `pusher:subscribe`.
    Subscribe {
        /// The Pusher channel name.
        channel: String,
        /// `key:signature` for a private or presence channel.
        auth: Option<String>,
        /// A presence channel's member data (JSON text).
        channel_data: Option<String>,
        /// Herald's exact-resume extension, when the client asks for it
        /// ([`crate::resume`]; Pusher's servers ignore these fields).
        resume: Option<ResumeAsk>,
    },
    /// `pusher:unsubscribe`.
    Unsubscribe {
        /// The Pusher channel name.
        channel: String,
    },
    /// A client event (`client-*`) on a channel.
    ClientEvent {
        /// The event name, `client-` and more.
        event: String,
        /// The channel it is sent on.
        channel: String,
        /// Its data: the string as sent, or the JSON text of any other value.
        data: String,
    },
    /// `pusher:signin`: a user's sign-in ([`crate::users`]).
    Signin {
        /// `key:signature` over `socket_id::user::user_data`.
        auth: String,
        /// The user's data, JSON text as signed.
        user_data: String,
    },
    /// Any other event name (unknown ones, or ones not served).
    Other {
        /// The event name.
        event: String,
    },
}

/// A frame that is not one: what was wrong, for `pusher:error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError(pub String);

impl ClientFrame {
    /// Parses one text frame.
    pub fn parse(text: &str) -> Result<ClientFrame, FrameError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| FrameError(format!("Invalid JSON: {e}")))?;
        let Value::Object(mut object) = value else {
            return Err(FrameError(
                "Invalid message: a frame is a JSON object".into(),
            ));
        };
        let event = match object.remove("event") {
            Some(Value::String(event)) => event,
            _ => return Err(FrameError("Invalid message: no event name".into())),
        };
        match event.as_str() {
            "pusher:ping" => Ok(ClientFrame::Ping),
            "pusher:pong" => Ok(ClientFrame::Pong),
            "pusher:subscribe" => {
                let data = command_data(&event, object.remove("data"))?;
                Ok(ClientFrame::Subscribe {
                    channel: channel_of(&event, &data)?,
                    auth: optional_string(&event, &data, "auth")?,
                    channel_data: optional_string(&event, &data, "channel_data")?,
                    resume: ResumeAsk::parse(&data)?,
                })
            }
            "pusher:signin" => {
                let data = command_data(&event, object.remove("data"))?;
                let required = |field: &str| {
                    optional_string(&event, &data, field)?.ok_or_else(|| {
                        FrameError(format!("Invalid {event}: data.{field} must be a string"))
                    })
                };
                Ok(ClientFrame::Signin {
                    auth: required("auth")?,
                    user_data: required("user_data")?,
                })
            }
            "pusher:unsubscribe" => {
                let data = command_data(&event, object.remove("data"))?;
                Ok(ClientFrame::Unsubscribe {
                    channel: channel_of(&event, &data)?,
                })
            }
            _ if event.starts_with("client-") => {
                let channel = match object.remove("channel") {
                    Some(Value::String(channel)) => channel,
                    _ => {
                        return Err(FrameError(format!(
                            "Invalid client event {event:?}: it names no channel"
                        )))
                    }
                };
                let data = match object.remove("data") {
                    Some(Value::String(data)) => data,
                    None | Some(Value::Null) => String::new(),
                    Some(other) => other.to_string(),
                };
                Ok(ClientFrame::ClientEvent {
                    event,
                    channel,
                    data,
                })
            }
            _ => Ok(ClientFrame::Other { event }),
        }
    }
}

/// A command's `data`: an object, or a string holding one.
fn command_data(event: &str, data: Option<Value>) -> Result<Map<String, Value>, FrameError> {
    let data = match data {
        Some(Value::String(text)) => serde_json::from_str(&text).ok(),
        other => other,
    };
    match data {
        Some(Value::Object(data)) => Ok(data),
        _ => Err(FrameError(format!(
            "Invalid {event}: data must be an object"
        ))),
    }
}

fn channel_of(event: &str, data: &Map<String, Value>) -> Result<String, FrameError> {
    match data.get("channel") {
        Some(Value::String(channel)) => Ok(channel.clone()),
        _ => Err(FrameError(format!(
            "Invalid {event}: data.channel must be a string"
        ))),
    }
}

fn optional_string(
    event: &str,
    data: &Map<String, Value>,
    field: &str,
) -> Result<Option<String>, FrameError> {
    match data.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(FrameError(format!(
            "Invalid {event}: data.{field} must be a string"
        ))),
    }
}

fn text(value: Value) -> Bytes {
    Bytes::from(value.to_string())
}

/// `pusher:connection_established`: the socket id and the activity timeout in seconds.
pub fn connection_established(socket_id: &str, activity_timeout_secs: u64) -> Bytes {
    let data = json!({ "socket_id": socket_id, "activity_timeout": activity_timeout_secs });
    text(json!({ "event": "pusher:connection_established", "data": data.to_string() }))
}

/// `pusher:error` with `code` (none for an error that is not one of Pusher's codes) and
/// `message`.
pub fn error(code: Option<u16>, message: &str) -> Bytes {
    text(json!({ "event": "pusher:error", "data": { "code": code, "message": message } }))
}

/// `pusher:ping`, the server's.
pub fn ping() -> Bytes {
    Bytes::from_static(br#"{"event":"pusher:ping","data":"{}"}"#)
}

/// `pusher:pong`, the answer to a client's ping.
pub fn pong() -> Bytes {
    Bytes::from_static(br#"{"event":"pusher:pong","data":"{}"}"#)
}

/// `pusher_internal:subscription_succeeded` for `channel`.
pub fn subscription_succeeded(channel: &str) -> Bytes {
    text(json!({
        "event": "pusher_internal:subscription_succeeded",
        "channel": channel,
        "data": "{}",
    }))
}

/// `pusher:signin_success` with the `user_data` the client signed in with (pusher-js parses it
/// and subscribes to the user's server-to-user channel).
pub fn signin_success(user_data: &str) -> Bytes {
    let data = json!({ "user_data": user_data });
    text(json!({ "event": "pusher:signin_success", "data": data.to_string() }))
}

/// `pusher:cache_miss` for `channel`: a cache channel has no event to send its new
/// subscriber (pusher-js hands it to the channel's `pusher:cache_miss` listeners).
pub fn cache_miss(channel: &str) -> Bytes {
    text(json!({ "event": "pusher:cache_miss", "channel": channel }))
}

/// Several server frames queued as one control frame: joined with `\n`, which no frame's
/// JSON holds (serde escapes it in strings), and written by the wire as one WebSocket frame
/// each.
pub fn several(frames: &[Bytes]) -> Bytes {
    Bytes::from(frames.join(&b'\n'))
}

/// `pusher:subscription_error` for `channel`: pusher-js hands `data` (`type`, `error`,
/// `status`, the shape of its own authorisation errors) to the channel's
/// `pusher:subscription_error` listeners.
pub fn subscription_error(channel: &str, kind: &str, status: u16, message: &str) -> Bytes {
    text(json!({
        "event": "pusher:subscription_error",
        "channel": channel,
        "data": { "type": kind, "error": message, "status": status },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ClientFrame, FrameError> {
        ClientFrame::parse(text)
    }

    #[test]
    fn pusher_js_frames_parse() {
        assert_eq!(
            parse(r#"{"event":"pusher:ping","data":{}}"#),
            Ok(ClientFrame::Ping)
        );
        assert_eq!(
            parse(r#"{"event":"pusher:pong","data":{}}"#),
            Ok(ClientFrame::Pong)
        );
        assert_eq!(
            parse(r#"{"event":"pusher:subscribe","data":{"auth":"k:s","channel":"private-a"}}"#),
            Ok(ClientFrame::Subscribe {
                channel: "private-a".into(),
                auth: Some("k:s".into()),
                channel_data: None,
                resume: None,
            })
        );
        // Data as a string holding the object, as some clients send it.
        assert_eq!(
            parse(r#"{"event":"pusher:unsubscribe","data":"{\"channel\":\"news\"}"}"#),
            Ok(ClientFrame::Unsubscribe {
                channel: "news".into()
            })
        );
        assert_eq!(
            parse(r#"{"event":"client-typing","channel":"private-a","data":{"who":1}}"#),
            Ok(ClientFrame::ClientEvent {
                event: "client-typing".into(),
                channel: "private-a".into(),
                data: r#"{"who":1}"#.into(),
            })
        );
        assert_eq!(
            parse(r#"{"event":"client-x","channel":"private-a","data":"as sent"}"#),
            Ok(ClientFrame::ClientEvent {
                event: "client-x".into(),
                channel: "private-a".into(),
                data: "as sent".into(),
            })
        );
        assert_eq!(
            parse(
                r#"{"event":"pusher:signin","data":{"auth":"k:s","user_data":"{\"id\":\"1\"}"}}"#
            ),
            Ok(ClientFrame::Signin {
                auth: "k:s".into(),
                user_data: r#"{"id":"1"}"#.into(),
            })
        );
        assert_eq!(
            parse(r#"{"event":"pusher:whatever","data":{}}"#),
            Ok(ClientFrame::Other {
                event: "pusher:whatever".into()
            })
        );
    }

    #[test]
    fn malformed_frames_say_what_is_wrong() {
        for (text, says) in [
            ("{", "Invalid JSON"),
            ("[1]", "a JSON object"),
            (r#"{"data":{}}"#, "no event name"),
            (r#"{"event":"pusher:subscribe"}"#, "data must be an object"),
            (
                r#"{"event":"pusher:subscribe","data":{"channel":1}}"#,
                "data.channel must be a string",
            ),
            (
                r#"{"event":"pusher:subscribe","data":{"channel":"a","auth":5}}"#,
                "data.auth must be a string",
            ),
            (r#"{"event":"client-x","data":{}}"#, "names no channel"),
            (
                r#"{"event":"pusher:signin","data":{"auth":"k:s"}}"#,
                "data.user_data must be a string",
            ),
        ] {
            let FrameError(message) = parse(text).unwrap_err();
            assert!(message.contains(says), "{text}: {message}");
        }
    }

    #[test]
    fn server_frames_are_pushers() {
        let established: Value =
            serde_json::from_slice(&connection_established("12.34", 120)).unwrap();
        assert_eq!(established["event"], "pusher:connection_established");
        let data: Value = serde_json::from_str(established["data"].as_str().unwrap()).unwrap();
        assert_eq!(data, json!({"socket_id": "12.34", "activity_timeout": 120}));
        let e: Value = serde_json::from_slice(&error(Some(4001), "no app")).unwrap();
        assert_eq!(
            e,
            json!({"event":"pusher:error","data":{"code":4001,"message":"no app"}})
        );
        let e: Value = serde_json::from_slice(&error(None, "x")).unwrap();
        assert!(e["data"]["code"].is_null());
        let ok: Value = serde_json::from_slice(&subscription_succeeded("news")).unwrap();
        assert_eq!(ok["channel"], "news");
        assert_eq!(ok["data"], "{}");
        for frame in [ping(), pong()] {
            let _: Value = serde_json::from_slice(&frame).unwrap();
        }
        let signed: Value = serde_json::from_slice(&signin_success(r#"{"id":"1"}"#)).unwrap();
        assert_eq!(signed["event"], "pusher:signin_success");
        let data: Value = serde_json::from_str(signed["data"].as_str().unwrap()).unwrap();
        assert_eq!(data, json!({"user_data": "{\"id\":\"1\"}"}));
        let miss: Value = serde_json::from_slice(&cache_miss("cache-a")).unwrap();
        assert_eq!(
            miss,
            json!({"event":"pusher:cache_miss","channel":"cache-a"})
        );
        let two = several(&[subscription_succeeded("cache-a"), cache_miss("cache-a")]);
        let parts: Vec<Value> = two
            .split(|b| *b == b'\n')
            .map(|part| serde_json::from_slice(part).unwrap())
            .collect();
        assert_eq!(parts[1], miss);
        assert_eq!(parts.len(), 2);
    }
}
