//! WebSocket at `/v1/ws`: JSON text frames (docs/protocol.md). The upgrade authenticates a
//! `?token=` or `Authorization: Bearer` token before accepting ([`handshake`]); the connection
//! then runs one small task that waits for the socket to become readable (holding no read
//! buffer while idle), parses frames ([`frame`]), runs commands ([`session`]) and writes
//! everything the outbox holds in one write.

mod frame;
mod handshake;
mod session;

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{RawQuery, Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use herald_core::auth::Client;
use herald_core::outbox::{CloseReason, OutFrame, Outbox};
use herald_core::telemetry::telemetry;
use herald_core::usage::ConnectionGuard;
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::http::{client_token, error_response, query_pairs, secs_until};
use crate::Edge;
use frame::{close, FrameReader, Incoming, Opcode};
use handshake::Upgrade;
use session::Session;

/// Close code when a peer answered nothing for a whole ping interval.
const CLOSE_KEEPALIVE_TIMEOUT: u16 = 4002;
/// A write that cannot finish in this long means the peer is gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
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
    let client = match client_token(&pairs, request.headers()) {
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
    let (response, socket) = upgrade.accept();
    let task_edge = edge.clone();
    // The upgrade future is boxed so its memory is freed once the socket is handed over,
    // instead of staying part of every idle connection's task.
    let socket = Box::pin(socket);
    edge.connections.spawn(async move {
        if let Some((stream, read_ahead)) = socket.await {
            run(task_edge, stream, read_ahead, client, counted).await;
        }
    });
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

async fn run(
    edge: Arc<Edge>,
    stream: TcpStream,
    read_ahead: Bytes,
    client: Option<Client>,
    counted: Option<ConnectionGuard>,
) {
    let _gauge = ConnectionGauge::new();
    let max = edge.settings.max_frame_bytes;
    let outbox = Outbox::new(edge.settings.outbox_bytes);
    let mut session = Session::new(edge.clone(), outbox.clone(), client, counted);
    // Boxed: only device connections open an inbox, and the others should not carry the
    // future's state.
    Box::pin(session.start()).await;
    let mut reader = FrameReader::new(max);
    let mut incoming = Vec::new();
    let mut ticks = edge.keepalive.subscribe();
    let mut keepalive_running = true;
    let mut heard_since_ping = true;
    // The token's expiry timer, boxed and only for tokens that expire, so a connection without
    // one carries no timer; rebuilt when a `connect` changes the token.
    let mut expiry: Option<(u64, Pin<Box<Sleep>>)> = None;

    let mut end = match reader.feed(&read_ahead, &mut incoming) {
        Ok(()) => None,
        Err(e) => Some(End::BadFrame(e)),
    };
    drop(read_ahead);
    while end.is_none() {
        if !incoming.is_empty() {
            heard_since_ping = true;
            end = Box::pin(handle_incoming(&stream, &mut session, &mut incoming)).await;
            continue;
        }
        let expires = session.expires();
        if expiry.as_ref().map(|(exp, _)| *exp) != expires {
            expiry = expires.map(|exp| (exp, Box::pin(tokio::time::sleep(secs_until(exp)))));
        }
        end = tokio::select! {
            ready = stream.readable() => match ready {
                Ok(()) => match read_available(&stream, &mut reader, &mut incoming) {
                    Ok(true) => None,
                    Ok(false) => Some(End::Gone),
                    Err(ReadError::Frame(e)) => Some(End::BadFrame(e)),
                    Err(ReadError::Io) => Some(End::Gone),
                },
                Err(_) => Some(End::Gone),
            },
            (frames, closed) = outbox.next_batch() => {
                match write_frames(&stream, frames) {
                    Written::All => Ok(()),
                    Written::Part(rest) => Box::pin(write_rest(&stream, rest)).await,
                    Written::Failed(e) => Err(e),
                }
                .map_or(Some(End::Gone), |()| closed.map(End::Disconnect))
            }
            tick = ticks.changed(), if keepalive_running => {
                if tick.is_err() {
                    // The clock stopped (shutting down): no more pings.
                    keepalive_running = false;
                    None
                } else if !heard_since_ping {
                    Some(End::Close(CLOSE_KEEPALIVE_TIMEOUT))
                } else {
                    heard_since_ping = false;
                    let mut buf = Vec::with_capacity(2);
                    frame::encode(&mut buf, Opcode::Ping, b"");
                    Box::pin(write_rest(&stream, buf)).await.err().map(|_| End::Gone)
                }
            }
            _ = edge.shutdown.cancelled() => {
                let (frames, _) = outbox.take();
                if let Written::Part(rest) = write_frames(&stream, frames) {
                    let _ = Box::pin(write_rest(&stream, rest)).await;
                }
                Some(End::Disconnect(CloseReason::Shutdown))
            }
            _ = expired(&mut expiry) => Some(End::Disconnect(CloseReason::TokenExpired)),
        };
    }
    session.close();
    let mut goodbye = Vec::new();
    match end {
        Some(End::Disconnect(reason)) => {
            let text = herald_proto::frame::disconnect(reason.code(), reason.message());
            frame::encode(&mut goodbye, Opcode::Text, &text);
            frame::encode_close(&mut goodbye, disconnect_code(reason));
        }
        Some(End::BadFrame(e)) => {
            let code = match e {
                frame::FrameError::TooBig(_) => "too_large",
                _ => "bad_request",
            };
            let text = herald_proto::frame::disconnect(code, &e.describe(max));
            frame::encode(&mut goodbye, Opcode::Text, &text);
            frame::encode_close(&mut goodbye, e.close_code());
        }
        Some(End::Close(code)) => frame::encode_close(&mut goodbye, code),
        Some(End::Gone) | None => {}
    }
    if !goodbye.is_empty() {
        let bye = tokio::time::timeout(Duration::from_secs(1), write_rest(&stream, goodbye));
        let _ = Box::pin(bye).await;
    }
}

/// Runs the commands and control frames read so far; returns how the connection ends, if it
/// does. The caller boxes this future, so the (large) command futures exist only while
/// commands run, not in every idle connection.
async fn handle_incoming(
    stream: &TcpStream,
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
    stream: &TcpStream,
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

/// What a first, non-blocking write of a batch achieved.
enum Written {
    /// Everything went out.
    All,
    /// The socket is full; this rest must wait for it to drain.
    Part(Vec<u8>),
    /// The socket failed.
    Failed(io::Error),
}

/// Encodes a batch of frames into one buffer and writes as much as the socket takes at once —
/// usually all of it, in one syscall, without touching a timer or a waker.
fn write_frames(stream: &TcpStream, frames: std::collections::VecDeque<OutFrame>) -> Written {
    if frames.is_empty() {
        return Written::All;
    }
    let mut messages = 0u64;
    let mut lag_recorded = false;
    let payloads: Vec<Bytes> = frames
        .into_iter()
        .map(|f| match f {
            OutFrame::Control(b) => b,
            OutFrame::Message(m) => {
                if !lag_recorded {
                    herald_core::message::record_delivery_lag(&m);
                    lag_recorded = true;
                }
                messages += 1;
                herald_proto::frame::ws_message(&m)
            }
            OutFrame::Replayed(m) => {
                messages += 1;
                herald_proto::frame::ws_message(&m)
            }
        })
        .collect();
    let size = payloads.iter().map(|p| p.len() + 10).sum();
    let mut buf = Vec::with_capacity(size);
    for p in &payloads {
        frame::encode(&mut buf, Opcode::Text, p);
    }
    drop(payloads);
    telemetry().written_ws.increment(messages);
    let mut written = 0;
    while written < buf.len() {
        match stream.try_write(&buf[written..]) {
            Ok(0) => return Written::Failed(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                buf.drain(..written);
                return Written::Part(buf);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Written::Failed(e),
        }
    }
    Written::All
}

/// Writes `buf` as the socket drains, giving up after [`WRITE_TIMEOUT`].
async fn write_rest(stream: &TcpStream, buf: Vec<u8>) -> io::Result<()> {
    match tokio::time::timeout(WRITE_TIMEOUT, write_all(stream, &buf)).await {
        Ok(result) => result,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}

async fn write_all(stream: &TcpStream, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match stream.try_write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => stream.writable().await?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Resolves when the token's expiry timer fires; never if there is none.
async fn expired(expiry: &mut Option<(u64, Pin<Box<Sleep>>)>) {
    match expiry {
        Some((_, sleep)) => sleep.as_mut().await,
        None => std::future::pending().await,
    }
}

fn disconnect_code(reason: CloseReason) -> u16 {
    match reason {
        CloseReason::SlowConsumer => 4008,
        CloseReason::Shutdown => close::GOING_AWAY,
        CloseReason::TokenExpired => 4001,
    }
}
