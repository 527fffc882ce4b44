//! Small HTTP helpers shared by the transports: JSON error responses, reading the client token
//! from `?token=` or `Authorization: Bearer`, query strings with repeated keys, and the header
//! map of a request head parsed without hyper.

use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_core::HeraldError;

/// `{"error":{"code","message"}}` with the code's HTTP status, as `herald_proto::http` renders
/// every HTTP error.
pub fn error_response(e: &HeraldError) -> Response {
    let (status, body) = error_parts(e);
    let json = HeaderValue::from_static("application/json");
    (status, [(header::CONTENT_TYPE, json)], body).into_response()
}

/// The HTTP status and JSON body of [`error_response`], for a transport that writes its own
/// answer.
pub fn error_parts(e: &HeraldError) -> (StatusCode, Vec<u8>) {
    let (status, body) = herald_proto::http::error_answer(e);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    (status, body)
}

/// Resolves when a token that expires at `expires` (seconds since the Unix epoch) has expired;
/// never when `None`.
pub async fn until_expiry(expires: Option<u64>) {
    match expires {
        Some(exp) => tokio::time::sleep(secs_until(exp)).await,
        None => std::future::pending().await,
    }
}

/// Time from now until `exp` (seconds since the Unix epoch); zero if it has passed.
pub fn secs_until(exp: u64) -> std::time::Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    std::time::Duration::from_secs(exp.saturating_sub(now))
}

/// A boolean query parameter: `true`/`1`/empty or `false`/`0`.
pub fn parse_bool(v: &str) -> Result<bool, HeraldError> {
    match v {
        "true" | "1" | "" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(HeraldError::bad_request(format!(
            "invalid boolean {v:?}: use true or false"
        ))),
    }
}

/// The headers of a request head `httparse` read, as hyper would have given them (repeated
/// names kept, in order); `None` if a name or value is one hyper would refuse.
pub(crate) fn header_map(lines: &[httparse::Header<'_>]) -> Option<HeaderMap> {
    let mut headers = HeaderMap::with_capacity(lines.len());
    for line in lines {
        let name = HeaderName::from_bytes(line.name.as_bytes()).ok()?;
        let value = HeaderValue::from_bytes(line.value).ok()?;
        headers.append(name, value);
    }
    Some(headers)
}

/// The decoded `key=value` pairs of a query string, in order (repeated keys kept).
pub fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// The client token from `?token=` or an `Authorization: Bearer` header; an empty one counts
/// as none. A `?token=` parameter wins even when it is empty: the header is then not looked at
/// (docs/protocol.md, "Where to send the token"), so a request never gains the header's rights
/// by blanking the query.
pub fn client_token(pairs: &[(String, String)], headers: &HeaderMap) -> Option<String> {
    if let Some((_, t)) = pairs.iter().find(|(k, _)| k == "token") {
        let t = t.trim();
        return (!t.is_empty()).then(|| t.to_owned());
    }
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(herald_proto::http::bearer)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
}
