//! The server's fast encoders: the bytes of every server frame, written by hand where a frame
//! is sent per message (a message entry, its WebSocket push, its SSE `data:` lines, a history
//! body) and through serde for small per-request replies. They take proto views, not server
//! types; the server caches a message's encodings once per message (`herald_core::frames`).
//! The typed, two-way forms of the same frames are in [`crate::reply`]; a test shows both agree.

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;

use crate::error::HeraldError;
use crate::reply::ErrorBody;

/// One message as the wire describes it: what [`message_entry`] encodes.
#[derive(Debug, Clone, Copy)]
pub struct MessageView<'a> {
    /// The channel's public name (without any app prefix).
    pub channel: &'a str,
    /// Position in the channel, from 1.
    pub seq: u64,
    /// Epoch of the channel's log.
    pub epoch: &'a str,
    /// The message id: the publisher's idempotency key, or `<epoch>-<seq>`.
    pub id: &'a str,
    /// When it was stored, milliseconds since the Unix epoch.
    pub time: i64,
    /// The payload: JSON text, byte for byte as published.
    pub data: &'a [u8],
}

/// The JSON object describing one message, as history, long-poll and the WebSocket `message`
/// push carry it: `{"channel":..,"seq":..,"epoch":..,"id":..,"time":..,"data":..}`. Every
/// message carries its full cursor, so a client that subscribed before a channel's first
/// message still learns the epoch.
pub fn message_entry(m: &MessageView<'_>) -> Bytes {
    let mut buf = BytesMut::with_capacity(m.data.len() + 96 + m.channel.len());
    buf.put_slice(b"{\"channel\":");
    buf.put_slice(&json_string(m.channel));
    buf.put_slice(b",\"seq\":");
    buf.put_slice(m.seq.to_string().as_bytes());
    buf.put_slice(b",\"epoch\":");
    buf.put_slice(&json_string(m.epoch));
    buf.put_slice(b",\"id\":");
    buf.put_slice(&json_string(m.id));
    buf.put_slice(b",\"time\":");
    buf.put_slice(m.time.to_string().as_bytes());
    buf.put_slice(b",\"data\":");
    buf.put_slice(m.data);
    buf.put_u8(b'}');
    buf.freeze()
}

fn json_string(s: &str) -> Vec<u8> {
    serde_json::to_vec(s).unwrap_or_else(|_| b"\"\"".to_vec())
}

/// The WebSocket push of a message, around its [`message_entry`]: `{"message":{...entry...}}`.
pub fn ws_message(entry: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(entry.len() + 12);
    buf.put_slice(b"{\"message\":");
    buf.put_slice(entry);
    buf.put_u8(b'}');
    buf.freeze()
}

/// Splits `payload` into `data:` lines, ending with the blank line that ends an event (the
/// entry JSON of a message, split on line breaks so EventSource joins it back together). The
/// `id:` line is per connection and not included.
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

/// Where a channel's log stood when its history was read.
#[derive(Debug, Clone, Copy)]
pub struct HistoryHead<'a> {
    /// The channel's public name.
    pub channel: &'a str,
    /// Its epoch.
    pub epoch: &'a str,
    /// Its newest seq.
    pub seq: u64,
    /// Its oldest retained seq; only the HTTP API's history carries it.
    pub first_seq: Option<u64>,
}

/// A history read as JSON: `{"channel","epoch","seq",["first_seq",]"messages":[...]}`, from the
/// messages' [`message_entry`]s. The HTTP API includes `first_seq`; the WebSocket `history`
/// reply does not.
pub fn history(head: &HistoryHead<'_>, entries: &[Bytes]) -> Vec<u8> {
    let mut body = Vec::with_capacity(128 + entries.iter().map(|e| e.len() + 1).sum::<usize>());
    body.extend_from_slice(b"{\"channel\":");
    body.extend_from_slice(&json_string(head.channel));
    body.extend_from_slice(b",\"epoch\":");
    body.extend_from_slice(&json_string(head.epoch));
    body.extend_from_slice(format!(",\"seq\":{}", head.seq).as_bytes());
    if let Some(first_seq) = head.first_seq {
        body.extend_from_slice(format!(",\"first_seq\":{first_seq}").as_bytes());
    }
    body.extend_from_slice(b",\"messages\":[");
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(entry);
    }
    body.extend_from_slice(b"]}");
    body
}

/// An error frame: `{"id":N,"error":{"code":"...","message":"..."}}` (id omitted if unknown).
pub fn error(id: Option<u64>, e: &HeraldError) -> Bytes {
    reply(id, "error", &ErrorBody::from(e))
}

/// The frame sent before the server closes a connection: `{"disconnect":{"code","message"}}`.
pub fn disconnect(code: &str, message: &str) -> Bytes {
    reply(None, "disconnect", &ErrorBody::new(code, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn view(data: &str) -> MessageView<'_> {
        MessageView {
            channel: "news",
            seq: 58,
            epoch: "e1",
            id: "e1-58",
            time: 1700,
            data: data.as_bytes(),
        }
    }

    #[test]
    fn message_frames_are_valid_json() {
        let ws = ws_message(&message_entry(&view(r#"{"t":"hello"}"#)));
        let v: serde_json::Value = serde_json::from_slice(&ws).unwrap();
        assert_eq!(v["message"]["channel"], "news");
        assert_eq!(v["message"]["seq"], 58);
        assert_eq!(v["message"]["epoch"], "e1");
        assert_eq!(v["message"]["id"], "e1-58");
        assert_eq!(v["message"]["time"], 1700);
        assert_eq!(v["message"]["data"]["t"], "hello");
    }

    #[test]
    fn sse_splits_multiline_json() {
        let s = sse_data_lines(&message_entry(&view("{\n \"a\": 1\r\n}")));
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
