//! Who a request speaks for: the key it presents, either as `Authorization: Bearer <key>` or
//! as the dashboard's session cookie (`herald_admin::session`), which counts only when the
//! request also carries `X-Herald-Session: 1` (a cross-origin page cannot send that header, so
//! the cookie cannot be used by CSRF). Either way the key's SHA-256 hash is checked against the
//! admin key's and the publisher keys' on every request, so a revoked key's sessions end at
//! once. The admin key acts for one app on the publisher routes when the request names it in
//! `X-Herald-App` (the dashboard browsing an app's channels, devices and pushes).
//!
//! Who may call a handler is said in its signature, by one of the extractors of `extract`
//! ([`Publisher`], [`Admin`], [`AppOrAdmin`], [`Caller`], [`DeviceToken`]; `limited.rs` adds
//! [`crate::limited::Counted`]).

use axum::http::HeaderMap;
use herald_admin::session::{cookie_value, has_session_header};
use herald_core::auth::hash_api_key;
pub(crate) use herald_core::revoked::now_secs;
use herald_core::tenant::AppId;
use herald_core::{ErrorCode, HeraldError};

use crate::{bearer, Api};

mod extract;

pub(crate) use extract::{Admin, AppOrAdmin, DeviceToken, Publisher};

/// The header in which the admin key names the app it acts for.
pub const APP_HEADER: &str = "x-herald-app";

/// How the request presented its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// The session cookie with `X-Herald-Session: 1`.
    Session,
}

/// The hash of the key a request presents, and how.
pub(crate) struct Presented {
    pub hash: String,
    pub via: Via,
    /// When a session ends (seconds since the Unix epoch); `None` for a bearer key.
    pub expires_at: Option<u64>,
}

/// Who a valid key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The admin key.
    Admin,
    /// A publisher key of this app.
    Publisher(AppId),
}

pub(crate) fn unauthorized(message: impl Into<String>) -> HeraldError {
    HeraldError::new(ErrorCode::Unauthorized, message)
}

impl Api {
    /// The key the request presents: its bearer key, else its session cookie when the request
    /// carries the session header. An expired, forged or missing cookie with the header is an
    /// error; a cookie without the header is ignored.
    pub(crate) fn presented(&self, headers: &HeaderMap) -> Result<Option<Presented>, HeraldError> {
        if let Some(key) = bearer(headers) {
            return Ok(Some(Presented {
                hash: hash_api_key(key),
                via: Via::Bearer,
                expires_at: None,
            }));
        }
        if !has_session_header(headers) {
            return Ok(None);
        }
        let value = cookie_value(headers)
            .ok_or_else(|| unauthorized("no dashboard session: log in with POST /admin/session"))?;
        let session = self
            .sessions
            .key
            .open(value, now_secs())
            .map_err(|e| unauthorized(e.to_string()))?;
        Ok(Some(Presented {
            hash: session.key_hash,
            via: Via::Session,
            expires_at: Some(session.expires_at),
        }))
    }

    /// Who the key hashed as `hash` is, if it is still valid.
    pub(crate) fn caller_of(&self, hash: &str) -> Option<Caller> {
        if self.admin_key_hash.as_deref() == Some(hash) {
            return Some(Caller::Admin);
        }
        self.keys.check_hash(hash).map(Caller::Publisher)
    }

    /// The error for a request without any credential.
    pub(crate) fn missing(headers: &HeaderMap, what: &str) -> HeraldError {
        if cookie_value(headers).is_some() {
            unauthorized(format!(
                "send the {what} as Authorization: Bearer <key>; the dashboard's session \
                 cookie counts only with the X-Herald-Session: 1 header"
            ))
        } else {
            unauthorized(format!("send the {what} as Authorization: Bearer <key>"))
        }
    }

    /// The error for a key that is not (or no longer) valid.
    pub(crate) fn invalid(via: Via) -> HeraldError {
        match via {
            Via::Bearer => unauthorized("the API key is not valid"),
            Via::Session => {
                unauthorized("the key this session logged in with is no longer valid: log in again")
            }
        }
    }
}

/// The answer for an app the key may not see: the same as for an app that does not exist, so
/// keys cannot probe for other tenants.
pub(crate) fn no_app(app: &AppId) -> HeraldError {
    HeraldError::new(ErrorCode::NotFound, format!("no app {app}"))
}

/// The app named in `X-Herald-App`, if any.
pub(crate) fn acting_app(headers: &HeaderMap) -> Result<Option<AppId>, HeraldError> {
    let Some(value) = headers.get(APP_HEADER) else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| HeraldError::bad_request(format!("{APP_HEADER} is not a valid app id")))?;
    AppId::parse(text).map(Some)
}
