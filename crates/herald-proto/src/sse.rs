//! Server-Sent Events as Herald writes them, typed for clients and vectors: one event is an
//! optional `event: NAME` line (`subscribed`, `disconnect`) or an `id: CURSOR` line (a message,
//! with the connection's cursor string after it), then the JSON body as `data:` lines, then a
//! blank line. The server's writer is [`crate::frame::sse_event`] / [`crate::frame::sse_data_lines`].

use bytes::{BufMut, Bytes, BytesMut};

/// One SSE event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` name; `None` for a message.
    pub event: Option<String>,
    /// The `id:` (a cursor string); only messages carry one.
    pub id: Option<String>,
    /// The `data:` lines joined with `\n`: a JSON body.
    pub data: String,
}

impl SseEvent {
    /// Parses one event block (the text before the blank line that ends it). Comment lines
    /// (`:`) and fields Herald does not send (`retry:`) are skipped; `None` if the block holds
    /// no data (a comment-only keep-alive).
    pub fn parse(block: &str) -> Option<SseEvent> {
        let mut event = SseEvent::default();
        let mut data: Vec<&str> = Vec::new();
        for line in block.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => event.event = Some(value.to_string()),
                "id" => event.id = Some(value.to_string()),
                "data" => data.push(value),
                _ => {}
            }
        }
        if data.is_empty() {
            return None;
        }
        event.data = data.join("\n");
        Some(event)
    }

    /// The event's bytes, exactly as the server writes them (blank line included).
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(self.data.len() + 64);
        if let Some(id) = &self.id {
            buf.put_slice(b"id: ");
            buf.put_slice(id.as_bytes());
            buf.put_u8(b'\n');
        }
        if let Some(name) = &self.event {
            buf.put_slice(b"event: ");
            buf.put_slice(name.as_bytes());
            buf.put_u8(b'\n');
        }
        buf.put_slice(&crate::frame::sse_data_lines(self.data.as_bytes()));
        buf.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_encode_agree() {
        let text = "event: subscribed\ndata: {\"a\":1}\n\n";
        let e = SseEvent::parse(text.trim_end_matches('\n')).unwrap();
        assert_eq!(e.event.as_deref(), Some("subscribed"));
        assert_eq!(&e.encode()[..], text.as_bytes());
        assert_eq!(SseEvent::parse(": ping"), None);
    }
}
