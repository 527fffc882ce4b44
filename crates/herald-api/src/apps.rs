//! Apps (tenants) and their keys, behind the admin key: `POST/GET /v1/apps`,
//! `GET/DELETE /v1/apps/{id}`, `GET/POST /v1/apps/{id}/keys`, `DELETE /v1/apps/{id}/keys/{key}`;
//! per-app usage at `GET /v1/apps/{id}/stats` (admin or the app's own key); and
//! `POST /v1/tokens`, where an app's backend mints client and device tokens without holding the
//! token secret.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_core::auth::{generate_secret, hash_api_key, ClientClaims};
use herald_core::caches::{CacheEvent, TokenSecret};
use herald_core::message::now_millis;
use herald_core::tenancy::{App, AppLimits, KeyInfo};
use herald_core::tenant::AppId;
use herald_core::{ErrorCode, HeraldError};
use serde::Deserialize;
use serde_json::json;

use crate::audit::{self, Action};
use crate::auth::{Admin, AppOrAdmin, Publisher};
use crate::body::{parse_json, read_body};
use crate::error::ApiError;
use crate::Api;

/// Longest token lifetime `POST /v1/tokens` mints: 30 days.
const MAX_TOKEN_TTL_SECS: u64 = 30 * 24 * 3600;

/// Checks limits given by an admin: counts fit an int64; an ack window is more than 0 and at
/// most an hour; a message
/// size limit is at least 1 and at most the server's own (`max_frame_bytes`), which it could
/// never raise.
fn check_limits(limits: &AppLimits, server_max_message_bytes: usize) -> Result<(), HeraldError> {
    // The document's integers are int64: a count past that is no count a client can send.
    for (name, value) in [
        ("max_devices", limits.max_devices),
        ("max_connections", limits.max_connections),
    ] {
        if value.is_some_and(|v| v > i64::MAX as u64) {
            return Err(HeraldError::bad_request(format!(
                "limits.{name} must be 0 to {}",
                i64::MAX
            )));
        }
    }
    let max = herald_push::delivery::MAX_ACK_WINDOW.as_millis() as u64;
    if let Some(ms) = limits.ack_window_ms {
        if ms == 0 || ms > max {
            return Err(HeraldError::bad_request(format!(
                "limits.ack_window_ms must be 1 to {max}"
            )));
        }
    }
    if let Some(bytes) = limits.max_message_bytes {
        if bytes == 0 || bytes > server_max_message_bytes {
            return Err(HeraldError::bad_request(format!(
                "limits.max_message_bytes must be 1 to {server_max_message_bytes}, this \
                 server's max_frame_bytes (an app cannot be allowed more than the server)"
            )));
        }
    }
    Ok(())
}

pub(crate) fn app_param(id: &str) -> Result<AppId, HeraldError> {
    AppId::parse(id)
}

pub(crate) async fn find_app(api: &Api, id: &AppId) -> Result<App, HeraldError> {
    api.tenancy
        .app(id)
        .await
        .map_err(HeraldError::from)?
        .ok_or_else(|| HeraldError::new(ErrorCode::NotFound, format!("no app {id}")))
}

/// Creates a publisher key for `app`, stores it, publishes it to every node's caches and
/// returns it (shown only this once).
async fn new_key(api: &Api, app: &AppId, label: &str) -> Result<(String, KeyInfo), HeraldError> {
    let key = generate_secret("hk_");
    let hash = hash_api_key(&key);
    let info = KeyInfo {
        app: app.clone(),
        id: hash[..12].to_string(),
        hash: hash.clone(),
        label: label.to_string(),
        created: now_millis(),
    };
    api.tenancy
        .add_key(&info)
        .await
        .map_err(HeraldError::from)?;
    api.bus.publish(CacheEvent::KeyAdded {
        app: app.clone(),
        hash,
    });
    Ok((key, info))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateApp {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    limits: AppLimits,
}

/// `POST /v1/apps` `{"id":"shop","name":"Shop"}`: creates an app with a token secret and a
/// first publisher key, both returned once.
pub async fn create(
    State(api): State<Arc<Api>>,
    _: Admin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::AppCreate, None, None);
    let body = read_body(body, 4096).await?;
    let req: CreateApp = parse_json(&body)?;
    check_limits(&req.limits, api.max_message_bytes)?;
    let id = AppId::parse(&req.id)?;
    audit::note(&api, &headers, Action::AppCreate, Some(&id), None);
    audit::detail("name", &req.name);
    audit::detail("limits", req.limits);
    let secret = generate_secret("hs_");
    let app = App {
        name: req.name.unwrap_or_else(|| id.to_string()),
        id: id.clone(),
        token_secret: Some(secret.clone()),
        limits: req.limits,
        created: now_millis(),
    };
    if !api
        .tenancy
        .create_app(&app)
        .await
        .map_err(HeraldError::from)?
    {
        return Err(HeraldError::new(
            ErrorCode::Conflict,
            format!("app {id} exists, or existed: the ids of deleted apps are not reused"),
        )
        .into());
    }
    api.bus.publish(CacheEvent::TokenSecretSet {
        app: id.clone(),
        secret: TokenSecret(secret.clone()),
    });
    api.bus.publish(CacheEvent::AppCreated {
        app: id.clone(),
        limits: app.limits,
    });
    let (key, info) = new_key(&api, &id, "created with the app").await?;
    audit::detail("key_id", &info.id);
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({ "app": app, "key": key, "key_id": info.id, "token_secret": secret })),
    )
        .into_response())
}

/// `GET /v1/apps`.
pub async fn list(State(api): State<Arc<Api>>, _: Admin) -> Result<Response, ApiError> {
    let apps = api.tenancy.apps().await.map_err(HeraldError::from)?;
    Ok(axum::Json(json!({ "apps": apps })).into_response())
}

/// `GET /v1/apps/{id}` (admin or the app's own key).
pub async fn get(
    State(api): State<Arc<Api>>,
    AppOrAdmin(id): AppOrAdmin,
) -> Result<Response, ApiError> {
    Ok(axum::Json(find_app(&api, &id).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateApp {
    limits: AppLimits,
}

/// `PATCH /v1/apps/{id}` `{"limits":{...}}`: replaces the app's limits (admin).
pub async fn update(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    _: Admin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let id = app_param(&id)?;
    audit::note(&api, &headers, Action::AppUpdate, Some(&id), None);
    let body = read_body(body, 4096).await?;
    let req: UpdateApp = parse_json(&body)?;
    audit::detail("limits", req.limits);
    check_limits(&req.limits, api.max_message_bytes)?;
    if !api
        .tenancy
        .set_limits(&id, req.limits)
        .await
        .map_err(HeraldError::from)?
    {
        return Err(HeraldError::new(ErrorCode::NotFound, format!("no app {id}")).into());
    }
    api.bus.publish(CacheEvent::LimitsChanged {
        app: id.clone(),
        limits: req.limits,
    });
    Ok(axum::Json(find_app(&api, &id).await?).into_response())
}

/// `DELETE /v1/apps/{id}`: the app, its keys, devices, receipts and usage; its connections are
/// closed. The store purges its channels, their messages and its retained messages right after
/// (herald-store's `app_purge`). The default app cannot be deleted.
pub async fn delete(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    _: Admin,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = app_param(&id)?;
    audit::note(&api, &headers, Action::AppDelete, Some(&id), None);
    if id.is_default() {
        return Err(HeraldError::forbidden("the default app cannot be deleted").into());
    }
    if !api
        .tenancy
        .delete_app(&id)
        .await
        .map_err(HeraldError::from)?
    {
        return Err(HeraldError::new(ErrorCode::NotFound, format!("no app {id}")).into());
    }
    api.limits.forget_app(&id);
    api.bus.publish(CacheEvent::AppDeleted { app: id });
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /v1/apps/{id}/keys`: key ids, labels and creation times (never the keys).
pub async fn list_keys(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    _: Admin,
) -> Result<Response, ApiError> {
    let id = app_param(&id)?;
    find_app(&api, &id).await?;
    let keys: Vec<KeyInfo> = api
        .tenancy
        .keys()
        .await
        .map_err(HeraldError::from)?
        .into_iter()
        .filter(|k| k.app == id)
        .collect();
    Ok(axum::Json(json!({ "keys": keys })).into_response())
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AddKey {
    #[serde(default)]
    label: Option<String>,
}

/// `POST /v1/apps/{id}/keys` `{"label":"..."}`: a new publisher key (rotation: add the new key,
/// move the backends over, delete the old one).
pub async fn add_key(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    _: Admin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let id = app_param(&id)?;
    audit::note(&api, &headers, Action::KeyCreate, Some(&id), None);
    find_app(&api, &id).await?;
    let body = read_body(body, 4096).await?;
    let req: AddKey = if body.is_empty() {
        AddKey::default()
    } else {
        parse_json(&body)?
    };
    audit::detail("label", &req.label);
    let (key, info) = new_key(&api, &id, req.label.as_deref().unwrap_or("")).await?;
    audit::note(&api, &headers, Action::KeyCreate, Some(&id), Some(&info.id));
    audit::detail("label", &info.label);
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({ "key": key, "key_id": info.id, "label": info.label })),
    )
        .into_response())
}

/// `DELETE /v1/apps/{id}/keys/{key_id}`.
pub async fn remove_key(
    State(api): State<Arc<Api>>,
    Path((id, key_id)): Path<(String, String)>,
    _: Admin,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = app_param(&id)?;
    audit::note(&api, &headers, Action::KeyRevoke, Some(&id), Some(&key_id));
    if !api
        .tenancy
        .remove_key(&id, &key_id)
        .await
        .map_err(HeraldError::from)?
    {
        return Err(HeraldError::new(
            ErrorCode::NotFound,
            format!("app {id} has no key {key_id:?} (give the key_id, 12 hex digits)"),
        )
        .into());
    }
    api.bus.publish(CacheEvent::KeyRemoved { app: id, key_id });
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /v1/apps/{id}/stats`: usage counters (admin or the app's own key).
pub async fn stats(
    State(api): State<Arc<Api>>,
    AppOrAdmin(id): AppOrAdmin,
) -> Result<Response, ApiError> {
    find_app(&api, &id).await?;
    let providers = crate::jobs::provider_stats(&api, &id).await?;
    let app = api.usage.app(&id);
    Ok(axum::Json(json!({
        "app": id,
        "usage": app.totals(),
        "devices": app.devices(),
        "limits": app.limits(),
        "providers": providers,
    }))
    .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MintToken {
    #[serde(default)]
    sub: String,
    #[serde(default)]
    device: Option<String>,
    #[serde(default)]
    channels: Vec<String>,
    #[serde(default)]
    publish: Vec<String>,
    #[serde(default)]
    ttl: Option<u64>,
    #[serde(default)]
    jti: Option<String>,
    /// Any JSON value as sent (members in their order), so that one that is no object is
    /// refused by [`herald_proto::token::user_info`] with a message saying so (`null` is
    /// refused as read).
    #[serde(default)]
    user_info: Option<Box<serde_json::value::RawValue>>,
}

/// `POST /v1/tokens` `{"sub","device","channels","publish","ttl","jti","user_info"}`: a client
/// token for the key's app, with `iat` (now) and the `jti` and `user_info` given, if any. A token
/// naming a device receives that device's inbox; the device must be registered. `user_info` is
/// a JSON object of at most [`herald_proto::token::MAX_USER_INFO_BYTES`] bytes, signed compact.
pub async fn mint_token(
    State(api): State<Arc<Api>>,
    Publisher { app, .. }: Publisher,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_body(body, 16 * 1024).await?;
    let req: MintToken = parse_json(&body)?;
    let ttl = req.ttl.unwrap_or(24 * 3600);
    if ttl == 0 || ttl > MAX_TOKEN_TTL_SECS {
        return Err(HeraldError::bad_request(format!(
            "ttl must be 1 to {MAX_TOKEN_TTL_SECS} seconds"
        ))
        .into());
    }
    let user_info = req
        .user_info
        .as_ref()
        .map(|raw| herald_proto::token::user_info("user_info", raw.get()))
        .transpose()?;
    if let Some(device) = &req.device {
        herald_core::device_id::check_device_id(device)?;
        if api
            .devices
            .device(&app, device)
            .await
            .map_err(HeraldError::from)?
            .is_none()
        {
            return Err(HeraldError::new(
                ErrorCode::NotFound,
                format!("no device {device:?}; register it first"),
            )
            .into());
        }
    }
    for pattern in req.channels.iter().chain(&req.publish) {
        herald_core::pattern::check_pattern(pattern)?;
    }
    if let Some(jti) = &req.jti {
        herald_proto::token::check_jti(jti)?;
    }
    let now = (now_millis() / 1000) as u64;
    let exp = now + ttl;
    let claims = ClientClaims {
        sub: req.sub,
        exp: Some(exp),
        channels: req.channels,
        publish: req.publish,
        device: req.device,
        iat: Some(now),
        jti: req.jti,
        user_info,
    };
    let token = api.tokens.mint(&app, &claims).ok_or_else(|| {
        HeraldError::new(
            ErrorCode::Conflict,
            format!(
                "app {app} has no HS256 token secret, so Herald cannot mint its tokens: its                  backend signs them with its RS256 or ES256 private key (or give the app a                  secret with POST /v1/apps/{app}/token-secret)"
            ),
        )
    })?;
    Ok(axum::Json(json!({ "token": token, "expires": exp })).into_response())
}
