//! The WebSocket wire format (RFC 6455 section 5) as Herald needs it: parsing the masked frames
//! a client sends, reassembling fragmented messages, and encoding the unmasked frames the server
//! sends. Nothing is buffered between reads unless a frame arrived incomplete, which is what lets
//! an idle connection cost almost nothing.

/// Close codes used by the server (RFC 6455 section 7.4 and Herald's own 4xxx codes).
pub mod close {
    /// Normal closure.
    pub const NORMAL: u16 = 1000;
    /// The server is going away (shutdown).
    pub const GOING_AWAY: u16 = 1001;
    /// The peer broke the protocol.
    pub const PROTOCOL_ERROR: u16 = 1002;
    /// A data message of a kind the endpoint does not take (a text message where a protocol
    /// takes binary ones only).
    pub const UNSUPPORTED_DATA: u16 = 1003;
    /// A text message was not UTF-8.
    pub const INVALID_PAYLOAD: u16 = 1007;
    /// A message was larger than the limit.
    pub const TOO_BIG: u16 = 1009;

    /// The code to answer a client's close with: its own, when it is one that may be sent on
    /// the wire (RFC 6455 section 7.4), else [`NORMAL`].
    pub fn echo(code: Option<u16>) -> u16 {
        match code {
            Some(c @ (1000..=1003 | 1007..=1011 | 3000..=4999)) => c,
            _ => NORMAL,
        }
    }
}

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// A complete message or control frame from the client.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming {
    /// A whole text message (reassembled if it was fragmented), valid UTF-8.
    Text(String),
    /// A whole binary message (Herald does not use them; the payload is dropped).
    Binary,
    /// A ping; its payload must be echoed in a pong.
    Ping(Vec<u8>),
    /// A pong.
    Pong,
    /// The client is closing, with its status code if it gave one.
    Close(Option<u16>),
}

impl Incoming {
    /// The text of a text message.
    pub fn text(&self) -> Option<&str> {
        match self {
            Incoming::Text(text) => Some(text),
            _ => None,
        }
    }
}

/// Why the client's bytes could not be accepted; each maps to a close code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// Broke RFC 6455 (unmasked frame, reserved bits or opcode, bad fragmentation...).
    Protocol(&'static str),
    /// A frame or message over the size limit.
    TooBig(usize),
    /// A text message that is not UTF-8.
    InvalidUtf8,
}

impl FrameError {
    /// The close code that goes with the error.
    pub fn close_code(&self) -> u16 {
        match self {
            FrameError::Protocol(_) => close::PROTOCOL_ERROR,
            FrameError::TooBig(_) => close::TOO_BIG,
            FrameError::InvalidUtf8 => close::INVALID_PAYLOAD,
        }
    }

    /// A sentence for the client.
    pub fn describe(&self, limit: usize) -> String {
        match self {
            FrameError::Protocol(why) => format!("WebSocket protocol error: {why}"),
            FrameError::TooBig(size) => {
                format!("message of {size} bytes is over the limit of {limit} bytes")
            }
            FrameError::InvalidUtf8 => "text message is not valid UTF-8".into(),
        }
    }
}

/// Reassembles client frames into messages.
pub struct FrameReader {
    /// Bytes of an incomplete frame, kept only until the rest arrives.
    partial: Vec<u8>,
    /// A fragmented data message being reassembled: its opcode and payload so far.
    fragmented: Option<(u8, Vec<u8>)>,
    max_message: usize,
}

impl FrameReader {
    /// Whether no frame or message is part-read (so the reader holds nothing to resume).
    pub fn is_idle(&self) -> bool {
        self.partial.is_empty() && self.fragmented.is_none()
    }

    /// The most bytes a frame or message may have ([`FrameReader::new`]'s bound).
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// A reader that refuses frames and messages larger than `max_message` bytes.
    pub fn new(max_message: usize) -> Self {
        FrameReader {
            partial: Vec::new(),
            fragmented: None,
            max_message,
        }
    }

    /// Feeds bytes read from the socket, appending every completed message to `out` (a binary
    /// message without its payload: Herald's protocols carry text).
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<Incoming>) -> Result<(), FrameError> {
        self.feed_with(input, &mut |message| {
            out.push(match message {
                Assembled::Message(message) => message,
                Assembled::Binary(_) => Incoming::Binary,
            })
        })
    }

    /// Feeds bytes of a connection that carries a byte stream in binary messages (MQTT over
    /// WebSocket): each completed binary message's payload is appended to `stream`, in order;
    /// every other message (text, ping, pong, close) goes to `out` as [`FrameReader::feed`]
    /// gives it.
    pub fn feed_stream(
        &mut self,
        input: &[u8],
        stream: &mut Vec<u8>,
        out: &mut Vec<Incoming>,
    ) -> Result<(), FrameError> {
        self.feed_with(input, &mut |message| match message {
            Assembled::Message(message) => out.push(message),
            Assembled::Binary(payload) => stream.extend_from_slice(&payload),
        })
    }

    fn feed_with(
        &mut self,
        input: &[u8],
        sink: &mut dyn FnMut(Assembled),
    ) -> Result<(), FrameError> {
        if self.partial.is_empty() {
            let used = self.parse_all(input, sink)?;
            if used < input.len() {
                self.partial = input[used..].to_vec();
            }
        } else {
            let mut data = std::mem::take(&mut self.partial);
            data.extend_from_slice(input);
            let used = self.parse_all(&data, sink)?;
            if used < data.len() {
                data.drain(..used);
                self.partial = data;
            }
        }
        Ok(())
    }

    fn parse_all(
        &mut self,
        mut data: &[u8],
        sink: &mut dyn FnMut(Assembled),
    ) -> Result<usize, FrameError> {
        let total = data.len();
        while let Some((frame, used)) = parse_frame(data, self.max_message)? {
            data = &data[used..];
            if let Some(message) = self.assemble(frame)? {
                sink(message);
            }
        }
        Ok(total - data.len())
    }

    fn assemble(&mut self, frame: Frame) -> Result<Option<Assembled>, FrameError> {
        match frame.opcode {
            OP_CLOSE => {
                let code = match frame.payload.len() {
                    0 => None,
                    1 => return Err(FrameError::Protocol("close payload of one byte")),
                    _ => Some(u16::from_be_bytes([frame.payload[0], frame.payload[1]])),
                };
                if std::str::from_utf8(frame.payload.get(2..).unwrap_or(&[])).is_err() {
                    return Err(FrameError::InvalidUtf8);
                }
                Ok(Some(Assembled::Message(Incoming::Close(code))))
            }
            OP_PING => Ok(Some(Assembled::Message(Incoming::Ping(frame.payload)))),
            OP_PONG => Ok(Some(Assembled::Message(Incoming::Pong))),
            OP_TEXT | OP_BINARY => {
                if self.fragmented.is_some() {
                    return Err(FrameError::Protocol(
                        "new message before the last one ended",
                    ));
                }
                if frame.fin {
                    finish(frame.opcode, frame.payload).map(Some)
                } else {
                    self.fragmented = Some((frame.opcode, frame.payload));
                    Ok(None)
                }
            }
            OP_CONTINUATION => {
                let Some((opcode, mut data)) = self.fragmented.take() else {
                    return Err(FrameError::Protocol(
                        "continuation frame with nothing to continue",
                    ));
                };
                if data.len() + frame.payload.len() > self.max_message {
                    return Err(FrameError::TooBig(data.len() + frame.payload.len()));
                }
                data.extend_from_slice(&frame.payload);
                if frame.fin {
                    finish(opcode, data).map(Some)
                } else {
                    self.fragmented = Some((opcode, data));
                    Ok(None)
                }
            }
            _ => Err(FrameError::Protocol("reserved opcode")),
        }
    }
}

/// A message as the reader assembled it, before the caller decides what a binary one keeps.
enum Assembled {
    /// Anything but a binary message.
    Message(Incoming),
    /// A whole binary message's payload.
    Binary(Vec<u8>),
}

fn finish(opcode: u8, payload: Vec<u8>) -> Result<Assembled, FrameError> {
    if opcode == OP_BINARY {
        return Ok(Assembled::Binary(payload));
    }
    String::from_utf8(payload)
        .map(|text| Assembled::Message(Incoming::Text(text)))
        .map_err(|_| FrameError::InvalidUtf8)
}

struct Frame {
    fin: bool,
    opcode: u8,
    payload: Vec<u8>,
}

/// Parses one client frame from the front of `data`: `Ok(None)` if it is not complete yet.
fn parse_frame(data: &[u8], max: usize) -> Result<Option<(Frame, usize)>, FrameError> {
    let [b0, b1, ..] = *data else {
        return Ok(None);
    };
    let fin = b0 & 0x80 != 0;
    if b0 & 0x70 != 0 {
        return Err(FrameError::Protocol(
            "reserved bits set (no extension was agreed)",
        ));
    }
    let opcode = b0 & 0x0F;
    let is_control = opcode & 0x8 != 0;
    if b1 & 0x80 == 0 {
        return Err(FrameError::Protocol("client frames must be masked"));
    }
    let (len, mut at) = match b1 & 0x7F {
        126 => match data.get(2..4) {
            Some(b) => (u16::from_be_bytes([b[0], b[1]]) as u64, 4),
            None => return Ok(None),
        },
        127 => match data.get(2..10) {
            Some(b) => {
                let len = u64::from_be_bytes(b.try_into().expect("8 bytes"));
                if len >> 63 != 0 {
                    return Err(FrameError::Protocol("payload length has its top bit set"));
                }
                (len, 10)
            }
            None => return Ok(None),
        },
        n => (n as u64, 2),
    };
    if is_control && (len > 125 || !fin) {
        return Err(FrameError::Protocol(
            "control frames must be whole and at most 125 bytes",
        ));
    }
    if len > max as u64 {
        return Err(FrameError::TooBig(
            usize::try_from(len).unwrap_or(usize::MAX),
        ));
    }
    let len = len as usize;
    let Some(mask) = data.get(at..at + 4) else {
        return Ok(None);
    };
    let mask = [mask[0], mask[1], mask[2], mask[3]];
    at += 4;
    let Some(body) = data.get(at..at + len) else {
        return Ok(None);
    };
    let payload = body
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ mask[i & 3])
        .collect();
    Ok(Some((
        Frame {
            fin,
            opcode,
            payload,
        },
        at + len,
    )))
}

/// Appends one unmasked, unfragmented server frame to `out`.
pub fn encode(out: &mut Vec<u8>, opcode: Opcode, payload: &[u8]) {
    out.push(0x80 | opcode as u8);
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= u16::MAX as usize => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
}

/// How many bytes [`encode`] writes for a payload of `len` bytes.
pub fn encoded_len(len: usize) -> usize {
    let header = match len {
        n if n < 126 => 2,
        n if n <= u16::MAX as usize => 4,
        _ => 10,
    };
    header + len
}

/// Appends a close frame with `code`.
pub fn encode_close(out: &mut Vec<u8>, code: u16) {
    encode(out, Opcode::Close, &code.to_be_bytes());
}

/// Opcodes the server sends.
#[derive(Debug, Clone, Copy)]
pub enum Opcode {
    /// Text frame.
    Text = OP_TEXT as isize,
    /// Binary frame.
    Binary = OP_BINARY as isize,
    /// Close frame.
    Close = OP_CLOSE as isize,
    /// Ping frame.
    Ping = OP_PING as isize,
    /// Pong frame.
    Pong = OP_PONG as isize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A masked client frame, as a browser would send it.
    fn client_frame(fin: bool, opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
        let mut out = vec![(if fin { 0x80 } else { 0 }) | opcode];
        match payload.len() {
            n if n < 126 => out.push(0x80 | n as u8),
            n if n <= 65535 => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(0x80 | 127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
        out
    }

    fn read_all(bytes: &[u8], max: usize) -> Result<Vec<Incoming>, FrameError> {
        let mut r = FrameReader::new(max);
        let mut out = Vec::new();
        r.feed(bytes, &mut out)?;
        Ok(out)
    }

    #[test]
    fn encoded_len_is_what_encode_writes() {
        for len in [0, 1, 125, 126, 65535, 65536, 70000] {
            let mut out = Vec::new();
            encode(&mut out, Opcode::Text, &vec![b'x'; len]);
            assert_eq!(encoded_len(len), out.len(), "{len}");
        }
    }

    #[test]
    fn text_ping_close() {
        let mut bytes = client_frame(true, OP_TEXT, b"{\"ping\":{}}", [1, 2, 3, 4]);
        bytes.extend(client_frame(true, OP_PING, b"hi", [9, 9, 9, 9]));
        bytes.extend(client_frame(
            true,
            OP_CLOSE,
            &1000u16.to_be_bytes(),
            [0, 0, 0, 0],
        ));
        assert_eq!(
            read_all(&bytes, 1024).unwrap(),
            vec![
                Incoming::Text("{\"ping\":{}}".into()),
                Incoming::Ping(b"hi".to_vec()),
                Incoming::Close(Some(1000)),
            ]
        );
    }

    #[test]
    fn fragmented_message_with_interleaved_ping() {
        let mut bytes = client_frame(false, OP_TEXT, b"hel", [1, 1, 1, 1]);
        bytes.extend(client_frame(true, OP_PING, b"", [2, 2, 2, 2]));
        bytes.extend(client_frame(true, OP_CONTINUATION, b"lo", [3, 3, 3, 3]));
        assert_eq!(
            read_all(&bytes, 1024).unwrap(),
            vec![Incoming::Ping(vec![]), Incoming::Text("hello".into())]
        );
    }

    #[test]
    fn medium_and_large_lengths() {
        let medium = "m".repeat(300);
        let large = "l".repeat(70_000);
        let mut bytes = client_frame(true, OP_TEXT, medium.as_bytes(), [5, 6, 7, 8]);
        bytes.extend(client_frame(true, OP_TEXT, large.as_bytes(), [8, 7, 6, 5]));
        assert_eq!(
            read_all(&bytes, 100_000).unwrap(),
            vec![Incoming::Text(medium), Incoming::Text(large)]
        );
    }

    #[test]
    fn protocol_violations() {
        let unmasked = [0x81, 0x01, b'x'];
        assert!(matches!(
            read_all(&unmasked, 10),
            Err(FrameError::Protocol(_))
        ));
        let rsv = client_frame(true, 0x40 | OP_TEXT, b"x", [0; 4]);
        assert!(matches!(read_all(&rsv, 10), Err(FrameError::Protocol(_))));
        let reserved_op = client_frame(true, 0x3, b"x", [0; 4]);
        assert!(matches!(
            read_all(&reserved_op, 10),
            Err(FrameError::Protocol(_))
        ));
        let orphan = client_frame(true, OP_CONTINUATION, b"x", [0; 4]);
        assert!(matches!(
            read_all(&orphan, 10),
            Err(FrameError::Protocol(_))
        ));
        let long_ping = client_frame(true, OP_PING, &[0; 126], [0; 4]);
        assert!(matches!(
            read_all(&long_ping, 1000),
            Err(FrameError::Protocol(_))
        ));
        let fragmented_ping = client_frame(false, OP_PING, b"", [0; 4]);
        assert!(matches!(
            read_all(&fragmented_ping, 10),
            Err(FrameError::Protocol(_))
        ));
        let bad_utf8 = client_frame(true, OP_TEXT, &[0xff, 0xfe], [0; 4]);
        assert_eq!(read_all(&bad_utf8, 10), Err(FrameError::InvalidUtf8));
        let big = client_frame(true, OP_TEXT, &[b'a'; 20], [0; 4]);
        assert_eq!(read_all(&big, 10), Err(FrameError::TooBig(20)));
        // A huge declared length is refused from the header alone, before any payload arrives.
        let mut huge = vec![0x81, 0x80 | 127];
        huge.extend_from_slice(&(1u64 << 40).to_be_bytes());
        assert!(matches!(
            read_all(&huge, 1 << 16),
            Err(FrameError::TooBig(_))
        ));
        // Fragments that add up past the limit.
        let mut parts = client_frame(false, OP_TEXT, &[b'a'; 8], [0; 4]);
        parts.extend(client_frame(true, OP_CONTINUATION, &[b'a'; 8], [0; 4]));
        assert_eq!(read_all(&parts, 10), Err(FrameError::TooBig(16)));
    }

    #[test]
    fn a_byte_stream_takes_binary_payloads_in_order_and_leaves_the_rest() {
        let mut bytes = client_frame(false, OP_BINARY, b"\x10\x0c", [1, 2, 3, 4]);
        bytes.extend(client_frame(true, OP_PING, b"p", [5, 5, 5, 5]));
        bytes.extend(client_frame(
            true,
            OP_CONTINUATION,
            b"\x00\x04",
            [6, 6, 6, 6],
        ));
        bytes.extend(client_frame(true, OP_BINARY, b"MQTT", [7, 7, 7, 7]));
        bytes.extend(client_frame(true, OP_TEXT, b"hi", [8, 8, 8, 8]));
        let mut reader = FrameReader::new(1024);
        let (mut stream, mut out) = (Vec::new(), Vec::new());
        for piece in bytes.chunks(3) {
            reader.feed_stream(piece, &mut stream, &mut out).unwrap();
        }
        assert_eq!(stream, b"\x10\x0c\x00\x04MQTT");
        assert_eq!(
            out,
            vec![Incoming::Ping(b"p".to_vec()), Incoming::Text("hi".into())]
        );
        assert!(reader.is_idle());
        // The message bound holds for binary messages too.
        let big = client_frame(true, OP_BINARY, &[0; 20], [0; 4]);
        let e = FrameReader::new(10).feed_stream(&big, &mut stream, &mut out);
        assert_eq!(e, Err(FrameError::TooBig(20)));
    }

    #[test]
    fn close_codes_are_echoed_only_when_sendable() {
        assert_eq!(close::echo(Some(1001)), 1001);
        assert_eq!(close::echo(Some(4321)), 4321);
        assert_eq!(close::echo(Some(1005)), close::NORMAL);
        assert_eq!(close::echo(Some(999)), close::NORMAL);
        assert_eq!(close::echo(None), close::NORMAL);
    }

    #[test]
    fn server_frames_encode_lengths() {
        let mut out = Vec::new();
        encode(&mut out, Opcode::Text, b"abc");
        assert_eq!(out, [0x81, 3, b'a', b'b', b'c']);
        out.clear();
        encode(&mut out, Opcode::Text, &[0; 200]);
        assert_eq!(&out[..4], &[0x81, 126, 0, 200]);
        out.clear();
        encode(&mut out, Opcode::Text, &[0; 70_000]);
        assert_eq!(&out[..2], &[0x81, 127]);
        assert_eq!(out.len(), 10 + 70_000);
        out.clear();
        encode_close(&mut out, 1001);
        assert_eq!(out, [0x88, 2, 0x03, 0xE9]);
    }

    proptest! {
        #[test]
        fn any_split_of_the_stream_gives_the_same_messages(
            texts in proptest::collection::vec("[a-z{}\":é]{0,300}", 1..6),
            splits in proptest::collection::vec(1usize..64, 1..40),
            mask in any::<[u8; 4]>(),
        ) {
            let mut bytes = Vec::new();
            for t in &texts {
                bytes.extend(client_frame(true, OP_TEXT, t.as_bytes(), mask));
            }
            let mut reader = FrameReader::new(1 << 20);
            let mut out = Vec::new();
            let mut rest = &bytes[..];
            for s in splits.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let n = (*s).min(rest.len());
                reader.feed(&rest[..n], &mut out).unwrap();
                rest = &rest[n..];
            }
            let expected: Vec<Incoming> = texts.into_iter().map(Incoming::Text).collect();
            prop_assert_eq!(out, expected);
            prop_assert!(reader.partial.is_empty(), "nothing kept once every frame is complete");
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut reader = FrameReader::new(256);
            let mut out = Vec::new();
            let _ = reader.feed(&bytes, &mut out);
        }
    }
}
