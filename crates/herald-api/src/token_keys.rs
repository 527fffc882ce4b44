//! What verifies an app's client tokens, with the admin key or the app's own publisher key:
//! `GET/PUT /v1/apps/{id}/token-keys` (public keys for RS256 and ES256, a JWKS URL, whether the
//! app keeps an HS256 secret) and `POST /v1/apps/{id}/token-secret` (a new HS256 secret,
//! answered once, the old one still valid for the overlap the request names). Each change is
//! stored first (secrets sealed) and then reaches every node as a [`CacheEvent::TokenKeysSet`]:
//! connections whose key is gone are closed with `revoked`, those of a rotated-out secret when
//! its overlap ends (each node reads the end from the store, so it holds across restarts).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use herald_core::auth::generate_secret;
use herald_core::caches::CacheEvent;
use herald_core::revoked::now_secs;
use herald_core::tenant::AppId;
use herald_core::token_keys::{check_public_keys, AppTokenKeys, PreviousSecret, PublicKeySpec};
use herald_core::{ErrorCode, HeraldError};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::audit::{self, Action};
use crate::auth::AppOrAdmin;
use crate::body::{parse_json, read_body};
use crate::error::ApiError;
use crate::Api;

/// How long the previous secret stays valid when a rotation does not say: one hour.
pub const DEFAULT_OVERLAP_SECS: u64 = 3600;
/// The longest overlap a rotation may ask for: 30 days (the longest token `POST /v1/tokens`
/// mints).
pub const MAX_OVERLAP_SECS: u64 = 30 * 24 * 3600;

async fn stored_keys(api: &Api, app: &AppId) -> Result<AppTokenKeys, HeraldError> {
    api.tenancy
        .token_keys(app)
        .await
        .map_err(HeraldError::from)?
        .ok_or_else(|| HeraldError::new(ErrorCode::NotFound, format!("no app {app}")))
}

/// What an answer shows of an app's keys: never a secret.
fn describe(app: &AppId, keys: &AppTokenKeys) -> Value {
    json!({
        "app": app,
        "hs256": app.is_default() || keys.secret.is_some(),
        "previous_valid_until": keys.previous_at(now_secs()).map(|p| p.until),
        "keys": keys.public_keys,
        "jwks_url": keys.jwks_url,
    })
}

/// Stores an app's keys and tells every node.
async fn store(api: &Api, app: &AppId, keys: AppTokenKeys) -> Result<(), HeraldError> {
    if !api
        .tenancy
        .set_token_keys(app, &keys)
        .await
        .map_err(HeraldError::from)?
    {
        return Err(HeraldError::new(
            ErrorCode::NotFound,
            format!("no app {app}"),
        ));
    }
    api.bus.publish(CacheEvent::TokenKeysSet {
        app: app.clone(),
        keys,
    });
    Ok(())
}

/// `GET /v1/apps/{id}/token-keys`.
pub async fn get(
    State(api): State<Arc<Api>>,
    AppOrAdmin(id): AppOrAdmin,
) -> Result<Response, ApiError> {
    let keys = stored_keys(&api, &id).await?;
    Ok(axum::Json(describe(&id, &keys)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PutKeys {
    #[serde(default)]
    keys: Vec<PublicKeySpec>,
    #[serde(default)]
    jwks_url: Option<String>,
    #[serde(default)]
    hs256: Option<bool>,
}

/// `PUT /v1/apps/{id}/token-keys` `{"keys":[{"kid","alg","pem"}],"jwks_url","hs256"}`: replaces
/// the app's public keys and JWKS URL; `"hs256": false` drops its HS256 secret (tokens are then
/// only minted by the app's backend).
pub async fn put(
    State(api): State<Arc<Api>>,
    AppOrAdmin(id): AppOrAdmin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::TokenKeysSet, Some(&id), None);
    let body = read_body(body, 256 * 1024).await?;
    let req: PutKeys = parse_json(&body)?;
    audit::detail("public_keys", req.keys.len());
    audit::detail("jwks_url", req.jwks_url.is_some());
    audit::detail("hs256", req.hs256);
    check_public_keys(&req.keys, req.jwks_url.as_deref())?;
    if let Some(url) = &req.jwks_url {
        crate::destinations::check_url(&api, "jwks_url", url).await?;
    }
    let mut keys = stored_keys(&api, &id).await?;
    match req.hs256 {
        Some(false) if id.is_default() => {
            return Err(HeraldError::bad_request(
                "the default app's HS256 secret is the server's token_secret and cannot be \
                 dropped",
            )
            .into())
        }
        Some(false) => {
            keys.secret = None;
            keys.previous = None;
        }
        Some(true) if keys.secret.is_none() && !id.is_default() => {
            return Err(HeraldError::bad_request(format!(
                "app {id} has no HS256 secret: POST /v1/apps/{id}/token-secret makes one"
            ))
            .into())
        }
        _ => {}
    }
    keys.public_keys = req.keys;
    keys.jwks_url = req.jwks_url;
    if !id.is_default() && keys.secret.is_none() && !keys.has_public_keys() {
        return Err(HeraldError::bad_request(
            "without an HS256 secret the app needs public keys or a jwks_url, or no token \
             would verify",
        )
        .into());
    }
    store(&api, &id, keys.clone()).await?;
    Ok(axum::Json(describe(&id, &keys)).into_response())
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Rotate {
    #[serde(default)]
    overlap: Option<u64>,
}

/// `POST /v1/apps/{id}/token-secret` `{"overlap": SECONDS}`: a new HS256 secret (answered this
/// once); the current one keeps verifying tokens for `overlap` seconds (default an hour, 0:
/// not at all; at most 30 days), then connections it verified are closed. A secret rotated out
/// earlier whose overlap still runs is dropped at once: only one previous secret is kept.
pub async fn rotate(
    State(api): State<Arc<Api>>,
    AppOrAdmin(id): AppOrAdmin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::TokenSecretRotate, Some(&id), None);
    if id.is_default() {
        return Err(HeraldError::bad_request(
            "the default app's token secret is the server's (token_secret in the configuration, \
             or the data directory's token-secret file): change it there",
        )
        .into());
    }
    let body = read_body(body, 4096).await?;
    let req: Rotate = if body.is_empty() {
        Rotate::default()
    } else {
        parse_json(&body)?
    };
    let overlap = req.overlap.unwrap_or(DEFAULT_OVERLAP_SECS);
    audit::detail("overlap", overlap);
    if overlap > MAX_OVERLAP_SECS {
        return Err(HeraldError::bad_request(format!(
            "overlap must be 0 to {MAX_OVERLAP_SECS} seconds"
        ))
        .into());
    }
    let mut keys = stored_keys(&api, &id).await?;
    let secret = generate_secret("hs_");
    let until = now_secs() + overlap;
    keys.previous = keys
        .secret
        .take()
        .filter(|_| overlap > 0)
        .map(|secret| PreviousSecret { secret, until });
    keys.secret = Some(secret.clone());
    let valid_until = keys.previous.as_ref().map(|p| p.until);
    tracing::warn!(app = %id, overlap, "an app's token secret was rotated");
    store(&api, &id, keys).await?;
    Ok(axum::Json(json!({
        "app": id,
        "token_secret": secret,
        "previous_valid_until": valid_until,
    }))
    .into_response())
}
