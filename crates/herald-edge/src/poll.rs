//! Long-poll at `GET /v1/poll?channel=a&since=CURSOR&timeout=30`. Answers at once when messages
//! after the cursor are waiting, otherwise when one arrives or the timeout passes. Every answer
//! carries the cursor to send next time, so successive polls see every message exactly once.
//! A poll a revocation ends answers at once with what it has and a `disconnect` entry
//! (`{"code":"revoked","message":...}`).
//!
//! On a presence channel a poll's user is a member while it waits and for [`PRESENCE_GRACE`]
//! after it answered, so a client polling in a loop is one member throughout; with
//! `presence=true` the answer's `presence` array holds each presence channel's `members` list
//! (which alone does not end the wait), then the joins and leaves that came while it waited.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use herald_core::lifecycle::{DisconnectReason, Transport};
use herald_core::outbox::{OutFrame, Outbox};
use herald_core::telemetry::telemetry;
use herald_core::HeraldError;
use herald_proto::query::whole_number;
use herald_proto::reply::ChannelStatus;

use crate::channels::{StreamRequest, Subscriptions};
use crate::driver::drain::messages;
use crate::http::error_response;
use crate::Edge;

/// Longest wait a client may ask for.
const MAX_TIMEOUT_SECS: u64 = 120;
/// Wait when the client does not say.
const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Most messages in one answer; the cursor then points at the last one returned.
const MAX_LIMIT: usize = 10_000;
/// Messages per answer when the client does not say.
const DEFAULT_LIMIT: usize = 1000;
/// How long a poll's user stays a member of the presence channels it named once the poll has
/// answered: a client that polls again within it stays one member, with no leave and join
/// between its polls.
pub const PRESENCE_GRACE: Duration = Duration::from_secs(10);

/// Answers one long-poll request.
pub async fn poll(
    State(edge): State<Arc<Edge>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    match answer(&edge, query.as_deref(), &headers).await {
        Ok(response) => response,
        Err(e) => error_response(&e),
    }
}

async fn answer(
    edge: &Arc<Edge>,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, HeraldError> {
    StreamRequest::prepare_keys(edge, query, headers).await;
    let request = StreamRequest::parse(edge, query, headers, None)?;
    // Query parameters follow the API's one rule (`herald_proto::query`).
    let timeout = match request.param("timeout") {
        Some(t) => whole_number("timeout", t, 0, MAX_TIMEOUT_SECS)?,
        None => DEFAULT_TIMEOUT_SECS,
    };
    let limit = match request.param("limit") {
        Some(l) => whole_number("limit", l, 1, MAX_LIMIT)?,
        None => DEFAULT_LIMIT,
    };
    let outbox = Outbox::new(edge.settings.outbox_bytes);
    let (mut subs, outcomes) =
        Subscriptions::open(Transport::LongPoll, edge, &request, &outbox, |_, _| None).await?;
    let (mut frames, mut closed) = outbox.take();
    // A presence channel's `members` list, queued by the subscribe itself, is no news: the
    // poll still waits, and answers it with whatever comes.
    let news = |frames: &std::collections::VecDeque<OutFrame>| {
        frames.iter().any(|f| match f {
            OutFrame::Presence(p) => !herald_core::presence::is_members_frame(p),
            _ => true,
        })
    };
    if !news(&frames) && closed.is_none() {
        tokio::select! {
            batch = outbox.next_batch() => {
                let (more, why) = batch;
                frames.extend(more);
                closed = why;
            }
            _ = tokio::time::sleep(Duration::from_secs(timeout)) => {}
            _ = edge.shutdown.cancelled() => subs.set_disconnect_reason(DisconnectReason::Shutdown),
        }
    }
    let mut body = Vec::with_capacity(256);
    body.extend_from_slice(b"{\"messages\":[");
    let mut written = 0u64;
    for m in messages(&frames) {
        if written as usize == limit {
            break;
        }
        if subs.advance(m).is_some() {
            if written > 0 {
                body.push(b',');
            }
            body.extend_from_slice(&herald_core::frames::message_entry(m));
            written += 1;
        }
    }
    body.extend_from_slice(b"],\"cursor\":");
    serde_json::to_writer(&mut body, &subs.cursor()).map_err(internal)?;
    body.extend_from_slice(b",\"channels\":");
    let channels: Vec<_> = outcomes
        .iter()
        .map(|(n, o)| ChannelStatus {
            channel: n.public().into(),
            epoch: o.epoch.as_str().into(),
            seq: o.seq,
            recovered: o.recovered,
        })
        .collect();
    serde_json::to_writer(&mut body, &channels).map_err(internal)?;
    let mut presence = frames.iter().filter_map(|f| match f {
        OutFrame::Presence(p) => Some(herald_core::presence::frame_body(p)),
        _ => None,
    });
    if let Some(first) = presence.next() {
        body.extend_from_slice(b",\"presence\":[");
        body.extend_from_slice(&first);
        for frame in presence {
            body.push(b',');
            body.extend_from_slice(&frame);
        }
        body.push(b']');
    }
    // A revocation ended the poll: say so (other closes answer as they always have).
    if let Some(reason) = closed.filter(|r| r.code() == "revoked") {
        body.extend_from_slice(b",\"disconnect\":");
        let why = herald_proto::reply::ErrorBody::new(reason.code(), reason.message());
        serde_json::to_writer(&mut body, &why).map_err(internal)?;
    }
    body.push(b'}');
    telemetry().written_poll.increment(written);
    let held = subs.take_presence();
    if !held.is_empty() {
        tokio::spawn(async move {
            tokio::time::sleep(PRESENCE_GRACE).await;
            drop(held);
        });
    }
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

fn internal(e: serde_json::Error) -> HeraldError {
    HeraldError::new(herald_core::ErrorCode::Internal, e.to_string())
}
