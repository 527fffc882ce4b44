//! Protocol detection on a fresh connection, in one place: [`detect`] looks at the connection's
//! first bytes without consuming them (a peek), asks each registered [`Detector`] in turn what
//! they are, and hands the prefix it looked at on to the protocol that recognised it. The bytes
//! stay in the socket, so a protocol that was not chosen (hyper, answering HTTP as it always
//! did) reads them as if nobody had looked.
//!
//! The HTTP listener registers its detectors in one list (`herald-server`'s `listener.rs`): a
//! directly served SSE stream ([`crate::sse::DETECTOR`]) and Herald's WebSocket handshake
//! ([`crate::ws::DETECTOR`], which only says where the connection is served). A WebSocket at
//! another path is one more [`GetPath`]; a protocol of its own on another listener (a raw TCP
//! port) implements [`Detector`] and calls [`detect`] with its own list.
//!
//! Waiting: at most the `first_byte` deadline for the first byte, then the `head` deadline for
//! the rest of what the detectors need. Peeking leaves the socket readable, so its readiness
//! cannot say when more of a request that arrives in pieces is there: while every detector is
//! undecided, the prefix is looked at again after a pause, 5 ms at first and doubling (to at most
//! 250 ms) while nothing new arrives. A request usually arrives whole, and then nothing waits.

use std::time::Duration;

use tokio::time::Instant;

use crate::conn::Conn;
use crate::deadlines::Deadlines;

/// Most bytes of a connection's start that are looked at; past them the detectors have said
/// nothing and the connection is the default protocol's.
pub const MAX_PREFIX_BYTES: usize = 8 * 1024;
/// The first look's size: a request line and the headers of most requests.
const FIRST_LOOK_BYTES: usize = 1024;
/// First pause before looking again at a prefix that arrives in pieces.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
/// Longest pause between looks at a prefix that arrives in pieces.
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// What a detector makes of a connection's first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Its protocol's, whatever follows.
    Mine,
    /// Not its protocol's, whatever follows.
    NotMine,
    /// Could still be either: more bytes decide.
    Undecided,
}

/// A protocol that recognises itself from the first bytes of a connection.
pub trait Detector: Sync {
    /// What `prefix`, the first bytes the client sent (all of them so far, up to
    /// [`MAX_PREFIX_BYTES`]), is. Called again with a longer prefix while it says
    /// [`Verdict::Undecided`]; it must not panic on any bytes.
    fn detect(&self, prefix: &[u8]) -> Verdict;
}

/// A `GET` of one path (with or without a query) on HTTP/1: how a WebSocket handshake at a
/// path, Herald's `/v1/ws` or another protocol's (`/mqtt`), is recognised.
#[derive(Debug, Clone, Copy)]
pub struct GetPath {
    /// `GET ` and the path.
    request_line: &'static str,
}

impl GetPath {
    /// Recognises `GET {request_line minus "GET "}` followed by a space or a query:
    /// `request_line` is `"GET /path"`.
    pub const fn new(request_line: &'static str) -> GetPath {
        GetPath { request_line }
    }
}

impl Detector for GetPath {
    fn detect(&self, prefix: &[u8]) -> Verdict {
        let wanted = self.request_line.as_bytes();
        let seen = prefix.len().min(wanted.len());
        if prefix[..seen] != wanted[..seen] {
            return Verdict::NotMine;
        }
        match prefix.get(wanted.len()) {
            None => Verdict::Undecided,
            Some(b' ' | b'?') => Verdict::Mine,
            Some(_) => Verdict::NotMine,
        }
    }
}

/// What [`detect`] found a fresh connection to be.
pub enum Detected {
    /// The protocol of the detector at `index` in the list, which saw `prefix` (still unread in
    /// the socket); the first byte arrived at `started`.
    Chosen {
        /// The detector's place in the list.
        index: usize,
        /// The bytes the detector recognised, for its protocol to use.
        prefix: Vec<u8>,
        /// When the first byte arrived.
        started: Instant,
    },
    /// No detector's: the default protocol's, whose first byte arrived at the instant given;
    /// nothing was consumed.
    Other(Instant),
    /// The client sent nothing in time: close it.
    Gone,
    /// Part of a prefix arrived, not enough for the detectors in time: the listener answers
    /// that the request timed out, and closes.
    Late,
}

/// Waits (at most `first_byte` for the first byte, then `head` for the rest) until one of
/// `detectors` says [`Verdict::Mine`] (the first in the list that does wins) or all say
/// [`Verdict::NotMine`]. A socket that fails, or a prefix over [`MAX_PREFIX_BYTES`], or a
/// client that sent all it will while some are undecided, is the default protocol's.
pub async fn detect(
    stream: &mut Conn,
    deadlines: &Deadlines,
    detectors: &[&dyn Detector],
) -> Detected {
    let mut deadline = Instant::now() + deadlines.first_byte;
    let mut first_byte_at = None;
    let mut pause = FIRST_PAUSE;
    let mut seen = 0;
    loop {
        // Waits for something to read with a one-byte peek (readiness alone can be reported
        // for a fresh socket that has nothing to read), so no buffer is held while waiting.
        let waited = async {
            stream.peek(&mut [0u8; 1]).await?;
            stream.read_closed().await
        };
        let read_closed = match tokio::time::timeout_at(deadline, waited).await {
            Ok(Ok(closed)) => closed,
            // The default protocol sees the same error and deals with it.
            Ok(Err(_)) => return Detected::Other(Instant::now()),
            Err(_) if first_byte_at.is_none() => return Detected::Gone,
            Err(_) => return Detected::Late,
        };
        let started = *first_byte_at.get_or_insert_with(|| {
            let now = Instant::now();
            deadline = now + deadlines.head;
            now
        });
        // Only while looking: the buffer is gone before the next wait. A first look of
        // FIRST_LOOK_BYTES decides most connections (a WebSocket handshake by its request line,
        // anything but a GET at once); only a look that fills it with the detectors undecided
        // looks again, at once, with room for all of MAX_PREFIX_BYTES. Every connection's
        // look at its full bound cost an 8 KiB buffer that the allocator's thread caches then
        // kept by the dozen once the connections were idle.
        let mut buf = vec![0u8; FIRST_LOOK_BYTES];
        let (n, undecided) = loop {
            let n = match stream.peek(&mut buf).await {
                Ok(n) => n,
                Err(_) => return Detected::Other(started),
            };
            let mut undecided = false;
            for (index, detector) in detectors.iter().enumerate() {
                match detector.detect(&buf[..n]) {
                    Verdict::Mine => {
                        buf.truncate(n);
                        return Detected::Chosen {
                            index,
                            prefix: buf,
                            started,
                        };
                    }
                    Verdict::NotMine => {}
                    Verdict::Undecided => undecided = true,
                }
            }
            if undecided && n == buf.len() && n < MAX_PREFIX_BYTES {
                buf = vec![0u8; MAX_PREFIX_BYTES];
                continue;
            }
            break (n, undecided);
        };
        // Over the bound, or the client sent all it will: the default protocol's.
        if !undecided || n == 0 || n == MAX_PREFIX_BYTES || read_closed {
            return Detected::Other(started);
        }
        drop(buf);
        pause = if n > seen {
            FIRST_PAUSE
        } else {
            (pause * 2).min(MAX_PAUSE)
        };
        seen = n;
        if Instant::now() >= deadline {
            return Detected::Late;
        }
        tokio::time::sleep_until((Instant::now() + pause).min(deadline)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_get_path_is_decided_on_the_request_line() {
        let ws = GetPath::new("GET /v1/ws");
        assert_eq!(ws.detect(b"GET /v1/ws HTTP/1.1\r\n"), Verdict::Mine);
        assert_eq!(ws.detect(b"GET /v1/ws?token=t HTTP/1.1"), Verdict::Mine);
        assert_eq!(ws.detect(b""), Verdict::Undecided);
        assert_eq!(ws.detect(b"GET /v1"), Verdict::Undecided);
        assert_eq!(ws.detect(b"GET /v1/ws"), Verdict::Undecided);
        assert_eq!(ws.detect(b"GET /v1/wss HTTP/1.1"), Verdict::NotMine);
        assert_eq!(ws.detect(b"GET /v1/w HTTP/1.1"), Verdict::NotMine);
        assert_eq!(ws.detect(b"POST /v1/ws HTTP/1.1"), Verdict::NotMine);
        assert_eq!(ws.detect(b"\x16\x03\x01"), Verdict::NotMine);
        let mqtt = GetPath::new("GET /mqtt");
        assert_eq!(mqtt.detect(b"GET /mqtt HTTP/1.1"), Verdict::Mine);
        assert_eq!(mqtt.detect(b"GET /v1/ws HTTP/1.1"), Verdict::NotMine);
    }

    /// The listener's detectors, as `herald-server` registers them.
    fn http_detectors() -> [&'static dyn Detector; 2] {
        [&crate::sse::DETECTOR, &crate::ws::DETECTOR]
    }

    /// What `detect` makes of a connection whose client sends `sent` (in two pieces, the second
    /// after a pause) and then waits.
    async fn detected(sent: [&'static [u8]; 2], deadlines: Deadlines) -> (Detected, Vec<u8>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
            for piece in sent {
                client.write_all(piece).await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut rest = Vec::new();
            let _ = client.read_to_end(&mut rest).await;
        });
        let (tcp, _) = listener.accept().await.unwrap();
        let mut conn = Conn::Plain(tcp);
        let found = detect(&mut conn, &deadlines, &http_detectors()).await;
        // Nothing was consumed: the socket still holds every byte the client sent.
        let mut unread = vec![0u8; 256];
        let n = match &found {
            Detected::Gone => 0,
            _ => conn.peek(&mut unread).await.unwrap(),
        };
        unread.truncate(n);
        drop(conn);
        client.abort();
        (found, unread)
    }

    #[tokio::test]
    async fn the_first_detector_to_claim_a_connection_gets_it_with_nothing_consumed() {
        let deadlines = Deadlines::default();
        let sse = b"GET /v1/sse?channel=a HTTP/1.1\r\nHost: x\r\n\r\n";
        let (found, unread) = detected([&sse[..9], &sse[9..]], deadlines).await;
        assert!(matches!(found, Detected::Chosen { index: 0, ref prefix, .. } if prefix == sse));
        assert_eq!(unread, sse);
        let ws = b"GET /v1/ws?token=t HTTP/1.1\r\n";
        let (found, unread) = detected([&ws[..4], &ws[4..]], deadlines).await;
        assert!(matches!(found, Detected::Chosen { index: 1, .. }));
        assert_eq!(unread, ws);
        let other = b"POST /v1/channels/a/messages HTTP/1.1\r\n";
        let (found, unread) = detected([other, b""], deadlines).await;
        assert!(matches!(found, Detected::Other(_)));
        assert_eq!(unread, other);
    }

    #[tokio::test]
    async fn a_head_longer_than_the_first_look_is_looked_at_up_to_the_bound() {
        let deadlines = Deadlines::default();
        let head = |cookie: usize| -> &'static [u8] {
            let cookie = "c".repeat(cookie);
            let head =
                format!("GET /v1/sse?channel=a HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\n\r\n");
            Box::leak(head.into_bytes().into_boxed_slice())
        };
        let long = head(3 * FIRST_LOOK_BYTES);
        let (found, unread) = detected([long, b""], deadlines).await;
        assert!(matches!(found, Detected::Chosen { index: 0, ref prefix, .. } if prefix == long));
        assert_eq!(unread, long[..256]);
        // In two pieces, the first filling the first look.
        let (found, _) = detected(
            [&long[..FIRST_LOOK_BYTES], &long[FIRST_LOOK_BYTES..]],
            deadlines,
        )
        .await;
        assert!(matches!(found, Detected::Chosen { index: 0, ref prefix, .. } if prefix == long));
        // Past the bound, with the SSE detector still waiting for the end of the head: the
        // default protocol's, nothing consumed.
        let over = head(MAX_PREFIX_BYTES);
        let (found, unread) = detected([over, b""], deadlines).await;
        assert!(matches!(found, Detected::Other(_)));
        assert_eq!(unread, over[..256]);
    }

    #[tokio::test]
    async fn silence_is_gone_and_a_head_cut_short_is_late() {
        let deadlines = Deadlines {
            first_byte: Duration::from_millis(100),
            head: Duration::from_millis(100),
            ..Deadlines::default()
        };
        let (found, _) = detected([b"", b""], deadlines).await;
        assert!(matches!(found, Detected::Gone));
        let (found, _) = detected([b"GET /v1/ss", b""], deadlines).await;
        assert!(matches!(found, Detected::Late));
    }
}
