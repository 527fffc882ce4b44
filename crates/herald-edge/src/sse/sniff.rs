//! Looking at a fresh connection's first request before hyper does, without consuming it. If it
//! is a complete `GET /v1/sse` (HTTP/1.0 or 1.1, no body, header block within
//! [`MAX_HEAD_BYTES`]), its header bytes are consumed and [`super::direct`] serves the stream;
//! anything else is left untouched in the socket for hyper, which answers it as it always did.
//! The request is parsed with `httparse`, the parser hyper itself uses.

use std::io;
use std::time::Duration;

use axum::http::{header, HeaderMap, Uri};
use tokio::time::Instant;

use crate::conn::Conn;
use crate::deadlines::Deadlines;

/// Largest header block looked at; a larger one goes to hyper.
pub(super) const MAX_HEAD_BYTES: usize = 8 * 1024;
/// Most header lines looked at; more go to hyper (which allows 100).
const MAX_HEADERS: usize = 64;
/// First pause before looking again at a request that arrives in pieces (see [`sniff`]).
const FIRST_PAUSE: Duration = Duration::from_millis(5);
/// Longest pause between looks at a request that arrives in pieces.
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// The parts of an SSE request the stream needs.
pub(crate) struct SseRequest {
    /// The request said HTTP/1.0 (the answer says so too).
    pub http10: bool,
    /// The query string, as axum's `RawQuery` gives it.
    pub query: Option<String>,
    /// Every header, as hyper would have given them.
    pub headers: HeaderMap,
}

/// What a fresh connection turned out to be.
pub(super) enum Sniffed {
    /// An SSE request, whose header bytes have been consumed.
    Sse(Box<SseRequest>),
    /// Anything else, whose head started arriving at the instant given; nothing was consumed.
    Other(Instant),
    /// The client sent nothing in time, or the socket failed while it was being consumed:
    /// close it.
    Gone,
    /// Part of an SSE request head arrived, not all of it in time: answer 408 and close.
    Late,
}

/// What the bytes peeked so far are.
pub(crate) enum Head {
    /// A complete SSE request whose header block is `len` bytes.
    Sse { len: usize, request: SseRequest },
    /// Not one (or not one this loop serves).
    Other,
    /// Could still become one.
    Incomplete,
}

/// Waits (at most `first_byte` for the first byte, then `head` for the rest) until the first
/// request can be told apart. Peeking leaves
/// the socket readable, so its readiness cannot say when more of a request that arrives in
/// pieces is there: an incomplete request is looked at again after a pause, 5 ms at first and
/// doubling (to at most [`MAX_PAUSE`]) while nothing new arrives. A request usually arrives
/// whole, and then nothing waits.
pub(super) async fn sniff(stream: &mut Conn, deadlines: &Deadlines) -> Sniffed {
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
            // Hyper sees the same error and deals with it.
            Ok(Err(_)) => return Sniffed::Other(Instant::now()),
            Err(_) if first_byte_at.is_none() => return Sniffed::Gone,
            Err(_) => return Sniffed::Late,
        };
        let started = *first_byte_at.get_or_insert_with(|| {
            let now = Instant::now();
            deadline = now + deadlines.head;
            now
        });
        // Only while looking: the buffer is gone before the next wait.
        let mut buf = vec![0u8; MAX_HEAD_BYTES];
        let n = match stream.peek(&mut buf).await {
            Ok(n) => n,
            Err(_) => return Sniffed::Other(started),
        };
        match classify(&buf[..n]) {
            Head::Sse { len, request } => {
                return match consume(stream, &mut buf[..len]).await {
                    Ok(()) => Sniffed::Sse(Box::new(request)),
                    Err(_) => Sniffed::Gone,
                };
            }
            Head::Other => return Sniffed::Other(started),
            // Over the bound, or the client sent all it will: hyper answers as it would have.
            Head::Incomplete if n == 0 || n == MAX_HEAD_BYTES || read_closed => {
                return Sniffed::Other(started);
            }
            Head::Incomplete => {}
        }
        drop(buf);
        pause = if n > seen {
            FIRST_PAUSE
        } else {
            (pause * 2).min(MAX_PAUSE)
        };
        seen = n;
        if Instant::now() >= deadline {
            return Sniffed::Late;
        }
        tokio::time::sleep_until((Instant::now() + pause).min(deadline)).await;
    }
}

/// Reads exactly the header block (already in the socket's buffer) out of the socket.
async fn consume(stream: &mut Conn, buf: &mut [u8]) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        stream.readable().await?;
        match stream.try_read(&mut buf[got..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether a request target names the SSE endpoint (with or without a query).
fn is_sse_target(target: &str) -> bool {
    match target.strip_prefix("/v1/sse") {
        Some(rest) => rest.is_empty() || rest.starts_with('?') || rest.starts_with('#'),
        None => false,
    }
}

/// Decides what `bytes`, the start of a connection, are. Rejects as early as the request line
/// allows, so other requests go to hyper without waiting for their headers.
pub(crate) fn classify(bytes: &[u8]) -> Head {
    let mut lines = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut lines);
    let status = match req.parse(bytes) {
        Ok(status) => status,
        Err(_) => return Head::Other,
    };
    if req.method.is_some_and(|m| m != "GET") || req.path.is_some_and(|p| !is_sse_target(p)) {
        return Head::Other;
    }
    let len = match status {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => return Head::Incomplete,
    };
    // The target as hyper reads it, so the query is exactly what axum's `RawQuery` would give.
    let Some(uri) = req.path.and_then(|p| p.parse::<Uri>().ok()) else {
        return Head::Other;
    };
    if uri.path() != "/v1/sse" {
        return Head::Other;
    }
    let Some(headers) = crate::http::header_map(req.headers) else {
        return Head::Other;
    };
    // A request with a body is hyper's to read.
    let body = headers
        .get_all(header::CONTENT_LENGTH)
        .iter()
        .any(|v| v.as_bytes().trim_ascii() != b"0")
        || headers.contains_key(header::TRANSFER_ENCODING);
    if body {
        return Head::Other;
    }
    Head::Sse {
        len,
        request: SseRequest {
            http10: req.version == Some(0),
            query: uri.query().map(str::to_owned),
            headers,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sse(bytes: &[u8]) -> Option<(usize, SseRequest)> {
        match classify(bytes) {
            Head::Sse { len, request } => Some((len, request)),
            _ => None,
        }
    }

    const REQUEST: &[u8] = b"GET /v1/sse?channel=a&token=t HTTP/1.1\r\nHost: x\r\n\
        Authorization: Bearer abc\r\nLast-Event-ID: e:1\r\n\r\n";

    #[test]
    fn takes_a_complete_sse_get_and_nothing_after_its_head() {
        let mut bytes = REQUEST.to_vec();
        bytes.extend_from_slice(b"junk after");
        let (len, request) = sse(&bytes).expect("an SSE request");
        assert_eq!(len, REQUEST.len());
        assert!(!request.http10);
        assert_eq!(request.query.as_deref(), Some("channel=a&token=t"));
        assert_eq!(request.headers["authorization"], "Bearer abc");
        assert_eq!(request.headers["last-event-id"], "e:1");
        let (_, request) = sse(b"GET /v1/sse HTTP/1.0\r\n\r\n").unwrap();
        assert!(request.http10 && request.query.is_none());
        let (_, request) =
            sse(b"GET /v1/sse?a=1#frag HTTP/1.1\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert_eq!(request.query.as_deref(), Some("a=1"));
    }

    #[test]
    fn leaves_everything_else_to_hyper() {
        for other in [
            &b"POST /v1/sse HTTP/1.1\r\n\r\n"[..],
            b"OPTIONS /v1/sse?channel=a HTTP/1.1\r\n\r\n",
            b"HEAD /v1/sse HTTP/1.1\r\n\r\n",
            b"GET /v1/ssex HTTP/1.1\r\n\r\n",
            b"GET /v1/sse/ HTTP/1.1\r\n\r\n",
            b"GET /v1/poll?channel=a HTTP/1.1\r\n\r\n",
            b"GET http://host/v1/sse HTTP/1.1\r\n\r\n",
            b"GET /v1/sse HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
            b"GET /v1/sse HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            b"GET /v1/sse HTTP/2.0\r\n\r\n",
            b"\x16\x03\x01\x02\x00",
            b"GET /v1/sse HTTP/1.1\r\nBad Header\r\n\r\n",
        ] {
            assert!(
                matches!(classify(other), Head::Other),
                "{:?}",
                String::from_utf8_lossy(other)
            );
        }
        // Decided on the request line, before the headers are complete.
        assert!(matches!(
            classify(b"POST /v1/channels/a/messages HTTP/1.1\r\nHo"),
            Head::Other
        ));
        assert!(matches!(
            classify(b"GET /v1/ws?x HTTP/1.1\r\n"),
            Head::Other
        ));
        let many: String = (0..MAX_HEADERS + 1)
            .map(|i| format!("x-{i}: v\r\n"))
            .collect();
        let many = format!("GET /v1/sse HTTP/1.1\r\n{many}\r\n");
        assert!(matches!(classify(many.as_bytes()), Head::Other));
    }

    proptest! {
        #[test]
        fn every_prefix_of_a_request_waits_for_the_rest(cut in 0..REQUEST.len()) {
            prop_assert!(matches!(classify(&REQUEST[..cut]), Head::Incomplete));
        }

        #[test]
        fn any_bytes_are_classified_without_panicking(
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let mut prefixed = b"GET /v1/sse?".to_vec();
            prefixed.extend_from_slice(&bytes);
            let _ = classify(&bytes);
            if let Head::Sse { len, .. } = classify(&prefixed) {
                prop_assert!(len <= prefixed.len());
            }
        }
    }
}
