//! What a server is started with: [`ServerSettings`] (addresses, data directory, secrets,
//! limits, history), [`MeteorPorts`] and [`MqttPort`]. Plain values, no command-line or file types: the
//! binary turns its layered configuration into these, and tests build them directly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use herald_core::jwks::JwksOptions;
use herald_core::limits::RateLimits;
use herald_core::namespace::Namespaces;
use herald_edge::EdgeSettings;
use herald_hooks::service::HooksConfig;
use herald_meteor::MeteorConf;
use herald_mqtt::settings::MqttSettings;
use herald_providers::destination::Destinations;
use herald_push::delivery::senders::ProviderEndpoints;
use herald_push::delivery::worker::DeliveryConfig;
use herald_pusher::settings::ClientSettings as PusherClientSettings;
use herald_store::{PostgresOptions, SqliteOptions};

/// Everything a [`crate::Server`] needs to start. `Debug` leaves the secrets out.
#[derive(Clone)]
pub struct ServerSettings {
    /// Address of the HTTP listener (port 0 picks a free port; the running server reports it).
    pub listen: SocketAddr,
    /// Data directory: the database and the generated token secret.
    pub data: PathBuf,
    /// How the SQLite store runs (durability, batch sizes).
    pub store: SqliteOptions,
    /// Publisher API key of the default app, stored hashed; `None` generates one on the first
    /// start (reported by [`crate::RunningServer::generated_api_key`]).
    pub api_key: Option<String>,
    /// The publisher key configured before `api_key`, kept valid beside it while its users move
    /// over; every other key configured before is removed at start.
    pub previous_api_key: Option<String>,
    /// Admin key; `None` turns app administration off.
    pub admin_key: Option<String>,
    /// Bearer token `GET /metrics` requires; `None` leaves it open (the usual setup behind a
    /// private network).
    pub metrics_token: Option<String>,
    /// Client-token secret; `None` uses (or first generates) [`crate::TOKEN_SECRET_FILE`] in
    /// the data directory.
    pub token_secret: Option<String>,
    /// The default app's secret before `token_secret`: tokens signed with it stay valid beside
    /// the current secret's while it is set (a rotation's overlap, ended by removing it).
    pub previous_token_secret: Option<String>,
    /// Limits and switches of the client transports. Its `max_frame_bytes` also bounds a
    /// published message's payload.
    pub edge: EdgeSettings,
    /// How long shutdown waits for connections to finish before closing the store anyway.
    pub shutdown_grace: Duration,
    /// Worker threads of the runtime that serves HTTP requests (the publisher and admin API,
    /// long-poll, the WebSocket handshake), apart from the runtime that runs WebSocket and SSE
    /// connections, so an answer never queues behind a fan-out's wakes. `0` serves HTTP on the
    /// caller's runtime, with everything else.
    pub http_workers: usize,
    /// Deliveries (a message times its subscribers on this node) that may wait for the fan-out
    /// before publishes to channels with subscribers here wait for room; `0` never makes them
    /// wait (see [`herald_core::fanout::backlog`]).
    pub fanout_backlog: usize,
    /// How long entries of the audit log of admin actions are kept.
    pub audit_retention: Duration,
    /// History and delivery options per channel-name prefix.
    pub namespaces: Namespaces,
    /// Meteor's subscriber and controller ports (off unless an address is set).
    pub meteor: MeteorPorts,
    /// The MQTT listener; off unless its address is set.
    pub mqtt: MqttPort,
    /// Pusher's client protocol at `/app/{key}` (the `[pusher]` table): the activity timeout,
    /// the pong timeout, client events a second.
    pub pusher: PusherClientSettings,
    /// Provider delivery: the credentials key, provider endpoints, the worker's settings.
    pub providers: ProviderSettings,
    /// Cluster mode: a shared PostgreSQL store and a Redis bus (both off: one node on SQLite).
    pub cluster: ClusterSettings,
    /// The admin dashboard's sessions.
    pub admin: AdminSettings,
    /// How apps' JWKS key sets are refetched and how long a connect waits for one.
    pub jwks: JwksOptions,
    /// Where requests to URLs that tenants give (Web Push endpoints, JWKS URLs) may go: public
    /// addresses, and the ranges the operator allows (`outbound_allow`).
    pub outbound: Destinations,
    /// Rate limits (the `[limits]` table): per app and publisher key, per WebSocket
    /// connection, per source address. Counted by each node on its own.
    pub limits: RateLimits,
    /// TLS on the HTTP listener (and on Meteor's ports with [`MeteorPorts::tls`]): the
    /// certificate and key files; `None` serves plain TCP.
    pub tls: Option<crate::tls::TlsFiles>,
    /// Webhooks (the `[hooks]` table): how apps' lifecycle events are batched, retried and
    /// bounded on their way to the endpoints the apps registered. Their URLs are checked
    /// against [`ServerSettings::outbound`].
    pub hooks: HooksConfig,
}

/// The admin dashboard (`/admin`): how long a login lasts and how its cookie is marked.
#[derive(Debug, Clone)]
pub struct AdminSettings {
    /// How long a dashboard session lasts from its login.
    pub session_ttl: Duration,
    /// Mark the session cookie `Secure`: the server is reached over https (through a proxy
    /// that terminates TLS), so browsers never send the cookie over plain http.
    pub secure_cookie: bool,
}

impl Default for AdminSettings {
    fn default() -> Self {
        AdminSettings {
            session_ttl: Duration::from_secs(3600),
            secure_cookie: false,
        }
    }
}

/// Where the durable state lives and how nodes reach each other. Both empty (the default): one
/// node, SQLite in the data directory, [`herald_core::bus::LocalBus`].
#[derive(Clone, Default)]
pub struct ClusterSettings {
    /// A PostgreSQL URL (`postgres://user:password@host:port/database`, `?sslmode=require` for
    /// TLS): every node keeps its durable state there instead of SQLite.
    pub postgres: Option<String>,
    /// How the PostgreSQL store runs (pool size, group commit size).
    pub postgres_options: PostgresOptions,
    /// Redis URLs (`redis://host:port`, `rediss://` for TLS): one for a single Redis server,
    /// several (or `redis_cluster`) for Redis Cluster. Empty: no bus between nodes.
    pub redis: Vec<String>,
    /// The Redis URLs are nodes of a Redis Cluster.
    pub redis_cluster: bool,
    /// Extra CA certificates (PEM) trusted, besides the web roots, for `rediss://` URLs.
    pub redis_ca_pem: Option<Vec<u8>>,
    /// Redis messages the bus's receiver may fall behind by before it reads its channels from
    /// the log instead; `None`: the bus's default.
    pub redis_receive_queue: Option<usize>,
}

impl ClusterSettings {
    /// Whether several nodes may share this node's state (a PostgreSQL store).
    pub fn shared_store(&self) -> bool {
        self.postgres.is_some()
    }
}

impl std::fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSettings")
            .field("postgres", &self.postgres.as_deref().map(redact_url))
            .field("postgres_options", &self.postgres_options)
            .field(
                "redis",
                &self.redis.iter().map(|u| redact_url(u)).collect::<Vec<_>>(),
            )
            .field("redis_cluster", &self.redis_cluster)
            .field("redis_ca_pem", &self.redis_ca_pem.as_ref().map(|_| ".."))
            .field("redis_receive_queue", &self.redis_receive_queue)
            .finish()
    }
}

/// A URL with its password (`user:password@`) replaced by `***`, for logs and `Debug`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            if userinfo.contains(':') {
                format!("{scheme}://{user}:***@{host}{path}")
            } else {
                format!("{scheme}://{user}@{host}{path}")
            }
        }
        None => url.to_owned(),
    }
}

/// Provider delivery settings. `Debug` leaves the credentials key out.
#[derive(Clone, Default)]
pub struct ProviderSettings {
    /// Key (64 hex digits) that seals provider credentials at rest; `None` uses (or first
    /// generates) [`crate::CREDENTIALS_KEY_FILE`] in the data directory.
    pub credentials_key: Option<String>,
    /// Where provider connections go (overrides for mocks and proxies) and how many.
    pub endpoints: ProviderEndpoints,
    /// How the delivery worker leases, batches and times out.
    pub delivery: DeliveryConfig,
}

impl std::fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSettings")
            .field(
                "credentials_key",
                &self.credentials_key.as_ref().map(|_| "<set>"),
            )
            .field("endpoints", &self.endpoints)
            .field("delivery", &self.delivery)
            .finish()
    }
}

impl ServerSettings {
    /// Settings with Herald's defaults, listening on `listen` and keeping data in `data`.
    pub fn new(listen: SocketAddr, data: impl Into<PathBuf>) -> ServerSettings {
        ServerSettings {
            listen,
            data: data.into(),
            store: SqliteOptions::default(),
            api_key: None,
            admin_key: None,
            previous_api_key: None,
            metrics_token: None,
            token_secret: None,
            previous_token_secret: None,
            edge: EdgeSettings::default(),
            shutdown_grace: Duration::from_secs(10),
            http_workers: default_http_workers(),
            fanout_backlog: DEFAULT_FANOUT_BACKLOG,
            audit_retention: herald_api::audit::DEFAULT_RETENTION,
            namespaces: Namespaces::default(),
            meteor: MeteorPorts::default(),
            mqtt: MqttPort::default(),
            pusher: PusherClientSettings::default(),
            providers: ProviderSettings::default(),
            cluster: ClusterSettings::default(),
            admin: AdminSettings::default(),
            jwks: JwksOptions::default(),
            outbound: Destinations::public_only(),
            limits: RateLimits::default(),
            tls: None,
            hooks: HooksConfig::default(),
        }
    }
}

/// The default [`ServerSettings::fanout_backlog`].
pub use herald_core::fanout::backlog::DEFAULT_FANOUT_BACKLOG;

/// The default [`ServerSettings::http_workers`]: one per CPU, as many as the main runtime has.
pub fn default_http_workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

impl std::fmt::Debug for ServerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |secret: &Option<String>| secret.as_ref().map(|_| "<set>");
        f.debug_struct("ServerSettings")
            .field("listen", &self.listen)
            .field("data", &self.data)
            .field("store", &self.store)
            .field("api_key", &set(&self.api_key))
            .field("admin_key", &set(&self.admin_key))
            .field("metrics_token", &set(&self.metrics_token))
            .field("previous_api_key", &set(&self.previous_api_key))
            .field("token_secret", &set(&self.token_secret))
            .field("previous_token_secret", &set(&self.previous_token_secret))
            .field("edge", &self.edge)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("http_workers", &self.http_workers)
            .field("fanout_backlog", &self.fanout_backlog)
            .field("audit_retention", &self.audit_retention)
            .field("namespaces", &self.namespaces)
            .field("meteor", &self.meteor)
            .field("mqtt", &self.mqtt)
            .field("pusher", &self.pusher)
            .field("providers", &self.providers)
            .field("cluster", &self.cluster)
            .field("admin", &self.admin)
            .field("jwks", &self.jwks)
            .field("outbound", &self.outbound)
            .field("limits", &self.limits)
            .field("tls", &self.tls)
            .field("hooks", &self.hooks)
            .finish()
    }
}

/// Meteor's ports. `Debug` leaves the controller password out.
#[derive(Clone, Default)]
pub struct MeteorPorts {
    /// Subscriber port address; `None` = off.
    pub listen: Option<SocketAddr>,
    /// Controller port address; `None` = off.
    pub control: Option<SocketAddr>,
    /// Modes and templates; `None` = Meteor's shipped ones.
    pub conf: Option<MeteorConf>,
    /// Folder served under `/` of the subscriber port.
    pub document_root: Option<PathBuf>,
    /// Password a controller must send first, as `AUTH <password>`.
    pub control_password: Option<String>,
    /// Channel patterns (as in tokens) of the default-app channels the subscriber port may
    /// subscribe to; `None`: every channel.
    pub channels: Option<Vec<String>>,
    /// Both ports serve TLS with the server's certificate ([`ServerSettings::tls`], which
    /// must then be set).
    pub tls: bool,
}

impl MeteorPorts {
    /// Whether either port is configured.
    pub fn any(&self) -> bool {
        self.listen.is_some() || self.control.is_some()
    }
}

impl std::fmt::Debug for MeteorPorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeteorPorts")
            .field("listen", &self.listen)
            .field("control", &self.control)
            .field("conf", &self.conf.as_ref().map(|_| "<set>"))
            .field("document_root", &self.document_root)
            .field(
                "control_password",
                &self.control_password.as_ref().map(|_| "<set>"),
            )
            .field("channels", &self.channels)
            .field("tls", &self.tls)
            .finish()
    }
}

/// The MQTT listener (MQTT 3.1.1 and 5.0 over TCP, `herald-mqtt`), and MQTT over WebSocket at
/// `/mqtt` on the HTTP listener.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MqttPort {
    /// Its address (port 0 picks a free port; the running server reports it); `None` = off.
    pub listen: Option<SocketAddr>,
    /// It serves TLS with the server's certificate ([`ServerSettings::tls`], which must then
    /// be set).
    pub tls: bool,
    /// MQTT over WebSocket is served at `/mqtt` on the HTTP listener (`mqtt.websocket`), with
    /// or without [`MqttPort::listen`]; over TLS when the HTTP listener is. Default false.
    pub websocket: bool,
    /// What every MQTT connection announces and is held to.
    pub settings: MqttSettings,
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_never_reach_logs() {
        assert_eq!(
            redact_url("postgres://herald:s3cret@db:5432/herald?sslmode=require"),
            "postgres://herald:***@db:5432/herald?sslmode=require"
        );
        assert_eq!(
            redact_url("redis://:pw@cache:6379"),
            "redis://:***@cache:6379"
        );
        assert_eq!(redact_url("redis://cache:6379/0"), "redis://cache:6379/0");
        assert_eq!(redact_url("postgres://u@h/d"), "postgres://u@h/d");
        assert_eq!(redact_url("not a url"), "not a url");
    }
}
