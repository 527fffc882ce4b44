//! WebSocket at `/v1/ws`: JSON text frames (docs/protocol.md). The upgrade authenticates a
//! `?token=` or `Authorization: Bearer` token before accepting (`handshake`); the connection
//! then runs one small task that waits for the socket to become readable (holding no read
//! buffer while idle), parses frames (`frame`), runs commands (`session`) and writes
//! everything the outbox holds in one write.

pub(crate) mod frame;
mod handshake;
mod park;
mod session;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{RawQuery, Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use herald_core::auth::Client;
use herald_core::outbox::{Batch, CloseReason, OutFrame, Outbox};
use herald_core::telemetry::telemetry;
use herald_core::usage::ConnectionGuard;
use tokio::time::Sleep;

use crate::conn::Conn;
use crate::http::{client_token, error_response, query_pairs, secs_until};
use crate::parking::idle::IdleTimer;
use crate::parking::Ticket;
use crate::roster::Place;
use crate::socket::{slow_consumer_goodbye, write_rest, write_until_cut, Blocked, WRITE_TIMEOUT};
use crate::Edge;
use frame::{close, FrameReader, Incoming, Opcode};
use handshake::Upgrade;
use session::Session;

/// Close code when a peer answered nothing for a whole ping interval.
const CLOSE_KEEPALIVE_TIMEOUT: u16 = 4002;
/// Most bytes read in one go before other work (writes, timers) gets a turn.
const READ_BUDGET: usize = 64 * 1024;
/// Size of the on-stack read buffer; nothing is kept between reads.
const READ_CHUNK: usize = 8 * 1024;

/// Accepts a WebSocket upgrade.
pub async fn upgrade(
    State(edge): State<Arc<Edge>>,
    RawQuery(query): RawQuery,
    mut request: Request,
) -> Response {
    let upgrade = match Upgrade::from_request(&mut request) {
        Ok(u) => u,
        Err(e) => return error_response(&e),
    };
    let pairs = query_pairs(query.as_deref());
    let token = client_token(&pairs, request.headers());
    if let Some(token) = &token {
        // An app's JWKS key set not cached yet (or lacking the token's key) is fetched first.
        edge.tokens.prepare(token).await;
    }
    let client = match token {
        Some(token) => match edge.tokens.verify(&token) {
            Ok(client) => Some(client),
            Err(e) => return error_response(&e),
        },
        None if edge.settings.allow_anonymous => Some(Client::anonymous()),
        None => None,
    };
    // An app at its connection limit is refused before the upgrade.
    let counted = match client
        .as_ref()
        .map(|c| edge.usage.connect(&c.app))
        .transpose()
    {
        Ok(counted) => counted,
        Err(e) => return error_response(&e),
    };
    // Served on the HTTP runtime (not the sessions'), the connection moves to the sessions'.
    let elsewhere = edge.sessions.as_ref().filter(|sessions| {
        tokio::runtime::Handle::try_current().map_or(true, |here| here.id() != sessions.id())
    });
    let (response, socket) = upgrade.accept(elsewhere.is_some());
    // Everything the connection keeps is built here and owned by the task as one value, which
    // `Connection::run` borrows: moved into a second future, it would be stored twice.
    let mut connection = Connection::new(edge.clone(), client, counted);
    // The upgrade future is boxed so its memory is freed once the socket is handed over,
    // instead of staying part of every idle connection's task.
    let socket = Box::pin(socket);
    let run = async move {
        // Boxed: the upgrade and the first steps are no part of the idle connection's task.
        let Some((mut stream, place, gauge, end)) = Box::pin(connection.open(socket)).await else {
            return;
        };
        let served = match end {
            Some(end) => Served::Ends(Some(end), Vec::new()),
            None => connection.serve(&mut stream).await,
        };
        // Boxed: parking or saying goodbye is no part of the idle connection's task.
        Box::pin(connection.after(served, stream, place, gauge)).await;
    };
    match elsewhere {
        Some(sessions) => edge.connections.spawn_on(run, sessions),
        None => edge.connections.spawn(run),
    };
    response.into_response()
}

struct ConnectionGauge;

impl ConnectionGauge {
    fn new() -> Self {
        telemetry().connections_ws.increment(1.0);
        ConnectionGauge
    }
}

impl Drop for ConnectionGauge {
    fn drop(&mut self) {
        telemetry().connections_ws.decrement(1.0);
    }
}

/// How a connection ended, from the server's side.
enum End {
    /// Send a `disconnect` frame with this reason, then close with its code.
    Disconnect(CloseReason),
    /// Tell the client about a frame error, then close with its code.
    BadFrame(frame::FrameError),
    /// Close with this code and nothing else.
    Close(u16),
    /// The socket is gone; nothing more can be sent.
    Gone,
}

/// How [`Connection::serve`] stopped.
enum Served {
    /// The connection ends: with this said (if anything), after what a slow-consumer cut left
    /// of the frame in progress.
    Ends(Option<End>, Vec<u8>),
    /// It had nothing to do for `park_idle_after` and parks in this reserved slot.
    Parks(Ticket),
}

/// What woke an idle connection.
enum Wake {
    /// The socket has something to read (or failed).
    Readable(io::Result<()>),
    /// The outbox has frames, a close or a ping request.
    Outbox(Batch),
    /// The token expired.
    Expired,
    /// Nothing happened for a whole `park_idle_after`: the connection may park.
    Idle,
}

/// One WebSocket connection's state: the session and the frame parser. An idle connection is
/// this value, its socket and its outbox; it waits by leaving its waker with the socket and the
/// outbox ([`Connection::poll_wake`]) and stores no futures.
struct Connection {
    session: Session,
    reader: FrameReader,
    incoming: Vec<Incoming>,
    /// The client spoke (any frame) since the last ping went out.
    heard_since_ping: bool,
    /// Whose turn it is to be looked at first, so neither a flood of commands nor a flood of
    /// messages starves the other direction.
    outbox_first: bool,
    /// The token's expiry timer, boxed and only for tokens that expire, so a connection without
    /// one carries no timer; rebuilt when a `connect` changes the token.
    expiry: Option<(u64, Pin<Box<Sleep>>)>,
}

impl Connection {
    fn new(edge: Arc<Edge>, client: Option<Client>, counted: Option<ConnectionGuard>) -> Self {
        let max = edge.settings.max_frame_bytes;
        let outbox = Outbox::new(edge.settings.outbox_bytes);
        Connection {
            session: Session::new(edge, outbox, client, counted),
            reader: FrameReader::new(max),
            incoming: Vec::new(),
            heard_since_ping: true,
            outbox_first: false,
            expiry: None,
        }
    }

    /// Starts the connection once `socket` (the finished upgrade) yields the TCP stream and the
    /// bytes read past the handshake: what [`Connection::serve`] then serves.
    async fn open(
        &mut self,
        socket: Pin<Box<impl Future<Output = Option<(Conn, Bytes)>>>>,
    ) -> Option<(Conn, Place, ConnectionGauge, Option<End>)> {
        let (stream, read_ahead) = socket.await?;
        let gauge = ConnectionGauge::new();
        let end = match self.reader.feed(&read_ahead, &mut self.incoming) {
            Ok(()) => None,
            Err(e) => Some(End::BadFrame(e)),
        };
        drop(read_ahead);
        let place = self.session.edge().keepalive.join(self.session.outbox());
        // Boxed: only device connections open an inbox, and the others should not carry the
        // future's state.
        Box::pin(self.session.start()).await;
        Some((stream, place, gauge, end))
    }

    /// Serves the connection (fresh, or revived from parking) until it ends, or until it has
    /// had nothing to do for `park_idle_after` and reserves a parking slot. The socket, the
    /// roster place and the rest are the caller's: passed by value into this future they
    /// would be stored twice in the connection's task (an `async fn` keeps its arguments
    /// apart from its locals).
    async fn serve(&mut self, stream: &mut Conn) -> Served {
        let mut end = None;
        // TLS connections stay in their task: rustls's session is not parked.
        let mut idle = match stream {
            Conn::Plain(_) => IdleTimer::new(self.session.edge().parking.delay()),
            Conn::Tls(_) => None,
        };
        // What a slow-consumer cut left of the frame in progress, written before the goodbye.
        let mut cut_frame = Vec::new();
        while end.is_none() {
            if !self.incoming.is_empty() {
                self.heard_since_ping = true;
                end = Box::pin(handle_incoming(
                    stream,
                    &mut self.session,
                    &mut self.incoming,
                ))
                .await;
                continue;
            }
            let expires = self.session.expires();
            if self.expiry.as_ref().map(|(exp, _)| *exp) != expires {
                self.expiry =
                    expires.map(|exp| (exp, Box::pin(tokio::time::sleep(secs_until(exp)))));
            }
            let wake = std::future::poll_fn(|cx| self.poll_wake(stream, idle.as_mut(), cx));
            let wake = match wake.await {
                // Its parked form keeps no command budget: one still refilling stays here
                // another delay.
                Wake::Idle if !self.session.may_park() => {
                    if let Some(timer) = idle.as_mut() {
                        timer.busy();
                    }
                    continue;
                }
                Wake::Idle => match self.reserve_parking(stream) {
                    Ok(ticket) => return Served::Parks(ticket),
                    Err(batch) => {
                        if batch.is_none() {
                            idle = None;
                        }
                        idle.as_mut().map(IdleTimer::busy);
                        match batch {
                            Some(batch) => Wake::Outbox(batch),
                            None => continue,
                        }
                    }
                },
                wake => {
                    idle.as_mut().map(IdleTimer::busy);
                    wake
                }
            };
            end = match wake {
                Wake::Idle => None,
                Wake::Readable(Ok(())) => {
                    match read_available(stream, &mut self.reader, &mut self.incoming) {
                        Ok(true) => None,
                        Ok(false) => Some(End::Gone),
                        Err(ReadError::Frame(e)) => Some(End::BadFrame(e)),
                        Err(ReadError::Io) => Some(End::Gone),
                    }
                }
                Wake::Readable(Err(_)) => Some(End::Gone),
                Wake::Outbox(batch) => {
                    let (closed, ping) = (batch.closed, batch.ping);
                    let mut ends = closed.map(End::Disconnect);
                    let ping = ping && {
                        if !self.heard_since_ping {
                            ends = ends.or(Some(End::Close(CLOSE_KEEPALIVE_TIMEOUT)));
                        }
                        std::mem::take(&mut self.heard_since_ping)
                    };
                    match write_frames(stream, batch.frames, ping) {
                        Written::All => ends,
                        // Boxed: only a connection whose socket is full waits here.
                        Written::Part(pending) => {
                            let outbox = self.session.outbox();
                            let Pending { buf, frame_ends } = pending;
                            let write =
                                write_until_cut(stream, outbox, buf, WRITE_TIMEOUT, |_, at| {
                                    frame_ends.into_iter().find(|end| *end > at).unwrap_or(at)
                                });
                            match Box::pin(write).await {
                                Blocked::Written => ends,
                                Blocked::Cut(rest) => {
                                    cut_frame = rest;
                                    Some(End::Disconnect(CloseReason::SlowConsumer))
                                }
                                Blocked::Failed => Some(End::Gone),
                            }
                        }
                        Written::Failed => Some(End::Gone),
                    }
                }
                Wake::Expired => Some(End::Disconnect(CloseReason::TokenExpired)),
            };
        }
        Served::Ends(end, cut_frame)
    }

    /// After [`Connection::serve`]: parks the connection in its reserved slot, or ends it
    /// (telling the client why, as `served` says).
    async fn after(
        mut self,
        served: Served,
        mut stream: Conn,
        place: Place,
        gauge: ConnectionGauge,
    ) {
        let (end, cut_frame) = match served {
            Served::Parks(ticket) => return park::park(self, ticket, stream, place, gauge),
            Served::Ends(end, cut_frame) => (end, cut_frame),
        };
        let _gauge = gauge;
        self.session.edge().keepalive.leave(place);
        self.session.close();
        if let Some(end) = end {
            let max_frame = self.session.edge().settings.max_frame_bytes;
            goodbye(&mut stream, end, max_frame, cut_frame).await;
        }
        if stream.is_tls() {
            stream.close().await;
        }
    }

    /// Looks at the socket, the outbox, the expiry timer and the idle timer, in turns; pending
    /// (with the waker left with each) when none has anything.
    fn poll_wake(
        &mut self,
        stream: &mut Conn,
        idle: Option<&mut IdleTimer>,
        cx: &mut Context<'_>,
    ) -> Poll<Wake> {
        self.outbox_first = !self.outbox_first;
        if self.outbox_first {
            if let Poll::Ready(batch) = self.session.outbox().poll_batch(cx) {
                return Poll::Ready(Wake::Outbox(batch));
            }
        }
        if let Poll::Ready(ready) = stream.poll_read_ready(cx) {
            return Poll::Ready(Wake::Readable(ready));
        }
        if !self.outbox_first {
            if let Poll::Ready(batch) = self.session.outbox().poll_batch(cx) {
                return Poll::Ready(Wake::Outbox(batch));
            }
        }
        if let Some((_, sleep)) = &mut self.expiry {
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Wake::Expired);
            }
        }
        // A frame read in part keeps the connection in its task until the rest arrives.
        if let Some(idle) = idle.filter(|_| self.reader.is_idle()) {
            if idle.poll_idle(cx).is_ready() {
                return Poll::Ready(Wake::Idle);
            }
        }
        Poll::Pending
    }
}

/// Tells the client why the connection ends (a `disconnect` frame and a close frame, as `end`
/// calls for), giving the socket a second at most; a slow consumer's goodbye, after what a cut
/// left of the frame in progress (`cut_frame`), gets [`crate::socket::SLOW_CONSUMER_GRACE`].
async fn goodbye(stream: &mut Conn, end: End, max_frame: usize, cut_frame: Vec<u8>) {
    let mut goodbye = cut_frame;
    match end {
        End::Disconnect(reason @ CloseReason::SlowConsumer) => {
            let text = herald_proto::frame::disconnect(reason.code(), reason.message());
            frame::encode(&mut goodbye, Opcode::Text, &text);
            frame::encode_close(&mut goodbye, disconnect_code(reason));
            return slow_consumer_goodbye(stream, goodbye).await;
        }
        End::Disconnect(reason) => {
            let text = herald_proto::frame::disconnect(reason.code(), reason.message());
            frame::encode(&mut goodbye, Opcode::Text, &text);
            frame::encode_close(&mut goodbye, disconnect_code(reason));
        }
        End::BadFrame(e) => {
            let code = match e {
                frame::FrameError::TooBig(_) => "too_large",
                _ => "bad_request",
            };
            let text = herald_proto::frame::disconnect(code, &e.describe(max_frame));
            frame::encode(&mut goodbye, Opcode::Text, &text);
            frame::encode_close(&mut goodbye, e.close_code());
        }
        End::Close(code) => frame::encode_close(&mut goodbye, code),
        End::Gone => return,
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), write_rest(stream, goodbye)).await;
}

/// What a first, non-blocking write of a batch achieved.
enum Written {
    /// Everything went out.
    All,
    /// The socket is full; the rest waits for it ([`write_until_cut`]).
    Part(Pending),
    /// The socket failed.
    Failed,
}

/// A batch's bytes the socket did not take at once, and where each frame in them ends, so a
/// slow-consumer cut never splits one.
struct Pending {
    buf: Vec<u8>,
    frame_ends: Vec<usize>,
}

/// Runs the commands and control frames read so far; returns how the connection ends, if it
/// does. The caller boxes this future, so the (large) command futures exist only while
/// commands run, not in every idle connection.
async fn handle_incoming(
    stream: &mut Conn,
    session: &mut Session,
    incoming: &mut Vec<Incoming>,
) -> Option<End> {
    for message in std::mem::take(incoming) {
        match message {
            Incoming::Text(text) => session.handle(&text).await,
            Incoming::Binary => session.reject_binary(),
            Incoming::Ping(payload) => {
                let mut buf = Vec::with_capacity(payload.len() + 2);
                frame::encode(&mut buf, Opcode::Pong, &payload);
                if write_rest(stream, buf).await.is_err() {
                    return Some(End::Gone);
                }
            }
            Incoming::Pong => {}
            Incoming::Close(code) => return Some(End::Close(close::echo(code))),
        }
    }
    None
}

enum ReadError {
    Frame(frame::FrameError),
    Io,
}

/// Reads what the socket has (up to a budget) through a stack buffer and parses it. Returns
/// false when the peer closed the connection.
fn read_available(
    stream: &mut Conn,
    reader: &mut FrameReader,
    incoming: &mut Vec<Incoming>,
) -> Result<bool, ReadError> {
    let mut chunk = [0u8; READ_CHUNK];
    let mut budget = READ_BUDGET;
    while budget > 0 {
        match stream.try_read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                reader
                    .feed(&chunk[..n], incoming)
                    .map_err(ReadError::Frame)?;
                budget = budget.saturating_sub(n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(ReadError::Io),
        }
    }
    Ok(true)
}

/// A queued frame's text payload, borrowed (a message's from its shared frame cache).
fn payload(frame: &OutFrame) -> &[u8] {
    match frame {
        OutFrame::Control(b) => b,
        OutFrame::Message(m) | OutFrame::Replayed(m) => herald_core::frames::ws_message_ref(m),
    }
}

/// Encodes a batch of frames (and a ping after them, if `ping`) into one buffer and writes as
/// much as the socket takes at once: usually all of it, in one syscall.
fn write_frames(
    stream: &mut Conn,
    frames: std::collections::VecDeque<OutFrame>,
    ping: bool,
) -> Written {
    if frames.is_empty() && !ping {
        return Written::All;
    }
    let mut messages = 0u64;
    let mut lag_recorded = false;
    let size = frames.iter().map(|f| payload(f).len() + 10).sum::<usize>() + 2;
    let mut buf = Vec::with_capacity(size);
    for f in &frames {
        match f {
            OutFrame::Control(_) => {}
            OutFrame::Message(m) => {
                if !lag_recorded {
                    herald_core::message::record_delivery_lag(m);
                    lag_recorded = true;
                }
                messages += 1;
            }
            OutFrame::Replayed(_) => messages += 1,
        }
        frame::encode(&mut buf, Opcode::Text, payload(f));
    }
    if ping {
        frame::encode(&mut buf, Opcode::Ping, b"");
    }
    telemetry().written_ws.increment(messages);
    let mut written = 0;
    while written < buf.len() {
        match stream.try_write(&buf[written..]) {
            Ok(0) => return Written::Failed,
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Written::Failed,
        }
    }
    if written == buf.len() {
        if stream.has_unsent_output() {
            // A TLS session holds encrypted bytes the socket did not take yet.
            return Written::Part(Pending {
                buf: Vec::new(),
                frame_ends: Vec::new(),
            });
        }
        return Written::All;
    }
    // Where each frame ends, counted from the first unwritten byte, so a slow-consumer cut
    // never splits one (only a blocked write pays for this).
    let mut frame_ends = Vec::new();
    let mut end = 0;
    let sizes = frames
        .iter()
        .map(|f| payload(f).len())
        .chain(ping.then_some(0));
    for size in sizes {
        end += frame::encoded_len(size);
        if end > written {
            frame_ends.push(end - written);
        }
    }
    buf.drain(..written);
    Written::Part(Pending { buf, frame_ends })
}

fn disconnect_code(reason: CloseReason) -> u16 {
    match reason {
        CloseReason::SlowConsumer => 4008,
        CloseReason::Shutdown => close::GOING_AWAY,
        CloseReason::TokenExpired => 4001,
        CloseReason::Revoked
        | CloseReason::AppDeleted
        | CloseReason::SecretChanged
        | CloseReason::DeviceRevoked => 4003,
        CloseReason::RateLimited => 4029,
        CloseReason::ResumeLost => 4010,
        CloseReason::StoreUnavailable => 1011,
    }
}
