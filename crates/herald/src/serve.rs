//! `herald serve`: turns the configuration into [`ServerSettings`], starts the server
//! ([`herald_server`]), prints where it listens, and on SIGTERM or Ctrl-C shuts it down
//! (connections drained, each told why, before the store closes). A second signal during that
//! shutdown exits at once (code 130), as a kill -9 would: every acknowledged write is already
//! durable. SIGHUP reloads the TLS certificate and key from their files (new handshakes get the
//! new certificate, open connections keep theirs; a reload that fails keeps the old one and says
//! why at ERROR).

use herald_server::vocabulary::{
    DeliveryConfig, Destinations, EdgeSettings, JwksOptions, PostgresOptions, ProviderEndpoints,
};
use herald_server::{
    AdminSettings, ClusterSettings, MeteorPorts, ProviderSettings, Server, ServerSettings,
};

use crate::config::Config;

/// Runs the server with a validated configuration until shutdown.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    // Listening for the signal starts before the listeners do: a SIGTERM that arrives once a
    // client can connect then shuts down in order instead of killing the process.
    let mut signals = Signals::install();
    survive_file_size_limit();
    warn_about_retention_from_meteor_conf(&config);
    if let crate::config::Source::Flag(flag) = config.source("token_secret") {
        tracing::warn!(
            "the client-token secret comes from {flag}, which other users of this machine can \
             see in the process list and which a restart without it forgets (every token is then \
             refused); prefer HERALD_TOKEN_SECRET, the config file, or the data directory's file"
        );
    }
    let server = Server::builder(settings(&config)).start().await?;
    // Tests and scripts read these lines, in this order, to find the ports when listening on
    // port 0.
    if let Some(key) = server.generated_api_key() {
        println!("Generated a publisher API key (shown only once, stored hashed): {key}");
        println!("Use it as: export HERALD_API_KEY={key}");
    }
    let addresses = server.addresses();
    if let Some(addr) = addresses.meteor {
        println!("herald meteor listening on {addr}");
    }
    if let Some(addr) = addresses.meteor_control {
        println!("herald meteor-control listening on {addr}");
    }
    if let Some(addr) = addresses.mqtt {
        println!("herald mqtt listening on {addr}");
    }
    let scheme = if server.serves_tls() { "https" } else { "http" };
    println!("herald listening on {scheme}://{}", addresses.http);
    let mut hangups = Hangups::install();
    loop {
        tokio::select! {
            _ = signals.next() => break,
            _ = hangups.next() => reload_tls(&server),
        }
    }
    eprintln!(
        "herald: shutting down (connections are told and drained, up to shutdown_grace); send \
         the signal again to exit at once"
    );
    tokio::select! {
        done = server.shutdown() => done?,
        _ = signals.next() => {
            eprintln!("herald: second signal, exiting now");
            std::process::exit(EXIT_ON_SECOND_SIGNAL);
        }
    }
    Ok(())
}

/// SIGXFSZ's number (the same on Linux, the BSDs and macOS).
#[cfg(unix)]
const SIGXFSZ: i32 = 25;

/// A write past the process's file-size limit (`RLIMIT_FSIZE`, e.g. systemd's `LimitFSIZE`)
/// raises SIGXFSZ, whose default action kills the process. Handling it instead makes the write
/// fail with `EFBIG`, which the store answers as a full disk (`507 insufficient_storage`), and
/// writes resume once the limit is raised. Each signal is logged.
fn survive_file_size_limit() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::from_raw(SIGXFSZ)) {
            Ok(mut file_size) => {
                tokio::spawn(async move {
                    while file_size.recv().await.is_some() {
                        tracing::warn!(
                            "a write went past the file-size limit (RLIMIT_FSIZE); it failed and \
                             the store answers insufficient_storage until the limit is raised"
                        );
                    }
                });
            }
            Err(e) => tracing::warn!(error = %e, "cannot handle SIGXFSZ"),
        }
    }
}

/// SIGHUP: reloads the TLS certificate, or says there is none to reload.
fn reload_tls(server: &herald_server::RunningServer) {
    match server.reload_tls() {
        // The server logged the new certificate at INFO.
        Some(Ok(_)) => {}
        Some(Err(e)) => {
            let mut reason = e.to_string();
            if let Some(source) = std::error::Error::source(&e) {
                reason = format!("{reason}: {source}");
            }
            tracing::error!(
                error = %reason,
                "TLS reload failed; still serving the previous certificate"
            );
        }
        None => tracing::info!("SIGHUP: no TLS certificate to reload (tls_cert is not set)"),
    }
}

/// SIGHUP, as a stream (never on platforms without it). Installed once the server runs, so a
/// SIGHUP before that terminates the process as it always did.
struct Hangups {
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl Hangups {
    fn install() -> Hangups {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Hangups {
                hup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        Hangups {}
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(hup) = &mut self.hup {
            hup.recv().await;
            return;
        }
        std::future::pending::<()>().await
    }
}

/// Exit code when a second signal cuts the shutdown short (128 + SIGINT, as shells report it).
pub const EXIT_ON_SECOND_SIGNAL: i32 = 130;

/// A meteord.conf's `MaxMessagesPerChannel` / `MaxMessageAge` become the default history of
/// every channel of every app (Meteor had one tenant); said at WARN so it is never a surprise.
fn warn_about_retention_from_meteor_conf(config: &Config) {
    use crate::config::Source;
    for (key, value) in [
        ("history.size", config.history.history_size.to_string()),
        ("history.age", format!("{:?}", config.history.history_age)),
    ] {
        if let Source::File { path, key: from } = config.source(key) {
            if from == "MaxMessagesPerChannel" || from == "MaxMessageAge" {
                tracing::warn!(
                    meteord_conf = %path.display(),
                    "{from} in the meteord.conf sets {key} = {value} for every channel of every \
                     app (not only the Meteor ones); set [history] in herald.toml (or a namespace) \
                     to choose otherwise"
                );
            }
        }
    }
}

/// The server's settings from the configuration.
fn settings(config: &Config) -> ServerSettings {
    let meteor = &config.meteor;
    ServerSettings {
        listen: config.listen,
        data: config.data.clone(),
        store: config.sqlite_options(),
        api_key: config.api_key.clone(),
        admin_key: config.admin_key.clone(),
        metrics_token: config.metrics_token.clone(),
        previous_api_key: config.previous_api_key.clone(),
        token_secret: config.token_secret.clone(),
        previous_token_secret: config.previous_token_secret.clone(),
        edge: EdgeSettings {
            allow_anonymous: config.allow_anonymous,
            max_frame_bytes: config.max_frame_bytes,
            outbox_bytes: config.outbox_bytes,
            catchup_bytes: config.catchup_bytes,
            tail_cache_bytes: config.tail_cache_bytes,
            max_subscriptions: config.max_subscriptions,
            ping_interval: config.ping_interval,
            deadlines: config.deadlines,
            park_idle_after: Some(config.park_idle_after).filter(|d| !d.is_zero()),
        },
        shutdown_grace: config.shutdown_grace,
        http_workers: config.http_workers,
        fanout_backlog: config.fanout_backlog,
        jwks: JwksOptions {
            min_refetch: config.jwks_min_refetch,
            fetch_timeout: config.jwks_fetch_timeout,
        },
        outbound: Destinations::allowing(config.outbound_allow.clone()),
        audit_retention: config.audit_retention,
        admin: AdminSettings {
            session_ttl: config.admin_session_ttl,
            secure_cookie: config.admin_cookie_secure,
        },
        namespaces: config.namespaces(),
        limits: config.limits.clone(),
        hooks: config.hooks.clone(),
        meteor: MeteorPorts {
            listen: meteor.listen,
            control: meteor.control,
            conf: meteor.conf.clone(),
            document_root: meteor.document_root.clone(),
            control_password: meteor.control_password.clone(),
            channels: meteor.channels.clone(),
            tls: meteor.tls,
        },
        mqtt: config.mqtt.clone(),
        pusher: config.pusher,
        providers: ProviderSettings {
            credentials_key: config.providers.credentials_key.clone(),
            endpoints: ProviderEndpoints {
                apns_url: config.providers.apns_url.clone(),
                fcm_url: config.providers.fcm_url.clone(),
                fcm_token_url: config.providers.fcm_token_url.clone(),
                extra_ca_pem: config.providers.ca_pem.clone(),
                connections: config.providers.connections,
            },
            delivery: DeliveryConfig {
                batch: config.providers.batch,
                lease: config.providers.lease,
                rounds: config.providers.rounds,
                ..DeliveryConfig::default()
            },
        },
        cluster: ClusterSettings {
            postgres: config.cluster.postgres.clone(),
            postgres_options: PostgresOptions {
                max_connections: config.cluster.postgres_pool,
                ..PostgresOptions::default()
            },
            redis: config.cluster.redis.clone(),
            redis_cluster: config.cluster.redis_cluster,
            redis_ca_pem: config.cluster.redis_ca_pem.clone(),
            redis_receive_queue: Some(config.cluster.redis_receive_queue),
        },
        tls: config.tls.as_ref().map(|t| t.files.clone()),
    }
}

/// SIGTERM and Ctrl-C (SIGINT), as a stream. The handlers are installed by
/// [`Signals::install`], not when first awaited, so a signal that arrives while the server
/// starts is not lost.
pub struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Installs the handlers.
    pub fn install() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Signals {
                term: signal(SignalKind::terminate()).ok(),
                interrupt: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// Resolves on the next SIGTERM or Ctrl-C.
    pub async fn next(&mut self) {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            tokio::select! {
                _ = recv(&mut self.term) => {}
                _ = recv(&mut self.interrupt) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
