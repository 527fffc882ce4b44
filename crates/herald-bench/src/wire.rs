//! Minimal client-side codecs for the load generator: HTTP/1.1 request heads and response heads,
//! chunked transfer decoding, WebSocket frames (client side, masked) and Server-Sent Events.
//!
//! They are hand-written rather than taken from a client library so that one worker process can
//! hold 15,000 connections with a few KiB each and parse hundreds of thousands of frames per
//! second on one core, leaving the rest of a 2-core machine to the server being measured.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix time in nanoseconds.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The JSON data every bench message carries: its send time in unix nanoseconds.
pub fn stamp(ns: u64) -> String {
    format!("{{\"ts\":{ns}}}")
}

/// Finds the send time (`"ts":N`) in a frame; `None` if the frame carries none.
///
/// A bench message's data is its frame's last field (`..."data":{"ts":N}}}`), so the time is
/// read backwards from the frame's end first, touching a few dozen bytes instead of the whole
/// frame; other shapes fall back to a search for the last `"ts":`.
pub fn find_ts(frame: &[u8]) -> Option<u64> {
    ts_at_end(frame).or_else(|| {
        let at = memchr::memmem::rfind(frame, TS_KEY)? + TS_KEY.len();
        let digits = &frame[at..];
        let len = digits.iter().take_while(|b| b.is_ascii_digit()).count();
        parse_digits(&digits[..len])
    })
}

const TS_KEY: &[u8] = b"\"ts\":";

/// The send time of a frame that ends with `"ts":N` and closing braces.
fn ts_at_end(frame: &[u8]) -> Option<u64> {
    let body = frame.trim_ascii_end();
    let closes = body.iter().rev().take_while(|b| **b == b'}').count();
    let body = &body[..body.len() - closes];
    let digits = body.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    let (head, digits) = body.split_at(body.len() - digits);
    if closes == 0 || !head.ends_with(TS_KEY) {
        return None;
    }
    parse_digits(digits)
}

/// The value of 1 to 20 ASCII digits (wrapping, as a send time never overflows): eight at a
/// time while eight are left (a send time has 19).
fn parse_digits(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    let mut chunks = digits.chunks_exact(8);
    let mut n = 0u64;
    for chunk in &mut chunks {
        let eight: [u8; 8] = chunk.try_into().expect("chunks of eight");
        n = n
            .wrapping_mul(100_000_000)
            .wrapping_add(eight_digits(eight));
    }
    Some(chunks.remainder().iter().fold(n, |n, &b| {
        n.wrapping_mul(10).wrapping_add(u64::from(b - b'0'))
    }))
}

/// The value of eight ASCII digits, the first the most significant: pairs, then quads, then
/// the whole, each step combining neighbouring lanes of one 64-bit word.
fn eight_digits(ascii: [u8; 8]) -> u64 {
    let v = u64::from_le_bytes(ascii).wrapping_sub(0x3030_3030_3030_3030);
    let v = (v.wrapping_mul(10).wrapping_add(v >> 8)) & 0x00ff_00ff_00ff_00ff;
    let v = (v.wrapping_mul(100).wrapping_add(v >> 16)) & 0x0000_ffff_0000_ffff;
    (v.wrapping_mul(10_000).wrapping_add(v >> 32)) & 0xffff_ffff
}

/// The log (`$app` or `$device`) and `seq` of an inbox message frame
/// (`{"message":{"channel":"$app","seq":4,...`), for the `ack` that answers it.
pub fn inbox_position(frame: &[u8]) -> Option<(&'static str, u64)> {
    let rest = frame.strip_prefix(b"{\"message\":{\"channel\":\"")?;
    let (log, rest) = if let Some(r) = rest.strip_prefix(b"$app\",") {
        ("$app", r)
    } else {
        ("$device", rest.strip_prefix(b"$device\",")?)
    };
    let digits = rest.strip_prefix(b"\"seq\":")?;
    let end = digits
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    let seq = std::str::from_utf8(&digits[..end]).ok()?.parse().ok()?;
    Some((log, seq))
}

/// Position of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    memchr::memmem::find(hay, needle)
}

/// A parsed HTTP response head.
#[derive(Debug, Default)]
pub struct ResponseHead {
    /// Status code.
    pub status: u16,
    /// `Content-Length`, if given.
    pub content_length: Option<usize>,
    /// Whether the body is chunked.
    pub chunked: bool,
    /// Whether the server closes the connection after this response (`Connection: close`, or
    /// an HTTP/1.0 answer without `Connection: keep-alive`): it must not carry another request.
    pub close: bool,
    /// Length of the head including the blank line.
    pub len: usize,
}

/// Parses a response head at the start of `buf`; `Ok(None)` if more bytes are needed.
pub fn parse_response_head(buf: &[u8]) -> Result<Option<ResponseHead>, String> {
    let Some(end) = find(buf, b"\r\n\r\n") else {
        if buf.len() > 64 * 1024 {
            return Err("response head larger than 64 KiB".into());
        }
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| "response head is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut out = ResponseHead {
        status,
        len: end + 4,
        ..Default::default()
    };
    let (mut close, mut keep_alive) = (false, false);
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("content-length") {
            out.content_length = v.parse().ok();
        } else if k.eq_ignore_ascii_case("transfer-encoding") {
            out.chunked = v.to_ascii_lowercase().contains("chunked");
        } else if k.eq_ignore_ascii_case("connection") {
            for option in v.split(',').map(str::trim) {
                close |= option.eq_ignore_ascii_case("close");
                keep_alive |= option.eq_ignore_ascii_case("keep-alive");
            }
        }
    }
    out.close = close || (status_line.starts_with("HTTP/1.0") && !keep_alive);
    Ok(Some(out))
}

/// A GET request head.
pub fn get_request(host: &str, path: &str, extra: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n").into_bytes()
}

/// A POST request with a JSON body and a bearer key.
pub fn post_json(host: &str, path: &str, key: &str, body: &[u8]) -> Vec<u8> {
    request_json("POST", host, path, key, body)
}

/// A `method` request (`POST`, `PUT`) of a JSON body with the bearer `key`.
pub fn request_json(method: &str, host: &str, path: &str, key: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// The WebSocket upgrade request for `path`.
pub fn ws_upgrade(host: &str, path: &str) -> Vec<u8> {
    get_request(
        host,
        path,
        "Upgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: aGVyYWxkLWJlbmNoLWtleQ==\r\nSec-WebSocket-Version: 13\r\n",
    )
}

const MASK: [u8; 4] = [0x5a, 0x17, 0xc3, 0x81];

/// Appends a masked client frame with `opcode` (1 = text, 10 = pong).
pub fn ws_frame(opcode: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.push(0x80 | opcode);
    let len = payload.len();
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if len < 65536 {
        out.push(0x80 | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(&MASK);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i & 3]));
}

/// One server frame found in a buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct WsFrame {
    /// Opcode (1 text, 2 binary, 8 close, 9 ping, 10 pong, 0 continuation).
    pub opcode: u8,
    /// Final fragment.
    pub fin: bool,
    /// Payload position in the buffer.
    pub start: usize,
    /// Payload end in the buffer.
    pub end: usize,
}

/// Parses the frame at the start of `buf`; `None` if it is not complete yet. Servers never
/// mask, so a masked frame is unmasked in place.
pub fn ws_parse(buf: &mut [u8]) -> Option<WsFrame> {
    if buf.len() < 2 {
        return None;
    }
    let fin = buf[0] & 0x80 != 0;
    let opcode = buf[0] & 0x0f;
    let masked = buf[1] & 0x80 != 0;
    let (len, mut at) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
        127 if buf.len() >= 10 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[2..10]);
            (u64::from_be_bytes(b) as usize, 10)
        }
        126 | 127 => return None,
        n => (n as usize, 2),
    };
    let mask = if masked {
        if buf.len() < at + 4 {
            return None;
        }
        let m = [buf[at], buf[at + 1], buf[at + 2], buf[at + 3]];
        at += 4;
        Some(m)
    } else {
        None
    };
    if buf.len() < at + len {
        return None;
    }
    if let Some(m) = mask {
        for (i, b) in buf[at..at + len].iter_mut().enumerate() {
            *b ^= m[i & 3];
        }
    }
    Some(WsFrame {
        opcode,
        fin,
        start: at,
        end: at + len,
    })
}

/// Incremental decoder of a chunked HTTP body.
#[derive(Debug, Default)]
pub struct Dechunker {
    /// Bytes left in the current chunk, plus 2 for its CRLF; 0 when a size line is expected.
    left: usize,
    /// The last chunk was seen.
    pub done: bool,
}

impl Dechunker {
    /// Moves the body bytes of `raw` into `body`, consuming what it could decode from `raw`.
    pub fn feed(&mut self, raw: &mut Vec<u8>, body: &mut Vec<u8>) -> Result<(), String> {
        let mut at = 0;
        while at < raw.len() && !self.done {
            if self.left == 0 {
                let Some(nl) = find(&raw[at..], b"\r\n") else {
                    break;
                };
                let line = std::str::from_utf8(&raw[at..at + nl]).map_err(|_| "bad chunk size")?;
                let hex = line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(hex, 16)
                    .map_err(|_| format!("bad chunk size line {line:?}"))?;
                at += nl + 2;
                if size == 0 {
                    self.done = true;
                    break;
                }
                self.left = size + 2;
                continue;
            }
            let take = self.left.min(raw.len() - at);
            // The trailing CRLF of a chunk is not body.
            let data = take.min(self.left.saturating_sub(2));
            body.extend_from_slice(&raw[at..at + data]);
            at += take;
            self.left -= take;
        }
        raw.drain(..at);
        Ok(())
    }
}

/// One Server-Sent Events block.
#[derive(Debug, PartialEq, Eq)]
pub enum SseEvent<'a> {
    /// `event: subscribed` — a subscription was confirmed.
    Subscribed,
    /// `event: disconnect` — the server closes the stream, with its data.
    Disconnect(&'a [u8]),
    /// An unnamed event with data: a channel message (the data lines, joined).
    Message(&'a [u8]),
    /// A comment, a `retry:` line, or another named event.
    Other,
}

/// Classifies one event block (the text between blank lines).
pub fn sse_classify(block: &[u8]) -> SseEvent<'_> {
    let mut name: &[u8] = b"";
    let mut data: Option<&[u8]> = None;
    for line in block.split(|b| *b == b'\n') {
        if let Some(v) = line.strip_prefix(b"event: ") {
            name = v;
        } else if let Some(v) = line.strip_prefix(b"data: ") {
            // Bench payloads are single-line JSON; the first data line is enough.
            data.get_or_insert(v);
        }
    }
    match (name, data) {
        (b"subscribed", _) => SseEvent::Subscribed,
        (b"disconnect", d) => SseEvent::Disconnect(d.unwrap_or(b"")),
        (b"", Some(d)) => SseEvent::Message(d),
        _ => SseEvent::Other,
    }
}

/// What a server WebSocket text frame is, told from its first bytes without parsing its JSON
/// (the bench reads hundreds of thousands a second). `src/vectors.rs` runs it over
/// herald-proto's golden server frames so it cannot drift from the protocol silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerText {
    /// `{"message":...}`: a channel or inbox message.
    Message,
    /// The reply to a `subscribe` command (one with an `id`).
    Subscribed,
    /// The reply to a `publish` command (one with an `id`).
    Published,
    /// An `error` frame; `answers` when it carries the failed command's `id`.
    Error {
        /// Whether the frame has an `id`.
        answers: bool,
    },
    /// The reply to an `ack` command (one with an `id`).
    Acked,
    /// An unasked `subscribe` reply (no `id`): the server opened one log of a device's inbox.
    InboxOpened,
    /// `{"disconnect":...}`: the server closes the connection next.
    Disconnect,
    /// Any other frame (other replies).
    Other,
}

/// Classifies one server text frame (see [`ServerText`]).
pub fn classify_ws_text(p: &[u8]) -> ServerText {
    if p.starts_with(b"{\"message\":") {
        ServerText::Message
    } else if p.starts_with(b"{\"id\":") {
        let kind = find(p, b",\"").map_or(&p[..0], |i| &p[i + 2..]);
        if kind.starts_with(b"subscribe\"") {
            ServerText::Subscribed
        } else if kind.starts_with(b"publish\"") {
            ServerText::Published
        } else if kind.starts_with(b"error\"") {
            ServerText::Error { answers: true }
        } else if kind.starts_with(b"ack\"") {
            ServerText::Acked
        } else {
            ServerText::Other
        }
    } else if p.starts_with(b"{\"subscribe\":") {
        ServerText::InboxOpened
    } else if p.starts_with(b"{\"disconnect\":") {
        ServerText::Disconnect
    } else if p.starts_with(b"{\"error\":") {
        ServerText::Error { answers: false }
    } else {
        ServerText::Other
    }
}

/// A long-poll answer, reading only what the bench counts: each message's `data` (borrowed,
/// so no allocation per message), the cursor, and how many channels.
#[derive(Debug, serde::Deserialize)]
pub struct PollAnswer<'a> {
    /// The messages.
    #[serde(borrow)]
    pub messages: Vec<PollMessage<'a>>,
    /// The cursor string to poll with next.
    pub cursor: String,
    /// One entry per channel.
    pub channels: Vec<serde::de::IgnoredAny>,
}

/// One message of a [`PollAnswer`].
#[derive(Debug, serde::Deserialize)]
pub struct PollMessage<'a> {
    /// The message's data, unparsed.
    #[serde(borrow)]
    pub data: &'a serde_json::value::RawValue,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ts_is_found() {
        let f = br#"{"message":{"channel":"a","seq":1,"id":"e-1","time":5,"data":{"ts":123456}}}"#;
        assert_eq!(find_ts(f), Some(123456));
        assert_eq!(find_ts(b"{}"), None);
        // Not at the end: found by the search, as before.
        assert_eq!(find_ts(br#"{"data":{"ts":77,"x":1}}"#), Some(77));
        assert_eq!(find_ts(b"{\"ts\":42}\n"), Some(42));
        assert_eq!(find_ts(b"\"ts\":42"), Some(42));
        assert_eq!(find_ts(br#"{"ts":}"#), None);
        for n in [0u64, 7, 12345678, 123456789, 1763772000123456789, u64::MAX] {
            let frame = format!("{{\"message\":{{\"data\":{{\"ts\":{n}}}}}}}");
            assert_eq!(find_ts(frame.as_bytes()), Some(n), "{frame}");
        }
        assert_eq!(find_ts(br#"{"ts":"x"}"#), None);
        assert_eq!(find(b"abcabd", b"abd"), Some(3));
        assert_eq!(find(b"ab", b"abd"), None);
    }

    #[test]
    fn ws_roundtrip_and_partial() {
        let mut out = Vec::new();
        ws_frame(1, b"hello", &mut out);
        let f = ws_parse(&mut out).unwrap();
        assert_eq!((f.opcode, f.fin), (1, true));
        assert_eq!(&out[f.start..f.end], b"hello");
        let mut big = vec![0x81, 126, 0x01, 0x00];
        big.extend(std::iter::repeat_n(b'x', 200));
        assert!(ws_parse(&mut big).is_none());
        big.extend(std::iter::repeat_n(b'x', 56));
        assert_eq!(ws_parse(&mut big).unwrap().end, 260);
    }

    #[test]
    fn dechunks_across_reads() {
        let mut d = Dechunker::default();
        let mut body = Vec::new();
        let mut raw = b"5\r\nhel".to_vec();
        d.feed(&mut raw, &mut body).unwrap();
        raw.extend_from_slice(b"lo\r\n3;x=1\r\nabc\r\n0\r\n\r\n");
        d.feed(&mut raw, &mut body).unwrap();
        assert_eq!(body, b"helloabc");
        assert!(d.done);
    }

    #[test]
    fn heads_and_events() {
        let h = parse_response_head(b"HTTP/1.1 200 OK\r\ncontent-length: 12\r\n\r\nxx")
            .unwrap()
            .unwrap();
        assert_eq!((h.status, h.content_length, h.len), (200, Some(12), 39));
        assert!(parse_response_head(b"HTTP/1.1 200 OK\r\n")
            .unwrap()
            .is_none());
        assert!(!h.close);
        assert_eq!(
            sse_classify(b"event: subscribed\ndata: {}"),
            SseEvent::Subscribed
        );
        assert_eq!(
            sse_classify(b"id: e:1\ndata: {\"ts\":1}"),
            SseEvent::Message(b"{\"ts\":1}")
        );
        assert_eq!(sse_classify(b": ping"), SseEvent::Other);
    }

    #[test]
    fn a_head_says_whether_the_server_closes_the_connection() {
        let close = |head: &str| {
            parse_response_head(format!("{head}\r\n\r\n").as_bytes())
                .unwrap()
                .unwrap()
                .close
        };
        // Sockudo's HTTP API answers (lower case, as hyper writes them).
        assert!(close(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close"
        ));
        assert!(close("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close"));
        assert!(!close("HTTP/1.1 200 OK\r\nConnection: keep-alive"));
        assert!(!close("HTTP/1.1 200 OK\r\ncontent-length: 0"));
        // HTTP/1.0 closes unless it says keep-alive.
        assert!(close("HTTP/1.0 200 OK\r\ncontent-length: 0"));
        assert!(!close("HTTP/1.0 200 OK\r\nConnection: Keep-Alive"));
    }
}
