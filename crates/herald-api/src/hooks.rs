//! An app's webhook endpoints (the admin key or a publisher key of the app the path names):
//! `GET`/`POST /v1/apps/{id}/hooks`, `GET`/`PATCH`/`DELETE /v1/apps/{id}/hooks/{hook}`,
//! `POST .../{hook}/rotate-secret`, `POST .../{hook}/test`, and the endpoint's dead letters:
//! `GET .../{hook}/dead`, `POST .../{hook}/dead/{row}/replay`, `DELETE .../{hook}/dead/{row}`.
//!
//! Bodies are read as every body of the API is (`body.rs`: a JSON object, strictly, within a
//! limit) into the fields this API documents, so an unknown field, `null` or an array where a
//! value belongs is refused here naming it; what the fields say (a URL and where it leads,
//! event names, channel patterns, ranges) is herald-hooks' to check ([`herald_hooks::Hooks`]),
//! and its refusals become the API's errors ([`refused`]). A signing secret is in two answers
//! only, `POST` (creation) and `rotate-secret`: never in a listing, a log line or the audit
//! log.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_core::{ErrorCode, HeraldError};
use herald_hooks::event::{rfc3339_millis, EventType};
use herald_hooks::store::RowId;
use herald_hooks::view::dead_json;
use herald_hooks::{EndpointId, HooksError};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::apps::find_app;
use crate::audit::{self, Action};
use crate::auth::AppOrAdmin;
use crate::body::{parse_json, read_body};
use crate::error::ApiError;
use crate::query::Query;
use crate::Api;

/// Largest body of `POST /v1/apps/{id}/hooks` and `PATCH .../{hook}` (a URL, a description and
/// a few dozen channel patterns fit many times over).
const MAX_HOOK_BODY_BYTES: usize = 64 * 1024;

/// Largest body of `POST .../rotate-secret`.
const MAX_ROTATE_BODY_BYTES: usize = 4096;

/// How long a rotated-out secret keeps signing requests when the body does not say: a day.
const DEFAULT_OVERLAP_SECS: u64 = 24 * 3600;

/// The fields of an endpoint as `POST` (creation) and `PATCH` take them, read only to refuse a
/// body that is not that shape (an unknown field, `null`, a value of the wrong type) naming
/// where; the body itself goes to [`herald_hooks::Hooks`], which checks what it says.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct HookFields {
    url: Option<String>,
    events: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    description: Option<String>,
    enabled: Option<bool>,
    offline_delay_ms: Option<u64>,
    format: Option<String>,
}

/// The body of `POST .../rotate-secret` (optional).
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rotate {
    overlap_seconds: Option<u64>,
}

/// `{hook}` of an endpoint's path.
#[derive(Deserialize)]
pub(crate) struct HookInPath {
    hook: String,
}

/// `{hook}` and `{row}` of a dead letter's path.
#[derive(Deserialize)]
pub(crate) struct DeadInPath {
    hook: String,
    row: String,
}

/// An endpoint id from the path: a number, as the listing shows it.
fn hook_id(text: &str) -> Result<EndpointId, HeraldError> {
    text.parse().map_err(|_| {
        HeraldError::bad_request(format!(
            "a webhook endpoint id is a number (as GET /v1/apps/{{id}}/hooks lists it), not \
             {text:?}"
        ))
    })
}

/// A dead letter's id from the path: a number, as `GET .../dead` lists it.
fn row_id(text: &str) -> Result<RowId, HeraldError> {
    text.parse().map_err(|_| {
        HeraldError::bad_request(format!(
            "a dead letter id is a number (as GET /v1/apps/{{id}}/hooks/{{hook}}/dead lists \
             it), not {text:?}"
        ))
    })
}

/// What the API answers for what [`herald_hooks::Hooks`] refused: bad input and a destination the
/// operator's rule refuses are `400 bad_request` naming the field (as a refused Web Push
/// endpoint is), a missing endpoint `404 not_found` (`what`: which one, in which app), too many
/// endpoints `409 conflict`, and the store's failure what every store failure is.
pub(crate) fn refused(e: HooksError, what: impl FnOnce() -> String) -> HeraldError {
    match e {
        HooksError::BadInput { .. } | HooksError::Refused(_) => {
            HeraldError::bad_request(e.to_string())
        }
        HooksError::NotFound => HeraldError::new(ErrorCode::NotFound, what()),
        HooksError::TooMany { .. } => HeraldError::new(ErrorCode::Conflict, e.to_string()),
        HooksError::Store(store) => HeraldError::from(store),
    }
}

/// The answer for an endpoint the app does not have.
fn no_hook(app: &AppId, hook: EndpointId) -> impl FnOnce() -> String {
    let app = app.clone();
    move || format!("app {app} has no webhook endpoint {hook}")
}

/// Endpoint `hook` of `app` as the API shows it (with its queue and delivery state).
async fn view_json(api: &Api, app: &AppId, hook: EndpointId) -> Result<Value, ApiError> {
    let view = api
        .hooks
        .get(app, hook)
        .await
        .map_err(|e| refused(e, no_hook(app, hook)))?;
    Ok(view.to_json())
}

/// Reads an endpoint body: its shape checked here, what it says left to [`herald_hooks::Hooks`].
async fn read_hook_body(body: Body) -> Result<Value, HeraldError> {
    let body = read_body(body, MAX_HOOK_BODY_BYTES).await?;
    parse_json::<HookFields>(&body)?;
    parse_json::<Value>(&body)
}

/// `GET /v1/apps/{id}/hooks`: `{"hooks": [...], "event_types": [...]}`, the endpoints in id
/// order and every event type an endpoint may ask for (what the dashboard offers).
pub async fn list(
    State(api): State<Arc<Api>>,
    AppOrAdmin(app): AppOrAdmin,
) -> Result<Response, ApiError> {
    find_app(&api, &app).await?;
    let views = api
        .hooks
        .list(&app)
        .await
        .map_err(|e| refused(e, || format!("no app {app}")))?;
    let hooks: Vec<Value> = views.iter().map(|v| v.to_json()).collect();
    let event_types: Vec<&str> = EventType::SUBSCRIBABLE.iter().map(|t| t.as_str()).collect();
    Ok(axum::Json(json!({ "hooks": hooks, "event_types": event_types })).into_response())
}

/// `POST /v1/apps/{id}/hooks`: registers an endpoint; `201` with it and its signing secret,
/// shown only in this answer.
pub async fn create(
    State(api): State<Arc<Api>>,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::HookCreate, Some(&app), None);
    find_app(&api, &app).await?;
    let input = read_hook_body(body).await?;
    let (endpoint, secret) = api
        .hooks
        .create(&app, &input)
        .await
        .map_err(|e| refused(e, || format!("no app {app}")))?;
    let id = endpoint.id;
    audit::detail("hook", id);
    audit::detail("events", endpoint.events.names());
    let answer = json!({ "hook": view_json(&api, &app, id).await?, "secret": secret.text() });
    Ok((StatusCode::CREATED, axum::Json(answer)).into_response())
}

/// `GET /v1/apps/{id}/hooks/{hook}`.
pub async fn get(
    State(api): State<Arc<Api>>,
    Path(HookInPath { hook }): Path<HookInPath>,
    AppOrAdmin(app): AppOrAdmin,
) -> Result<Response, ApiError> {
    let hook = hook_id(&hook)?;
    Ok(axum::Json(view_json(&api, &app, hook).await?).into_response())
}

/// `PATCH /v1/apps/{id}/hooks/{hook}`: changes the fields the body names.
pub async fn update(
    State(api): State<Arc<Api>>,
    Path(HookInPath { hook }): Path<HookInPath>,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::HookUpdate, Some(&app), Some(&hook));
    let hook = hook_id(&hook)?;
    let input = read_hook_body(body).await?;
    if let Some(fields) = input.as_object() {
        audit::detail("fields", fields.keys().collect::<Vec<_>>());
    }
    api.hooks
        .update(&app, hook, &input)
        .await
        .map_err(|e| refused(e, no_hook(&app, hook)))?;
    Ok(axum::Json(view_json(&api, &app, hook).await?).into_response())
}

/// `DELETE /v1/apps/{id}/hooks/{hook}`: the endpoint, its queue and its dead letters.
pub async fn delete(
    State(api): State<Arc<Api>>,
    Path(HookInPath { hook }): Path<HookInPath>,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::HookDelete, Some(&app), Some(&hook));
    let hook = hook_id(&hook)?;
    api.hooks
        .delete(&app, hook)
        .await
        .map_err(|e| refused(e, no_hook(&app, hook)))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /v1/apps/{id}/hooks/{hook}/rotate-secret`: a new signing secret, shown only in this
/// answer; the old one signs requests too (a second signature) for `overlap_seconds`.
pub async fn rotate_secret(
    State(api): State<Arc<Api>>,
    Path(HookInPath { hook }): Path<HookInPath>,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    audit::note(
        &api,
        &headers,
        Action::HookSecretRotate,
        Some(&app),
        Some(&hook),
    );
    let hook = hook_id(&hook)?;
    let body = read_body(body, MAX_ROTATE_BODY_BYTES).await?;
    let rotate: Rotate = if body.iter().all(u8::is_ascii_whitespace) {
        Rotate::default()
    } else {
        parse_json(&body)?
    };
    let overlap = rotate.overlap_seconds.unwrap_or(DEFAULT_OVERLAP_SECS);
    audit::detail("overlap_seconds", overlap);
    let secret = api
        .hooks
        .rotate_secret(&app, hook, Duration::from_secs(overlap))
        .await
        .map_err(|e| refused(e, no_hook(&app, hook)))?;
    // The store keeps the previous secret until about this time (the service's clock read a
    // moment before): the answer says when, to the millisecond as near as that.
    let until = (overlap > 0).then(|| rfc3339_millis(now_millis() + overlap as i64 * 1000));
    Ok(axum::Json(json!({
        "secret": secret.text(),
        "previous_valid_until": until,
    }))
    .into_response())
}

/// `POST /v1/apps/{id}/hooks/{hook}/test`: sends one signed `hook.test` event now (not
/// queued) and says how the endpoint answered.
pub async fn test(
    State(api): State<Arc<Api>>,
    Path(HookInPath { hook }): Path<HookInPath>,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::HookTest, Some(&app), Some(&hook));
    let hook = hook_id(&hook)?;
    let outcome = api
        .hooks
        .test(&app, hook)
        .await
        .map_err(|e| refused(e, no_hook(&app, hook)))?;
    audit::detail("delivered", outcome.delivered);
    Ok(axum::Json(outcome.to_json()).into_response())
}

/// `GET /v1/apps/{id}/hooks/{hook}/dead?after=ROW&limit=N`: the endpoint's dead letters in row
/// order after `after`; `next` is the last row of a full page.
pub async fn dead(
    State(api): State<Arc<Api>>,
    Path(HookInPath { hook }): Path<HookInPath>,
    AppOrAdmin(app): AppOrAdmin,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let hook = hook_id(&hook)?;
    let q = Query::parse(raw.as_deref(), &["after", "limit"])?;
    let after = q.number("after", i64::MIN, i64::MAX)?;
    let limit = q.limit()?;
    let letters = api
        .hooks
        .dead_letters(&app, hook, after, limit)
        .await
        .map_err(|e| refused(e, no_hook(&app, hook)))?;
    let dead: Vec<Value> = letters.iter().map(dead_json).collect();
    let next = (letters.len() == limit).then(|| letters.last().map(|d| d.row));
    Ok(axum::Json(json!({ "dead": dead, "next": next.flatten() })).into_response())
}

/// The answer for a dead letter the endpoint does not have.
fn no_dead(app: &AppId, hook: EndpointId, row: RowId) -> impl FnOnce() -> String {
    let app = app.clone();
    move || format!("webhook endpoint {hook} of app {app} has no dead letter {row}")
}

/// `POST /v1/apps/{id}/hooks/{hook}/dead/{row}/replay`: the dead letter is queued again, due
/// now (behind the endpoint's other due events).
pub async fn replay(
    State(api): State<Arc<Api>>,
    Path(DeadInPath { hook, row }): Path<DeadInPath>,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::HookReplay, Some(&app), Some(&hook));
    audit::detail("row", &row);
    let (hook, row) = (hook_id(&hook)?, row_id(&row)?);
    api.hooks
        .replay(&app, hook, row)
        .await
        .map_err(|e| refused(e, no_dead(&app, hook, row)))?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(json!({ "id": row, "state": "queued" })),
    )
        .into_response())
}

/// `DELETE /v1/apps/{id}/hooks/{hook}/dead/{row}`: drops a dead letter.
pub async fn drop_dead(
    State(api): State<Arc<Api>>,
    Path(DeadInPath { hook, row }): Path<DeadInPath>,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::HookDrop, Some(&app), Some(&hook));
    audit::detail("row", &row);
    let (hook, row) = (hook_id(&hook)?, row_id(&row)?);
    api.hooks
        .drop_dead(&app, hook, row)
        .await
        .map_err(|e| refused(e, no_dead(&app, hook, row)))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_the_apis_errors() {
        let bad = refused(
            HooksError::bad_input("events[1]", "unknown event type \"x\""),
            String::new,
        );
        assert_eq!(bad.code, ErrorCode::BadRequest);
        assert_eq!(bad.message, "events[1]: unknown event type \"x\"");
        let missing = refused(HooksError::NotFound, || {
            "app a has no webhook endpoint 7".into()
        });
        assert_eq!(missing.code, ErrorCode::NotFound);
        assert_eq!(missing.message, "app a has no webhook endpoint 7");
        let many = refused(HooksError::TooMany { max: 20 }, String::new);
        assert_eq!(many.code, ErrorCode::Conflict);
        assert!(many.message.contains("at most 20"), "{}", many.message);
    }

    #[test]
    fn bodies_are_the_documented_fields_only() {
        for (body, named) in [
            (
                &br#"{"url":"https://x.example/h","event":["*"]}"#[..],
                "event",
            ),
            (br#"{"url":null}"#, "url"),
            (br#"{"events":[null]}"#, "events[0]"),
            (br#"{"enabled":"yes"}"#, "enabled"),
        ] {
            let e = parse_json::<HookFields>(body).err().expect("refused");
            assert!(e.message.contains(named), "{}", e.message);
        }
        assert!(
            parse_json::<HookFields>(br#"{"url":"https://x.example/h","events":["*"]}"#).is_ok()
        );
    }

    #[test]
    fn path_ids_are_numbers() {
        assert_eq!(hook_id("12").unwrap(), 12);
        assert!(hook_id("x").unwrap_err().message.contains("not \"x\""));
        assert!(row_id("1.5").is_err());
    }
}
