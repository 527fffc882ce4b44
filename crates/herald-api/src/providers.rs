//! Provider credentials of an app (the admin key or the app's own key):
//! `GET /v1/apps/{id}/providers`, `PUT`/`GET`/`DELETE /v1/apps/{id}/providers/{provider}`.
//! Credentials are checked, sealed with the server's credentials key and stored; answers show
//! only their public part. `GET /v1/apps/{id}/vapid-public-key` needs no key: a web page reads
//! it to subscribe (`applicationServerKey`).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_core::caches::CacheEvent;
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_core::{ErrorCode, HeraldError};
use herald_push::credentials::input::{
    ApnsCredentials, FcmCredentials, ProviderCredentials, WebPushCredentials,
};
use herald_push::credentials::StoredCredentials;
use herald_push::device::Platform;
use serde_json::{json, Value};

use crate::audit::{self, Action};
use crate::auth::AppOrAdmin;
use crate::body::{parse_json, read_body};
use crate::error::ApiError;
use crate::Api;

/// Largest credentials body (a certificate chain with its key fits easily).
const MAX_CREDENTIALS_BYTES: usize = 64 * 1024;

/// Reads the credentials body as every other body of the API is read (`parse_json`: a JSON
/// object, no array where an object belongs), before herald-push's own parse checks what it
/// says: that parse would read `["mailto:ops@example.com", null, true]` as a subject and a key
/// to generate.
fn read_strictly(provider: Platform, body: &[u8]) -> Result<(), HeraldError> {
    let named = |e: HeraldError| {
        HeraldError::new(
            e.code,
            format!("{} credentials: {}", provider.as_str(), e.message),
        )
    };
    match provider {
        Platform::Apns => parse_json::<ApnsCredentials>(body).map(drop),
        Platform::Fcm => parse_json::<FcmCredentials>(body).map(drop),
        Platform::Webpush => parse_json::<WebPushCredentials>(body).map(drop),
        Platform::Herald => Ok(()),
    }
    .map_err(named)
}

/// The provider of a `/v1/apps/{id}/providers/{provider}` path, checked with the app's id
/// before the key is (it stands before [`AppOrAdmin`] in a handler's arguments): an id that is
/// not an app id, then a provider that is not one, are answered first.
pub(crate) struct ProviderPath(Platform);

impl FromRequestParts<Arc<Api>> for ProviderPath {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, api: &Arc<Api>) -> Result<Self, Response> {
        let Path((app, provider)) = Path::<(String, String)>::from_request_parts(parts, api)
            .await
            .map_err(IntoResponse::into_response)?;
        AppId::parse(&app).map_err(|e| ApiError(e).into_response())?;
        match Platform::parse(&provider) {
            Ok(Platform::Herald) | Err(_) => Err(ApiError(HeraldError::new(
                ErrorCode::NotFound,
                format!("no provider {provider:?}: use apns, fcm or webpush"),
            ))
            .into_response()),
            Ok(p) => Ok(ProviderPath(p)),
        }
    }
}

/// The answer for credentials the app does not have.
fn no_credentials(app: &AppId, provider: Platform) -> HeraldError {
    HeraldError::new(
        ErrorCode::NotFound,
        format!("app {app} has no {} credentials", provider.as_str()),
    )
}

async fn app_exists(api: &Api, app: &AppId) -> Result<(), HeraldError> {
    match api.tenancy.app(app).await.map_err(HeraldError::from)? {
        Some(_) => Ok(()),
        None => Err(HeraldError::new(
            ErrorCode::NotFound,
            format!("no app {app}"),
        )),
    }
}

fn shown(stored: &StoredCredentials) -> Value {
    let mut public: Value = serde_json::from_str(&stored.public).unwrap_or_else(|_| json!({}));
    if let Some(map) = public.as_object_mut() {
        map.insert("updated".into(), json!(stored.updated_ms));
    }
    public
}

/// `PUT /v1/apps/{id}/providers/{provider}`: sets (replaces) the app's credentials.
pub async fn put(
    State(api): State<Arc<Api>>,
    ProviderPath(provider): ProviderPath,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    audit::note(
        &api,
        &headers,
        Action::ProviderSet,
        Some(&app),
        Some(provider.as_str()),
    );
    app_exists(&api, &app).await?;
    let body = read_body(body, MAX_CREDENTIALS_BYTES).await?;
    read_strictly(provider, &body)?;
    let credentials = ProviderCredentials::parse(provider, &body)?;
    let stored = StoredCredentials {
        provider,
        sealed: api
            .deliverer
            .senders()
            .sealer()
            .seal(&app, provider, &credentials.secret()),
        public: credentials.public().to_string(),
        updated_ms: now_millis(),
    };
    let existed = api
        .credentials
        .credentials(&app, provider)
        .await
        .map_err(HeraldError::from)?
        .is_some();
    api.credentials
        .put_credentials(&app, stored.clone())
        .await
        .map_err(HeraldError::from)?;
    // Every node drops the provider clients made with the old credentials (this one at once).
    api.bus.publish(CacheEvent::CredentialsChanged {
        app: app.clone(),
        provider: provider.as_str().to_owned(),
    });
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, axum::Json(shown(&stored))).into_response())
}

/// `GET /v1/apps/{id}/providers/{provider}`: the public part of the app's credentials.
pub async fn get(
    State(api): State<Arc<Api>>,
    ProviderPath(provider): ProviderPath,
    AppOrAdmin(app): AppOrAdmin,
) -> Result<Response, ApiError> {
    let stored = api
        .credentials
        .credentials(&app, provider)
        .await
        .map_err(HeraldError::from)?
        .ok_or_else(|| no_credentials(&app, provider))?;
    Ok(axum::Json(shown(&stored)).into_response())
}

/// `GET /v1/apps/{id}/providers`: every provider the app has credentials for.
pub async fn list(
    State(api): State<Arc<Api>>,
    AppOrAdmin(app): AppOrAdmin,
) -> Result<Response, ApiError> {
    app_exists(&api, &app).await?;
    let all = api
        .credentials
        .all_credentials(&app)
        .await
        .map_err(HeraldError::from)?;
    let providers: Vec<Value> = all.iter().map(shown).collect();
    Ok(axum::Json(json!({ "providers": providers })).into_response())
}

/// `DELETE /v1/apps/{id}/providers/{provider}`.
pub async fn delete(
    State(api): State<Arc<Api>>,
    ProviderPath(provider): ProviderPath,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    audit::note(
        &api,
        &headers,
        Action::ProviderDelete,
        Some(&app),
        Some(provider.as_str()),
    );
    let removed = api
        .credentials
        .delete_credentials(&app, provider)
        .await
        .map_err(HeraldError::from)?;
    // Every node drops the provider clients made with the old credentials (this one at once).
    api.bus.publish(CacheEvent::CredentialsChanged {
        app: app.clone(),
        provider: provider.as_str().to_owned(),
    });
    if !removed {
        return Err(no_credentials(&app, provider).into());
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /v1/apps/{id}/vapid-public-key` (no key needed): `{"public_key": "..."}`.
pub async fn vapid_public_key(
    State(api): State<Arc<Api>>,
    Path(app): Path<String>,
) -> Result<Response, ApiError> {
    let app = AppId::parse(&app)?;
    let stored = api
        .credentials
        .credentials(&app, Platform::Webpush)
        .await
        .map_err(HeraldError::from)?
        .ok_or_else(|| {
            HeraldError::new(
                ErrorCode::NotFound,
                format!("app {app} has no Web Push (VAPID) key"),
            )
        })?;
    let public = shown(&stored);
    Ok(axum::Json(json!({ "public_key": public["public_key"] })).into_response())
}
