//! Recognising a fresh connection's first request before hyper does, without consuming it
//! ([`SseDetector`], one of the HTTP listener's detectors, [`crate::detect`]). If it is a
//! complete `GET /v1/sse` (HTTP/1.0 or 1.1, no body, header block within
//! [`MAX_PREFIX_BYTES`]), its header bytes are consumed and [`super::direct`] serves the stream;
//! anything else is left untouched in the socket for hyper, which answers it as it always did.
//! The request is parsed with `httparse`, the parser hyper itself uses.

use std::io;

use axum::http::{header, HeaderMap, Uri};

use crate::conn::Conn;
#[cfg(doc)]
use crate::detect::MAX_PREFIX_BYTES;
use crate::detect::{Detector, Verdict};

/// Most header lines looked at; more go to hyper (which allows 100).
const MAX_HEADERS: usize = 64;

/// The parts of an SSE request the stream needs.
pub struct SseRequest {
    /// The request said HTTP/1.0 (the answer says so too).
    pub http10: bool,
    /// The query string, as axum's `RawQuery` gives it.
    pub query: Option<String>,
    /// Every header, as hyper would have given them.
    pub headers: HeaderMap,
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

/// Recognises a fresh connection whose first request is a complete `GET /v1/sse` (see the
/// module docs), for [`crate::detect`].
#[derive(Debug, Clone, Copy)]
pub struct SseDetector;

impl Detector for SseDetector {
    fn detect(&self, prefix: &[u8]) -> Verdict {
        match classify(prefix) {
            Head::Sse { .. } => Verdict::Mine,
            Head::Other => Verdict::NotMine,
            Head::Incomplete => Verdict::Undecided,
        }
    }
}

/// Consumes the header block of the SSE request [`SseDetector`] recognised in `prefix` (the
/// bytes still unread in the socket) and returns it; `None` if the socket failed meanwhile.
pub async fn take_request(stream: &mut Conn, mut prefix: Vec<u8>) -> Option<Box<SseRequest>> {
    match classify(&prefix) {
        Head::Sse { len, request } => match consume(stream, &mut prefix[..len]).await {
            Ok(()) => Some(Box::new(request)),
            Err(_) => None,
        },
        // Not reached: the detector took these very bytes for an SSE request.
        Head::Other | Head::Incomplete => None,
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
