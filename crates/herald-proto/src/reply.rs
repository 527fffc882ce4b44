//! Typed server frames, for clients, tests and the golden vectors: every frame the server sends
//! over WebSocket (replies, `error`, `message`, `disconnect`), the SSE control events' bodies,
//! the long-poll answer and the history body, each as a serde type that serializes to exactly
//! the server's bytes and deserializes from them. The server's per-message fast paths are the
//! hand-written encoders in [`crate::frame`].

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::HeraldError;

/// The body of an `error` frame, an HTTP error and a `disconnect`: `{"code":"...","message":"..."}`.
/// A `disconnect` may carry codes that are not [`crate::ErrorCode`]s (`slow_consumer`,
/// `shutdown`), so the code is kept as its wire spelling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody<'a> {
    /// Stable code.
    #[serde(borrow)]
    pub code: Cow<'a, str>,
    /// Human message.
    #[serde(borrow)]
    pub message: Cow<'a, str>,
}

impl<'a> ErrorBody<'a> {
    /// A body from its two strings.
    pub fn new(code: &'a str, message: &'a str) -> Self {
        ErrorBody {
            code: Cow::Borrowed(code),
            message: Cow::Borrowed(message),
        }
    }
}

impl<'a> From<&'a HeraldError> for ErrorBody<'a> {
    fn from(e: &'a HeraldError) -> Self {
        ErrorBody::new(e.code.as_str(), &e.message)
    }
}

/// The body of a `subscribe` reply (WebSocket) and of the SSE `subscribed` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscribeReply<'a> {
    /// Channel subscribed.
    #[serde(borrow)]
    pub channel: Cow<'a, str>,
    /// Channel's newest seq when the subscription started.
    pub seq: u64,
    /// Channel's epoch.
    #[serde(borrow)]
    pub epoch: Cow<'a, str>,
    /// Whether the requested `since` was resumed exactly.
    pub recovered: bool,
}

/// The body of a `connect` reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectReply<'a> {
    /// The token's `sub` (empty for an anonymous connection).
    #[serde(borrow)]
    pub sub: Cow<'a, str>,
    /// The token's `exp`, left out when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    /// Subscriptions the new token no longer allows, left out when none.
    #[serde(default, borrow, skip_serializing_if = "Vec::is_empty")]
    pub unsubscribed: Vec<Cow<'a, str>>,
}

/// The body of an `unsubscribe` reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsubscribeReply<'a> {
    /// Channel unsubscribed.
    #[serde(borrow)]
    pub channel: Cow<'a, str>,
}

/// The body of a `publish` reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishReply<'a> {
    /// Channel published to.
    #[serde(borrow)]
    pub channel: Cow<'a, str>,
    /// True if the idempotency key was already stored and nothing was appended.
    pub duplicate: bool,
    /// The channel's epoch.
    #[serde(borrow)]
    pub epoch: Cow<'a, str>,
    /// The message id (the given key, or `<epoch>-<seq>`).
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    /// The message's seq.
    pub seq: u64,
    /// When it was stored, milliseconds since the Unix epoch.
    pub time: i64,
}

/// The body of an `ack` reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AckReply<'a> {
    /// `$app` or `$device`.
    #[serde(borrow)]
    pub channel: Cow<'a, str>,
    /// The seq acknowledged.
    pub seq: u64,
}

/// The body of a `pong` reply: `{}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pong {}

/// One message: what the `message` push, history, long-poll and SSE data carry.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MessageEntry<'a> {
    /// Channel name (or `$app` / `$device` in a device inbox).
    #[serde(borrow)]
    pub channel: Cow<'a, str>,
    /// Position in the channel.
    pub seq: u64,
    /// Epoch of the channel's log.
    #[serde(borrow)]
    pub epoch: Cow<'a, str>,
    /// The message id.
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    /// When it was stored, milliseconds since the Unix epoch.
    pub time: i64,
    /// The published JSON value, byte for byte.
    pub data: Box<RawValue>,
}

impl PartialEq for MessageEntry<'_> {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.channel,
            self.seq,
            &self.epoch,
            &self.id,
            self.time,
            self.data.get(),
        ) == (
            &other.channel,
            other.seq,
            &other.epoch,
            &other.id,
            other.time,
            other.data.get(),
        )
    }
}

/// A history body: the WebSocket `history` reply and the HTTP API's history answer (which adds
/// `first_seq`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryReply<'a> {
    /// Channel read.
    #[serde(borrow)]
    pub channel: Cow<'a, str>,
    /// Its epoch at the time of the read.
    #[serde(borrow)]
    pub epoch: Cow<'a, str>,
    /// Its newest seq at the time of the read.
    pub seq: u64,
    /// Its oldest retained seq (HTTP API only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<u64>,
    /// The messages, oldest first.
    #[serde(borrow)]
    pub messages: Vec<MessageEntry<'a>>,
}

/// Where one channel of a long-poll stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelStatus<'a> {
    /// Channel name.
    #[serde(borrow)]
    pub channel: Cow<'a, str>,
    /// Its epoch.
    #[serde(borrow)]
    pub epoch: Cow<'a, str>,
    /// Its newest seq when the poll started.
    pub seq: u64,
    /// Whether the cursor's position was resumed exactly.
    pub recovered: bool,
}

/// A long-poll answer: `{"messages":[...],"cursor":"...","channels":[...]}` (and
/// `"presence":[...]` when there are presence frames).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PollAnswer<'a> {
    /// Messages, in seq order within each channel.
    #[serde(borrow)]
    pub messages: Vec<MessageEntry<'a>>,
    /// The cursor string to send as `since` next time.
    #[serde(borrow)]
    pub cursor: Cow<'a, str>,
    /// Per channel, in cursor order.
    #[serde(borrow)]
    pub channels: Vec<ChannelStatus<'a>>,
    /// Presence frames, for a poll that asked (`presence=true`) and named a presence channel:
    /// each such channel's `members` first, then the joins and leaves seen while it waited.
    #[serde(default, skip_serializing_if = "Vec::is_empty", borrow)]
    pub presence: Vec<PresenceFrame<'a>>,
}

/// What a `presence` frame says ([`PresenceFrame`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PresenceEvent {
    /// The channel's members now (`members`): sent first, on each subscribe that asks.
    Members,
    /// A member joined (`user`, `data`): its first subscription.
    Join,
    /// A member left (`user`): its last subscription ended.
    Leave,
}

/// One member of a presence channel: the user id (the token's `sub`) and its data (a JSON
/// object: the token's `user_info` claim, or else what the subscribe's `member` said).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PresenceMember<'a> {
    /// The user id.
    #[serde(borrow)]
    pub user: Cow<'a, str>,
    /// The member's data, a JSON object, byte for byte.
    pub data: Box<RawValue>,
}

impl PartialEq for PresenceMember<'_> {
    fn eq(&self, other: &Self) -> bool {
        (&self.user, self.data.get()) == (&other.user, other.data.get())
    }
}

/// A presence channel's live state, for a subscriber that asked (`"presence": true`): the
/// WebSocket `presence` frame's body, the SSE `presence` event's data and an entry of a
/// long-poll answer's `presence`. `{"channel":C,"event":"members","members":[...]}` first, then
/// `{"channel":C,"event":"join","user":U,"data":{...}}` and
/// `{"channel":C,"event":"leave","user":U}`. Live state: never stored in the channel's log nor
/// resumed; each (re)subscribe that asks gets the whole list again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PresenceFrame<'a> {
    /// The channel.
    #[serde(borrow)]
    pub channel: Cow<'a, str>,
    /// What happened.
    pub event: PresenceEvent,
    /// `members`: every member, in the order they joined.
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub members: Option<Vec<PresenceMember<'a>>>,
    /// `join` and `leave`: who.
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub user: Option<Cow<'a, str>>,
    /// `join`: the member's data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Box<RawValue>>,
}

impl PartialEq for PresenceFrame<'_> {
    fn eq(&self, other: &Self) -> bool {
        let data = |f: &Self| f.data.as_ref().map(|d| d.get().to_string());
        (
            &self.channel,
            self.event,
            &self.members,
            &self.user,
            data(self),
        ) == (
            &other.channel,
            other.event,
            &other.members,
            &other.user,
            data(other),
        )
    }
}

/// `GET /v1/channels/{name}/presence`: a presence channel's members, in the order they joined.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelPresence<'a> {
    /// The channel.
    #[serde(borrow)]
    pub channel: Cow<'a, str>,
    /// Its members.
    #[serde(borrow)]
    pub members: Vec<PresenceMember<'a>>,
    /// How many.
    pub count: usize,
}

/// What a WebSocket server frame holds: its key and body.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerBody<'a> {
    /// `connect` reply.
    Connect(ConnectReply<'a>),
    /// `subscribe` reply (also sent unasked when a device inbox opens).
    Subscribe(SubscribeReply<'a>),
    /// `unsubscribe` reply.
    Unsubscribe(UnsubscribeReply<'a>),
    /// `publish` reply.
    Publish(PublishReply<'a>),
    /// `history` reply.
    History(HistoryReply<'a>),
    /// `ack` reply.
    Ack(AckReply<'a>),
    /// `pong` reply to `ping`.
    Pong(Pong),
    /// A command failed.
    Error(ErrorBody<'a>),
    /// A message of a subscribed channel or of the device inbox.
    Message(MessageEntry<'a>),
    /// The server closes the connection next.
    Disconnect(ErrorBody<'a>),
    /// A presence channel's members, or one joining or leaving (only to a subscriber that
    /// asked with `"presence": true`).
    Presence(PresenceFrame<'a>),
}

/// The keys a server frame may carry.
pub const SERVER_FRAME_KINDS: &[&str] = &[
    "connect",
    "subscribe",
    "unsubscribe",
    "publish",
    "history",
    "ack",
    "pong",
    "error",
    "message",
    "disconnect",
    "presence",
];

/// A WebSocket server frame: `{"id":N,"<kind>":<body>}`, `id` present only on replies to a
/// command that had one.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerFrame<'a> {
    /// The id of the command this answers, if it had one.
    pub id: Option<u64>,
    /// Key and body.
    pub body: ServerBody<'a>,
}

impl<'a> ServerFrame<'a> {
    /// The frame's key.
    pub fn kind(&self) -> &'static str {
        match &self.body {
            ServerBody::Connect(_) => "connect",
            ServerBody::Subscribe(_) => "subscribe",
            ServerBody::Unsubscribe(_) => "unsubscribe",
            ServerBody::Publish(_) => "publish",
            ServerBody::History(_) => "history",
            ServerBody::Ack(_) => "ack",
            ServerBody::Pong(_) => "pong",
            ServerBody::Error(_) => "error",
            ServerBody::Message(_) => "message",
            ServerBody::Disconnect(_) => "disconnect",
            ServerBody::Presence(_) => "presence",
        }
    }

    /// The frame's bytes, exactly as the server writes them.
    pub fn encode(&self) -> Bytes {
        let (id, kind) = (self.id, self.kind());
        match &self.body {
            ServerBody::Connect(b) => crate::frame::reply(id, kind, b),
            ServerBody::Subscribe(b) => crate::frame::reply(id, kind, b),
            ServerBody::Unsubscribe(b) => crate::frame::reply(id, kind, b),
            ServerBody::Publish(b) => crate::frame::reply(id, kind, b),
            ServerBody::History(b) => crate::frame::reply(id, kind, b),
            ServerBody::Ack(b) => crate::frame::reply(id, kind, b),
            ServerBody::Pong(b) => crate::frame::reply(id, kind, b),
            ServerBody::Error(b) | ServerBody::Disconnect(b) => crate::frame::reply(id, kind, b),
            ServerBody::Message(b) => crate::frame::reply(id, kind, b),
            ServerBody::Presence(b) => crate::frame::reply(id, kind, b),
        }
    }

    /// Parses one text frame from the server; `bad_request` if it is not one.
    pub fn parse(text: &'a str) -> Result<Self, HeraldError> {
        let bad = |m: String| HeraldError::bad_request(m);
        let map: BTreeMap<Cow<'a, str>, &'a RawValue> = serde_json::from_str(text)
            .map_err(|e| bad(format!("server frame is not a JSON object: {e}")))?;
        let id = match map.get("id").map(|v| v.get()) {
            None => None,
            Some(v) => Some(v.parse::<u64>().map_err(|_| bad("invalid \"id\"".into()))?),
        };
        let mut keys = map.iter().filter(|(k, _)| k.as_ref() != "id");
        let (Some((kind, raw)), None) = (keys.next(), keys.next()) else {
            return Err(bad(
                "a server frame holds exactly one key besides \"id\"".into()
            ));
        };
        fn body<'a, T: Deserialize<'a>>(raw: &'a RawValue) -> Result<T, HeraldError> {
            serde_json::from_str(raw.get())
                .map_err(|e| HeraldError::bad_request(format!("invalid frame body: {e}")))
        }
        let body = match kind.as_ref() {
            "connect" => ServerBody::Connect(body(raw)?),
            "subscribe" => ServerBody::Subscribe(body(raw)?),
            "unsubscribe" => ServerBody::Unsubscribe(body(raw)?),
            "publish" => ServerBody::Publish(body(raw)?),
            "history" => ServerBody::History(body(raw)?),
            "ack" => ServerBody::Ack(body(raw)?),
            "pong" => ServerBody::Pong(body(raw)?),
            "error" => ServerBody::Error(body(raw)?),
            "message" => ServerBody::Message(body(raw)?),
            "disconnect" => ServerBody::Disconnect(body(raw)?),
            "presence" => ServerBody::Presence(body(raw)?),
            other => return Err(bad(format!("unknown server frame {other:?}"))),
        };
        Ok(ServerFrame { id, body })
    }
}

impl Serialize for ServerFrame<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        if let Some(id) = self.id {
            map.serialize_entry("id", &id)?;
        }
        let kind = self.kind();
        match &self.body {
            ServerBody::Connect(b) => map.serialize_entry(kind, b)?,
            ServerBody::Subscribe(b) => map.serialize_entry(kind, b)?,
            ServerBody::Unsubscribe(b) => map.serialize_entry(kind, b)?,
            ServerBody::Publish(b) => map.serialize_entry(kind, b)?,
            ServerBody::History(b) => map.serialize_entry(kind, b)?,
            ServerBody::Ack(b) => map.serialize_entry(kind, b)?,
            ServerBody::Pong(b) => map.serialize_entry(kind, b)?,
            ServerBody::Error(b) | ServerBody::Disconnect(b) => map.serialize_entry(kind, b)?,
            ServerBody::Message(b) => map.serialize_entry(kind, b)?,
            ServerBody::Presence(b) => map.serialize_entry(kind, b)?,
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ServerFrame<'de> {
    /// Reads a frame from JSON text (`serde_json::from_str`); the same as [`ServerFrame::parse`].
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(d)?;
        ServerFrame::parse(raw.get()).map_err(serde::de::Error::custom)
    }
}
