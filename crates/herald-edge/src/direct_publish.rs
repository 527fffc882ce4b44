//! One-message publishes answered without hyper. A plain connection whose requests are
//! `POST /v1/channels/{name}/messages`, each arriving whole (head and body) with a
//! `Content-Length`, is served by this loop: it peeks at the socket, reads exactly one request,
//! hands its path, headers and body to a [`Handler`] (the API's own publish, the same code the
//! router runs) and writes the answer, as long as the client keeps sending such requests.
//!
//! Anything else (another route or method, a body sent in pieces or chunked, `Expect`,
//! `Upgrade`, `Connection: close`, HTTP/1.0, a percent-encoded or query-carrying target, a head
//! over [`MAX_HEAD_BYTES`] or a body over [`MAX_BODY_BYTES`]) is left unread in the socket and
//! the connection goes to hyper, which answers it and everything after it as it always did.
//! So this loop only ever serves requests it can serve exactly as the router would, and it
//! never has bytes to give back. The request is parsed with `httparse`, hyper's own parser.
//!
//! Between requests the loop waits for readiness with no buffer held, at most the keep-alive
//! deadline, and ends at shutdown; a request is only taken once it is all there, so the head and
//! body deadlines hyper's connections need do not arise.
//!
//! Why: a publish costs about a tenth less CPU this way (2-3 µs of about 20 on a 2-core
//! machine's loopback, `scripts/http-floor.sh`; docs/benchmarks.md, session 16).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, Uri};
use axum::response::Response;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use herald_core::telemetry::telemetry;

use crate::conn::Conn;

/// Largest request head served here.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;
/// Largest body served here; a larger one goes to hyper (the message limit applies either way).
pub const MAX_BODY_BYTES: usize = 8 * 1024;
/// Bytes looked at first: a publish with a small message fits.
const FIRST_LOOK: usize = 1024;
/// Most header lines served here (hyper allows 100).
const MAX_HEADERS: usize = 64;
/// The target's start: the rest is the channel's path, as the router's `{*path}` gets it.
const CHANNELS: &str = "/v1/channels/";

/// One publish request, read whole.
pub struct PublishRequest {
    /// The target after `/v1/channels/` (`NAME/messages`): no `%`, `?` or `#` in it.
    pub path: String,
    /// Every header, as hyper would have given them.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// Answers a publish request as the router would.
pub type Handler = Arc<dyn Fn(PublishRequest) -> BoxFuture<'static, Response> + Send + Sync>;

/// What the bytes peeked so far are.
pub(crate) enum Head {
    /// A whole publish: its head is `head` bytes, its body the `body` bytes after it.
    Publish {
        head: usize,
        body: usize,
        path: String,
        headers: HeaderMap,
    },
    /// Not one this loop serves, or not whole yet: hyper's.
    Other,
}

/// How the loop ended.
pub enum Served {
    /// The connection is done (closed by the client, idle too long, failed, or shutdown).
    Closed,
    /// The next request is not one this loop serves: it is unread, for hyper. `served`
    /// requests were answered here before it.
    HandOff {
        /// Requests answered here.
        served: u64,
    },
}

/// Serves publishes on `conn` while every request is one (`classify`); waits at most
/// `keepalive` for each next request, and stops between requests once `stop` is cancelled.
/// Holds no buffer while it waits.
pub async fn serve(
    conn: &mut Conn,
    handler: &Handler,
    keepalive: Duration,
    stop: &CancellationToken,
) -> Served {
    if conn.is_tls() {
        return Served::HandOff { served: 0 };
    }
    let mut served = 0;
    'requests: loop {
        let waited = tokio::select! {
            waited = tokio::time::timeout(keepalive, conn.readable()) => waited,
            _ = stop.cancelled() => return Served::Closed,
        };
        match waited {
            Ok(Ok(())) => {}
            _ => return Served::Closed,
        }
        let mut buf = vec![0u8; FIRST_LOOK];
        let (head, body, path, headers) = loop {
            let n = match conn.try_peek(&mut buf) {
                Ok(0) => return Served::Closed,
                Ok(n) => n,
                // Readiness can be reported with nothing to read: wait again.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue 'requests,
                Err(_) => return Served::HandOff { served },
            };
            match classify(&buf[..n]) {
                Head::Publish {
                    head,
                    body,
                    path,
                    headers,
                } => break (head, body, path, headers),
                // Perhaps cut by the first look: look again at everything there is.
                Head::Other if n == buf.len() && buf.len() == FIRST_LOOK => {
                    buf.resize(MAX_HEAD_BYTES + MAX_BODY_BYTES, 0);
                }
                Head::Other => return Served::HandOff { served },
            }
        };
        buf.truncate(head + body);
        if consume(conn, &mut buf).is_err() {
            return Served::Closed;
        }
        let body = Bytes::from(buf).slice(head..);
        let response = handler(PublishRequest {
            path,
            headers,
            body,
        })
        .await;
        let mut out = Vec::with_capacity(256);
        if write_response(&mut out, response).await.is_err() {
            return Served::Closed;
        }
        if conn.write_all(&out).await.is_err() {
            return Served::Closed;
        }
        served += 1;
        telemetry().direct_publishes.increment(1);
    }
}

/// Reads exactly `buf.len()` bytes, already in the socket's buffer (they were peeked).
fn consume(conn: &mut Conn, buf: &mut [u8]) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match conn.try_read(&mut buf[got..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes `response` as HTTP/1.1 bytes: status line, its headers, `content-length` and `date`
/// (as hyper would), and the body.
async fn write_response(out: &mut Vec<u8>, response: Response) -> Result<(), axum::Error> {
    use std::io::Write;
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await?;
    let status = parts.status;
    let _ = write!(
        out,
        "HTTP/1.1 {} {}\r\n",
        status.as_str(),
        status.canonical_reason().unwrap_or("")
    );
    for (name, value) in &parts.headers {
        if name == header::CONTENT_LENGTH {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let _ = write!(
        out,
        "content-length: {}\r\ndate: {date}\r\n\r\n",
        body.len()
    );
    out.extend_from_slice(&body);
    Ok(())
}

/// Decides what `bytes` (the socket's unread bytes) start with.
pub(crate) fn classify(bytes: &[u8]) -> Head {
    let mut lines = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut lines);
    let head = match req.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        _ => return Head::Other,
    };
    if req.method != Some("POST") || req.version != Some(1) {
        return Head::Other;
    }
    let Some(target) = req.path else {
        return Head::Other;
    };
    let Some(path) = target.strip_prefix(CHANNELS) else {
        return Head::Other;
    };
    // Nothing to decode and nothing after the path; and a target hyper would accept.
    if !path.ends_with("/messages")
        || path.contains(['%', '?', '#'])
        || target.parse::<Uri>().is_err()
    {
        return Head::Other;
    }
    let Some(headers) = crate::http::header_map(req.headers) else {
        return Head::Other;
    };
    let mut lengths = headers.get_all(header::CONTENT_LENGTH).iter();
    let (Some(length), None) = (lengths.next(), lengths.next()) else {
        return Head::Other;
    };
    let digits = length.as_bytes();
    if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return Head::Other;
    }
    let length: Option<usize> = std::str::from_utf8(digits)
        .ok()
        .and_then(|d| d.parse().ok());
    let keeps_alive = headers
        .get_all(header::CONNECTION)
        .iter()
        .all(|v| v.as_bytes().eq_ignore_ascii_case(b"keep-alive"));
    let served_by_hyper = [header::TRANSFER_ENCODING, header::EXPECT, header::UPGRADE];
    if !keeps_alive || served_by_hyper.iter().any(|h| headers.contains_key(h)) {
        return Head::Other;
    }
    let Some(body) = length.filter(|&len: &usize| len <= MAX_BODY_BYTES) else {
        return Head::Other;
    };
    if head > MAX_HEAD_BYTES || bytes.len() < head + body {
        return Head::Other;
    }
    Head::Publish {
        head,
        body,
        path: path.to_owned(),
        headers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PUBLISH: &[u8] = b"POST /v1/channels/news/eu/messages HTTP/1.1\r\nHost: x\r\n\
        Authorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\
        \r\n{\"data\":1}";

    fn publish(bytes: &[u8]) -> Option<(usize, usize, String, HeaderMap)> {
        match classify(bytes) {
            Head::Publish {
                head,
                body,
                path,
                headers,
            } => Some((head, body, path, headers)),
            Head::Other => None,
        }
    }

    #[test]
    fn takes_one_whole_publish_and_nothing_after_it() {
        let mut bytes = PUBLISH.to_vec();
        bytes.extend_from_slice(b"POST /v1/channels/next/messages HTTP/1.1\r\n");
        let (head, body, path, headers) = publish(&bytes).expect("a publish");
        assert_eq!(head + body, PUBLISH.len());
        assert_eq!(&PUBLISH[head..head + body], b"{\"data\":1}");
        assert_eq!(path, "news/eu/messages");
        assert_eq!(headers["authorization"], "Bearer k");
        assert_eq!(headers["content-length"], "10");
        let keep_alive = b"POST /v1/channels/a/messages HTTP/1.1\r\nConnection: Keep-Alive\r\n\
            Content-Length: 0\r\n\r\n";
        assert!(publish(keep_alive).is_some());
    }

    #[test]
    fn leaves_everything_else_to_hyper() {
        let with = |extra: &str| {
            format!("POST /v1/channels/a/messages HTTP/1.1\r\n{extra}Content-Length: 2\r\n\r\n{{}}")
        };
        let others = [
            "GET /v1/channels/a/messages HTTP/1.1\r\n\r\n".to_owned(),
            "POST /v1/channels/a/messages HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}".to_owned(),
            "POST /v1/channels/a HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}".to_owned(),
            "POST /v1/batch HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}".to_owned(),
            "POST /v1/channels/a%2Fb/messages HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}".to_owned(),
            "POST /v1/channels/a/messages?x=1 HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}".to_owned(),
            "POST http://h/v1/channels/a/messages HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"
                .to_owned(),
            "POST /v1/channels/a/messages HTTP/1.1\r\n\r\n".to_owned(),
            with("Transfer-Encoding: chunked\r\n"),
            with("Expect: 100-continue\r\n"),
            with("Upgrade: websocket\r\n"),
            with("Connection: close\r\n"),
            with("Content-Length: 2\r\n"),
            with("Bad Header\r\n"),
            "POST /v1/channels/a/messages HTTP/1.1\r\nContent-Length: +2\r\n\r\n{}".to_owned(),
            "POST /v1/channels/a/messages HTTP/1.1\r\nContent-Length: 99999\r\n\r\n{}".to_owned(),
            format!(
                "POST /v1/channels/a/messages HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
                MAX_BODY_BYTES + 1
            ),
            "\x16\x03\x01\x02\x00".to_owned(),
        ];
        for other in &others {
            assert!(publish(other.as_bytes()).is_none(), "{other:?}");
        }
        let many: String = (0..MAX_HEADERS + 1)
            .map(|i| format!("x-{i}: v\r\n"))
            .collect();
        assert!(publish(with(&many).as_bytes()).is_none());
        let long = format!("x-long: {}\r\n", "v".repeat(MAX_HEAD_BYTES));
        assert!(publish(with(&long).as_bytes()).is_none());
    }

    proptest! {
        #[test]
        fn no_prefix_of_a_publish_is_taken(cut in 0..PUBLISH.len()) {
            prop_assert!(publish(&PUBLISH[..cut]).is_none());
        }

        #[test]
        fn any_bytes_are_classified_without_panicking(
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let mut prefixed = b"POST /v1/channels/".to_vec();
            prefixed.extend_from_slice(&bytes);
            for candidate in [&bytes, &prefixed] {
                if let Some((head, body, ..)) = publish(candidate) {
                    prop_assert!(head + body <= candidate.len());
                }
            }
        }
    }
}
