//! What a server is started with: [`ServerSettings`] (addresses, data directory, secrets,
//! limits, history) and [`MeteorPorts`]. Plain values, no command-line or file types: the
//! binary turns its layered configuration into these, and tests build them directly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use herald_core::namespace::Namespaces;
use herald_edge::EdgeSettings;
use herald_meteor::MeteorConf;
use herald_push::delivery::senders::ProviderEndpoints;
use herald_push::delivery::worker::DeliveryConfig;
use herald_store::SqliteOptions;

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
    /// Admin key; `None` turns app administration off.
    pub admin_key: Option<String>,
    /// Client-token secret; `None` uses (or first generates) [`crate::TOKEN_SECRET_FILE`] in
    /// the data directory.
    pub token_secret: Option<String>,
    /// Limits and switches of the client transports. Its `max_frame_bytes` also bounds a
    /// published message's payload.
    pub edge: EdgeSettings,
    /// How long shutdown waits for connections to finish before closing the store anyway.
    pub shutdown_grace: Duration,
    /// History and delivery options per channel-name prefix.
    pub namespaces: Namespaces,
    /// Meteor's subscriber and controller ports (off unless an address is set).
    pub meteor: MeteorPorts,
    /// Provider delivery: the credentials key, provider endpoints, the worker's settings.
    pub providers: ProviderSettings,
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
            token_secret: None,
            edge: EdgeSettings::default(),
            shutdown_grace: Duration::from_secs(10),
            namespaces: Namespaces::default(),
            meteor: MeteorPorts::default(),
            providers: ProviderSettings::default(),
        }
    }
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
            .field("token_secret", &set(&self.token_secret))
            .field("edge", &self.edge)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("namespaces", &self.namespaces)
            .field("meteor", &self.meteor)
            .field("providers", &self.providers)
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
            .finish()
    }
}
