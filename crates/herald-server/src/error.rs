//! [`ServerError`]: why a server could not start or did not stop cleanly. Each variant names
//! the file, address or step, and keeps the underlying error as its source.

use std::net::SocketAddr;
use std::path::PathBuf;

use herald_core::log::StoreError;

/// Why a server could not start, or did not finish cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The `metrics` recorder could not be installed (another one was installed first).
    #[error("cannot install the metrics recorder")]
    Metrics(#[source] metrics_exporter_prometheus::BuildError),
    /// The metrics upkeep thread could not be started.
    #[error("cannot start the metrics upkeep thread")]
    MetricsUpkeep(#[source] std::io::Error),
    /// The data directory could not be created.
    #[error("cannot create data directory {}", path.display())]
    DataDir {
        /// The data directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Another server holds the data directory.
    #[error("the data directory {} is in use by another herald server{}: stop that one first, or give this one its own --data", path.display(), holder.map(|pid| format!(" (process {pid})")).unwrap_or_default())]
    DataDirInUse {
        /// The data directory.
        path: PathBuf,
        /// The process id the lock file names, if it could be read.
        holder: Option<u32>,
    },
    /// The data directory's lock file could not be opened or locked.
    #[error("cannot lock the data directory with {}", path.display())]
    DataDirLock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TLS certificate or key cannot be used.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// Meteor's ports were asked to serve TLS without a certificate.
    #[error("meteor_tls needs the server's certificate: set tls_cert and tls_key")]
    MeteorTlsWithoutCertificate,
    /// The MQTT listener was asked to serve TLS without a certificate.
    #[error("mqtt_tls needs the server's certificate: set tls_cert and tls_key")]
    MqttTlsWithoutCertificate,
    /// The runtime that serves HTTP requests (`http_workers`) could not be started.
    #[error("cannot start the HTTP runtime's threads")]
    HttpRuntime(#[source] std::io::Error),
    /// The fan-out thread could not be started.
    #[error("cannot start the fan-out thread")]
    FanOut(#[source] std::io::Error),
    /// The store could not be opened.
    #[error("cannot open the store in {place}")]
    OpenStore {
        /// The data directory, or the PostgreSQL server (without its password).
        place: String,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// The Redis bus could not start.
    #[error(transparent)]
    Bus(herald_bus_redis::BusError),
    /// A secret every node of a cluster must share was not configured.
    #[error("{what} must be configured when nodes share a PostgreSQL store ({how}): every node must use the same one, and it is not kept in the database")]
    ClusterSecret {
        /// Which secret.
        what: &'static str,
        /// Where to set it.
        how: &'static str,
    },
    /// Reading or writing apps, keys or usage at start failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The token-secret file could not be read.
    #[error("cannot read {}", path.display())]
    ReadSecret {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The generated token secret could not be written.
    #[error("cannot write {}", path.display())]
    WriteSecret {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The provider credentials key is not usable.
    #[error("the provider credentials key is not usable: {0}")]
    CredentialsKey(String),
    /// The HTTP client that fetches apps' JWKS key sets could not be built.
    #[error("cannot build the HTTP client that fetches JWKS key sets: {0}")]
    KeySetClient(String),
    /// The HTTP client that sends webhooks could not be built.
    #[error("cannot build the HTTP client that sends webhooks: {0}")]
    HookClient(String),
    /// A listener could not be bound; `what` is empty for HTTP, else ` (meteor)`,
    /// ` (meteor-control)` or ` (mqtt)`.
    #[error("cannot listen on {addr}{what}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// Which port, as the message says it.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server's task panicked or was cancelled.
    #[error("the server task failed")]
    Task(#[source] tokio::task::JoinError),
}
