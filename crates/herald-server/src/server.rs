//! Starting a server and the handle on a running one: [`Server::builder`] →
//! [`ServerBuilder::start`] binds every listener and returns a [`RunningServer`], which knows
//! its addresses and shuts down in order: stop accepting, tell every connection why, wait for
//! them within the grace period, finish background work, close the store.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use herald_core::lifecycle::LifecycleListener;
use herald_edge::conn::TlsAcceptor;
use herald_edge::Edge;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::data_dir::DataDirLock;
use crate::error::ServerError;
use crate::http_runtime::HttpRuntime;
use crate::meteor::MeteorListeners;
use crate::mqtt::MqttListener;
use crate::settings::ServerSettings;
use crate::tls::{CertificateInfo, ServerTls, TlsError};
use crate::usage_writer::write_usage;
use crate::wiring::Parts;

/// A Herald server; start one with [`Server::builder`].
pub struct Server;

impl Server {
    /// A builder for a server with `settings`.
    pub fn builder(settings: ServerSettings) -> ServerBuilder {
        ServerBuilder {
            settings,
            metrics: None,
            shutdown: None,
            lifecycle: Vec::new(),
        }
    }
}

/// Options of a server about to start.
pub struct ServerBuilder {
    settings: ServerSettings,
    metrics: Option<PrometheusHandle>,
    shutdown: Option<CancellationToken>,
    /// Listeners joined to the node's lifecycle registry at start ([`ServerBuilder::lifecycle_listener`]).
    lifecycle: Vec<Arc<dyn LifecycleListener>>,
}

impl ServerBuilder {
    /// Tells `listener` of the node's lifecycle events (connections, subscriptions, channels
    /// occupied and vacated, [`herald_core::lifecycle`]); in a cluster, of each channel
    /// transition and each lost node's departures once, on one node (every node must have
    /// the same listeners). It joins before anything is served.
    pub fn lifecycle_listener(mut self, listener: Arc<dyn LifecycleListener>) -> ServerBuilder {
        self.lifecycle.push(listener);
        self
    }

    /// Renders `/metrics` with `handle` (a recorder the caller installed) instead of the one
    /// this crate installs for the process on first use.
    pub fn metrics(mut self, handle: PrometheusHandle) -> ServerBuilder {
        self.metrics = Some(handle);
        self
    }

    /// Also shuts the server down when `token` is cancelled (for example, one token for several
    /// servers). A server that fails to start does not cancel it.
    pub fn shutdown_on(mut self, token: CancellationToken) -> ServerBuilder {
        self.shutdown = Some(token);
        self
    }

    /// Opens the store, binds every listener and starts serving (inside a tokio runtime).
    /// Nothing is left running or open if this fails; a publisher key is generated only once
    /// nothing else can fail.
    pub async fn start(self) -> Result<RunningServer, ServerError> {
        let ServerBuilder {
            settings,
            metrics,
            shutdown,
            lifecycle,
        } = self;
        let metrics = match metrics {
            Some(handle) => {
                // The caller's recorder gets the `# HELP` lines too.
                crate::metrics::describe_metrics();
                handle
            }
            None => crate::metrics::recorder()?,
        };
        let shutdown = shutdown.map(|t| t.child_token()).unwrap_or_default();
        // One node's data directory belongs to one server at a time; a cluster node keeps
        // nothing there (its secrets are configured, its store is PostgreSQL).
        let lock = match settings.cluster.shared_store() {
            true => None,
            false => Some(DataDirLock::acquire(&settings.data)?),
        };
        let (engine, bus, store) = Parts::open_store(&settings).await?;
        for listener in lifecycle {
            engine.lifecycle().join(listener);
        }
        let opened = Parts::load(&settings, engine, bus.clone(), store.clone()).await;
        let started = match opened {
            Ok(parts) => assemble(settings, parts, metrics, lock, &shutdown).await,
            Err(e) => Err(e),
        };
        if started.is_err() {
            shutdown.cancel();
            store.close().await;
            bus.shutdown().await;
        }
        started
    }
}

/// Binds the listeners (Meteor's first, then MQTT, then HTTP), settles the publisher keys, and spawns the
/// server's tasks. On error the caller cancels `shutdown` and closes the store.
async fn assemble(
    settings: ServerSettings,
    parts: Parts,
    metrics: PrometheusHandle,
    lock: Option<DataDirLock>,
    shutdown: &CancellationToken,
) -> Result<RunningServer, ServerError> {
    let http_runtime = HttpRuntime::start(settings.http_workers)?;
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    let http_workers = http_runtime
        .handle()
        .map_or(0, |h| h.metrics().num_workers());
    metrics::gauge!(crate::metrics::RUNTIME_WORKERS, "runtime" => "main").set(workers as f64);
    metrics::gauge!(crate::metrics::RUNTIME_WORKERS, "runtime" => "http").set(http_workers as f64);
    let edge = parts.edge(&settings, shutdown);
    let tls = settings.tls.clone().map(ServerTls::open).transpose()?;
    let meteor = MeteorListeners::bind(&settings.meteor, &edge, tls.as_ref())?;
    let mqtt = MqttListener::bind(&settings.mqtt, tls.as_ref())?;
    let listen = settings.listen;
    let listen_error = |source| ServerError::Listen {
        addr: listen,
        what: "",
        source,
    };
    let http = TcpListener::bind(listen).await.map_err(listen_error)?;
    let addresses = Addresses {
        http: http.local_addr().map_err(listen_error)?,
        meteor: meteor.as_ref().and_then(MeteorListeners::subscriber_addr),
        meteor_control: meteor.as_ref().and_then(MeteorListeners::controller_addr),
        mqtt: mqtt.as_ref().and_then(MqttListener::local_addr),
    };
    let generated_api_key = parts.publisher_keys(&settings).await?;
    // One set of persistent MQTT sessions for the TCP listener and `/mqtt` alike.
    let mqtt_sessions = crate::mqtt::start_sessions(&settings, &parts, &edge);
    if let Some(sessions) = &mqtt_sessions {
        // `$SYS/` reads the figures `/metrics` serves (herald-mqtt's `sys.rs`).
        let handle = metrics.clone();
        sessions.start_sys(Arc::new(move || handle.render()));
    }
    let mqtt_websocket = crate::mqtt::websocket_router(&settings.mqtt, &edge, &mqtt_sessions);
    let (router, direct_publish) =
        parts.router(&settings, edge.clone(), metrics, mqtt_websocket)?;
    parts.start_delivery(shutdown);
    // Before anything is served: a node with endpoints tells of its first connection.
    parts.start_hooks().await;

    let background = TaskTracker::new();
    background.spawn(write_usage(
        parts.usage.clone(),
        parts.tenancy.clone(),
        shutdown.clone(),
    ));
    background.spawn(crate::node::learn_from_other_nodes(
        parts.bus.clone(),
        parts.usage.clone(),
        parts.devices.clone(),
        shutdown.clone(),
    ));
    background.spawn(herald_api::audit::prune_periodically(
        parts.store.audit.clone(),
        settings.audit_retention,
        shutdown.clone(),
    ));
    if let Some(meteor) = meteor {
        meteor.serve(&background);
    }
    if let (Some(mqtt), Some(sessions)) = (mqtt, mqtt_sessions) {
        mqtt.serve(edge.clone(), sessions, &background);
    }
    background.close();
    tracing::info!(
        addr = %addresses.http,
        tls = tls.is_some(),
        store = %store_description(&settings),
        bus = if settings.cluster.redis.is_empty() { "local" } else { "redis" },
        workers,
        http_workers,
        "herald is serving"
    );
    let tls = tls.map(Arc::new);
    let serving = run(
        (http, tls.as_ref().map(|t| t.http_acceptor()), http_runtime),
        (router, direct_publish),
        edge,
        parts,
        background,
        shutdown.clone(),
        settings.shutdown_grace,
    );
    let finished = tokio::spawn(async move {
        serving.await;
        // Released only once the store is closed: a server started next on the directory
        // finds every file finished.
        drop(lock);
    });
    Ok(RunningServer {
        addresses,
        tls,
        generated_api_key,
        shutdown: shutdown.clone(),
        finished,
    })
}

/// Serves HTTP until shutdown, then drains connections within `grace`, waits for the
/// background tasks (the usage writer's last write, Meteor's and MQTT's accept loops) and
/// closes the store; the HTTP runtime stops last (work its requests started, such as counting
/// a broadcast's audience, may run there until the store closes).
async fn run(
    (http, tls, http_runtime): (TcpListener, Option<TlsAcceptor>, HttpRuntime),
    (router, direct_publish): (Router, herald_edge::direct_publish::Handler),
    edge: Arc<Edge>,
    parts: Parts,
    background: TaskTracker,
    shutdown: CancellationToken,
    grace: Duration,
) {
    let http = crate::listener::serve(
        http,
        router,
        direct_publish,
        edge.clone(),
        shutdown,
        tls,
        http_runtime.handle(),
    )
    .await;
    tracing::info!("shutting down: closing connections");
    edge.connections.close();
    let drained = async {
        http.wait().await;
        edge.connections.wait().await;
    };
    if tokio::time::timeout(grace, drained).await.is_err() {
        tracing::warn!(
            ?grace,
            "connections still open after the shutdown grace period"
        );
    }
    background.wait().await;
    parts.close().await;
    drop(http_runtime);
    tracing::info!("store closed; bye");
}

/// Where a running server listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addresses {
    /// The HTTP listener (API, WebSocket, SSE, long-poll).
    pub http: SocketAddr,
    /// Meteor's subscriber port, when configured.
    pub meteor: Option<SocketAddr>,
    /// Meteor's controller port, when configured.
    pub meteor_control: Option<SocketAddr>,
    /// The MQTT listener, when configured.
    pub mqtt: Option<SocketAddr>,
}

/// A started server. Dropping the handle leaves the server running; stop it with
/// [`RunningServer::shutdown`] (or cancel the token given to [`ServerBuilder::shutdown_on`] and
/// [`RunningServer::wait`]).
pub struct RunningServer {
    addresses: Addresses,
    tls: Option<Arc<ServerTls>>,
    generated_api_key: Option<String>,
    shutdown: CancellationToken,
    finished: JoinHandle<()>,
}

impl RunningServer {
    /// Where the server listens (the real ports when asked for port 0).
    pub fn addresses(&self) -> Addresses {
        self.addresses
    }

    /// The HTTP listener's address.
    pub fn http_addr(&self) -> SocketAddr {
        self.addresses.http
    }

    /// The publisher API key generated at this start, if none was configured or stored for the
    /// default app. It is stored only hashed: this is the one time it can be shown.
    pub fn generated_api_key(&self) -> Option<&str> {
        self.generated_api_key.as_deref()
    }

    /// Whether the HTTP listener serves TLS.
    pub fn serves_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Reads the TLS certificate and key files again: every new handshake (HTTP, and Meteor's
    /// ports and the MQTT listener when they serve TLS) gets the new certificate, open connections keep theirs. On
    /// error the old certificate stays. `None` when the server serves no TLS.
    pub fn reload_tls(&self) -> Option<Result<CertificateInfo, TlsError>> {
        self.tls.as_ref().map(|tls| tls.reload())
    }

    /// Starts shutting down without waiting; [`RunningServer::wait`] waits for the end.
    pub fn begin_shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Waits until the server has shut down (it runs until shutdown begins) and its store is
    /// closed.
    pub async fn wait(self) -> Result<(), ServerError> {
        self.finished.await.map_err(ServerError::Task)
    }

    /// Shuts down: stops accepting, tells every connected client why
    /// (`{"disconnect":{"code":"shutdown"}}`, or its Meteor mode's shutdown line), waits for
    /// connections to finish within the grace period, writes the usage totals and closes the
    /// store.
    pub async fn shutdown(self) -> Result<(), ServerError> {
        self.begin_shutdown();
        self.wait().await
    }
}

/// Where the store is, for the start-up line (never a password).
fn store_description(settings: &ServerSettings) -> String {
    match &settings.cluster.postgres {
        Some(url) => crate::settings::redact_url(url),
        None => format!(
            "sqlite {} (sync {})",
            settings.data.display(),
            settings.store.sync
        ),
    }
}
