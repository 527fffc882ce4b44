//! Server frames. Channel messages are encoded once per message and per transport kind, through
//! the message's frame cache ([`herald_core::StoredMessage::frame`]); replies and errors are small
//! and encoded per request.

use bytes::{BufMut, Bytes, BytesMut};
use herald_core::log::LogSlice;
use herald_core::message::FrameKind;
use herald_core::{HeraldError, StoredMessage};
use serde::Serialize;

/// The JSON object describing one message, as history, long-poll and the WebSocket `message`
/// push carry it: `{"channel":..,"seq":..,"epoch":..,"id":..,"time":..,"data":..}`. Every
/// message carries its full cursor, so a client that subscribed before a channel's first
/// message still learns the epoch.
pub fn message_entry(m: &StoredMessage) -> Bytes {
    m.frame(FrameKind::JsonEntry, encode_entry)
}

fn encode_entry(m: &StoredMessage) -> Bytes {
    let mut buf = BytesMut::with_capacity(m.data.len() + 96 + m.channel.as_str().len());
    buf.put_slice(b"{\"channel\":");
    buf.put_slice(&json_string(m.channel.public()));
    buf.put_slice(b",\"seq\":");
    buf.put_slice(m.seq.to_string().as_bytes());
    buf.put_slice(b",\"epoch\":");
    buf.put_slice(&json_string(m.epoch.as_str()));
    buf.put_slice(b",\"id\":");
    buf.put_slice(&json_string(&m.id()));
    buf.put_slice(b",\"time\":");
    buf.put_slice(m.time.to_string().as_bytes());
    buf.put_slice(b",\"data\":");
    buf.put_slice(&m.data);
    buf.put_u8(b'}');
    buf.freeze()
}

fn json_string(s: &str) -> Vec<u8> {
    serde_json::to_vec(s).unwrap_or_else(|_| b"\"\"".to_vec())
}

/// The WebSocket push of a message: `{"message":{...entry...}}`.
pub fn ws_message(m: &StoredMessage) -> Bytes {
    m.frame(FrameKind::WsJson, |m| {
        let entry = message_entry(m);
        let mut buf = BytesMut::with_capacity(entry.len() + 12);
        buf.put_slice(b"{\"message\":");
        buf.put_slice(&entry);
        buf.put_u8(b'}');
        buf.freeze()
    })
}

/// The `data:` lines of an SSE event for a message (the entry JSON, split on line breaks so
/// EventSource joins it back together). The `id:` line is per connection and not included.
pub fn sse_data(m: &StoredMessage) -> Bytes {
    m.frame(FrameKind::SseData, |m| sse_data_lines(&message_entry(m)))
}

/// Splits `payload` into `data:` lines, ending with the blank line that ends an event.
pub fn sse_data_lines(payload: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(payload.len() + 16);
    for line in payload.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        buf.put_slice(b"data: ");
        buf.put_slice(line);
        buf.put_u8(b'\n');
    }
    buf.put_u8(b'\n');
    buf.freeze()
}

/// A named SSE control event (`event: NAME`) with a JSON body.
pub fn sse_event(name: &str, body: &impl Serialize) -> Bytes {
    let json = serde_json::to_vec(body).unwrap_or_default();
    let mut buf = BytesMut::with_capacity(json.len() + name.len() + 16);
    buf.put_slice(b"event: ");
    buf.put_slice(name.as_bytes());
    buf.put_u8(b'\n');
    buf.put_slice(&sse_data_lines(&json));
    buf.freeze()
}

/// A reply to command `kind`: `{"id":N,"<kind>":<body>}` (`id` omitted when `None`).
pub fn reply(id: Option<u64>, kind: &'static str, body: &impl Serialize) -> Bytes {
    let mut buf = reply_start(id, kind, 64);
    if serde_json::to_writer(&mut buf, body).is_err() {
        buf.extend_from_slice(b"null");
    }
    buf.push(b'}');
    Bytes::from(buf)
}

/// A reply whose body is already-encoded JSON.
pub fn reply_json(id: Option<u64>, kind: &'static str, body: &[u8]) -> Bytes {
    let mut buf = reply_start(id, kind, body.len() + 32);
    buf.extend_from_slice(body);
    buf.push(b'}');
    Bytes::from(buf)
}

fn reply_start(id: Option<u64>, kind: &str, capacity: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(capacity);
    buf.push(b'{');
    if let Some(id) = id {
        buf.extend_from_slice(b"\"id\":");
        buf.extend_from_slice(id.to_string().as_bytes());
        buf.push(b',');
    }
    buf.push(b'"');
    buf.extend_from_slice(kind.as_bytes());
    buf.extend_from_slice(b"\":");
    buf
}

/// A history read as JSON: `{"channel","epoch","seq",["first_seq",]"messages":[...]}`, the
/// messages as [`message_entry`]s. The HTTP API includes `first_seq`; the WebSocket `history`
/// reply does not.
pub fn history(slice: &LogSlice, with_first_seq: bool) -> Vec<u8> {
    let state = &slice.state;
    let mut body = Vec::with_capacity(
        128 + slice
            .messages
            .iter()
            .map(|m| m.data.len() + 96)
            .sum::<usize>(),
    );
    body.extend_from_slice(b"{\"channel\":");
    body.extend_from_slice(&json_string(state.name.public()));
    body.extend_from_slice(b",\"epoch\":");
    body.extend_from_slice(&json_string(state.epoch.as_str()));
    body.extend_from_slice(format!(",\"seq\":{}", state.last_seq).as_bytes());
    if with_first_seq {
        body.extend_from_slice(format!(",\"first_seq\":{}", state.first_seq).as_bytes());
    }
    body.extend_from_slice(b",\"messages\":[");
    for (i, m) in slice.messages.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&message_entry(m));
    }
    body.extend_from_slice(b"]}");
    body
}

/// The body of an error: `{"code":"...","message":"..."}`.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    /// Stable code.
    pub code: &'a str,
    /// Human message.
    pub message: &'a str,
}

impl<'a> From<&'a HeraldError> for ErrorBody<'a> {
    fn from(e: &'a HeraldError) -> Self {
        ErrorBody {
            code: e.code.as_str(),
            message: &e.message,
        }
    }
}

/// An error frame: `{"id":N,"error":{"code":"...","message":"..."}}` (id omitted if unknown).
pub fn error(id: Option<u64>, e: &HeraldError) -> Bytes {
    reply(id, "error", &ErrorBody::from(e))
}

/// The frame sent before the server closes a connection: `{"disconnect":{"code","message"}}`.
pub fn disconnect(code: &str, message: &str) -> Bytes {
    reply(None, "disconnect", &ErrorBody { code, message })
}

/// The body of a subscribe reply.
#[derive(Debug, Serialize)]
pub struct SubscribeReply<'a> {
    /// Channel subscribed.
    pub channel: &'a str,
    /// Channel's newest seq when the subscription started.
    pub seq: u64,
    /// Channel's epoch.
    pub epoch: &'a str,
    /// Whether the requested `since` was resumed exactly.
    pub recovered: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::{ChannelName, Epoch, ErrorCode};

    fn msg(data: &'static str) -> StoredMessage {
        StoredMessage::new(
            ChannelName::parse("news").unwrap(),
            Epoch::new("e1"),
            58,
            None,
            1700,
            Bytes::from_static(data.as_bytes()),
        )
    }

    #[test]
    fn message_frames_are_valid_json_and_cached() {
        let m = msg(r#"{"t":"hello"}"#);
        let ws = ws_message(&m);
        let v: serde_json::Value = serde_json::from_slice(&ws).unwrap();
        assert_eq!(v["message"]["channel"], "news");
        assert_eq!(v["message"]["seq"], 58);
        assert_eq!(v["message"]["epoch"], "e1");
        assert_eq!(v["message"]["id"], "e1-58");
        assert_eq!(v["message"]["time"], 1700);
        assert_eq!(v["message"]["data"]["t"], "hello");
        assert_eq!(ws.as_ptr(), ws_message(&m).as_ptr(), "encoded once");
    }

    #[test]
    fn sse_splits_multiline_json() {
        let m = msg("{\n \"a\": 1\r\n}");
        let s = sse_data(&m);
        let text = std::str::from_utf8(&s).unwrap();
        assert!(text.ends_with("\n\n"));
        let joined: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect();
        let v: serde_json::Value = serde_json::from_str(&joined.join("\n")).unwrap();
        assert_eq!(v["data"]["a"], 1);
    }

    #[test]
    fn replies_and_errors() {
        let r = reply(Some(2), "pong", &serde_json::json!({}));
        assert_eq!(&r[..], br#"{"id":2,"pong":{}}"#);
        let e = error(None, &HeraldError::new(ErrorCode::Forbidden, "no"));
        assert_eq!(&e[..], br#"{"error":{"code":"forbidden","message":"no"}}"#);
    }
}
