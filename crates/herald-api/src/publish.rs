//! Publishing: `POST /v1/channels/{name}/messages` (one message) and `POST /v1/batch` (many
//! messages to any channels). Both answer only after the messages are durably stored.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use herald_core::limits::AppAction;
use herald_core::log::Appended;
use herald_core::{ChannelName, ErrorCode, HeraldError, NewMessage};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::auth::Publisher;
use crate::body::{parse_json, read_body, too_large};
use crate::channels::split_path;
use crate::error::ApiError;
use crate::{Api, MAX_BATCH};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishBody {
    data: Box<RawValue>,
    #[serde(default)]
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchItem {
    channel: String,
    data: Box<RawValue>,
    #[serde(default)]
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    messages: Vec<BatchItem>,
}

/// What a publish answers for each message.
#[derive(Serialize)]
pub struct Published {
    channel: String,
    seq: u64,
    id: String,
    epoch: String,
    time: i64,
    duplicate: bool,
}

impl From<&Appended> for Published {
    fn from(a: &Appended) -> Self {
        let m = &a.message;
        Published {
            channel: m.channel.to_string(),
            seq: m.seq,
            id: m.id(),
            epoch: m.epoch.to_string(),
            time: m.time,
            duplicate: a.duplicate,
        }
    }
}

/// A publish's body: still arriving (through the router), or read whole before the handler
/// (herald-edge's `direct_publish`).
enum Incoming {
    Stream(Body),
    Read(Bytes),
}

/// `POST /v1/channels/{name}/messages`.
pub async fn publish(
    State(api): State<Arc<Api>>,
    Path(path): Path<String>,
    publisher: Publisher,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    publish_one(&api, publisher, &path, &headers, Incoming::Stream(body)).await
}

/// `POST /v1/channels/{path}` for a request read whole without the router (herald-edge's
/// `direct_publish`): `path` is the target after `/v1/channels/`, with nothing to
/// percent-decode. Answers exactly as `publish` does through the router: the publisher is
/// checked here, as the `Publisher` extractor checks it there.
pub async fn publish_read(
    api: Arc<Api>,
    path: String,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let publisher = match Publisher::of(&api, &headers) {
        Ok(publisher) => publisher,
        Err(e) => return ApiError(e).into_response(),
    };
    match publish_one(&api, publisher, &path, &headers, Incoming::Read(body)).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn publish_one(
    api: &Api,
    publisher: Publisher,
    path: &str,
    headers: &HeaderMap,
    body: Incoming,
) -> Result<Response, ApiError> {
    let (name, messages) = split_path(path);
    if !messages {
        return Err(HeraldError::new(
            ErrorCode::NotFound,
            "publish with POST /v1/channels/{name}/messages",
        )
        .into());
    }
    publisher.count(api, AppAction::Publish, 1)?;
    let app = publisher.app;
    let channel = app.parse_channel(name)?;
    let limit = api.max_message_bytes + 4096;
    let body = match body {
        Incoming::Stream(body) => read_body(body, limit).await?,
        Incoming::Read(body) if body.len() > limit => return Err(too_large(limit).into()),
        Incoming::Read(body) => body,
    };
    let parsed: PublishBody = parse_json(&body)?;
    let header_id = headers
        .get("idempotency-key")
        .map(|v| {
            v.to_str()
                .map(str::to_owned)
                .map_err(|_| HeraldError::bad_request("Idempotency-Key must be visible ASCII"))
        })
        .transpose()?;
    let id = match (header_id, parsed.id) {
        (Some(h), Some(b)) if h != b => {
            return Err(HeraldError::bad_request(
                "Idempotency-Key header and body \"id\" differ; send one",
            )
            .into())
        }
        (h, b) => h.or(b),
    };
    let message = api
        .publisher
        .message(&app, id, parsed.data.get().as_bytes())?;
    let appended = api.publisher.publish(&app, &channel, vec![message]).await?;
    let first = appended
        .first()
        .ok_or_else(|| HeraldError::new(ErrorCode::Internal, "nothing was appended"))?;
    Ok(axum::Json(Published::from(first)).into_response())
}

/// `POST /v1/batch`: `{"messages":[{"channel","data","id"?},...]}`. Messages to one channel are
/// stored in the order given and all-or-nothing; different channels are independent, so each
/// result is either the stored message or an error.
pub async fn batch(
    State(api): State<Arc<Api>>,
    publisher: Publisher,
    body: Body,
) -> Result<Response, ApiError> {
    let limit = (api.max_message_bytes + 512)
        .saturating_mul(MAX_BATCH)
        .min(64 << 20);
    let body = read_body(body, limit).await?;
    let parsed: BatchBody = parse_json(&body)?;
    if parsed.messages.is_empty() || parsed.messages.len() > MAX_BATCH {
        return Err(HeraldError::bad_request(format!(
            "a batch holds 1 to {MAX_BATCH} messages; this one has {}",
            parsed.messages.len()
        ))
        .into());
    }
    publisher.count(&api, AppAction::Publish, parsed.messages.len())?;
    let app = publisher.app;
    // Validate everything before storing anything.
    let mut groups: Vec<(ChannelName, Vec<usize>, Vec<NewMessage>)> = Vec::new();
    let mut group_of: HashMap<ChannelName, usize> = HashMap::new();
    for (i, item) in parsed.messages.into_iter().enumerate() {
        let at = |e: HeraldError| HeraldError::new(e.code, format!("messages[{i}]: {}", e.message));
        let channel = app.parse_channel(&item.channel).map_err(at)?;
        let message = api
            .publisher
            .message(&app, item.id, item.data.get().as_bytes())
            .map_err(at)?;
        let g = *group_of.entry(channel.clone()).or_insert_with(|| {
            groups.push((channel, Vec::new(), Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(i);
        groups[g].2.push(message);
    }
    let total: usize = groups.iter().map(|g| g.1.len()).sum();
    let stored = futures_util::future::join_all(groups.into_iter().map(|(ch, idx, msgs)| {
        let (publisher, app) = (&api.publisher, &app);
        async move { (idx, publisher.publish(app, &ch, msgs).await) }
    }))
    .await;
    let mut results: Vec<serde_json::Value> = vec![serde_json::Value::Null; total];
    let mut failures = 0;
    let mut last_error = None;
    for (idx, outcome) in stored {
        match outcome {
            Ok(appended) => {
                for (i, a) in idx.into_iter().zip(&appended) {
                    results[i] = serde_json::to_value(Published::from(a)).unwrap_or_default();
                }
            }
            Err(e) => {
                failures += idx.len();
                let body = serde_json::json!({ "error": herald_proto::reply::ErrorBody::from(&e) });
                for i in idx {
                    results[i] = body.clone();
                }
                last_error = Some(e);
            }
        }
    }
    if failures == total {
        if let Some(e) = last_error {
            return Err(e.into());
        }
    }
    Ok(axum::Json(serde_json::json!({ "results": results })).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_bodies_refuse_arrays_in_place_of_messages_and_keep_raw_data() {
        let e = parse_json::<BatchBody>(br#"{"messages":[["news",1]]}"#)
            .err()
            .expect("refused");
        assert_eq!(
            e.message,
            "invalid request body: messages[0]: expected an object, not an array"
        );
        let ok: BatchBody =
            parse_json(br#"{"messages":[{"channel":"a","data":[1,{"b":[]}]}]}"#).unwrap();
        assert_eq!(ok.messages[0].data.get(), r#"[1,{"b":[]}]"#);
    }
}
