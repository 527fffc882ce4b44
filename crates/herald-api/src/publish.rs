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

/// The error for a request body over `limit` bytes.
fn too_large(limit: usize) -> HeraldError {
    HeraldError::new(
        ErrorCode::TooLarge,
        format!("request body is larger than {limit} bytes"),
    )
}

/// Reads a request body of at most `limit` bytes. A declared `Content-Length` over the limit is
/// refused before anything is read, and a body that grows past it while read is refused as it
/// does (`413 too_large`); a body that stops arriving before its deadline (the listener's
/// `body_timeout`) is answered `408 request_timeout`; a body that cannot be read (a chunked
/// body whose framing is malformed, one that ends early) is the client's error: `400`.
pub(crate) async fn read_body(body: Body, limit: usize) -> Result<Bytes, HeraldError> {
    use futures_util::StreamExt;
    if axum::body::HttpBody::size_hint(&body).lower() > limit as u64 {
        return Err(too_large(limit));
    }
    // The limit is checked here rather than by `axum::body::to_bytes`, whose error does not
    // tell a body over the limit from one that could not be read.
    let mut chunks = body.into_data_stream();
    let mut first: Option<Bytes> = None;
    let mut more: Option<bytes::BytesMut> = None;
    let mut read = 0usize;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| unreadable_body(&e))?;
        read = read.saturating_add(chunk.len());
        if read > limit {
            return Err(too_large(limit));
        }
        // One chunk (the usual case) is kept as it came, without a copy.
        match (&first, &mut more) {
            (None, _) => first = Some(chunk),
            (Some(head), None) => {
                let mut joined = bytes::BytesMut::with_capacity(read);
                joined.extend_from_slice(head);
                joined.extend_from_slice(&chunk);
                more = Some(joined);
            }
            (Some(_), Some(joined)) => joined.extend_from_slice(&chunk),
        }
    }
    Ok(match more {
        Some(joined) => joined.freeze(),
        None => first.unwrap_or_default(),
    })
}

/// The answer to a body that failed while read: its deadline passed (`408`), or its bytes are
/// not a body (`400`): hyper's chunked decoder reports a bad chunk-size line or framing as
/// `InvalidInput`/`InvalidData`, and a body cut short as `UnexpectedEof`.
fn unreadable_body(e: &axum::Error) -> HeraldError {
    use std::io::ErrorKind;
    let found = |kinds: &[ErrorKind]| io_errors_in(e).find(|io| kinds.contains(&io.kind()));
    if found(&[ErrorKind::TimedOut]).is_some() {
        return HeraldError::new(
            ErrorCode::RequestTimeout,
            "the request body stopped arriving before the body deadline (body_timeout); \
             the connection is closed",
        );
    }
    if let Some(io) = found(&[ErrorKind::InvalidInput, ErrorKind::InvalidData]) {
        return HeraldError::bad_request(format!(
            "the chunked request body is malformed ({io}): each chunk is a hexadecimal size \
             line, CRLF, that many bytes and CRLF, and a 0 size ends the body; nothing of it \
             was used and the connection is closed"
        ));
    }
    if found(&[ErrorKind::UnexpectedEof]).is_some() {
        return HeraldError::bad_request(
            "the request body ended before it was complete; nothing of it was used",
        );
    }
    HeraldError::bad_request("the request body could not be read; nothing of it was used")
}

/// The `io::Error`s in `e`'s chain (how the listener's timed body and hyper say what went
/// wrong).
fn io_errors_in(e: &axum::Error) -> impl Iterator<Item = &std::io::Error> {
    let first: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    std::iter::successors(first, |e| e.source()).filter_map(|e| e.downcast_ref())
}

/// Parses a job id from the path.
pub(crate) fn parse_job_id(id: &str) -> Result<i64, HeraldError> {
    id.parse()
        .map_err(|_| HeraldError::bad_request(format!("a job id is a number, not {id:?}")))
}

/// Parses a JSON request body, saying what is wrong with it. Every body of the API is a JSON
/// object, read strictly (`herald_proto::strict_json`): serde would read an array as an
/// object's fields in order (`[1]` as `{"data":1}`, `{"limits":[5,7]}` as two limits), which no
/// one means, so an array where an object belongs is refused at any depth, naming where.
pub(crate) fn parse_json<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, HeraldError> {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        None => {
            return Err(HeraldError::bad_request(
                "the request body is empty: send a JSON object",
            ))
        }
        Some(b'{') => {}
        Some(_) => {
            return Err(HeraldError::bad_request(
                "the request body must be a JSON object ({...}), not an array, a string or a \
                 number",
            ))
        }
    }
    herald_proto::strict_json::from_slice(body).map_err(|e| {
        HeraldError::bad_request(format!("invalid request body: {}", without_type_names(&e)))
    })
}

/// serde's message without the server's own type names (`expected struct PublishBody` says
/// nothing to a client): a struct is "an object", an enum "one of the allowed values".
fn without_type_names(e: &herald_proto::strict_json::Error) -> String {
    let text = e.to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest
        .find("expected struct ")
        .or_else(|| rest.find("expected enum "))
    {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let (phrase, skip) = if tail.starts_with("expected struct ") {
            ("expected an object", "expected struct ".len())
        } else {
            ("expected one of the allowed values", "expected enum ".len())
        };
        out.push_str(phrase);
        let name = &tail[skip..];
        let end = name
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .unwrap_or(name.len());
        rest = &name[end..];
    }
    out.push_str(rest);
    out
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
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    publish_one(&api, &path, &headers, Incoming::Stream(body)).await
}

/// `POST /v1/channels/{path}` for a request read whole without the router (herald-edge's
/// `direct_publish`): `path` is the target after `/v1/channels/`, with nothing to
/// percent-decode. Answers exactly as `publish` does through the router.
pub async fn publish_read(
    api: Arc<Api>,
    path: String,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match publish_one(&api, &path, &headers, Incoming::Read(body)).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn publish_one(
    api: &Api,
    path: &str,
    headers: &HeaderMap,
    body: Incoming,
) -> Result<Response, ApiError> {
    let (app, key) = api.authorize_key(headers)?;
    let (name, messages) = split_path(path);
    if !messages {
        return Err(HeraldError::new(
            ErrorCode::NotFound,
            "publish with POST /v1/channels/{name}/messages",
        )
        .into());
    }
    api.count_rate(&app, &key, AppAction::Publish, 1)?;
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
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (app, key) = api.authorize_key(&headers)?;
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
    api.count_rate(&app, &key, AppAction::Publish, parsed.messages.len())?;
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
    fn bodies_are_objects_and_errors_name_no_server_types() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct PublishBody {
            data: u8,
        }
        let e = parse_json::<PublishBody>(b" [1]").unwrap_err();
        assert!(e.message.contains("must be a JSON object"), "{}", e.message);
        let e = parse_json::<PublishBody>(b"").unwrap_err();
        assert!(e.message.contains("empty"), "{}", e.message);
        let e = parse_json::<std::collections::HashMap<String, PublishBody>>(br#"{"a":"x"}"#)
            .unwrap_err();
        assert!(e.message.contains("expected an object"), "{}", e.message);
        assert!(!e.message.contains("PublishBody"), "{}", e.message);
    }

    #[test]
    fn arrays_in_place_of_objects_are_refused_at_any_depth_naming_where() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Update {
            limits: herald_core::tenancy::AppLimits,
        }
        for (body, path) in [
            (&br#"{"limits":[null,null]}"#[..], "limits"),
            (br#"{"limits":[5,7,1000]}"#, "limits"),
        ] {
            let e = parse_json::<Update>(body).unwrap_err();
            assert_eq!(
                e.message,
                format!("invalid request body: {path}: expected an object, not an array")
            );
        }
        let e = parse_json::<BatchBody>(br#"{"messages":[["news",1]]}"#)
            .err()
            .expect("refused");
        assert_eq!(
            e.message,
            "invalid request body: messages[0]: expected an object, not an array"
        );
        let e = parse_json::<herald_push::push::PushBody>(br#"{"target":["dev-1"],"data":1}"#)
            .err()
            .expect("refused");
        assert_eq!(
            e.message,
            "invalid request body: target: expected an object, not an array"
        );
        let ok: BatchBody =
            parse_json(br#"{"messages":[{"channel":"a","data":[1,{"b":[]}]}]}"#).unwrap();
        assert_eq!(ok.messages[0].data.get(), r#"[1,{"b":[]}]"#);
    }
}
