//! `GET /v1/apps/{id}/hooks/tail` (the admin key or a publisher key of the app): the webhook
//! events this node queues for the app's endpoints, live, as a `text/event-stream`
//! ([`herald_hooks::tail`]).
//!
//! The stream opens with a comment, then carries each event as the writer queues it (only
//! events some endpoint wants), one `data:` line of the event's JSON as a receiver gets it;
//! `event: lagged` with `{"missed": N}` when the reader fell behind and N events were not
//! shown; and a `: ping` comment every [`PING_EVERY`] while nothing happens. It ends when the
//! server shuts down. It is this node's events only: in a cluster each node has its own.
//! A node serves at most [`herald_hooks::tail::MAX_TAILS`] at once; past that the answer is
//! `429 limit_exceeded`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use herald_core::{ErrorCode, HeraldError};
use herald_hooks::tail::{Tail, TailItem};
use herald_proto::sse::SseEvent;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::apps::find_app;
use crate::auth::AppOrAdmin;
use crate::error::ApiError;
use crate::Api;

/// How often an idle tail gets a `: ping` comment (so proxies keep it open).
pub(crate) const PING_EVERY: Duration = Duration::from_secs(25);

/// `GET /v1/apps/{id}/hooks/tail`: see the [module documentation](self).
pub async fn tail(
    State(api): State<Arc<Api>>,
    AppOrAdmin(app): AppOrAdmin,
) -> Result<Response, ApiError> {
    find_app(&api, &app).await?;
    let tail = api
        .hooks
        .tail(&app)
        .map_err(|e| HeraldError::new(ErrorCode::LimitExceeded, e.to_string()))?;
    let opening = Bytes::from(format!(
        ": the webhook events this node queues for app {app}, as they are queued\n\n"
    ));
    let mut response =
        Body::from_stream(frames(tail, api.shutdown.clone(), opening)).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// What the stream reads next.
struct Reading {
    tail: Tail,
    shutdown: CancellationToken,
    ping: tokio::time::Interval,
    opening: Option<Bytes>,
}

/// The stream's frames: `opening`, then the tail's events, lags and pings until `shutdown`
/// (or the node's tails are gone).
fn frames(
    tail: Tail,
    shutdown: CancellationToken,
    opening: Bytes,
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send {
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let reading = Reading {
        tail,
        shutdown,
        ping,
        opening: Some(opening),
    };
    futures_util::stream::unfold(reading, |mut r| async move {
        if let Some(opening) = r.opening.take() {
            return Some((Ok(opening), r));
        }
        let frame = tokio::select! {
            _ = r.shutdown.cancelled() => return None,
            _ = r.ping.tick() => Bytes::from_static(b": ping\n\n"),
            item = r.tail.next() => frame(item?),
        };
        r.ping.reset();
        Some((Ok(frame), r))
    })
}

/// One item of a tail as its SSE frame.
fn frame(item: TailItem) -> Bytes {
    let event = match item {
        TailItem::Event(event) => SseEvent {
            event: None,
            id: None,
            data: event.to_json().to_string(),
        },
        TailItem::Lagged(missed) => SseEvent {
            event: Some("lagged".into()),
            id: None,
            data: json!({ "missed": missed }).to_string(),
        },
    };
    event.encode()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lag_says_how_many_were_missed() {
        let text = frame(TailItem::Lagged(7));
        assert_eq!(&text[..], b"event: lagged\ndata: {\"missed\":7}\n\n");
    }
}
