//! The one place a server's parts are built and connected: the store, the bus and the engine
//! (through [`Engine::open_with_bus`], so the store's commits reach the engine's own hub through
//! the [`LocalBus`]), the caches of apps' keys, client-token secrets, limits and usage counters
//! (loaded from the store at start, then kept up to date by the bus's events), device inboxes,
//! the provider delivery worker, the webhook service ([`crate::hooks`]), apps' Pusher
//! credentials, Pusher's HTTP API and client protocol (herald-pusher), the transports' [`Edge`], the publisher
//! API and the HTTP router that joins them.

use std::sync::Arc;
use std::time::Duration;

use axum::response::IntoResponse;
use axum::Router;
use herald_core::auth::{generate_secret, hash_api_key, Tokens};
use herald_core::bus::Bus;
use herald_core::caches::{CacheEvent, CacheListener, Caches, TokenSecret};
use herald_core::limits::Limiters;
use herald_core::publish::Publisher;
use herald_core::tenancy::{KeyInfo, Tenancy};
use herald_core::tenant::AppId;
use herald_core::usage::UsageMeter;
use herald_core::{Engine, ErrorCode, HeraldError};
use herald_edge::direct_publish::Handler as DirectPublish;
use herald_edge::parking::Parking;
use herald_edge::{Edge, KeepAlive};
use herald_hooks::PushHooks;
use herald_push::credentials::sealer::Sealer;
use herald_push::credentials::CredentialStore;
use herald_push::delivery::senders::Senders;
use herald_push::delivery::stats::WorkerStats;
use herald_push::delivery::worker::{Deliverer, DeliveryConfig};
use herald_push::push_events::PushObserver;
use herald_push::{DeviceRegistry, Inbox};
use herald_pusher::credentials::service::PusherCredentials;
use herald_pusher::http::{HttpLimits, PusherHttp};
use herald_pusher::serve::PusherClients;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::ServerError;
use crate::hooks::NodeHooks;
use crate::node::{self, NodeBus, Store};
use crate::secrets::{credentials_key, token_secret};
use crate::settings::ServerSettings;

/// The parts every listener shares, built over one store.
pub(crate) struct Parts {
    /// The channel engine, over `store` and its own hub.
    pub engine: Arc<Engine>,
    /// The store (SQLite, or PostgreSQL shared with other nodes); closed last at shutdown.
    pub store: Store,
    /// Apps, keys, limits, usage (the same store).
    pub tenancy: Arc<dyn Tenancy>,
    /// Devices, inbox cursors, receipts (the same store).
    pub devices: Arc<dyn DeviceRegistry>,
    /// Stores and counts published messages and pushes (the one publish rule).
    pub publisher: Arc<Publisher>,
    /// Committed messages to the fan-out (and other nodes), cache events to `caches`.
    pub bus: Arc<NodeBus>,
    /// Every app's client-token secret (in `bus`'s caches).
    pub tokens: Arc<Tokens>,
    /// Per-app usage counters, loaded from the store (in `bus`'s caches).
    pub usage: Arc<UsageMeter>,
    /// Pushes and device inboxes.
    pub inbox: Arc<Inbox>,
    /// Provider credentials (the same store).
    pub credentials: Arc<dyn CredentialStore>,
    /// The provider delivery worker (started by [`Parts::start_delivery`]).
    pub deliverer: Arc<Deliverer>,
    /// The worker's task, awaited by [`Parts::close`] before the store closes.
    delivery_task: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Webhooks: the service, its tasks (started by [`Parts::start_hooks`]) and its lifecycle
    /// listener (joined once an endpoint exists).
    pub hooks: NodeHooks,
    /// Apps' Pusher credentials, cached on this node (the bus's events drop what changed).
    pub pusher: Arc<PusherCredentials>,
}

impl Parts {
    /// Builds this node's (empty) caches with the default app's token secret, and opens the
    /// store and the bus with the engine over them (see [`crate::node`]).
    pub(crate) async fn open_store(
        settings: &ServerSettings,
    ) -> Result<(Engine, Arc<NodeBus>, Store), ServerError> {
        let secret = token_secret(settings)?;
        crate::secrets::remember_token_secret(settings, &secret);
        let caches = Caches::new(secret.as_bytes());
        if let Some(previous) = &settings.previous_token_secret {
            caches.tokens.set_default_previous(previous.as_bytes());
        }
        node::open(settings, caches).await
    }

    /// Reads what the store knows (apps' token secrets, revoked tokens, usage totals and
    /// limits, device counts)
    /// into this node's caches (the same events the bus carries, applied here only) and builds
    /// the shared parts over `engine`, `bus` and `store`.
    pub(crate) async fn load(
        settings: &ServerSettings,
        engine: Engine,
        bus: Arc<NodeBus>,
        store: Store,
    ) -> Result<Parts, ServerError> {
        let registry = store.tenancy.clone();
        let devices = store.devices.clone();
        let caches = bus.caches().clone();
        let (tokens, usage) = (caches.tokens.clone(), caches.usage.clone());
        for app in registry.apps().await? {
            if let Some(secret) = &app.token_secret {
                caches.apply(&CacheEvent::TokenSecretSet {
                    app: app.id.clone(),
                    secret: TokenSecret(secret.clone()),
                });
            }
            usage.load(&app.id, registry.usage(&app.id).await?);
            caches.apply(&CacheEvent::AppCreated {
                app: app.id.clone(),
                limits: app.limits,
            });
            let counters = usage.app(&app.id);
            counters.devices_changed(devices.device_count(&app.id).await?, 0);
        }
        // Every app's keys (a rotated-out secret during its overlap, public keys, a JWKS URL,
        // fetched from now on in the background).
        let key_sets = crate::jwks_fetch::HttpKeySets::new(
            settings.jwks.fetch_timeout,
            settings.outbound.clone(),
        )
        .map_err(ServerError::KeySetClient)?;
        tokens.set_key_source(Arc::new(key_sets), settings.jwks);
        for (app, keys) in registry.all_token_keys().await? {
            caches.apply(&CacheEvent::TokenKeysSet { app, keys });
        }
        // Revoked tokens stay refused across a restart.
        tokens.replace_revocations(&registry.token_revocations().await?);
        let engine = Arc::new(engine);
        // Each app's channel deliveries on this node, for the dashboard (`/v1/overview`).
        engine.set_delivery_meter(usage.clone());
        // A publish of any transport whose data is a `$mqtt` envelope with `"retain":true` sets
        // or clears its channel's retained message, as an MQTT RETAIN 1 publish does.
        let publisher = Arc::new(
            Publisher::new(engine.clone(), usage.clone(), settings.edge.max_frame_bytes)
                .with_retain_rule(herald_mqtt::payload::retain_of_data),
        );
        let sealer = Arc::new(
            Sealer::new(&credentials_key(settings)?)
                .map_err(|e| ServerError::CredentialsKey(e.to_string()))?,
        );
        // Webhook secrets are sealed with the same key as provider credentials.
        let hooks = NodeHooks::new(
            store.hooks.clone(),
            sealer.clone(),
            settings.outbound.clone(),
            settings.hooks.clone(),
            engine.lifecycle().clone(),
        )?;
        hooks.count_with(engine.clone(), bus.clone());
        // Pusher secrets too, with the app as associated data.
        let node_bus: Arc<dyn Bus> = bus.clone();
        let pusher = Arc::new(PusherCredentials::new(
            store.pusher.clone(),
            sealer.clone(),
            node_bus,
        ));
        // Endpoints in Pusher's format are signed with the app's Pusher secret.
        hooks
            .service
            .set_pusher(Arc::new(herald_pusher::PusherHookFormat::new(
                pusher.clone(),
            )));
        let credentials = store.credentials.clone();
        let queue = store.jobs.clone();
        let senders = Arc::new(Senders::new(
            credentials.clone(),
            sealer,
            settings.providers.endpoints.clone(),
            settings.outbound.clone(),
        ));
        // Credentials changed or an app deleted, on any node: its provider clients are dropped,
        // and so is its cached Pusher set.
        caches.set_listener(Arc::new(Listeners(vec![senders.clone(), pusher.cache()])));
        let deliverer = Arc::new(Deliverer::new(
            queue,
            devices.clone(),
            engine.clone(),
            senders,
            Arc::new(WorkerStats::default()),
            DeliveryConfig {
                clustered: settings.cluster.shared_store(),
                ..settings.providers.delivery.clone()
            },
        ));
        let inbox = Arc::new(
            Inbox::new(publisher.clone(), devices.clone(), usage.clone())
                .with_delivery(deliverer.clone()),
        );
        // Devices registered and deactivated, acks and provider sends reach the webhooks
        // (herald-push tells them through its observer seam; it does not know herald-hooks).
        let push_hooks: Arc<dyn PushObserver> = Arc::new(PushHooks::new(hooks.service.clone()));
        deliverer.observe(push_hooks.clone());
        inbox.observe(push_hooks);
        Ok(Parts {
            credentials,
            deliverer,
            delivery_task: parking_lot::Mutex::new(None),
            hooks,
            pusher,
            engine,
            store,
            tenancy: registry,
            devices,
            publisher,
            bus,
            tokens,
            usage,
            inbox,
        })
    }

    /// Starts the provider delivery worker; it stops at `shutdown`, finishing the batch it is
    /// sending.
    pub(crate) fn start_delivery(&self, shutdown: &CancellationToken) {
        let task = tokio::spawn(self.deliverer.clone().run(shutdown.clone()));
        *self.delivery_task.lock() = Some(task);
    }

    /// Loads the webhook endpoints (the lifecycle listener joins if there is one) and starts
    /// the webhook tasks; they stop in [`Parts::close`], once the connections are gone.
    pub(crate) async fn start_hooks(&self) {
        self.hooks.start().await;
    }

    /// The transports' shared state; starts the keep-alive clock, which stops at `shutdown`.
    pub(crate) fn edge(
        &self,
        settings: &ServerSettings,
        shutdown: &CancellationToken,
    ) -> Arc<Edge> {
        Arc::new(Edge {
            engine: self.engine.clone(),
            publisher: self.publisher.clone(),
            tokens: self.tokens.clone(),
            api_keys: self.bus.caches().keys.clone(),
            inbox: self.inbox.clone(),
            usage: self.usage.clone(),
            live: self.bus.caches().live.clone(),
            settings: settings.edge.clone(),
            shutdown: shutdown.clone(),
            connections: TaskTracker::new(),
            sessions: (settings.http_workers > 0).then(tokio::runtime::Handle::current),
            keepalive: KeepAlive::start(settings.edge.ping_interval, shutdown.clone()),
            limits: Arc::new(Limiters::new(settings.limits.clone())),
            parking: parking(settings.edge.park_idle_after, shutdown),
            attached: Default::default(),
        })
    }

    /// Loads the publisher keys into this node's caches: the configured one (stored as a hash,
    /// for the default app, and announced on the bus), plus every app's stored keys. With none
    /// configured and none stored for the default app, one is generated, stored hashed,
    /// announced and returned (the only time it is seen).
    pub(crate) async fn publisher_keys(
        &self,
        settings: &ServerSettings,
    ) -> Result<Option<String>, ServerError> {
        let registry = self.tenancy.as_ref();
        // Both the configured key and a generated one go out as bus events: nodes already
        // running over a shared store honour them now, not at their next start.
        if let Some(key) = &settings.api_key {
            let mut keep = vec![hash_api_key(key)];
            let mut adds = vec![(keep[0].clone(), CONFIGURED)];
            if let Some(previous) = &settings.previous_api_key {
                keep.push(hash_api_key(previous));
                adds.push((keep[1].clone(), CONFIGURED_PREVIOUS));
            }
            for (hash, label) in adds {
                registry
                    .add_key(&default_app_key(hash.clone(), label))
                    .await?;
                self.bus.publish(CacheEvent::KeyAdded {
                    app: AppId::default_app(),
                    hash,
                });
            }
            // A configured key replaces the one configured before it: that one stops working
            // now (unless kept as previous_api_key), instead of staying valid for ever.
            for old in registry.keys().await? {
                let configured = old.label == CONFIGURED || old.label == CONFIGURED_PREVIOUS;
                if old.app.is_default() && configured && !keep.contains(&old.hash) {
                    registry.remove_key(&old.app, &old.id).await?;
                    self.bus.publish(CacheEvent::KeyRemoved {
                        app: old.app.clone(),
                        key_id: old.id.clone(),
                    });
                    tracing::warn!(
                        key_id = %old.id,
                        "the publisher key configured before no longer works: api_key changed \
                         (set previous_api_key to keep it valid while clients move over)"
                    );
                }
            }
        }
        let stored = registry.keys().await?;
        let caches = self.bus.caches();
        let mut generated = None;
        if !stored.iter().any(|k| k.app.is_default()) {
            let key = generate_secret("hk_");
            let hash = hash_api_key(&key);
            registry
                .add_key(&default_app_key(hash.clone(), "generated"))
                .await?;
            self.bus.publish(CacheEvent::KeyAdded {
                app: AppId::default_app(),
                hash,
            });
            generated = Some(key);
        }
        for k in stored {
            caches.apply(&CacheEvent::KeyAdded {
                app: k.app,
                hash: k.hash,
            });
        }
        Ok(generated)
    }

    /// The HTTP router: the transports' routes, the publisher and admin API, the admin
    /// dashboard's pages, and JSON answers for unknown paths and methods, then Pusher's HTTP
    /// API and client protocol (merged after the layer that makes errors JSON: Pusher's
    /// answers are its plain text); with it, the same
    /// API's one-message publish for the listener to answer without the router
    /// ([`herald_edge::direct_publish`]).
    pub(crate) fn router(
        &self,
        settings: &ServerSettings,
        edge: Arc<Edge>,
        metrics: PrometheusHandle,
        mqtt: Option<Router>,
    ) -> Result<(Router, DirectPublish), ServerError> {
        let api = Arc::new(herald_api::Api {
            engine: self.engine.clone(),
            publisher: self.publisher.clone(),
            keys: self.bus.caches().keys.clone(),
            admin_key_hash: settings.admin_key.as_deref().map(hash_api_key),
            metrics_token_hash: settings.metrics_token.as_deref().map(hash_api_key),
            tenancy: self.tenancy.clone(),
            devices: self.devices.clone(),
            inbox: self.inbox.clone(),
            tokens: self.tokens.clone(),
            usage: self.usage.clone(),
            live: self.bus.caches().live.clone(),
            bus: self.bus.clone(),
            presence: self.bus.presence(),
            max_message_bytes: settings.edge.max_frame_bytes,
            metrics: {
                // A deleted app's series leave the page with it.
                let usage = self.usage.clone();
                Arc::new(move || crate::metrics::render(&metrics, &usage.deleted_apps()))
            },
            credentials: self.credentials.clone(),
            deliverer: self.deliverer.clone(),
            sessions: self.sessions(settings)?,
            audit: self.store.audit.clone(),
            audit_retention: settings.audit_retention,
            limits: edge.limits.clone(),
            shutdown: edge.shutdown.clone(),
            destinations: settings.outbound.clone(),
            hooks: self.hooks.service.clone(),
            pusher: self.pusher.clone(),
        });
        let publisher = api.clone();
        let direct: DirectPublish = Arc::new(move |request| {
            let answer = herald_api::publish_read(
                publisher.clone(),
                request.path,
                request.headers,
                request.body,
            );
            Box::pin(async move {
                let answer = answer.await;
                // Counted as the router counts the same publish.
                crate::http_metrics::record(crate::http_metrics::CHANNEL_MESSAGES, answer.status());
                answer
            })
        });
        let pusher_http = Arc::new(PusherHttp {
            credentials: self.pusher.clone(),
            publisher: self.publisher.clone(),
            usage: self.usage.clone(),
            limits: edge.limits.clone(),
            subscribers: self.bus.presence(),
            bus: self.bus.clone(),
            settings: HttpLimits::default(),
        });
        let pusher_clients = Arc::new(PusherClients {
            edge: edge.clone(),
            credentials: self.pusher.clone(),
            settings: settings.pusher,
            hooks: Some(self.hooks.service.clone()),
        });
        let router = herald_edge::router(edge)
            .merge(herald_api::router(api))
            .merge(herald_admin::router())
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed)
            .layer(axum::middleware::map_response(json_errors))
            .merge(herald_pusher::http::router(pusher_http))
            .merge(herald_pusher::serve::router(pusher_clients))
            // MQTT over WebSocket at `/mqtt`, when `mqtt.websocket` is on.
            .merge(mqtt.unwrap_or_default())
            // Outermost: counts the answer the client gets, by route and status class.
            .layer(axum::middleware::from_fn(crate::http_metrics::count));
        Ok((router, direct))
    }

    /// The dashboard's sessions: signed with a key derived from the token secret (every node of
    /// a cluster shares it, so any node accepts a session), with the configured lifetime.
    fn sessions(&self, settings: &ServerSettings) -> Result<herald_api::Sessions, ServerError> {
        let mut sessions = herald_api::Sessions::new(token_secret(settings)?.as_bytes());
        sessions.ttl = settings.admin.session_ttl;
        sessions.secure_cookie = settings.admin.secure_cookie;
        Ok(sessions)
    }

    /// Waits for the work pushes left running (audience counts) and stops the webhook tasks
    /// (the writer stores the departures of the connections that just closed), then closes the
    /// store (after its last commits).
    pub(crate) async fn close(&self) {
        // A cluster node's last lifecycle transitions (its channels vacated, its users offline
        // where it held the last) are told before the webhook writer stores what it holds.
        self.bus.stop_lifecycle().await;
        self.hooks.stop().await;
        let task = self.delivery_task.lock().take();
        if let Some(task) = task {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "the delivery worker failed");
            }
        }
        self.inbox.close().await;
        self.store.close().await;
        self.bus.shutdown().await;
    }
}

/// Several listeners of the caches' events, told in order.
struct Listeners(Vec<Arc<dyn CacheListener>>);

impl CacheListener for Listeners {
    fn applied(&self, event: &CacheEvent) {
        for listener in &self.0 {
            listener.applied(event);
        }
    }
}

/// Label of the default app's key that `api_key` configures.
const CONFIGURED: &str = "configured";
/// Label of the key `previous_api_key` keeps valid beside it.
const CONFIGURED_PREVIOUS: &str = "configured (previous)";

/// A publisher key of the default app, as stored (its short id is the start of its hash, as
/// for every app's keys).
fn default_app_key(hash: String, label: &str) -> KeyInfo {
    KeyInfo {
        app: AppId::default_app(),
        id: hash[..12].to_owned(),
        hash,
        label: label.to_owned(),
        created: herald_core::message::now_millis(),
    }
}

/// Most bytes of a non-JSON error body read to build its JSON form.
const PLAIN_ERROR_LIMIT: usize = 4096;

/// Every error the router answers is `{"error":{"code","message"}}`: what axum's extractors
/// answer themselves (a path that is not valid UTF-8 once decoded, a query it cannot read) as
/// plain text is turned into that form, with a code from its status. Successful answers and
/// JSON errors pass untouched (one comparison of the status).
async fn json_errors(response: axum::response::Response) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    if is_json {
        return response;
    }
    let code = match status {
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::TooLarge,
        StatusCode::REQUEST_TIMEOUT => ErrorCode::RequestTimeout,
        StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
        StatusCode::FORBIDDEN => ErrorCode::Forbidden,
        s if s.is_client_error() => ErrorCode::BadRequest,
        _ => ErrorCode::Internal,
    };
    let text = axum::body::to_bytes(response.into_body(), PLAIN_ERROR_LIMIT)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = match text.as_str() {
        t if t.contains("Invalid UTF-8") => {
            "the URL's path is not valid UTF-8 once percent-decoded: percent-encode UTF-8 bytes \
             only"
                .to_owned()
        }
        "" => status
            .canonical_reason()
            .unwrap_or("request refused")
            .to_owned(),
        t => t.replace('`', "'"),
    };
    let mut answer = herald_api::ApiError(HeraldError::new(code, message)).into_response();
    *answer.status_mut() = status;
    answer
}

async fn not_found() -> impl IntoResponse {
    herald_api::ApiError(HeraldError::new(
        ErrorCode::NotFound,
        "no such endpoint; see /v1/openapi.yaml",
    ))
}

async fn method_not_allowed() -> impl IntoResponse {
    herald_api::ApiError(HeraldError::new(
        ErrorCode::MethodNotAllowed,
        "this endpoint does not take that method; see /v1/openapi.yaml",
    ))
}

/// Idle connections' parking (off without a delay, or if its thread cannot start).
fn parking(after: Option<Duration>, shutdown: &CancellationToken) -> Parking {
    let Some(after) = after else {
        return Parking::disabled();
    };
    Parking::start(after, shutdown.clone()).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "idle connections will not park: the parking thread did not start");
        Parking::disabled()
    })
}
