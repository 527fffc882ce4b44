//! Server-Sent Events at `GET /v1/sse?channel=a&channel=b`. Works with a plain `EventSource`:
//! each message is an unnamed event whose `id:` is the connection's cursor string, so the
//! browser's automatic reconnect sends `Last-Event-ID` and resumes every channel exactly.
//! Control events are named: `subscribed` (one per channel, first), `presence` (a presence
//! channel's members, joins and leaves, when the stream asked with `presence=true`) and
//! `disconnect`.
//!
//! A stream is served one of two ways, with the same events:
//! - `direct`: a fresh connection whose first request is `GET /v1/sse` (`sniff`'s detector
//!   recognises it before hyper sees it, [`crate::detect`]) is served on Herald's own loop, which waits with no stored futures, no
//!   timer and no buffers, like a WebSocket connection;
//! - `body`: any other `/v1/sse` request (one on a connection that already carried a request,
//!   one too large to sniff) is served through axum and hyper as a streamed body.
//!
//! This module holds what both share: opening the stream (authentication, query parsing,
//! subscriptions) and the event framing.

mod body;
mod direct;
mod park;
pub(crate) mod sniff;

use std::collections::VecDeque;
use std::sync::Arc;

use axum::http::HeaderMap;
use bytes::BufMut;
use herald_core::lifecycle::Transport;
use herald_core::outbox::{CloseReason, OutFrame, Outbox};
use herald_core::telemetry::telemetry;
use herald_core::HeraldError;
use herald_proto::cursor::CursorText;
use herald_proto::frame;
use herald_proto::reply::{ErrorBody, SubscribeReply};

use crate::channels::{StreamRequest, Subscriptions};
use crate::Edge;

pub use body::stream;
pub use direct::{answer_late, serve_detected};
pub use sniff::{take_request, SseDetector, SseRequest};

/// The HTTP listener's detector of a directly served SSE stream ([`crate::detect`]).
pub static DETECTOR: SseDetector = SseDetector;

/// The first bytes of every stream: reconnect after a second.
const PREAMBLE: &[u8] = b"retry: 1000\n\n";
/// The keep-alive comment.
const PING: &[u8] = b": ping\n\n";
/// The response headers of a stream, whichever way it is served.
const STREAM_HEADERS: [(&str, &str); 3] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-accel-buffering", "no"),
];

/// One open SSE stream: its outbox and subscriptions. Dropping it unsubscribes.
struct SseStream {
    outbox: Arc<Outbox>,
    subs: Subscriptions,
    /// When the client's token expires (seconds since the Unix epoch); the stream ends then.
    expires: Option<u64>,
}

impl SseStream {
    /// Authenticates and parses the request, and subscribes a new outbox to every channel (or
    /// the device's inbox), queuing a `subscribed` event ahead of each channel's catch-up.
    async fn open(
        edge: &Edge,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Result<SseStream, HeraldError> {
        let last_event_id = headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.trim().is_empty());
        StreamRequest::prepare_keys(edge, query, headers).await;
        let request = StreamRequest::parse(edge, query, headers, last_event_id)?;
        let outbox = Outbox::new(edge.settings.outbox_bytes);
        let (subs, _) =
            Subscriptions::open(Transport::Sse, edge, &request, &outbox, |name, outcome| {
                let body = SubscribeReply {
                    channel: name.public().into(),
                    seq: outcome.seq,
                    epoch: outcome.epoch.as_str().into(),
                    recovered: outcome.recovered,
                };
                Some(OutFrame::Control(frame::sse_event("subscribed", &body)))
            })
            .await?;
        telemetry().connections_sse.increment(1.0);
        Ok(SseStream {
            outbox,
            subs,
            expires: request.client.expires,
        })
    }

    /// Appends a batch to `buf`, coalesced: control events as they are, each message with its
    /// cursor as `id:`, a ping comment if `ping`, and the `disconnect` event if the outbox was
    /// closed (the stream ends after it).
    fn encode_events(
        &mut self,
        frames: VecDeque<OutFrame>,
        closed: Option<CloseReason>,
        ping: bool,
        buf: &mut Vec<u8>,
    ) {
        crate::driver::drain::record_lag(&frames);
        let mut written = 0;
        // The cursor string after each message: formatted once per batch, then each message
        // moves one position of it (a stream of many channels would otherwise format every
        // channel's position for every message).
        let mut ids: Option<CursorText> = None;
        let count = frames.len();
        for (k, f) in frames.into_iter().enumerate() {
            match f {
                OutFrame::Control(b) => buf.put_slice(&b),
                OutFrame::Presence(frame) => {
                    let body = herald_core::presence::frame_body(&frame);
                    buf.put_slice(b"event: presence\ndata: ");
                    buf.put_slice(&body);
                    buf.put_slice(b"\n\n");
                }
                OutFrame::Message(m) | OutFrame::Replayed(m) => {
                    if let Some(i) = self.subs.advance(&m) {
                        let ids = match &mut ids {
                            Some(ids) => {
                                ids.set(i, self.subs.position(i));
                                ids
                            }
                            None => {
                                let ids = ids.insert(CursorText::new(self.subs.positions()));
                                // Room for every id at once: a cursor of many channels makes
                                // ids the bulk of the batch, and growing by doubling copies it.
                                buf.reserve((count - k) * (ids.as_str().len() + 6));
                                ids
                            }
                        };
                        buf.put_slice(b"id: ");
                        buf.put_slice(ids.as_str().as_bytes());
                        buf.put_u8(b'\n');
                        buf.put_slice(&herald_core::frames::sse_data(&m));
                        written += 1;
                    }
                }
            }
        }
        telemetry().written_sse.increment(written);
        match closed {
            Some(reason) => {
                let body = ErrorBody::new(reason.code(), reason.message());
                buf.put_slice(&frame::sse_event("disconnect", &body));
            }
            None if ping => buf.put_slice(PING),
            None => {}
        }
    }
}

impl Drop for SseStream {
    fn drop(&mut self) {
        telemetry().connections_sse.decrement(1.0);
    }
}
