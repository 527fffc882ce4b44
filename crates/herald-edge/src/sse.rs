//! Server-Sent Events at `GET /v1/sse?channel=a&channel=b`. Works with a plain `EventSource`:
//! each message is an unnamed event whose `id:` is the connection's cursor string, so the
//! browser's automatic reconnect sends `Last-Event-ID` and resumes every channel exactly.
//! Control events are named: `subscribed` (one per channel, first) and `disconnect`.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, BytesMut};
use herald_core::outbox::{CloseReason, OutFrame, Outbox};
use herald_core::telemetry::telemetry;
use herald_core::HeraldError;
use herald_proto::frame::{self, SubscribeReply};

use crate::channels::{StreamRequest, Subscriptions};
use crate::http::{error_response, until_expiry};
use crate::Edge;

/// Opens an SSE stream.
pub async fn stream(
    State(edge): State<Arc<Edge>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    match open(&edge, query.as_deref(), &headers).await {
        Ok(response) => response,
        Err(e) => error_response(&e),
    }
}

async fn open(
    edge: &Arc<Edge>,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, HeraldError> {
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty());
    let request = StreamRequest::parse(edge, query, headers, last_event_id)?;
    let outbox = Outbox::new(edge.settings.outbox_bytes);
    let subs = Subscriptions::open(edge, &request, &outbox, |name, outcome| {
        let body = SubscribeReply {
            channel: name.public(),
            seq: outcome.seq,
            epoch: outcome.epoch.as_str(),
            recovered: outcome.recovered,
        };
        Some(OutFrame::Control(frame::sse_event("subscribed", &body)))
    })
    .await?;
    telemetry().connections_sse.increment(1.0);
    let state = StreamState {
        edge: edge.clone(),
        outbox,
        subs,
        expires: request.client.expires,
        started: false,
        done: false,
    };
    let body = Body::from_stream(futures_util::stream::unfold(state, next_chunk));
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

struct StreamState {
    edge: Arc<Edge>,
    outbox: Arc<Outbox>,
    subs: Subscriptions,
    /// When the client's token expires (seconds since the Unix epoch); the stream ends then.
    expires: Option<u64>,
    started: bool,
    done: bool,
}

impl Drop for StreamState {
    fn drop(&mut self) {
        telemetry().connections_sse.decrement(1.0);
    }
}

/// Produces the next chunk of the stream: everything queued, coalesced into one write.
async fn next_chunk(
    mut st: StreamState,
) -> Option<(Result<Bytes, std::convert::Infallible>, StreamState)> {
    if st.done {
        return None;
    }
    if !st.started {
        st.started = true;
        return Some((Ok(Bytes::from_static(b"retry: 1000\n\n")), st));
    }
    let ping = tokio::time::sleep(st.edge.settings.ping_interval);
    let (frames, closed) = tokio::select! {
        batch = st.outbox.next_batch() => batch,
        _ = ping => return Some((Ok(Bytes::from_static(b": ping\n\n")), st)),
        _ = st.edge.shutdown.cancelled() => {
            st.outbox.close(CloseReason::Shutdown);
            st.outbox.take()
        }
        _ = until_expiry(st.expires) => {
            st.outbox.close(CloseReason::TokenExpired);
            st.outbox.take()
        }
    };
    let mut buf = BytesMut::new();
    if let Some(OutFrame::Message(oldest)) =
        frames.iter().find(|f| matches!(f, OutFrame::Message(_)))
    {
        herald_core::message::record_delivery_lag(oldest);
    }
    for f in frames {
        match f {
            OutFrame::Control(b) => buf.put_slice(&b),
            OutFrame::Message(m) | OutFrame::Replayed(m) => {
                if st.subs.advance(&m) {
                    buf.put_slice(b"id: ");
                    buf.put_slice(st.subs.cursor().as_bytes());
                    buf.put_u8(b'\n');
                    buf.put_slice(&frame::sse_data(&m));
                    telemetry().written_sse.increment(1);
                }
            }
        }
    }
    if let Some(reason) = closed {
        let body = frame::ErrorBody {
            code: reason.code(),
            message: reason.message(),
        };
        buf.put_slice(&frame::sse_event("disconnect", &body));
        st.done = true;
    }
    Some((Ok(buf.freeze()), st))
}
