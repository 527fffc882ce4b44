//! Small HTTP helpers shared by the transports: JSON error responses, reading the client token
//! from `?token=` or `Authorization: Bearer`, and query strings with repeated keys.

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_core::HeraldError;
use herald_proto::frame::ErrorBody;

/// `{"error":{"code","message"}}` with the code's HTTP status.
pub fn error_response(e: &HeraldError) -> Response {
    let status = StatusCode::from_u16(e.code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
    let body = serde_json::json!({ "error": ErrorBody::from(e) });
    (status, axum::Json(body)).into_response()
}

/// The decoded `key=value` pairs of a query string, in order (repeated keys kept).
pub fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// The client token from `?token=` or an `Authorization: Bearer` header.
pub fn client_token(pairs: &[(String, String)], headers: &HeaderMap) -> Option<String> {
    if let Some((_, t)) = pairs.iter().find(|(k, _)| k == "token") {
        return Some(t.clone());
    }
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_owned())
}
