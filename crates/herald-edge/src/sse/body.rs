//! The axum handler for `/v1/sse`: the stream as a hyper response body. Serves the requests
//! [`super::direct`] does not take (one on a kept-alive connection after another request, a
//! header block too large to sniff). The body ends with the stream; hyper frames it (chunked on
//! HTTP/1.1) and may keep the connection for another request.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use herald_core::outbox::CloseReason;

use super::{SseStream, PING, PREAMBLE, STREAM_HEADERS};
use crate::http::{error_response, until_expiry};
use crate::Edge;

/// Opens an SSE stream.
pub async fn stream(
    State(edge): State<Arc<Edge>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let stream = match SseStream::open(&edge, query.as_deref(), &headers).await {
        Ok(stream) => stream,
        Err(e) => return error_response(&e),
    };
    let state = BodyState {
        edge,
        stream,
        started: false,
        done: false,
    };
    let body = Body::from_stream(futures_util::stream::unfold(state, next_chunk));
    let mut response = body.into_response();
    for (name, value) in STREAM_HEADERS {
        response.headers_mut().insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    response
}

struct BodyState {
    edge: Arc<Edge>,
    stream: SseStream,
    started: bool,
    done: bool,
}

/// Produces the next chunk of the stream: everything queued, coalesced into one write.
async fn next_chunk(
    mut st: BodyState,
) -> Option<(Result<Bytes, std::convert::Infallible>, BodyState)> {
    if st.done {
        return None;
    }
    if !st.started {
        st.started = true;
        return Some((Ok(Bytes::from_static(PREAMBLE)), st));
    }
    let ping = tokio::time::sleep(st.edge.settings.ping_interval);
    let (frames, closed) = tokio::select! {
        batch = st.stream.outbox.next_batch() => batch,
        _ = ping => return Some((Ok(Bytes::from_static(PING)), st)),
        _ = st.edge.shutdown.cancelled() => {
            st.stream.outbox.close(CloseReason::Shutdown);
            st.stream.outbox.take()
        }
        _ = until_expiry(st.stream.expires) => {
            st.stream.outbox.close(CloseReason::TokenExpired);
            st.stream.outbox.take()
        }
    };
    let mut buf = Vec::new();
    st.done = closed.is_some();
    st.stream.encode_events(frames, closed, false, &mut buf);
    Some((Ok(Bytes::from(buf)), st))
}
