//! An SSE stream served on Herald's own loop, without hyper: for a fresh connection whose first
//! request is `GET /v1/sse` ([`serve_if_sse`], called by the accept loop before hyper sees the
//! connection). It answers exactly what the hyper path answers (status, headers, JSON errors,
//! events), then waits like a WebSocket connection: its waker left with the socket and the
//! outbox, no stored futures, no timer (pings and shutdown arrive through the outbox from the
//! keep-alive roster; only a token that expires gets a timer), no buffers while idle.
//!
//! The body ends by closing the connection (`connection: close`, neither a length nor chunked
//! encoding): a stream ends only when the server ends it, an `EventSource` reconnects on a new
//! connection anyway, so there is no next request to keep the connection for; writes carry
//! no chunk framing; and HTTP/1.0 clients read the same bytes.

use std::collections::VecDeque;
use std::future::Future;
use std::io::{self, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::http::StatusCode;
use herald_core::outbox::{Batch, CloseReason};
use herald_core::HeraldError;
use tokio::time::{Instant, Sleep};

use super::sniff::{sniff, Sniffed, SseRequest};
use super::{SseStream, PREAMBLE, STREAM_HEADERS};
use crate::conn::Conn;
use crate::deadlines::request_timeout;
use crate::http::{error_parts, secs_until};
use crate::parking::idle::IdleTimer;
use crate::parking::{Parking, Ticket};
use crate::roster::Place;
use crate::socket::{
    send, slow_consumer_goodbye, try_send, write_rest, write_until_cut, Blocked, Sent,
    WRITE_TIMEOUT,
};
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

/// Serves `conn` here if its first request is an SSE stream, and returns `None` when done (or
/// when the client sent nothing in time, or only part of a head: that is answered `408`, or the
/// server is shutting down). Otherwise returns the connection untouched, for hyper, with the
/// instant its first request's head started arriving.
pub async fn serve_if_sse(edge: &Arc<Edge>, mut conn: Conn) -> Option<(Conn, Instant)> {
    // Every step but the idle wait is boxed, so the connection's task is only as large as its
    // idle state: a future stores the largest of its steps.
    let deadlines = &edge.settings.deadlines;
    let sniffed = Box::pin(async {
        tokio::select! {
            sniffed = sniff(&mut conn, deadlines) => sniffed,
            _ = edge.shutdown.cancelled() => Sniffed::Gone,
        }
    })
    .await;
    let request = match sniffed {
        Sniffed::Sse(request) => request,
        Sniffed::Other(head_started) => return Some((conn, head_started)),
        Sniffed::Gone => return None,
        Sniffed::Late => {
            let late = request_timeout("head", deadlines.head);
            Box::pin(answer_error(&mut conn, false, &late)).await;
            let _ = discard_input(&mut conn);
            return None;
        }
    };
    let mut connection = match Box::pin(open(edge, &mut conn, request)).await {
        Some(connection) => connection,
        None => {
            let _ = discard_input(&mut conn);
            return None;
        }
    };
    let place = edge.keepalive.join(&connection.stream.outbox);
    let parking = parking_for(edge, &conn);
    let ran = connection.run(&mut conn, parking).await;
    // Boxed: said once, at the end, and no part of an idle stream's task.
    Box::pin(after(edge, connection, conn, place, ran)).await;
    None
}

/// Where a stream may park: nowhere for TLS, whose rustls session is not parked.
fn parking_for<'a>(edge: &'a Edge, conn: &Conn) -> Option<&'a Parking> {
    (!conn.is_tls()).then_some(&edge.parking)
}

/// Parks a stream that went idle, or closes one that ended.
async fn after(edge: &Arc<Edge>, connection: Connection, mut conn: Conn, place: Place, ran: Ran) {
    if let Ran::Parks(ticket) = ran {
        return super::park::park(edge, connection, conn, place, ticket);
    }
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
    let parking = parking_for(&edge, &conn);
    let ran = connection.run(&mut conn, parking).await;
    Box::pin(after(&edge, connection, conn, place, ran)).await;
}

/// How a served stream stopped.
enum Ran {
    /// It is over.
    Ended,
    /// It had nothing to do for a while and parks in this slot.
    Parks(Ticket),
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
    stream.encode(frames, closed, false, &mut buf);
    if send(conn, buf).await.is_err() || closed.is_some() {
        return None;
    }
    let expiry = stream
        .expires
        .map(|exp| Box::pin(tokio::time::sleep(secs_until(exp))));
    Some(Connection {
        stream,
        expiry,
        outbox_first: false,
        wrote_since_tick: true,
    })
}

/// What woke a waiting stream.
enum Wake {
    /// The socket is readable: the client closed, or sent something it should not have.
    Readable(io::Result<()>),
    /// The outbox has frames, a close or a ping request.
    Outbox(Batch),
    /// The token expired.
    Expired,
    /// Nothing happened for a whole `park_idle_after`: the stream may park.
    Idle,
}

/// What to do after a wake.
enum Step {
    /// Wait for the next wake.
    Wait,
    /// The stream is over.
    End,
    /// The socket took only part of a write: write this rest as it drains, then end if `true`.
    Blocked(Vec<u8>, bool),
}

/// One stream's state while it is served: all an idle SSE connection holds besides its socket.
pub(super) struct Connection {
    pub(super) stream: SseStream,
    /// The token's expiry timer, boxed and only for tokens that expire.
    expiry: Option<Pin<Box<Sleep>>>,
    /// Whose turn it is to be looked at first, so neither direction starves the other.
    outbox_first: bool,
    /// Events were written since the last keep-alive tick, so the next tick needs no ping.
    wrote_since_tick: bool,
}

impl Connection {
    /// Writes what the outbox hands out until the stream ends or the client goes away, or
    /// until it has had nothing to do for a while and reserves a slot in `parking`.
    async fn run(&mut self, conn: &mut Conn, parking: Option<&Parking>) -> Ran {
        if self.expiry.is_none() {
            // Revived from parking, which dropped the timer.
            self.expiry = self
                .stream
                .expires
                .map(|exp| Box::pin(tokio::time::sleep(secs_until(exp))));
        }
        let mut idle = parking.and_then(|p| IdleTimer::new(p.delay()));
        loop {
            let wake = std::future::poll_fn(|cx| self.poll_wake(conn, idle.as_mut(), cx));
            let wake = match (wake.await, parking) {
                (Wake::Idle, Some(parking)) => match parking.reserve(&self.stream.outbox) {
                    Ok(ticket) => {
                        self.expiry = None;
                        return Ran::Parks(ticket);
                    }
                    Err(Some(batch)) => {
                        idle.as_mut().map(IdleTimer::busy);
                        Wake::Outbox(batch)
                    }
                    Err(None) => {
                        idle = None;
                        continue;
                    }
                },
                (wake, _) => {
                    idle.as_mut().map(IdleTimer::busy);
                    wake
                }
            };
            match self.handle(conn, wake) {
                Step::Wait => {}
                Step::End => return Ran::Ended,
                // Boxed: only a stream whose socket is full waits here.
                Step::Blocked(rest, false) => {
                    let outbox = &self.stream.outbox;
                    let write = write_until_cut(conn, outbox, rest, WRITE_TIMEOUT, event_end);
                    match Box::pin(write).await {
                        Blocked::Written => {}
                        Blocked::Cut(mut rest) => {
                            let slow = Some(CloseReason::SlowConsumer);
                            self.stream.encode(VecDeque::new(), slow, false, &mut rest);
                            Box::pin(slow_consumer_goodbye(conn, rest)).await;
                            return Ran::Ended;
                        }
                        Blocked::Failed => return Ran::Ended,
                    }
                }
                // The stream's last bytes, its `disconnect` among them.
                Step::Blocked(rest, true) => {
                    if self.stream.outbox.closed() == Some(CloseReason::SlowConsumer) {
                        Box::pin(slow_consumer_goodbye(conn, rest)).await;
                        return Ran::Ended;
                    }
                    let _ = Box::pin(write_rest(conn, rest)).await;
                    return Ran::Ended;
                }
            }
        }
    }

    /// A keep-alive tick with nothing else to write, for a stream not in its task: whether it
    /// pings (as [`Connection::handle`] decides: only a stream that wrote nothing since the
    /// tick before).
    pub(super) fn lone_tick(&mut self) -> bool {
        !std::mem::replace(&mut self.wrote_since_tick, false)
    }

    /// Acts on what woke the stream, without waiting.
    fn handle(&mut self, conn: &mut Conn, wake: Wake) -> Step {
        match wake {
            Wake::Readable(Ok(())) if discard_input(conn) => Step::Wait,
            Wake::Readable(_) => Step::End,
            Wake::Outbox(batch) => {
                let done = batch.closed.is_some();
                let quiet = batch.frames.is_empty();
                // A tick pings only a stream that sent nothing since the tick before.
                let ping = batch.ping && quiet && !self.wrote_since_tick;
                if batch.ping {
                    self.wrote_since_tick = false;
                } else {
                    self.wrote_since_tick |= !quiet;
                }
                let mut buf = Vec::new();
                self.stream
                    .encode(batch.frames, batch.closed, ping, &mut buf);
                match try_send(conn, buf) {
                    Sent::All if done => Step::End,
                    Sent::All => Step::Wait,
                    Sent::Part(rest) => Step::Blocked(rest, done),
                    Sent::Failed => Step::End,
                }
            }
            Wake::Expired => {
                self.expiry = None;
                self.stream.outbox.close(CloseReason::TokenExpired);
                Step::Wait
            }
            Wake::Idle => Step::Wait,
        }
    }

    /// Looks at the outbox, the socket, the expiry timer and the idle timer, in turns; pending
    /// (with the waker left with each) when none has anything.
    fn poll_wake(
        &mut self,
        conn: &mut Conn,
        idle: Option<&mut IdleTimer>,
        cx: &mut Context<'_>,
    ) -> Poll<Wake> {
        self.outbox_first = !self.outbox_first;
        if self.outbox_first {
            if let Poll::Ready(batch) = self.stream.outbox.poll_batch(cx) {
                return Poll::Ready(Wake::Outbox(batch));
            }
        }
        if let Poll::Ready(ready) = conn.poll_read_ready(cx) {
            return Poll::Ready(Wake::Readable(ready));
        }
        if !self.outbox_first {
            if let Poll::Ready(batch) = self.stream.outbox.poll_batch(cx) {
                return Poll::Ready(Wake::Outbox(batch));
            }
        }
        if let Some(sleep) = &mut self.expiry {
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Wake::Expired);
            }
        }
        if let Some(idle) = idle {
            if idle.poll_idle(cx).is_ready() {
                return Poll::Ready(Wake::Idle);
            }
        }
        Poll::Pending
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
