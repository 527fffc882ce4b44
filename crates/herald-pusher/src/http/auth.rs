//! The HTTP API's request signature, checked in the order Pusher documents ("server API
//! authentication"): the `auth_key` is known and belongs to the app in the path;
//! `auth_version` is `1.0`; `auth_timestamp` is within [`MAX_CLOCK_SKEW_SECS`] of now;
//! `body_md5` is the hex MD5 of the body (required when there is a body); `auth_signature`
//! is `HMAC-SHA256(secret, "METHOD\nPATH\nQUERY")` ([`crate::signature::request_string`]) with
//! the current secret or the one rotating out while its overlap lasts. Each refusal is a 401
//! saying what was wrong; a store failure is a 503.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, StatusCode, Uri};
use bytes::Bytes;
use herald_core::message::now_millis;

use super::Answer;
use crate::credentials::cache::OpenCredentials;
use crate::credentials::service::PusherCredentials;
use crate::credentials::PusherError;
use crate::signature::{body_md5, body_md5_matches, request_string, verify_hmac_hex};

/// How far `auth_timestamp` may be from the server's clock, in seconds (Pusher's 600).
pub const MAX_CLOCK_SKEW_SECS: i64 = 600;

/// What is checked of one request.
pub struct SignedRequest<'a> {
    /// The method (`POST`).
    pub method: &'a str,
    /// The path as requested (`/apps/123/events`).
    pub path: &'a str,
    /// The Pusher app id in the path.
    pub app_id: &'a str,
    /// The query string as sent (without `?`).
    pub query: &'a str,
    /// The body.
    pub body: &'a [u8],
}

impl<'a> SignedRequest<'a> {
    /// The request to `uri` with `method`, for the app `app_id` of its path, with `body`.
    pub fn new(method: &'a Method, uri: &'a Uri, app_id: &'a str, body: &'a [u8]) -> Self {
        SignedRequest {
            method: method.as_str(),
            path: uri.path(),
            app_id,
            query: uri.query().unwrap_or(""),
            body,
        }
    }
}

/// Reads a request's body (more than `limit` bytes is a `413`) and checks the request's
/// signature: the body and the credentials it is signed with, or why it is refused.
pub async fn read_signed(
    credentials: &PusherCredentials,
    limit: usize,
    app_id: &str,
    method: &Method,
    uri: &Uri,
    body: Body,
) -> Result<(Bytes, Arc<OpenCredentials>), Answer> {
    let body: Bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        Answer::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Request body too large: the limit is {limit} bytes"),
        )
    })?;
    let signed = authenticate(credentials, &SignedRequest::new(method, uri, app_id, &body)).await?;
    Ok((body, signed))
}

/// The credentials `request` is signed with, or why it is refused.
pub async fn authenticate(
    credentials: &PusherCredentials,
    request: &SignedRequest<'_>,
) -> Result<Arc<OpenCredentials>, Answer> {
    let params: Vec<(String, String)> = form_urlencoded::parse(request.query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let key = param("auth_key").ok_or_else(|| Answer::unauthorized("Missing auth_key"))?;
    let set = credentials
        .by_key(key)
        .await
        .map_err(store_failed)?
        .ok_or_else(|| Answer::unauthorized(format!("Unknown auth_key {key:?}")))?;
    if set.app_id != request.app_id {
        return Err(Answer::unauthorized(format!(
            "auth_key {key:?} is not a key of app {:?}",
            request.app_id
        )));
    }
    match param("auth_version") {
        Some("1.0") => {}
        Some(other) => {
            return Err(Answer::unauthorized(format!(
                "Invalid auth_version {other:?}: the only version is 1.0"
            )))
        }
        None => return Err(Answer::unauthorized("Missing auth_version")),
    }
    let timestamp =
        param("auth_timestamp").ok_or_else(|| Answer::unauthorized("Missing auth_timestamp"))?;
    let now_ms = now_millis();
    let now = now_ms / 1000;
    let given: i64 = timestamp.parse().map_err(|_| {
        Answer::unauthorized(format!(
            "Invalid auth_timestamp {timestamp:?}: seconds since the Unix epoch"
        ))
    })?;
    if given.abs_diff(now) > MAX_CLOCK_SKEW_SECS as u64 {
        return Err(Answer::unauthorized(format!(
            "Timestamp expired: given timestamp {given} is not within {MAX_CLOCK_SKEW_SECS}s of \
             the server's time {now}"
        )));
    }
    match param("body_md5") {
        Some(md5) if !body_md5_matches(request.body, md5) => {
            return Err(Answer::unauthorized(format!(
                "Invalid body_md5: the body's MD5 is {}, but you sent {md5:?}",
                body_md5(request.body)
            )))
        }
        Some(_) => {}
        None if !request.body.is_empty() => {
            return Err(Answer::unauthorized(
                "Missing body_md5: a request with a body signs its hex MD5 as body_md5",
            ))
        }
        None => {}
    }
    let signature =
        param("auth_signature").ok_or_else(|| Answer::unauthorized("Missing auth_signature"))?;
    let signed = request_string(
        request.method,
        request.path,
        params.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    if !verify_hmac_hex(set.secrets_at(now_ms), signed.as_bytes(), signature) {
        return Err(Answer::unauthorized(format!(
            "Invalid signature: you should have sent HmacSHA256Hex({signed:?}, your_secret_key), \
             but you sent {signature:?}"
        )));
    }
    Ok(set)
}

fn store_failed(e: PusherError) -> Answer {
    match e {
        PusherError::Store(e) => Answer::from(herald_core::HeraldError::from(e)),
        other => Answer::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            other.to_string(),
        ),
    }
}
