//! Herald's HTTP publisher API: publish and batch publish, channel history, channel info and
//! listing (all behind a publisher API key), apps, devices, pushes and the job queue, an app's
//! webhook endpoints (`hooks.rs`) and the live tail of their events (`hooks_tail.rs`), its
//! Pusher credentials (`pusher.rs`), the
//! admin dashboard's sessions (`/admin/session`) and live figures (`/v1/overview`), plus the
//! liveness and readiness probes (`/healthz`, `/readyz`: `probes.rs`), `/metrics` and the
//! OpenAPI document. docs/openapi.yaml describes every route;
//! who a request speaks for is `auth/`, and who may call a handler its signature says
//! (`auth/extract.rs`); every body is read by `body.rs`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod apps;
pub mod audit;
mod auth;
mod body;
mod channels;
mod destinations;
mod device_inbox;
mod devices;
mod error;
mod hooks;
mod hooks_tail;
mod jobs;
mod limited;
mod ops;
mod overview;
mod probes;
mod prom;
mod providers;
mod publish;
mod pusher;
mod pushes;
mod query;
mod revoke;
mod session;
mod token_keys;

use std::sync::Arc;

use axum::http::HeaderMap;
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use herald_core::auth::{ApiKeys, Tokens};
use herald_core::bus::{Bus, Presence};
use herald_core::publish::Publisher;
use herald_core::tenancy::Tenancy;
use herald_core::usage::UsageMeter;
use herald_core::Engine;
use herald_push::credentials::CredentialStore;
use herald_push::delivery::worker::Deliverer;
use herald_push::{DeviceRegistry, Inbox};

pub use auth::{Caller, APP_HEADER};
pub use error::ApiError;
pub use herald_admin::Sessions;
pub use publish::publish_read;

/// Renders the Prometheus text exposition of all metrics.
pub type MetricsRender = Arc<dyn Fn() -> String + Send + Sync>;

/// What the API handlers need.
pub struct Api {
    /// The channel engine.
    pub engine: Arc<Engine>,
    /// Stores and counts published messages (the one publish rule).
    pub publisher: Arc<Publisher>,
    /// Valid publisher keys, each for one app (read here; changed only through `bus`).
    pub keys: Arc<ApiKeys>,
    /// SHA-256 hex of the admin key, if one is configured.
    pub admin_key_hash: Option<String>,
    /// SHA-256 hex of the token `GET /metrics` requires, if one is configured.
    pub metrics_token_hash: Option<String>,
    /// Apps, their keys, limits and usage.
    pub tenancy: Arc<dyn Tenancy>,
    /// Devices, their cursors and push receipts.
    pub devices: Arc<dyn DeviceRegistry>,
    /// Pushes and device inboxes.
    pub inbox: Arc<Inbox>,
    /// Every app's client-token secret (read here; changed only through `bus`).
    pub tokens: Arc<Tokens>,
    /// Per-app usage counters (limits changed only through `bus`).
    pub usage: Arc<UsageMeter>,
    /// This node's live client connections (the revoke API closes them and says how many).
    pub live: Arc<herald_core::live::LiveClients>,
    /// Where admin changes are published, after the store write, for every node's caches.
    pub bus: Arc<dyn Bus>,
    /// Cluster-wide subscriber counts (`None` on one node: this node's own are the whole).
    pub presence: Option<Arc<dyn Presence>>,
    /// Largest message payload (`data`) accepted, in bytes.
    pub max_message_bytes: usize,
    /// Renders `/metrics`.
    pub metrics: MetricsRender,
    /// Provider credentials, sealed.
    pub credentials: Arc<dyn CredentialStore>,
    /// The provider delivery worker: its queue, clients and figures.
    pub deliverer: Arc<Deliverer>,
    /// The admin dashboard's sessions: their signing key, lifetime and cookie attributes.
    pub sessions: Sessions,
    /// The audit log of admin actions ([`audit`]).
    pub audit: Arc<dyn herald_core::audit::AuditLog>,
    /// How long audit entries are kept.
    pub audit_retention: std::time::Duration,
    /// The rate limits (per app and publisher key; log-ins per source address).
    pub limits: Arc<herald_core::limits::Limiters>,
    /// The server's shutdown signal: once cancelled, the server is draining and `/readyz`
    /// answers not ready.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Where URLs that tenants give (Web Push endpoints, JWKS URLs) may lead: checked when
    /// they are given (`destinations.rs`).
    pub destinations: herald_push::Destinations,
    /// The app's webhook endpoints, their queues and dead letters (`hooks.rs`).
    pub hooks: Arc<herald_hooks::service::Hooks>,
    /// Apps' Pusher credentials (`pusher.rs`).
    pub pusher: Arc<herald_pusher::credentials::service::PusherCredentials>,
}

/// Most messages in one batch publish.
pub const MAX_BATCH: usize = 1000;

/// The credential of the request's `Authorization: Bearer` header, read by the contract's one
/// parser (`herald_proto::http::bearer`).
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(herald_proto::http::bearer)
}

/// `POST /v1/ack` is called by devices, browsers among them (a web app on another origin that
/// reads its inbox over EventSource acks with `fetch`), so it answers cross-origin requests;
/// it carries no cookies, only the device token the page sends.
fn ack_cors() -> tower_http::cors::CorsLayer {
    use axum::http::{header, Method};
    tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::Any)
        .allow_methods([Method::POST])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
        .max_age(std::time::Duration::from_secs(3600))
}

/// `GET /v1/apps/{id}/vapid-public-key` is read by web pages on the app's own origin (to pass
/// to `pushManager.subscribe`); it holds nothing secret and needs no key.
fn public_read_cors() -> tower_http::cors::CorsLayer {
    tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::Any)
        .allow_methods([axum::http::Method::GET])
        .max_age(std::time::Duration::from_secs(3600))
}

async fn preflight() -> axum::http::StatusCode {
    axum::http::StatusCode::NO_CONTENT
}

/// Every route of the publisher API and the operational endpoints, as (path, handlers): the
/// router is built from this list, and the OpenAPI test walks it to check that every route is
/// documented with exactly the methods it serves.
pub fn routes() -> Vec<(&'static str, MethodRouter<Arc<Api>>)> {
    vec![
        ("/v1/channels", get(channels::list)),
        (
            "/v1/channels/{*path}",
            get(channels::get_path).post(publish::publish),
        ),
        ("/v1/batch", post(publish::batch)),
        ("/v1/apps", get(apps::list).post(apps::create)),
        (
            "/v1/apps/{id}",
            get(apps::get).patch(apps::update).delete(apps::delete),
        ),
        (
            "/v1/apps/{id}/keys",
            get(apps::list_keys).post(apps::add_key),
        ),
        (
            "/v1/apps/{id}/keys/{key}",
            axum::routing::delete(apps::remove_key),
        ),
        ("/v1/apps/{id}/stats", get(apps::stats)),
        ("/v1/apps/{id}/revoke", post(revoke::revoke)),
        (
            "/v1/apps/{id}/token-keys",
            get(token_keys::get).put(token_keys::put),
        ),
        ("/v1/apps/{id}/token-secret", post(token_keys::rotate)),
        ("/v1/apps/{id}/providers", get(providers::list)),
        (
            "/v1/apps/{id}/providers/{provider}",
            get(providers::get)
                .put(providers::put)
                .delete(providers::delete),
        ),
        (
            "/v1/apps/{id}/vapid-public-key",
            get(providers::vapid_public_key).layer(public_read_cors()),
        ),
        ("/v1/apps/{id}/hooks", get(hooks::list).post(hooks::create)),
        ("/v1/apps/{id}/hooks/tail", get(hooks_tail::tail)),
        (
            "/v1/apps/{id}/hooks/{hook}",
            get(hooks::get).patch(hooks::update).delete(hooks::delete),
        ),
        (
            "/v1/apps/{id}/hooks/{hook}/rotate-secret",
            post(hooks::rotate_secret),
        ),
        ("/v1/apps/{id}/hooks/{hook}/test", post(hooks::test)),
        ("/v1/apps/{id}/hooks/{hook}/dead", get(hooks::dead)),
        (
            "/v1/apps/{id}/hooks/{hook}/dead/{row}",
            axum::routing::delete(hooks::drop_dead),
        ),
        (
            "/v1/apps/{id}/hooks/{hook}/dead/{row}/replay",
            post(hooks::replay),
        ),
        (
            "/v1/apps/{id}/pusher",
            get(pusher::get).post(pusher::create).delete(pusher::delete),
        ),
        ("/v1/apps/{id}/pusher/rotate", post(pusher::rotate)),
        ("/v1/overview", get(overview::overview)),
        (
            "/admin/session",
            get(session::current)
                .post(session::login)
                .delete(session::logout),
        ),
        ("/v1/jobs/stats", get(jobs::stats)),
        ("/v1/jobs/dead", get(jobs::dead)),
        ("/v1/jobs/{id}", axum::routing::delete(jobs::drop_dead)),
        ("/v1/jobs/{id}/replay", post(jobs::replay)),
        ("/v1/tokens", post(apps::mint_token)),
        ("/v1/audit", get(audit::list)),
        ("/v1/devices", get(devices::list).post(devices::register)),
        ("/v1/devices/batch", post(devices::register_batch)),
        (
            "/v1/devices/{id}",
            get(devices::get)
                .patch(devices::patch)
                .delete(devices::delete),
        ),
        ("/v1/devices/{id}/inbox", get(device_inbox::inbox)),
        ("/v1/devices/{id}/activate", post(devices::activate)),
        ("/v1/devices/{id}/deactivate", post(devices::deactivate)),
        ("/v1/push", post(pushes::push)),
        ("/v1/push/{id}", get(pushes::receipt)),
        (
            "/v1/ack",
            post(pushes::ack).options(preflight).layer(ack_cors()),
        ),
        ("/healthz", get(probes::healthz)),
        ("/readyz", get(probes::readyz)),
        ("/metrics", get(ops::metrics)),
        ("/v1/openapi.yaml", get(ops::openapi)),
    ]
}

/// Routes of the publisher API and the operational endpoints ([`routes`]), with admin actions
/// recorded in the audit log: every route but the data routes ([`audit::DATA_ROUTES`]: publish,
/// push, register, ack, mint) runs inside [`audit::record_layer`].
pub fn router(api: Arc<Api>) -> Router {
    routes()
        .into_iter()
        .fold(Router::new(), |router, (path, handlers)| {
            if audit::DATA_ROUTES.contains(&path) {
                return router.route(path, handlers);
            }
            let record = axum::middleware::from_fn_with_state(api.clone(), audit::record_layer);
            router.route(path, handlers.route_layer(record))
        })
        .with_state(api)
}
