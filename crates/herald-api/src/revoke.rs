//! `POST /v1/apps/{id}/revoke`: disconnects an app's live clients (all, one `sub`, one device)
//! or revokes its tokens (by `jti`, or every token issued before a time), with the admin key or
//! the app's own publisher key. A disconnect is not stored: the clients may connect again if
//! their tokens allow. A token revocation is stored first (it survives a restart and reaches
//! nodes that start later) and then refuses those tokens on every node. Either way every node
//! closes its own matching connections with a `disconnect` whose code is `revoked`; the answer
//! says how many this node closed.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use herald_core::caches::CacheEvent;
use herald_core::live::Target;
use herald_core::outbox::CloseReason;
use herald_core::revoked::{now_secs, RevokedKind, TokenRevocation};
use herald_core::HeraldError;
use serde::Deserialize;
use serde_json::json;

use crate::apps::find_app;
use crate::audit::{self, Action};
use crate::auth::AppOrAdmin;
use crate::body::{parse_json, read_body};
use crate::error::ApiError;
use crate::Api;

/// How long a `jti` revocation is kept when the request does not say: as long as the longest
/// token `POST /v1/tokens` mints lives.
const DEFAULT_JTI_KEEP_SECS: u64 = 30 * 24 * 3600;
/// The longest a `jti` revocation may be kept (ten years).
const MAX_JTI_KEEP_SECS: u64 = 10 * 365 * 24 * 3600;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RevokeRequest {
    #[serde(default)]
    all: bool,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    device: Option<String>,
    #[serde(default)]
    jti: Option<String>,
    /// Until when a `jti` revocation is kept (seconds since the Unix epoch).
    #[serde(default)]
    expires: Option<u64>,
    #[serde(default)]
    issued_before: Option<u64>,
}

/// What one request asks for.
enum Revoke {
    /// Close connections; store nothing.
    Disconnect(Target),
    /// Store the revocation, refuse the tokens, close their connections.
    Tokens(RevokedKind),
}

impl RevokeRequest {
    /// What the request names, as audit details (a `sub`, a device, a token id: none secret).
    fn audit_details(&self) {
        use audit::detail;
        if self.all {
            detail("all", true);
        }
        for (name, value) in [
            ("sub", &self.sub),
            ("device", &self.device),
            ("jti", &self.jti),
        ] {
            if let Some(value) = value {
                detail(name, herald_core::audit::clip(value));
            }
        }
        for (name, value) in [
            ("expires", self.expires),
            ("issued_before", self.issued_before),
        ] {
            if let Some(value) = value {
                detail(name, value);
            }
        }
    }

    fn check(self) -> Result<Revoke, HeraldError> {
        let named = usize::from(self.all)
            + usize::from(self.sub.is_some())
            + usize::from(self.device.is_some())
            + usize::from(self.jti.is_some())
            + usize::from(self.issued_before.is_some());
        if named != 1 {
            return Err(HeraldError::bad_request(
                "name exactly one of: {\"all\":true}, {\"sub\":\"...\"}, {\"device\":\"...\"}, \
                 {\"jti\":\"...\"} (with an optional \"expires\"), {\"issued_before\":SECONDS}",
            ));
        }
        if self.expires.is_some() && self.jti.is_none() {
            return Err(HeraldError::bad_request(
                "\"expires\" goes with \"jti\" only",
            ));
        }
        let now = now_secs();
        Ok(if self.all {
            Revoke::Disconnect(Target::All)
        } else if let Some(sub) = self.sub {
            if sub.is_empty() {
                return Err(HeraldError::bad_request("\"sub\" must not be empty"));
            }
            Revoke::Disconnect(Target::Sub(sub))
        } else if let Some(device) = self.device {
            herald_proto::token::check_device_id(&device)?;
            Revoke::Disconnect(Target::Device(device))
        } else if let Some(jti) = self.jti {
            herald_proto::token::check_jti(&jti)?;
            let expires = self.expires.unwrap_or(now + DEFAULT_JTI_KEEP_SECS);
            if expires <= now || expires > now + MAX_JTI_KEEP_SECS {
                return Err(HeraldError::bad_request(
                    "\"expires\" must be a time (seconds since the Unix epoch) in the next ten \
                     years: when the token expires",
                ));
            }
            Revoke::Tokens(RevokedKind::Jti { jti, expires })
        } else {
            let before = self.issued_before.unwrap_or(0);
            if before > now {
                return Err(HeraldError::bad_request(format!(
                    "\"issued_before\" {before} is in the future (now is {now}): it would \
                     refuse tokens not minted yet"
                )));
            }
            Revoke::Tokens(RevokedKind::IssuedBefore(before))
        })
    }
}

/// `POST /v1/apps/{id}/revoke` with one of `{"all":true}`, `{"sub":S}`, `{"device":D}`,
/// `{"jti":J,"expires":T}`, `{"issued_before":T}`: answers `{"closed":N}`, the connections
/// this node closed.
pub async fn revoke(
    State(api): State<Arc<Api>>,
    AppOrAdmin(app): AppOrAdmin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    audit::note(&api, &headers, Action::Revoke, Some(&app), None);
    find_app(&api, &app).await?;
    let body = read_body(body, 4096).await?;
    let request: RevokeRequest = parse_json(&body)?;
    request.audit_details();
    let closed = match request.check()? {
        Revoke::Disconnect(target) => {
            let closed = api.live.disconnect(&app, &target, CloseReason::Revoked);
            api.bus.publish(CacheEvent::Disconnect {
                app,
                target,
                reason: CloseReason::Revoked,
            });
            closed
        }
        Revoke::Tokens(kind) => {
            let revocation = TokenRevocation { app, kind };
            api.tenancy
                .revoke_tokens(&revocation)
                .await
                .map_err(HeraldError::from)?;
            let closed =
                api.live
                    .disconnect(&revocation.app, &revocation.target(), CloseReason::Revoked);
            api.bus.publish(CacheEvent::TokensRevoked(revocation));
            closed
        }
    };
    audit::detail("closed", closed);
    Ok(axum::Json(json!({ "closed": closed })).into_response())
}
