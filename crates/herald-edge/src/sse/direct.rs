//! An SSE stream served on Herald's own loop, without hyper: for a fresh connection whose first
//! request is `GET /v1/sse` ([`serve_detected`], called by the accept loop when the SSE detector
//! recognised it, before hyper sees the connection). It answers exactly what the hyper path answers (status, headers, JSON errors,
//! events), then runs on the connection driver ([`crate::driver`]) as a wire, like a WebSocket
//! connection: its waker left with the socket and the outbox, no stored futures, no timer (pings
//! and shutdown arrive through the outbox from the keep-alive roster; only a token that expires
//! gets a timer), no buffers while idle.
//!
//! The body ends by closing the connection (`connection: close`, neither a length nor chunked
//! encoding): a stream ends only when the server ends it, an `EventSource` reconnects on a new
//! connection anyway, so there is no next request to keep the connection for; writes carry
//! no chunk framing; and HTTP/1.0 clients read the same bytes.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::Arc;

use axum::http::StatusCode;
use herald_core::outbox::{Batch, CloseReason, Outbox};
use herald_core::HeraldError;

use super::sniff::SseRequest;
use super::{SseStream, PREAMBLE, STREAM_HEADERS};
use crate::conn::Conn;
use crate::deadlines::{request_timeout, Deadlines};
use crate::driver::{self, slow_consumer_goodbye, Encoded, Ended, Marks, Served, Wire};
use crate::http::error_parts;
use crate::roster::Place;
use crate::socket::send;
use crate::Edge;

/// What the CORS layer of the hyper path adds to every `GET /v1/sse` answer (any origin may
/// read the stream; see [`crate::router`]).
const CORS_HEADERS: [(&str, &str); 2] = [
    (
        "vary",
        "origin, access-control-request-method, access-control-request-headers",
    ),
    ("access-control-allow-origin", "*"),
];
/// Most bytes of unexpected input read (and dropped) in one go.
const READ_BUDGET: usize = 64 * 1024;

/// Serves the SSE stream of a fresh connection whose first request [`super::DETECTOR`]
/// recognised, and [`super::take_request`] took out of the socket, until the stream ends or the
/// connection parks.
pub async fn serve_detected(edge: &Arc<Edge>, mut conn: Conn, request: Box<SseRequest>) {
    // Every step but the idle wait is boxed, so the connection's task is only as large as its
    // idle state: a future stores the largest of its steps.
    let mut connection = match Box::pin(open(edge, &mut conn, request)).await {
        Some(connection) => connection,
        None => {
            let _ = discard_input(&mut conn);
            return;
        }
    };
    let place = edge.keepalive.join(&connection.wire.outbox);
    let served = connection.serve(&mut conn, &edge.parking).await;
    // Boxed: said once, at the end, and no part of an idle stream's task.
    Box::pin(after(edge, connection, conn, place, served)).await;
}

/// Answers `408` to a fresh connection whose first request's head did not arrive whole within
/// the head deadline while it was being looked at ([`crate::detect::Detected::Late`]), as hyper's
/// path answers a late head, then reads what the client sent so closing sends a FIN.
pub async fn answer_late(conn: &mut Conn, deadlines: &Deadlines) {
    let late = request_timeout("head", deadlines.head);
    Box::pin(answer_error(conn, false, &late)).await;
    let _ = discard_input(conn);
}

/// Parks a stream that went idle, or closes one that ended.
async fn after(
    edge: &Arc<Edge>,
    mut connection: Connection,
    mut conn: Conn,
    place: Place,
    served: Served<()>,
) {
    let ended = match served {
        Served::Parks(ticket) => return super::park::park(edge, connection, conn, place, ticket),
        Served::Ends(ended) => ended,
    };
    connection.wire.goodbye(&mut conn, ended).await;
    edge.keepalive.leave(place);
    // Whatever the client sent is read first, so closing sends a FIN rather than a reset that
    // could discard the last events on the client's side.
    let _ = discard_input(&mut conn);
    // A TLS stream also says `close_notify`; the connection's state is gone first, and the
    // socket is moved into the boxed goodbye, so a plain stream's idle task is no larger.
    drop(connection);
    if conn.is_tls() {
        Box::pin(conn.close()).await;
    }
}

/// Serves a stream revived from parking.
pub(super) async fn resume(
    edge: Arc<Edge>,
    mut connection: Connection,
    mut conn: Conn,
    place: Place,
) {
    let served = connection.serve(&mut conn, &edge.parking).await;
    Box::pin(after(&edge, connection, conn, place, served)).await;
}

/// Opens the stream and writes the response head with the first events; or answers the error
/// that prevents it. Returns the connection to wait on, unless it is already over.
async fn open(edge: &Edge, conn: &mut Conn, request: Box<SseRequest>) -> Option<Connection> {
    let http10 = request.http10;
    let mut stream = match SseStream::open(edge, request.query.as_deref(), &request.headers).await {
        Ok(stream) => stream,
        Err(e) => {
            answer_error(conn, http10, &e).await;
            return None;
        }
    };
    // The head, the preamble and what subscribing queued (`subscribed` events, catch-up) go
    // out in one write.
    let mut buf = Vec::with_capacity(1024);
    response_head(&mut buf, http10, StatusCode::OK, &STREAM_HEADERS);
    buf.extend_from_slice(PREAMBLE);
    let (frames, closed) = stream.outbox.take();
    stream.encode_events(frames, closed, false, &mut buf);
    if send(conn, buf).await.is_err() || closed.is_some() {
        return None;
    }
    Some(Connection::new(stream, Marks::new(true)))
}

/// One stream's state while it is served: all an idle SSE connection holds besides its socket.
pub(super) type Connection = driver::Connection<SseStream>;

/// The SSE stream as a wire of the driver: it reads nothing but the client's closing (what a
/// client sends is dropped), encodes events with their cursors as ids, pings only a stream that
/// wrote nothing since the tick before, and ends with a `disconnect` event in the same write as
/// the last events. The keep-alive mark is "events were written since the last tick".
impl Wire for SseStream {
    /// Nothing more to say: a stream that ends says so in its last events.
    type End = ();
    type Cuts = ();

    fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    fn expires(&self) -> Option<u64> {
        self.expires
    }

    fn read(&mut self, conn: &mut Conn) -> Option<Ended<()>> {
        (!discard_input(conn)).then_some(Ended::Gone)
    }

    fn encode(&mut self, batch: Batch, wrote_since_tick: &mut bool) -> Encoded<Self> {
        let done = batch.closed.is_some();
        let quiet = batch.frames.is_empty();
        // A tick pings only a stream that sent nothing since the tick before.
        let ping = batch.ping && quiet && !*wrote_since_tick;
        if batch.ping {
            *wrote_since_tick = false;
        } else {
            *wrote_since_tick |= !quiet;
        }
        let mut bytes = Vec::new();
        self.encode_events(batch.frames, batch.closed, ping, &mut bytes);
        Encoded {
            bytes,
            cuts: (),
            ends: done.then_some(Ended::Wire(())),
            last: done,
        }
    }

    fn cut_end(_: &(), _sent: usize, rest: &[u8], at: usize) -> usize {
        event_end(rest, at)
    }

    /// The stream ends with a `disconnect` event, queued as any close is.
    fn expired(&mut self) -> Option<Ended<()>> {
        self.expires = None;
        self.outbox.close(CloseReason::TokenExpired);
        None
    }

    /// A slow consumer cut off: the rest of the event in progress, then `disconnect`.
    async fn goodbye(&mut self, conn: &mut Conn, ended: Ended<()>) {
        if let Ended::Cut(mut rest) = ended {
            let slow = Some(CloseReason::SlowConsumer);
            self.encode_events(VecDeque::new(), slow, false, &mut rest);
            slow_consumer_goodbye(conn, rest).await;
        }
    }
}

/// Where the event in progress ends in `buf`, of which `written` bytes are written: after the
/// first blank line (`\n\n`) that ends past `written` (an event's `data:` is JSON on one line,
/// so a blank line only ever ends an event).
fn event_end(buf: &[u8], written: usize) -> usize {
    if written >= 2 && &buf[written - 2..written] == b"\n\n" {
        return written;
    }
    let from = written.saturating_sub(1);
    buf[from..]
        .windows(2)
        .position(|w| w == b"\n\n")
        .map_or(buf.len(), |at| from + at + 2)
}

/// Answers a request the stream could not open for, as `crate::http::error_response` would.
async fn answer_error(conn: &mut Conn, http10: bool, e: &HeraldError) {
    let (status, body) = error_parts(e);
    let length = body.len().to_string();
    let mut buf = Vec::with_capacity(256 + body.len());
    response_head(
        &mut buf,
        http10,
        status,
        &[
            ("content-type", "application/json"),
            ("content-length", &length),
        ],
    );
    buf.extend_from_slice(&body);
    let _ = send(conn, buf).await;
}

/// The status line and headers of an answer: `headers`, the CORS headers, `connection: close`
/// and the date, as hyper would send them.
fn response_head(buf: &mut Vec<u8>, http10: bool, status: StatusCode, headers: &[(&str, &str)]) {
    let minor = if http10 { 0 } else { 1 };
    let reason = status.canonical_reason().unwrap_or("");
    let _ = write!(buf, "HTTP/1.{minor} {} {reason}\r\n", status.as_u16());
    for (name, value) in headers.iter().chain(CORS_HEADERS.iter()) {
        let _ = write!(buf, "{name}: {value}\r\n");
    }
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let _ = write!(buf, "connection: close\r\ndate: {date}\r\n\r\n");
}

/// Reads and drops what the client sent (an SSE client sends nothing after its request).
/// Returns false when the client has closed the connection or it failed.
fn discard_input(conn: &mut Conn) -> bool {
    let mut chunk = [0u8; 1024];
    let mut budget = READ_BUDGET;
    while budget > 0 {
        match conn.try_read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => budget = budget.saturating_sub(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::event_end;

    #[test]
    fn a_cut_keeps_the_event_in_progress_whole() {
        let buf = b"id: 1\ndata: {}\n\nid: 2\ndata: {}\n\n";
        let first = "id: 1\ndata: {}\n\n".len();
        assert_eq!(event_end(buf, 0), first);
        assert_eq!(event_end(buf, 3), first);
        assert_eq!(event_end(buf, first - 1), first);
        assert_eq!(
            event_end(buf, first),
            first,
            "an event just finished: nothing more"
        );
        assert_eq!(event_end(buf, first + 1), buf.len());
    }
}
