//! Who may call a handler, said in its signature: each rule of the API is an extractor that
//! checks the request's credential ([`Api::presented`], [`Api::caller_of`]) and answers the
//! rule's error when it fails.
//!
//! - [`Publisher`]: a publisher key of an app, or the admin key acting for the app named in
//!   `X-Herald-App` (channels, devices, pushes, jobs, tokens);
//! - [`crate::limited::Counted`]: a [`Publisher`] whose request is at once counted against its
//!   app's and key's rate limits (pushes, device registrations and updates);
//! - [`Admin`]: the admin key (apps and their keys);
//! - [`AppOrAdmin`]: the admin key, or a publisher key of the app the path names in `{id}`
//!   (an app's settings: credentials, token keys, revocation, stats);
//! - [`Caller`]: the admin key or any publisher key, each seeing what is its own
//!   (`/v1/overview`, `/v1/audit`);
//! - [`DeviceToken`]: not a key but a client token naming a device (`/v1/ack`).
//!
//! An extractor runs where its argument stands: after the `Path` before it and before the body,
//! so a handler lists it right after its `Path` (if any), and a path that cannot be read is
//! answered before the key is looked at, a key before the body. A route that takes none of
//! them takes no key (`/v1/apps/{id}/vapid-public-key`, the probes); `/metrics` checks its own
//! token (`ops.rs`), `/admin/session` its header (`session.rs`: `SessionHeader`).

use std::sync::Arc;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use herald_core::tenant::AppId;
use herald_core::HeraldError;
use serde::Deserialize;

use super::{acting_app, no_app, unauthorized, Caller};
use crate::bearer;
use crate::error::ApiError;
use crate::Api;

/// A publisher of an app: a publisher key of the app, or the admin key acting for the app the
/// request names in `X-Herald-App` (the dashboard). A publisher key naming another app there
/// is told that app does not exist.
pub(crate) struct Publisher {
    /// The app the request acts for.
    pub app: AppId,
    /// The SHA-256 hex of the key presented: what the per-key rate limits count by.
    pub key_hash: String,
}

impl Publisher {
    /// The publisher the request's headers present, or the error that says why they present
    /// none. The extractor, and herald-edge's `direct_publish`, which reads a request without
    /// the router (`publish::publish_read`).
    pub(crate) fn of(api: &Api, headers: &HeaderMap) -> Result<Publisher, HeraldError> {
        let presented = api
            .presented(headers)?
            .ok_or_else(|| Api::missing(headers, "publisher API key"))?;
        let acting = acting_app(headers)?;
        let key_hash = presented.hash;
        let app = match (api.caller_of(&key_hash), acting) {
            (Some(Caller::Publisher(own)), Some(named)) if named != own => Err(no_app(&named)),
            (Some(Caller::Publisher(own)), _) => Ok(own),
            (Some(Caller::Admin), Some(named)) if api.tokens.knows(&named) => Ok(named),
            (Some(Caller::Admin), Some(named)) => Err(no_app(&named)),
            (Some(Caller::Admin), None) => Err(unauthorized(
                "the admin key is not a publisher key: name the app it acts for in the \
                 X-Herald-App header",
            )),
            (None, _) => Err(Api::invalid(presented.via)),
        }?;
        Ok(Publisher { app, key_hash })
    }
}

impl FromRequestParts<Arc<Api>> for Publisher {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &Arc<Api>) -> Result<Self, ApiError> {
        Ok(Publisher::of(api, &parts.headers)?)
    }
}

/// The admin key (bearer or session). Without an admin key configured, every request is
/// `403 forbidden`.
pub(crate) struct Admin;

impl FromRequestParts<Arc<Api>> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &Arc<Api>) -> Result<Self, ApiError> {
        if api.admin_key_hash.is_none() {
            return Err(HeraldError::forbidden(
                "app administration needs an admin key: start the server with --admin-key or \
                 HERALD_ADMIN_KEY",
            )
            .into());
        }
        match api.presented(&parts.headers)? {
            Some(p) if api.caller_of(&p.hash) == Some(Caller::Admin) => Ok(Admin),
            Some(_) => {
                Err(unauthorized("send the admin key as Authorization: Bearer <key>").into())
            }
            None => Err(Api::missing(&parts.headers, "admin key").into()),
        }
    }
}

/// The app the path names in `{id}`, for the admin key or a publisher of that app (as
/// [`Publisher`] says who that is). Another app's key is told the app does not exist, so keys
/// cannot probe for other tenants. An id that is not an app id is answered first, before the
/// key is looked at.
pub(crate) struct AppOrAdmin(pub AppId);

/// The `{id}` of an app's path.
#[derive(Deserialize)]
struct AppInPath {
    id: String,
}

impl FromRequestParts<Arc<Api>> for AppOrAdmin {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, api: &Arc<Api>) -> Result<Self, Response> {
        let Path(AppInPath { id }) = Path::<AppInPath>::from_request_parts(parts, api)
            .await
            .map_err(IntoResponse::into_response)?;
        let app = AppId::parse(&id).map_err(|e| ApiError(e).into_response())?;
        app_or_admin(api, &parts.headers, &app).map_err(|e| ApiError(e).into_response())?;
        Ok(AppOrAdmin(app))
    }
}

/// Whether the request presents the admin key or a publisher key of `app`.
fn app_or_admin(api: &Api, headers: &HeaderMap, app: &AppId) -> Result<(), HeraldError> {
    let presented = api.presented(headers)?;
    if presented.is_some_and(|p| api.caller_of(&p.hash) == Some(Caller::Admin)) {
        return Ok(());
    }
    let own = Publisher::of(api, headers)?.app;
    if own == *app {
        Ok(())
    } else {
        Err(no_app(app))
    }
}

/// Who the request's key is, admin or an app's publisher, for routes both may call (each sees
/// what is its own). `X-Herald-App` plays no part.
impl FromRequestParts<Arc<Api>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &Arc<Api>) -> Result<Self, ApiError> {
        let headers = &parts.headers;
        let presented = api
            .presented(headers)?
            .ok_or_else(|| Api::missing(headers, "admin key or a publisher API key"))?;
        Ok(api
            .caller_of(&presented.hash)
            .ok_or_else(|| Api::invalid(presented.via))?)
    }
}

/// A device token: a client token that names a device, as `Authorization: Bearer <token>`,
/// what a device acknowledges its pushes with. A token that names no device is `403`.
pub(crate) struct DeviceToken {
    /// The token's app.
    pub app: AppId,
    /// The device it names.
    pub device: String,
}

impl FromRequestParts<Arc<Api>> for DeviceToken {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &Arc<Api>) -> Result<Self, ApiError> {
        let token = bearer(&parts.headers).ok_or_else(|| {
            unauthorized("send the device token as Authorization: Bearer <token>")
        })?;
        let client = api.tokens.verify(token)?;
        let device = client
            .device
            .ok_or_else(|| HeraldError::forbidden("only a device token can acknowledge pushes"))?;
        Ok(DeviceToken {
            app: client.app,
            device,
        })
    }
}
