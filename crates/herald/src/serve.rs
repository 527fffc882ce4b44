//! `herald serve`: turns the configuration into [`ServerSettings`], starts the server
//! ([`herald_server`]), prints where it listens, and on SIGTERM or Ctrl-C shuts it down
//! (connections drained, each told why, before the store closes).

use herald_server::vocabulary::{DeliveryConfig, EdgeSettings, PostgresOptions, ProviderEndpoints};
use herald_server::{ClusterSettings, MeteorPorts, ProviderSettings, Server, ServerSettings};

use crate::config::Config;

/// Runs the server with a validated configuration until shutdown.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    // Listening for the signal starts before the listeners do: a SIGTERM that arrives once a
    // client can connect then shuts down in order instead of killing the process.
    let signal = shutdown_signal();
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
    println!("herald listening on http://{}", addresses.http);
    signal.await;
    server.shutdown().await?;
    Ok(())
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
        token_secret: config.token_secret.clone(),
        edge: EdgeSettings {
            allow_anonymous: config.allow_anonymous,
            max_frame_bytes: config.max_frame_bytes,
            outbox_bytes: config.outbox_bytes,
            max_subscriptions: config.max_subscriptions,
            ping_interval: config.ping_interval,
            deadlines: config.deadlines,
        },
        shutdown_grace: config.shutdown_grace,
        namespaces: config.namespaces(),
        meteor: MeteorPorts {
            listen: meteor.listen,
            control: meteor.control,
            conf: meteor.conf.clone(),
            document_root: meteor.document_root.clone(),
            control_password: meteor.control_password.clone(),
        },
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
        },
    }
}

/// Resolves on SIGTERM or Ctrl-C. The SIGTERM handler is installed when this is called, not
/// when the future is first polled.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    async move {
        #[cfg(unix)]
        {
            let Some(mut term) = term else {
                return std::future::pending().await;
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
}
