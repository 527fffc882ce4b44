//! `herald serve`: opens the store, builds the engine, the transports and the API, listens
//! ([`crate::listener`]), and on SIGTERM or Ctrl-C drains connections (each told why) before
//! closing the store.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::response::IntoResponse;
use herald_core::auth::{generate_secret, hash_api_key, ApiKeys, Tokens};
use herald_core::hub::Hub;
use herald_core::log::ChannelLog;
use herald_core::publish::Publisher;
use herald_core::tenancy::Tenancy;
use herald_core::usage::UsageMeter;
use herald_core::{Engine, ErrorCode, HeraldError};
use herald_edge::meteor::{Meteor, MeteorConf, MeteorSettings};
use herald_edge::{Edge, EdgeSettings};
use herald_push::{DeviceRegistry, Inbox};
use herald_store::SqliteLog;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{read_secret_file, Config};

/// Runs the server with a validated configuration until shutdown.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let metrics = install_metrics()?;
    std::fs::create_dir_all(&config.data)
        .with_context(|| format!("cannot create data directory {}", config.data.display()))?;
    let hub = Hub::new();
    let fanout = herald_core::fanout::FanOut::start(hub.clone())
        .context("cannot start the fan-out thread")?;
    let store = SqliteLog::open(&config.data, config.sqlite_options(), fanout)
        .with_context(|| format!("cannot open the store in {}", config.data.display()))?;
    let log: Arc<dyn ChannelLog> = store.clone();
    let registry: Arc<dyn Tenancy> = store.clone();
    let devices: Arc<dyn DeviceRegistry> = store;
    let keys = Arc::new(publisher_keys(&config, registry.as_ref()).await?);
    let tokens = Arc::new(Tokens::new(token_secret(&config)?.as_bytes()));
    let usage = UsageMeter::new();
    for app in registry.apps().await? {
        if let Some(secret) = &app.token_secret {
            tokens.set_app(&app.id, secret.as_bytes());
        }
        usage.load(&app.id, registry.usage(&app.id).await?);
        let counters = usage.app(&app.id);
        counters.set_limits(app.limits);
        counters.devices_changed(devices.device_count(&app.id).await?, 0);
    }
    let mut namespaces = config.namespaces();
    herald_push::logs::register(&mut namespaces, herald_push::logs::DEFAULT_RETENTION);
    let engine = Arc::new(Engine::new(log.clone(), hub, namespaces));
    let publisher = Arc::new(Publisher::new(
        engine.clone(),
        usage.clone(),
        config.max_frame_bytes,
    ));
    let inbox = Arc::new(Inbox::new(
        publisher.clone(),
        devices.clone(),
        usage.clone(),
    ));
    let shutdown = CancellationToken::new();
    let usage_writer = tokio::spawn(write_usage(
        usage.clone(),
        registry.clone(),
        shutdown.clone(),
    ));
    let edge = Arc::new(Edge {
        engine: engine.clone(),
        publisher: publisher.clone(),
        tokens: tokens.clone(),
        inbox: inbox.clone(),
        usage: usage.clone(),
        settings: EdgeSettings {
            allow_anonymous: config.allow_anonymous,
            max_frame_bytes: config.max_frame_bytes,
            outbox_bytes: config.outbox_bytes,
            max_subscriptions: config.max_subscriptions,
            ping_interval: config.ping_interval,
        },
        shutdown: shutdown.clone(),
        connections: TaskTracker::new(),
        keepalive: herald_edge::KeepAlive::start(config.ping_interval, shutdown.clone()),
    });
    let api = Arc::new(herald_api::Api {
        engine,
        publisher,
        keys,
        admin_key_hash: config.admin_key.as_deref().map(hash_api_key),
        tenancy: registry,
        devices,
        inbox: inbox.clone(),
        tokens,
        usage,
        max_message_bytes: config.max_frame_bytes,
        metrics: Arc::new(move || metrics.render()),
    });
    let app = herald_edge::router(edge.clone())
        .merge(herald_api::router(api))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);

    start_meteor(&config, &edge).await?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    // Tests and scripts read this line to find the port when listening on port 0.
    println!("herald listening on http://{addr}");
    tracing::info!(%addr, data = %config.data.display(), sync = %config.sync, "herald is serving");
    let signal_token = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down: closing connections");
        signal_token.cancel();
    });
    let grace = config.shutdown_grace;
    let http = crate::listener::serve(listener, app, edge.clone(), shutdown.clone()).await;
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
    // The usage writer stores the final totals once shutdown is signalled.
    let _ = usage_writer.await;
    // Audience counts of the last broadcasts finish before the store closes.
    inbox.close().await;
    log.close().await;
    tracing::info!("store closed; bye");
    Ok(())
}

/// Opens the Meteor subscriber and controller ports that are configured, printing each address
/// (tests and scripts read these lines, which come before the HTTP one).
async fn start_meteor(config: &Config, edge: &Arc<Edge>) -> anyhow::Result<()> {
    let m = &config.meteor;
    if m.listen.is_none() && m.control.is_none() {
        return Ok(());
    }
    let conf = m.conf.clone().unwrap_or_else(MeteorConf::builtin);
    if !conf.ignored.is_empty() {
        tracing::info!(
            keys = ?conf.ignored,
            "meteor_conf keys Herald does not use (its own listen settings apply)"
        );
    }
    let meteor = Meteor::new(
        edge.clone(),
        MeteorSettings {
            conf,
            document_root: m.document_root.clone(),
            control_password: m.control_password.clone(),
        },
    );
    if let Some(addr) = m.listen {
        let listener =
            bind_meteor(addr).with_context(|| format!("cannot listen on {addr} (meteor)"))?;
        println!("herald meteor listening on {}", listener.local_addr()?);
        tokio::spawn(meteor.clone().serve_subscribers(listener));
    }
    if let Some(addr) = m.control {
        if !addr.ip().is_loopback() && m.control_password.is_none() {
            tracing::warn!(
                %addr,
                "the Meteor controller port is reachable from other machines and has no \
                 password: anyone who can connect can publish (set meteor_control_password)"
            );
        }
        let listener = bind_meteor(addr)
            .with_context(|| format!("cannot listen on {addr} (meteor-control)"))?;
        println!(
            "herald meteor-control listening on {}",
            listener.local_addr()?
        );
        tokio::spawn(meteor.serve_controllers(listener));
    }
    Ok(())
}

/// A listener with a deep accept queue: Deacon's long-poll clients all reconnect at once after
/// every message, and an overflowing queue turns into one-second SYN retries.
fn bind_meteor(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(METEOR_BACKLOG)
}

/// Accept-queue length asked for on the Meteor ports (the kernel caps it at somaxconn).
const METEOR_BACKLOG: u32 = 8192;

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

/// How often histogram samples are folded into their buckets.
const METRICS_UPKEEP_INTERVAL: Duration = Duration::from_secs(1);

fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    let buckets = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    ];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets)?
        .install_recorder()
        .context("cannot install the metrics recorder")?;
    // Histograms keep raw samples until upkeep folds them into buckets: at a million
    // deliveries a second, folding five seconds' worth took 7-21 ms. On its own thread, every
    // second, that never holds up a connection's task.
    let upkeep = handle.clone();
    std::thread::Builder::new()
        .name("herald-metrics".into())
        .spawn(move || loop {
            std::thread::sleep(METRICS_UPKEEP_INTERVAL);
            upkeep.run_upkeep();
        })
        .context("cannot start the metrics upkeep thread")?;
    Ok(handle)
}

/// How often usage totals are written back to the store.
const USAGE_WRITE_INTERVAL: Duration = Duration::from_secs(5);

/// Writes every app's usage totals to the store every few seconds, and once more at shutdown.
async fn write_usage(usage: Arc<UsageMeter>, registry: Arc<dyn Tenancy>, stop: CancellationToken) {
    let mut every = tokio::time::interval(USAGE_WRITE_INTERVAL);
    loop {
        let stopping = tokio::select! {
            _ = every.tick() => false,
            _ = stop.cancelled() => true,
        };
        for (app, totals) in usage.snapshot() {
            if let Err(e) = registry.set_usage(&app, totals).await {
                tracing::warn!(%app, error = %e, "cannot store usage counters");
            }
        }
        if stopping {
            return;
        }
    }
}

/// The publisher keys: the configured one (stored as a hash, for the default app), plus every
/// app's stored keys. With none configured and none stored for the default app, one is
/// generated and printed once.
async fn publisher_keys(config: &Config, registry: &dyn Tenancy) -> anyhow::Result<ApiKeys> {
    if let Some(key) = &config.api_key {
        registry
            .add_key(&default_app_key(hash_api_key(key), "configured"))
            .await?;
    }
    let stored = registry.keys().await?;
    let keys = ApiKeys::default();
    if !stored.iter().any(|k| k.app.is_default()) {
        let key = generate_secret("hk_");
        let hash = hash_api_key(&key);
        registry
            .add_key(&default_app_key(hash.clone(), "generated"))
            .await?;
        keys.insert(hash, herald_core::tenant::AppId::default_app());
        println!("Generated a publisher API key (shown only once, stored hashed): {key}");
        println!("Use it as: export HERALD_API_KEY={key}");
    }
    for k in stored {
        keys.insert(k.hash, k.app);
    }
    Ok(keys)
}

/// A publisher key of the default app, as stored (its short id is the start of its hash, as
/// for every app's keys).
fn default_app_key(hash: String, label: &str) -> herald_core::tenancy::KeyInfo {
    herald_core::tenancy::KeyInfo {
        app: herald_core::tenant::AppId::default_app(),
        id: hash[..12].to_owned(),
        hash,
        label: label.to_owned(),
        created: herald_core::message::now_millis(),
    }
}

/// The client-token secret: configured, or read from (or first generated into) the data dir.
fn token_secret(config: &Config) -> anyhow::Result<String> {
    if let Some(secret) = &config.token_secret {
        return Ok(secret.clone());
    }
    let path = config.token_secret_file();
    if let Some(secret) =
        read_secret_file(&path).with_context(|| format!("cannot read {}", path.display()))?
    {
        return Ok(secret);
    }
    let secret = generate_secret("");
    write_private(&path, &secret).with_context(|| format!("cannot write {}", path.display()))?;
    tracing::info!(path = %path.display(), "generated a client-token secret");
    Ok(secret)
}

fn write_private(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(path)?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
