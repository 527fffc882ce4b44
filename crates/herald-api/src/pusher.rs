//! An app's Pusher credentials (the admin key or a publisher key of the app the path names):
//! `GET`/`POST`/`DELETE /v1/apps/{id}/pusher` and `POST /v1/apps/{id}/pusher/rotate`.
//!
//! `POST` creates the app's set: a Pusher app id (digits), a key and a secret (20 hex digits
//! each) drawn, or the values the body gives kept as they are (a migration from Pusher, Reverb
//! or soketi keeps its clients' and backends' configuration). The secret is in two answers
//! only, the creation's and the rotation's: never in `GET`, a log line or the audit log.
//! Bodies are read strictly (an unknown field is refused naming it); what the values say is
//! herald-pusher's to check ([`herald_pusher::credentials::service::PusherCredentials`]), and
//! its refusals become the API's errors ([`refused`]).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_core::tenant::AppId;
use herald_core::{ErrorCode, HeraldError};
use herald_hooks::event::rfc3339_millis;
use herald_pusher::credentials::service::GivenCredentials;
use herald_pusher::credentials::PusherError;
use serde::Deserialize;
use serde_json::json;

use crate::apps::find_app;
use crate::audit::{self, Action};
use crate::auth::AppOrAdmin;
use crate::body::{parse_json, read_body};
use crate::error::ApiError;
use crate::Api;

/// Largest body of `POST /v1/apps/{id}/pusher` and `POST .../rotate`.
const MAX_BODY_BYTES: usize = 4096;

/// How long a rotated-out secret stays valid when the body does not say: a day.
const DEFAULT_OVERLAP_SECS: u64 = 24 * 3600;

/// The longest overlap a rotation may ask for: 7 days.
const MAX_OVERLAP_SECS: u64 = 7 * 24 * 3600;

/// The body of `POST /v1/apps/{id}/pusher` (optional): values to keep instead of drawing.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    app_id: Option<String>,
    key: Option<String>,
    secret: Option<String>,
}

/// The body of `POST /v1/apps/{id}/pusher/rotate` (optional).
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rotate {
    overlap_seconds: Option<u64>,
    secret: Option<String>,
}

/// What the API answers for what the service refused: bad input `400 bad_request` naming
/// the field, no credentials `404 not_found`, a set already there or an app id or key taken
/// `409 conflict`, a secret that does not open `500 internal`, the store what every store
/// failure is.
pub(crate) fn refused(e: PusherError, app: &AppId) -> HeraldError {
    match e {
        PusherError::BadInput { .. } => HeraldError::bad_request(e.to_string()),
        PusherError::NotFound => HeraldError::new(
            ErrorCode::NotFound,
            format!(
                "app {app} has no Pusher credentials (create them with POST /v1/apps/{app}/pusher)"
            ),
        ),
        PusherError::Conflict(message) => HeraldError::new(ErrorCode::Conflict, message),
        PusherError::Sealed => HeraldError::new(ErrorCode::Internal, e.to_string()),
        PusherError::Store(store) => HeraldError::from(store),
    }
}

/// Reads an optional body: empty is `T::default()`.
async fn optional_body<T: Default + for<'a> Deserialize<'a>>(body: Body) -> Result<T, HeraldError> {
    let body = read_body(body, MAX_BODY_BYTES).await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        Ok(T::default())
    } else {
        parse_json(&body)
    }
}

/// `GET /v1/apps/{id}/pusher`: the app id and key (never the secret), when created, and until
/// when a rotated-out secret is still accepted.
pub async fn get(
    State(api): State<Arc<Api>>,
    AppOrAdmin(app): AppOrAdmin,
) -> Result<Response, ApiError> {
    find_app(&api, &app).await?;
    let view = api.pusher.show(&app).await.map_err(|e| refused(e, &app))?;
    Ok(axum::Json(json!({
        "app_id": view.app_id,
        "key": view.key,
        "created": rfc3339_millis(view.created_ms),
        "previous_secret_valid_until": view.previous_secret_until_ms.map(rfc3339_millis),
    }))
    .into_response())
}

/// `POST /v1/apps/{id}/pusher`: creates the app's set; `201` with the secret, shown only in
/// this answer.
pub async fn create(
    State(api): State<Arc<Api>>,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::PusherCreate, Some(&app), None);
    find_app(&api, &app).await?;
    let given: Create = optional_body(body).await?;
    audit::detail(
        "imported",
        given.app_id.is_some() || given.key.is_some() || given.secret.is_some(),
    );
    let created = api
        .pusher
        .create(
            &app,
            GivenCredentials {
                app_id: given.app_id,
                key: given.key,
                secret: given.secret,
            },
        )
        .await
        .map_err(|e| refused(e, &app))?;
    audit::detail("app_id", &created.app_id);
    audit::detail("key", &created.key);
    let answer = json!({
        "app_id": created.app_id,
        "key": created.key,
        "secret": created.secret,
        "created": rfc3339_millis(created.created_ms),
    });
    Ok((StatusCode::CREATED, axum::Json(answer)).into_response())
}

/// `POST /v1/apps/{id}/pusher/rotate`: a new secret (drawn, or the body's), shown only in this
/// answer; the old one is accepted too for `overlap_seconds` (a day unless given; `0`: not at
/// all).
pub async fn rotate(
    State(api): State<Arc<Api>>,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::PusherRotate, Some(&app), None);
    let rotate: Rotate = optional_body(body).await?;
    let overlap = rotate.overlap_seconds.unwrap_or(DEFAULT_OVERLAP_SECS);
    if overlap > MAX_OVERLAP_SECS {
        return Err(HeraldError::bad_request(format!(
            "overlap_seconds: at most {MAX_OVERLAP_SECS} (7 days), not {overlap}"
        ))
        .into());
    }
    audit::detail("overlap_seconds", overlap);
    audit::detail("given", rotate.secret.is_some());
    let (secret, until) = api
        .pusher
        .rotate(&app, Duration::from_secs(overlap), rotate.secret)
        .await
        .map_err(|e| refused(e, &app))?;
    Ok(axum::Json(json!({
        "secret": secret,
        "previous_valid_until": until.map(rfc3339_millis),
    }))
    .into_response())
}

/// `DELETE /v1/apps/{id}/pusher`: the set is gone; its key and secret stop working at once
/// on every node.
pub async fn delete(
    State(api): State<Arc<Api>>,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::PusherDelete, Some(&app), None);
    api.pusher
        .delete(&app)
        .await
        .map_err(|e| refused(e, &app))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_the_apis_errors() {
        let shop = AppId::parse("shop").unwrap();
        let bad = refused(PusherError::bad_input("key", "' ' is not allowed"), &shop);
        assert_eq!(
            (bad.code, bad.message.as_str()),
            (ErrorCode::BadRequest, "key: ' ' is not allowed")
        );
        let missing = refused(PusherError::NotFound, &shop);
        assert_eq!(missing.code, ErrorCode::NotFound);
        assert!(missing
            .message
            .starts_with("app shop has no Pusher credentials"));
        let taken = refused(PusherError::Conflict("key: taken".into()), &shop);
        assert_eq!(taken.code, ErrorCode::Conflict);
    }

    #[test]
    fn bodies_are_the_documented_fields_only() {
        let e = parse_json::<Create>(br#"{"appId":"1"}"#)
            .err()
            .expect("refused");
        assert!(e.message.contains("appId"), "{}", e.message);
        let e = parse_json::<Rotate>(br#"{"overlap_seconds":-1}"#)
            .err()
            .expect("refused");
        assert!(e.message.contains("overlap_seconds"), "{}", e.message);
        let given: Create =
            parse_json(br#"{"app_id":"app-id","key":"app-key","secret":"s"}"#).unwrap();
        assert_eq!(given.key.as_deref(), Some("app-key"));
    }
}
