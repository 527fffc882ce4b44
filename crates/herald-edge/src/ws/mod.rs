//! WebSocket at `/v1/ws`: JSON text frames (docs/protocol.md). The upgrade authenticates a
//! `?token=` or `Authorization: Bearer` token before accepting; the connection then runs one task
//! that reads commands ([`session`]) and writes everything the outbox holds, coalesced.

mod session;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use herald_core::auth::Client;
use herald_core::outbox::{CloseReason, OutFrame, Outbox};
use herald_core::HeraldError;
use herald_proto::frame;

use crate::http::{client_token, error_response, query_pairs};
use crate::Edge;
use session::Session;

/// Bytes read from the socket at a time.
const READ_BUFFER: usize = 4 * 1024;
/// Bytes gathered before a write to the socket; frames of one batch share writes.
const WRITE_BUFFER: usize = 8 * 1024;
/// Close code when a peer answered nothing for a whole ping interval.
const CLOSE_KEEPALIVE_TIMEOUT: u16 = 4002;
/// A batch that cannot be written in this long means the peer is gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Accepts a WebSocket upgrade.
pub async fn upgrade(
    State(edge): State<Arc<Edge>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => {
            return error_response(&HeraldError::bad_request(format!(
                "/v1/ws takes a WebSocket upgrade: {rejection}"
            )))
        }
    };
    let pairs = query_pairs(query.as_deref());
    let client = match client_token(&pairs, &headers) {
        Some(token) => match edge.tokens.verify(&token) {
            Ok(client) => Some(client),
            Err(e) => return error_response(&e),
        },
        None if edge.settings.allow_anonymous => Some(Client::anonymous()),
        None => None,
    };
    let max = edge.settings.max_frame_bytes;
    ws.read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .max_write_buffer_size(usize::MAX)
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| {
            let tracker = edge.connections.clone();
            tracker.track_future(run(edge, socket, client))
        })
}

struct ConnectionGauge;

impl ConnectionGauge {
    fn new() -> Self {
        metrics::gauge!("herald_connections", "transport" => "ws").increment(1.0);
        ConnectionGauge
    }
}

impl Drop for ConnectionGauge {
    fn drop(&mut self) {
        metrics::gauge!("herald_connections", "transport" => "ws").decrement(1.0);
    }
}

async fn run(edge: Arc<Edge>, socket: WebSocket, client: Option<Client>) {
    let _gauge = ConnectionGauge::new();
    let (mut tx, mut rx) = socket.split();
    let outbox = Outbox::new(edge.settings.outbox_bytes);
    let mut session = Session::new(edge.clone(), outbox.clone(), client);
    let mut ping = tokio::time::interval(edge.settings.ping_interval);
    ping.tick().await;
    let mut heard_since_ping = true;
    let mut close_code = 1000;
    loop {
        let expiry = session.token_expiry();
        tokio::select! {
            incoming = rx.next() => {
                heard_since_ping = true;
                match incoming {
                    Some(Ok(Message::Text(text))) => session.handle(text.as_str()).await,
                    Some(Ok(Message::Binary(_))) => session.reject_binary(),
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                    Some(Ok(Message::Close(_))) | None => break,
                    Some(Err(e)) => {
                        close_code = read_error(&mut tx, &e.to_string()).await;
                        break;
                    }
                }
            }
            (frames, closed) = outbox.next_batch() => {
                let written = tokio::time::timeout(WRITE_TIMEOUT, write_batch(&mut tx, frames)).await;
                if !matches!(written, Ok(Ok(()))) {
                    break;
                }
                if let Some(reason) = closed {
                    close_code = disconnect(&mut tx, reason).await;
                    break;
                }
            }
            _ = ping.tick() => {
                if !heard_since_ping {
                    // Nothing at all (not even a pong) for a whole ping interval: the peer is gone.
                    close_code = CLOSE_KEEPALIVE_TIMEOUT;
                    break;
                }
                heard_since_ping = false;
                if tx.send(Message::Ping(Default::default())).await.is_err() {
                    break;
                }
            }
            _ = edge.shutdown.cancelled() => {
                let (frames, _) = outbox.take();
                let _ = tokio::time::timeout(WRITE_TIMEOUT, write_batch(&mut tx, frames)).await;
                close_code = disconnect(&mut tx, CloseReason::Shutdown).await;
                break;
            }
            _ = expiry => {
                close_code = disconnect(&mut tx, CloseReason::TokenExpired).await;
                break;
            }
        }
    }
    session.close();
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = tx
            .send(Message::Close(Some(CloseFrame {
                code: close_code,
                reason: Utf8Bytes::from_static(""),
            })))
            .await;
        let _ = tx.close().await;
    })
    .await;
}

async fn write_batch(
    tx: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    frames: std::collections::VecDeque<OutFrame>,
) -> Result<(), axum::Error> {
    if frames.is_empty() {
        return Ok(());
    }
    let mut messages = 0u64;
    for f in frames {
        let bytes = match f {
            OutFrame::Control(b) => b,
            OutFrame::Message(m) => {
                messages += 1;
                frame::ws_message(&m)
            }
        };
        // Every frame is JSON built by herald-proto, so this check never fails in practice.
        if let Ok(text) = Utf8Bytes::try_from(bytes) {
            tx.feed(Message::Text(text)).await?;
        }
    }
    metrics::counter!("herald_messages_written_total", "transport" => "ws").increment(messages);
    tx.flush().await
}

/// Sends `{"disconnect":...}`; returns the close code that goes with it.
async fn disconnect(
    tx: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    reason: CloseReason,
) -> u16 {
    let text = frame::disconnect(reason.code(), reason.message());
    if let Ok(text) = Utf8Bytes::try_from(text) {
        let _ = tx.send(Message::Text(text)).await;
    }
    match reason {
        CloseReason::SlowConsumer => 4008,
        CloseReason::Shutdown => 1001,
        CloseReason::TokenExpired => 4001,
    }
}

/// Tells the client why its frame could not be read; returns the close code.
async fn read_error(
    tx: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    error: &str,
) -> u16 {
    let too_big =
        error.contains("too long") || error.contains("too big") || error.contains("Space");
    let (code, close) = if too_big {
        ("too_large", 1009)
    } else {
        ("bad_request", 1002)
    };
    let text = frame::disconnect(code, &format!("unreadable frame: {error}"));
    if let Ok(text) = Utf8Bytes::try_from(text) {
        let _ = tx.send(Message::Text(text)).await;
    }
    close
}
