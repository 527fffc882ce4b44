//! Owned forms of the answers the client hands back (proto's reply types borrow from the frame
//! text; these own their strings so a call can return them): a published message's place, a
//! subscription's start, a message, a history read.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Where a published message was stored (the WebSocket `publish` reply and the HTTP publish
/// answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// Channel published to.
    pub channel: String,
    /// The message's seq.
    pub seq: u64,
    /// The message id (the given key, or `<epoch>-<seq>`).
    pub id: String,
    /// The channel's epoch.
    pub epoch: String,
    /// When it was stored, milliseconds since the Unix epoch.
    pub time: i64,
    /// True if the idempotency key was already stored and nothing was appended.
    pub duplicate: bool,
}

/// A subscription's start (the WebSocket `subscribe` reply, the SSE `subscribed` event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscribed {
    /// Channel subscribed.
    pub channel: String,
    /// The channel's newest seq when the subscription started.
    pub seq: u64,
    /// The channel's epoch.
    pub epoch: String,
    /// Whether the requested resume position was resumed exactly.
    pub recovered: bool,
}

/// The `connect` reply; it serializes as the server wrote it (`expires` and `unsubscribed` left
/// out when there are none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connected {
    /// The token's `sub`.
    pub sub: String,
    /// The token's `exp`, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    /// Subscriptions the new token no longer allows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsubscribed: Vec<String>,
}

/// One message, as every transport and the history carry it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Message {
    /// Channel name (or `$app` / `$device` in a device inbox).
    pub channel: String,
    /// Position in the channel.
    pub seq: u64,
    /// Epoch of the channel's log.
    pub epoch: String,
    /// The message id.
    pub id: String,
    /// When it was stored, milliseconds since the Unix epoch.
    pub time: i64,
    /// The published JSON value, byte for byte.
    pub data: Box<RawValue>,
}

impl Message {
    /// The data as a JSON value.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.data.get()).unwrap_or(serde_json::Value::Null)
    }
}

/// A history read (the WebSocket `history` reply and the HTTP history answer).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct History {
    /// Channel read.
    pub channel: String,
    /// Its epoch at the time of the read.
    pub epoch: String,
    /// Its newest seq at the time of the read.
    pub seq: u64,
    /// Its oldest retained seq (HTTP API only).
    #[serde(default)]
    pub first_seq: Option<u64>,
    /// The messages, oldest first.
    pub messages: Vec<Message>,
}
