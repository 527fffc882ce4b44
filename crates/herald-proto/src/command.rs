//! Client commands: one JSON object per WebSocket text frame, `{"id": N, "<command>": {...}}`,
//! or several in one frame as a JSON array of such objects (a batch, [`batch`]).
//! `id` is optional (a reply echoes it); exactly one command key must be present. The server
//! parses them ([`ClientFrame::parse`]); a client serializes them (`serde_json::to_string` of a
//! [`ClientFrame`] writes `id` first, then the command, optional fields left out when unset; of
//! a slice of them, a batch).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};

use crate::error::{ErrorCode, HeraldError};
use serde_json::value::RawValue;

/// A parsed client frame.
#[derive(Debug)]
pub struct ClientFrame {
    /// Request id echoed in the reply; `None` when the client sent none.
    pub id: Option<u64>,
    /// The command.
    pub command: Command,
}

/// The commands a client may send.
#[derive(Debug)]
pub enum Command {
    /// Authenticate the connection with a client token.
    Connect(Connect),
    /// Subscribe to a channel, optionally resuming.
    Subscribe(Subscribe),
    /// Stop receiving a channel.
    Unsubscribe(Unsubscribe),
    /// Publish a message (when the token allows it).
    Publish(Publish),
    /// Read a channel's history.
    History(History),
    /// Acknowledge inbox messages up to a position (device tokens only).
    Ack(Ack),
    /// Liveness check; answered with `pong`.
    Ping,
}

/// `ack` command: everything in `channel` (`$app` or `$device`) up to `seq` was processed.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    /// `$app` or `$device`.
    pub channel: String,
    /// Last seq processed.
    pub seq: u64,
    /// Epoch of that seq, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
}

/// `connect` command.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Connect {
    /// Client JWT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// A resume position as a client sends it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Since {
    /// Last seq the client has seen.
    pub seq: u64,
    /// Epoch of that seq; omitted means "the channel's current epoch".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
}

/// `subscribe` command.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Subscribe {
    /// Channel name.
    pub channel: String,
    /// Resume after this position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Since>,
    /// Send the channel's last message first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<bool>,
    /// On a presence channel: send the member list, then each join and leave, as `presence`
    /// frames ([`crate::reply::PresenceFrame`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence: Option<bool>,
    /// On a presence channel: this member's data (a JSON object), used only when the token
    /// has no `user_info` claim. Supplied by the client, so not verified by anyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<Box<RawValue>>,
}

/// `unsubscribe` command.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Unsubscribe {
    /// Channel name.
    pub channel: String,
}

/// `publish` command.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Publish {
    /// Channel name.
    pub channel: String,
    /// Any JSON value.
    pub data: Box<RawValue>,
    /// Idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// `history` command.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct History {
    /// Channel name.
    pub channel: String,
    /// Return messages after this seq (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// At most this many (default 100, max 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// Command names, as they appear as keys.
pub const COMMANDS: &[&str] = &[
    "connect",
    "subscribe",
    "unsubscribe",
    "publish",
    "history",
    "ack",
    "ping",
];

impl Command {
    /// The command's key on the wire.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Connect(_) => "connect",
            Command::Subscribe(_) => "subscribe",
            Command::Unsubscribe(_) => "unsubscribe",
            Command::Publish(_) => "publish",
            Command::History(_) => "history",
            Command::Ack(_) => "ack",
            Command::Ping => "ping",
        }
    }
}

impl Serialize for ClientFrame {
    /// `{"id":N,"<command>":{...}}`, `id` left out when `None`; `ping` has the body `{}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        if let Some(id) = self.id {
            map.serialize_entry("id", &id)?;
        }
        let name = self.command.name();
        match &self.command {
            Command::Connect(c) => map.serialize_entry(name, c)?,
            Command::Subscribe(c) => map.serialize_entry(name, c)?,
            Command::Unsubscribe(c) => map.serialize_entry(name, c)?,
            Command::Publish(c) => map.serialize_entry(name, c)?,
            Command::History(c) => map.serialize_entry(name, c)?,
            Command::Ack(c) => map.serialize_entry(name, c)?,
            Command::Ping => map.serialize_entry(name, &serde_json::json!({}))?,
        }
        map.end()
    }
}

/// A parse failure, with the request id when it could be read.
#[derive(Debug)]
pub struct ParseError {
    /// The frame's `id`, if it had a valid one.
    pub id: Option<u64>,
    /// What was wrong.
    pub error: HeraldError,
}

impl ClientFrame {
    /// Parses one text frame. Never panics, whatever the input.
    ///
    /// The top level is read as keys over raw (unparsed) values, so only the command's own
    /// body is deserialised, once, straight into its type; no intermediate JSON tree is built.
    pub fn parse(text: &str) -> Result<ClientFrame, ParseError> {
        let fail = |id, code, msg: String| ParseError {
            id,
            error: HeraldError::new(code, msg),
        };
        let map: BTreeMap<Cow<'_, str>, &RawValue> = serde_json::from_str(text).map_err(|e| {
            fail(
                None,
                ErrorCode::BadRequest,
                format!("frame is not a JSON object: {e}"),
            )
        })?;
        let id = match map.get("id").map(|v| v.get()) {
            None | Some("null") => None,
            Some(v) => Some(v.parse::<u64>().map_err(|_| {
                fail(
                    None,
                    ErrorCode::BadRequest,
                    "\"id\" must be a non-negative integer".into(),
                )
            })?),
        };
        let mut commands = map.iter().filter(|(k, _)| k.as_ref() != "id");
        let Some((name, body)) = commands.next() else {
            return Err(fail(
                id,
                ErrorCode::BadRequest,
                format!(
                    "frame has no command; expected one of: {}",
                    COMMANDS.join(", ")
                ),
            ));
        };
        if let Some((other, _)) = commands.next() {
            return Err(fail(
                id,
                ErrorCode::BadRequest,
                format!("frame has more than one command ({name:?} and {other:?})"),
            ));
        }
        let command = parse_command(name, body).map_err(|error| ParseError { id, error })?;
        Ok(ClientFrame { id, command })
    }
}

/// The commands of a batch frame: a JSON array of command objects, each to be handled as if it
/// came in a text frame of its own, in order. `None` when `text` is not an array (a frame of one
/// command, for [`ClientFrame::parse`]); an error, without an id, when it is not a JSON array or
/// holds nothing. The elements are returned unparsed, so each one's error carries its own id.
pub fn batch(text: &str) -> Option<Result<Vec<&str>, HeraldError>> {
    if !text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('[')
    {
        return None;
    }
    Some(match serde_json::from_str::<Vec<&RawValue>>(text) {
        Ok(commands) if commands.is_empty() => Err(HeraldError::bad_request(
            "empty batch: a batch is a JSON array of one or more commands",
        )),
        Ok(commands) => Ok(commands.into_iter().map(RawValue::get).collect()),
        Err(e) => Err(HeraldError::bad_request(format!(
            "frame is not a JSON array of commands: {e}"
        ))),
    })
}

fn parse_command(name: &str, body: &RawValue) -> Result<Command, HeraldError> {
    fn args<'a, T: serde::Deserialize<'a>>(
        name: &str,
        body: &'a RawValue,
    ) -> Result<T, HeraldError> {
        crate::strict_json::from_str(body.get())
            .map_err(|e| HeraldError::bad_request(format!("invalid {name:?} command: {e}")))
    }
    Ok(match name {
        "connect" => Command::Connect(args(name, body)?),
        "subscribe" => Command::Subscribe(args(name, body)?),
        "unsubscribe" => Command::Unsubscribe(args(name, body)?),
        "history" => Command::History(args(name, body)?),
        "ack" => Command::Ack(args(name, body)?),
        "publish" => Command::Publish(args(name, body)?),
        "ping" => Command::Ping,
        other => {
            return Err(HeraldError::new(
                ErrorCode::UnknownCommand,
                format!(
                    "unknown command {:?}; expected one of: {}",
                    other.chars().take(64).collect::<String>(),
                    COMMANDS.join(", ")
                ),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_documented_shapes() {
        let f = ClientFrame::parse(r#"{"id":1,"connect":{"token":"t"}}"#).unwrap();
        assert_eq!(f.id, Some(1));
        assert!(matches!(f.command, Command::Connect(Connect { token: Some(ref t) }) if t == "t"));
        let f = ClientFrame::parse(
            r#"{"id":2,"subscribe":{"channel":"news","since":{"seq":41,"epoch":"ab"}}}"#,
        )
        .unwrap();
        match f.command {
            Command::Subscribe(s) => {
                assert_eq!(s.channel, "news");
                assert_eq!(
                    s.since,
                    Some(Since {
                        seq: 41,
                        epoch: Some("ab".into())
                    })
                );
            }
            other => panic!("{other:?}"),
        }
        let f = ClientFrame::parse(r#"{"publish":{"channel":"c","data":{"a":[1,2]}}}"#).unwrap();
        assert_eq!(f.id, None);
        match f.command {
            Command::Publish(p) => assert_eq!(p.data.get(), r#"{"a":[1,2]}"#),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            ClientFrame::parse(r#"{"ping":{}}"#).unwrap().command,
            Command::Ping
        ));
    }

    #[test]
    fn errors_are_specific() {
        let e = ClientFrame::parse("not json").unwrap_err();
        assert_eq!(e.error.code, ErrorCode::BadRequest);
        let e = ClientFrame::parse(r#"{"id":7,"fly":{}}"#).unwrap_err();
        assert_eq!((e.id, e.error.code), (Some(7), ErrorCode::UnknownCommand));
        let e = ClientFrame::parse(r#"{"id":8,"subscribe":{}}"#).unwrap_err();
        assert_eq!((e.id, e.error.code), (Some(8), ErrorCode::BadRequest));
        let e = ClientFrame::parse(r#"{"id":9,"ping":{},"connect":{}}"#).unwrap_err();
        assert_eq!(e.error.code, ErrorCode::BadRequest);
        let e = ClientFrame::parse(r#"{"id":-1,"ping":{}}"#).unwrap_err();
        assert_eq!(e.error.code, ErrorCode::BadRequest);
        let e =
            ClientFrame::parse(r#"{"id":3,"subscribe":{"channel":"a","bogus":1}}"#).unwrap_err();
        assert_eq!(e.error.code, ErrorCode::BadRequest);
    }

    #[test]
    fn arrays_in_place_of_objects_are_refused_saying_where() {
        for (frame, message) in [
            (
                r#"{"id":4,"subscribe":["news"]}"#,
                r#"invalid "subscribe" command: expected an object, not an array"#,
            ),
            (
                r#"{"id":4,"subscribe":{"channel":"news","since":[41,"ab"]}}"#,
                r#"invalid "subscribe" command: since: expected an object, not an array"#,
            ),
            (
                r#"{"id":4,"publish":["news",1]}"#,
                r#"invalid "publish" command: expected an object, not an array"#,
            ),
            (
                r#"{"id":4,"ack":["$app",3]}"#,
                r#"invalid "ack" command: expected an object, not an array"#,
            ),
        ] {
            let e = ClientFrame::parse(frame).unwrap_err();
            assert_eq!(
                (e.id, e.error.code),
                (Some(4), ErrorCode::BadRequest),
                "{frame}"
            );
            assert!(
                e.error.message.starts_with(message),
                "{frame}: {}",
                e.error.message
            );
        }
    }

    #[test]
    fn a_batch_is_its_commands_in_order_each_parsed_alone() {
        assert!(batch(r#"{"id":1,"ping":{}}"#).is_none(), "one command");
        assert!(batch("not json").is_none());
        let frames = batch(
            " \n[{\"id\":1,\"subscribe\":{\"channel\":\"a\"}},\n {\"id\":2,\"fly\":{}}, 7, {\"ping\":{}}]",
        )
        .unwrap()
        .unwrap();
        assert_eq!(frames.len(), 4);
        let first = ClientFrame::parse(frames[0]).unwrap();
        assert!(matches!(first.command, Command::Subscribe(ref s) if s.channel == "a"));
        assert_eq!(first.id, Some(1));
        let e = ClientFrame::parse(frames[1]).unwrap_err();
        assert_eq!((e.id, e.error.code), (Some(2), ErrorCode::UnknownCommand));
        let e = ClientFrame::parse(frames[2]).unwrap_err();
        assert_eq!((e.id, e.error.code), (None, ErrorCode::BadRequest));
        assert!(matches!(
            ClientFrame::parse(frames[3]).unwrap().command,
            Command::Ping
        ));
    }

    #[test]
    fn a_batch_that_is_no_array_of_values_or_is_empty_is_refused() {
        for text in ["[]", " [ ] ", "[{\"ping\":{}}", "[{\"ping\":{}}] x", "[1,]"] {
            let e = batch(text).unwrap().unwrap_err();
            assert_eq!(e.code, ErrorCode::BadRequest, "{text}");
        }
    }

    #[test]
    fn a_serialized_slice_of_frames_is_a_batch() {
        let frames = [
            ClientFrame {
                id: Some(1),
                command: Command::Subscribe(Subscribe {
                    channel: "news".into(),
                    ..Subscribe::default()
                }),
            },
            ClientFrame {
                id: None,
                command: Command::Ping,
            },
        ];
        let text = serde_json::to_string(&frames).unwrap();
        assert_eq!(
            text,
            r#"[{"id":1,"subscribe":{"channel":"news"}},{"ping":{}}]"#
        );
        assert_eq!(batch(&text).unwrap().unwrap().len(), 2);
    }

    proptest! {
        #[test]
        fn never_panics(s in ".{0,200}") {
            let _ = ClientFrame::parse(&s);
            if let Some(Ok(frames)) = batch(&s) {
                for f in frames {
                    let _ = ClientFrame::parse(f);
                }
            }
        }

        #[test]
        fn never_panics_on_json_like(s in r#"\{("id":[0-9-]{1,3},)?"[a-z]{1,12}":\{("channel":"[a-z/]{0,5}")?\}\}"#) {
            let _ = ClientFrame::parse(&s);
        }
    }
}
