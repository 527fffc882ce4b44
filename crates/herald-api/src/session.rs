//! The admin dashboard's sessions at `/admin/session`: `POST` logs in with the admin key or a
//! publisher key (never in a URL) and sets the signed cookie (`herald_admin::session`), `GET`
//! says who the current session is, `DELETE` clears the cookie. Log-in attempts are rate-limited
//! per source address (`limits.login`, counted before the key is looked at). Every request here carries
//! `X-Herald-Session: 1`, so a page on another origin can neither log a browser in nor out.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use herald_admin::session::has_session_header;
use herald_core::auth::hash_api_key;
use herald_core::{ErrorCode, HeraldError};
use serde::Deserialize;
use serde_json::json;

use crate::audit::{self, Action};
use crate::auth::{now_secs, Caller, Via};
use crate::body::{parse_json, read_body};
use crate::error::ApiError;
use crate::Api;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    key: String,
}

/// A request carrying `X-Herald-Session: 1`, which every request to `/admin/session` must: a
/// page on another origin cannot send it.
pub(crate) struct SessionHeader;

impl<S: Send + Sync> FromRequestParts<S> for SessionHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        if has_session_header(&parts.headers) {
            Ok(SessionHeader)
        } else {
            Err(HeraldError::bad_request(
                "requests to /admin/session carry the X-Herald-Session: 1 header",
            )
            .into())
        }
    }
}

/// The session's description: role, app and expiry.
fn describe(caller: &Caller, expires_at: u64) -> serde_json::Value {
    match caller {
        Caller::Admin => json!({ "role": "admin", "app": null, "expires_at": expires_at }),
        Caller::Publisher(app) => {
            json!({ "role": "publisher", "app": app, "expires_at": expires_at })
        }
    }
}

fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `POST /admin/session` `{"key": "..."}`: starts a session of the admin key or a publisher
/// key. A wrong key answers 401 without saying which keys exist.
pub async fn login(
    State(api): State<Arc<Api>>,
    _: SessionHeader,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::SessionLogin, None, None);
    audit::acted_as(audit::anonymous("login"));
    // Every attempt counts, before the key is looked at: a right key is not found faster.
    if let Some(Extension(ConnectInfo(peer))) = peer {
        api.limits.check_login(peer.ip())?;
    }
    let body = read_body(body, 4096).await?;
    let req: Login = parse_json(&body)?;
    let hash = hash_api_key(&req.key);
    let caller = api
        .caller_of(&hash)
        .ok_or_else(|| HeraldError::new(ErrorCode::Unauthorized, "the key is not valid"))?;
    let own_app = match &caller {
        Caller::Publisher(app) => Some(app),
        Caller::Admin => None,
    };
    audit::note(&api, &headers, Action::SessionLogin, own_app, None);
    audit::acted_as(audit::actor(&caller, &hash, "login"));
    let (cookie, expires_at) = api.sessions.start(&hash, now_secs());
    let cookie = HeaderValue::from_str(&cookie)
        .map_err(|_| HeraldError::new(ErrorCode::Internal, "the session cookie is malformed"))?;
    let mut response = axum::Json(describe(&caller, expires_at)).into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(no_store(response))
}

/// `GET /admin/session`: who the current session is; 401 without a valid one.
pub async fn current(
    State(api): State<Arc<Api>>,
    _: SessionHeader,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(session) = api.presented(&headers)?.filter(|p| p.via == Via::Session) else {
        return Err(HeraldError::new(
            ErrorCode::Unauthorized,
            "no dashboard session: log in with POST /admin/session",
        )
        .into());
    };
    let caller = api
        .caller_of(&session.hash)
        .ok_or_else(|| Api::invalid(Via::Session))?;
    let expires_at = session.expires_at.unwrap_or_default();
    Ok(no_store(
        axum::Json(describe(&caller, expires_at)).into_response(),
    ))
}

/// `DELETE /admin/session`: clears the cookie (the session is stateless: a copy of the cookie
/// stays valid until it expires or its key is revoked).
pub async fn logout(
    State(api): State<Arc<Api>>,
    _: SessionHeader,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::SessionLogout, None, None);
    let cookie = HeaderValue::from_str(&api.sessions.clear())
        .map_err(|_| HeraldError::new(ErrorCode::Internal, "the session cookie is malformed"))?;
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(no_store(response))
}
