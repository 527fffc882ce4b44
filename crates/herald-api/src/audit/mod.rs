//! The audit log of admin actions: which calls are admin actions ([`Action`]), how a handler
//! says it performs one ([`note`], its first line once the extractor in its signature has
//! authorized the caller; it resolves who acts: the credential presented, before the action
//! can change it), and the middleware ([`record_layer`]) that, once the handler has answered,
//! stores that with the source address, the time and how it ended (`ok` or the error code) as
//! one [`AuditEntry`]. The data routes
//! ([`DATA_ROUTES`]: publish, push, ...) run without the middleware; a request that notes nothing
//! costs it one task-local scope.
//! Nothing secret is ever recorded: an actor is a role and a key id, details are what a handler
//! chose to name. The query API is `query`.
//!
//! A request whose credential is not valid for the route is not an entry (it changed nothing,
//! and anyone could fill the log with them); dashboard log-ins are, failed ones too.

mod query;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;
use herald_core::audit::{clip, Actor, AuditEntry, AuditLog};
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_core::ErrorCode;
use tokio_util::sync::CancellationToken;

use crate::auth::{Caller, Via};
use crate::Api;

pub use query::list;

/// The routes that carry data, not admin actions: they run without [`record_layer`], so the
/// publish path pays nothing for the audit log. A new admin route is not listed here, and its
/// handler records its action with one [`note`].
pub const DATA_ROUTES: &[&str] = &[
    "/v1/channels/{*path}",
    "/v1/batch",
    "/v1/push",
    "/v1/ack",
    "/v1/tokens",
    "/v1/devices",
    "/v1/devices/batch",
];

/// How long entries are kept unless configured otherwise (`audit_retention`): 90 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(90 * 24 * 3600);

/// How often the server deletes entries past the retention (recording an entry does too).
const PRUNE_INTERVAL: Duration = Duration::from_secs(3600);

/// An admin action (docs/security.md, "9. The audit log", lists them with their routes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `POST /v1/apps`.
    AppCreate,
    /// `PATCH /v1/apps/{id}` (limits).
    AppUpdate,
    /// `DELETE /v1/apps/{id}`.
    AppDelete,
    /// `POST /v1/apps/{id}/keys`.
    KeyCreate,
    /// `DELETE /v1/apps/{id}/keys/{key}`.
    KeyRevoke,
    /// `POST /v1/apps/{id}/revoke` (disconnects and token revocations).
    Revoke,
    /// `PUT /v1/apps/{id}/providers/{provider}`.
    ProviderSet,
    /// `DELETE /v1/apps/{id}/providers/{provider}`.
    ProviderDelete,
    /// `DELETE /v1/devices/{id}`.
    DeviceDelete,
    /// `POST /v1/devices/{id}/deactivate`, or `PATCH` with `"active": false`.
    DeviceDeactivate,
    /// `POST /v1/devices/{id}/activate`, or `PATCH` with `"active": true`.
    DeviceActivate,
    /// `POST /v1/jobs/{id}/replay`.
    JobReplay,
    /// `DELETE /v1/jobs/{id}`.
    JobDrop,
    /// `PUT /v1/apps/{id}/token-keys` (public keys, JWKS URL, dropping the HS256 secret).
    TokenKeysSet,
    /// `POST /v1/apps/{id}/token-secret`.
    TokenSecretRotate,
    /// `POST /admin/session` (failed log-ins too).
    SessionLogin,
    /// `DELETE /admin/session`.
    SessionLogout,
    /// `POST /v1/apps/{id}/hooks`.
    HookCreate,
    /// `PATCH /v1/apps/{id}/hooks/{hook}`.
    HookUpdate,
    /// `DELETE /v1/apps/{id}/hooks/{hook}`.
    HookDelete,
    /// `POST /v1/apps/{id}/hooks/{hook}/rotate-secret`.
    HookSecretRotate,
    /// `POST /v1/apps/{id}/hooks/{hook}/test`.
    HookTest,
    /// `POST /v1/apps/{id}/hooks/{hook}/dead/{row}/replay`.
    HookReplay,
    /// `DELETE /v1/apps/{id}/hooks/{hook}/dead/{row}`.
    HookDrop,
    /// `POST /v1/apps/{id}/pusher`.
    PusherCreate,
    /// `POST /v1/apps/{id}/pusher/rotate`.
    PusherRotate,
    /// `DELETE /v1/apps/{id}/pusher`.
    PusherDelete,
}

impl Action {
    /// The action's name in entries and in `GET /v1/audit?action=`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::AppCreate => "app.create",
            Action::AppUpdate => "app.update",
            Action::AppDelete => "app.delete",
            Action::KeyCreate => "key.create",
            Action::KeyRevoke => "key.revoke",
            Action::Revoke => "app.revoke",
            Action::ProviderSet => "provider.set",
            Action::ProviderDelete => "provider.delete",
            Action::DeviceDelete => "device.delete",
            Action::DeviceDeactivate => "device.deactivate",
            Action::DeviceActivate => "device.activate",
            Action::JobReplay => "job.replay",
            Action::JobDrop => "job.drop",
            Action::TokenKeysSet => "token_keys.set",
            Action::TokenSecretRotate => "token_secret.rotate",
            Action::SessionLogin => "session.login",
            Action::SessionLogout => "session.logout",
            Action::HookCreate => "hook.create",
            Action::HookUpdate => "hook.update",
            Action::HookDelete => "hook.delete",
            Action::HookSecretRotate => "hook.rotate_secret",
            Action::HookTest => "hook.test",
            Action::HookReplay => "hook.replay",
            Action::HookDrop => "hook.drop",
            Action::PusherCreate => "pusher.create",
            Action::PusherRotate => "pusher.rotate",
            Action::PusherDelete => "pusher.delete",
        }
    }
}

/// What a handler noted about the action it performs.
struct Noted {
    action: Action,
    app: Option<AppId>,
    target: Option<String>,
    details: serde_json::Map<String, serde_json::Value>,
    /// Who acts: the request's credential, or for a log-in the key in its body.
    actor: Option<Actor>,
    /// The request's `User-Agent`, cut.
    user_agent: Option<String>,
}

tokio::task_local! {
    /// The note of the request being handled ([`record_layer`] opens it around the handler).
    static NOTED: RefCell<Option<Noted>>;
}

/// Says that this request (its `headers`) performs `action` on `app` (and `target` within it):
/// the middleware records it once the handler has answered, with the answer's result. Call it
/// once the request's credential is authorized, before anything that can fail; a later call
/// replaces the note. Outside [`record_layer`] (a unit test calling a handler) it does nothing.
pub fn note(
    api: &Api,
    headers: &HeaderMap,
    action: Action,
    app: Option<&AppId>,
    target: Option<&str>,
) {
    let _ = NOTED.try_with(|noted| {
        *noted.borrow_mut() = Some(Noted {
            action,
            app: app.cloned(),
            target: target.map(clip),
            details: serde_json::Map::new(),
            actor: api.actor_of(headers),
            user_agent: headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(clip),
        });
    });
}

/// Adds a non-secret detail to the noted action (after [`note`]). Never pass a key, a token, a
/// secret or a credential body.
pub fn detail(name: &str, value: impl serde::Serialize) {
    let _ = NOTED.try_with(|noted| {
        if let Some(noted) = noted.borrow_mut().as_mut() {
            let value = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
            noted.details.insert(name.to_owned(), value);
        }
    });
}

/// Sets who acted, for a log-in (whose credential is in its body, not its headers).
pub(crate) fn acted_as(actor: Actor) {
    let _ = NOTED.try_with(|noted| {
        if let Some(noted) = noted.borrow_mut().as_mut() {
            noted.actor = Some(actor);
        }
    });
}

/// The entry's actor for a caller whose key hashes to `hash`, presented `via`.
pub(crate) fn actor(caller: &Caller, hash: &str, via: &str) -> Actor {
    match caller {
        Caller::Admin => Actor {
            role: "admin".into(),
            key_id: None,
            via: via.into(),
        },
        Caller::Publisher(_) => Actor {
            role: "publisher".into(),
            key_id: hash.get(..12).map(str::to_owned),
            via: via.into(),
        },
    }
}

/// An anonymous actor (a log-in with a key that is not valid).
pub(crate) fn anonymous(via: &str) -> Actor {
    Actor {
        role: "anonymous".into(),
        key_id: None,
        via: via.into(),
    }
}

impl Api {
    /// Who the request's credential is, as an entry names it; `None` without a valid one.
    fn actor_of(&self, headers: &HeaderMap) -> Option<Actor> {
        let presented = self.presented(headers).ok()??;
        let caller = self.caller_of(&presented.hash)?;
        let via = match presented.via {
            Via::Bearer => "bearer",
            Via::Session => "session",
        };
        Some(actor(&caller, &presented.hash, via))
    }

    /// Stores an entry, deleting those past the retention; a failure is logged, never answered
    /// (the action itself has happened).
    async fn record(&self, entry: AuditEntry) {
        let keep = i64::try_from(self.audit_retention.as_millis()).unwrap_or(i64::MAX);
        let prune_before = entry.time.saturating_sub(keep);
        if let Err(err) = self.audit.record_audit(&entry, prune_before).await {
            tracing::error!(error = %err, action = %entry.action, "audit entry not stored");
        }
    }
}

/// The middleware around the API's routes: requests that may change state (not `GET`, `HEAD`
/// or `OPTIONS`) run with a note open; a noted action with a known actor is stored once the
/// handler has answered, before the answer is sent.
pub async fn record_layer(State(api): State<Arc<Api>>, request: Request, next: Next) -> Response {
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return next.run(request).await;
    }
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr);
    let (response, noted) = NOTED
        .scope(RefCell::new(None), async {
            let response = next.run(request).await;
            (response, NOTED.with(|noted| noted.borrow_mut().take()))
        })
        .await;
    let Some(noted) = noted else {
        return response;
    };
    let Some(actor) = noted.actor else {
        return response;
    };
    let result = match response.extensions().get::<ErrorCode>() {
        Some(code) => code.as_str().to_owned(),
        None if response.status().is_success() => "ok".to_owned(),
        None => format!("http_{}", response.status().as_u16()),
    };
    api.record(AuditEntry {
        id: 0,
        time: now_millis(),
        actor,
        source: peer.map(|addr| addr.to_string()),
        user_agent: noted.user_agent,
        action: noted.action.as_str().to_owned(),
        app: noted.app,
        target: noted.target,
        details: serde_json::Value::Object(noted.details),
        result,
    })
    .await;
    response
}

/// Deletes entries past `retention` now and every hour until `stop` is cancelled.
pub async fn prune_periodically(
    log: Arc<dyn AuditLog>,
    retention: Duration,
    stop: CancellationToken,
) {
    let keep = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
    let mut every = tokio::time::interval(PRUNE_INTERVAL);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.cancelled() => return,
        }
        match log.prune_audit(now_millis().saturating_sub(keep)).await {
            Ok(0) => {}
            Ok(pruned) => tracing::debug!(pruned, "audit entries past the retention removed"),
            Err(err) => tracing::error!(error = %err, "audit log prune failed"),
        }
    }
}
