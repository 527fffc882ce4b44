//! Reaching PostgreSQL: the connection URL (with the TLS modes Herald adds to what
//! `tokio-postgres` parses), TLS through rustls, and the connection pool.
//!
//! `sslmode` may be `disable`, `prefer` (the default), `require`, `verify-ca` or `verify-full`.
//! TLS is used when the URL asks for it (`require`, `verify-ca`, `verify-full`); `prefer` and
//! `disable` connect without it. Unlike libpq, every mode that uses TLS verifies the server's
//! certificate and name, against the Web PKI roots plus the PEM file `sslrootcert` names (a
//! private CA), if any: a push server should not send its tenants' data to whoever answers. Nothing here puts the password in an
//! error or a log line: a store is named by [`Target`] (host, port, database).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool::managed::QueueMode;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use herald_core::log::StoreError;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::Config;

/// Where a store connects, for messages: never the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Target(String);

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Target({})", self.0)
    }
}

/// A parsed connection URL: the driver's config, the TLS config when TLS is asked for, and
/// where it points.
pub(crate) struct Connection {
    pub config: Config,
    pub tls: Option<rustls::ClientConfig>,
    pub target: Target,
}

/// Parses `url` (`postgres://user:password@host:port/database?sslmode=...`). An error names the
/// option that is wrong, never the password.
pub(crate) fn parse(url: &str) -> Result<Connection, StoreError> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut kept = Vec::new();
    let mut root_cert = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match (key, value) {
            ("sslmode", "verify-ca" | "verify-full") => kept.push("sslmode=require".to_string()),
            ("sslrootcert", path) => root_cert = Some(path.to_string()),
            _ => kept.push(pair.to_string()),
        }
    }
    let rebuilt = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let mut config: Config = rebuilt
        .parse()
        .map_err(|e| StoreError::backend("invalid PostgreSQL URL", e))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(5));
    }
    let target = target_of(&config);
    let tls = match config.get_ssl_mode() {
        SslMode::Require => Some(client_config(root_cert.as_deref())?),
        _ => None,
    };
    Ok(Connection {
        config,
        tls,
        target,
    })
}

/// `host:port/database` of a config, for messages.
fn target_of(config: &Config) -> Target {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    Target(format!("{host}:{port}/{database}"))
}

/// A rustls client config trusting the Web PKI roots and the certificates in `root_cert`.
fn client_config(root_cert: Option<&str>) -> Result<rustls::ClientConfig, StoreError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = root_cert {
        let pem = std::fs::read(path)
            .map_err(|e| StoreError::backend(format!("cannot read sslrootcert {path}"), e))?;
        for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
            let cert =
                cert.map_err(|e| StoreError::backend(format!("invalid sslrootcert {path}"), e))?;
            roots
                .add(cert)
                .map_err(|e| StoreError::backend(format!("invalid sslrootcert {path}"), e))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::backend("cannot set up TLS", e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// A pool of at most `size` connections to `connection`. Connections are made on first use and
/// made again after a failure, so the pool recovers by itself once the server is back. The
/// connection returned last is handed out next (last in, first out): the writer, taking one for
/// each batch, keeps using the same connection and so the same PostgreSQL backend, whose caches
/// stay warm, instead of going round every backend the pool has opened.
pub(crate) fn pool(connection: &Connection, size: usize) -> Result<Pool, StoreError> {
    let manager_config = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    let manager = match &connection.tls {
        Some(tls) => Manager::from_config(
            connection.config.clone(),
            tokio_postgres_rustls::MakeRustlsConnect::new(tls.clone()),
            manager_config,
        ),
        None => Manager::from_config(
            connection.config.clone(),
            tokio_postgres::NoTls,
            manager_config,
        ),
    };
    let timeout = connection
        .config
        .get_connect_timeout()
        .copied()
        .unwrap_or(Duration::from_secs(5));
    Pool::builder(manager)
        .max_size(size.max(1))
        .runtime(Runtime::Tokio1)
        .queue_mode(QueueMode::Lifo)
        .create_timeout(Some(timeout))
        .wait_timeout(Some(timeout.saturating_mul(2)))
        .recycle_timeout(Some(timeout))
        .build()
        .map_err(|e| StoreError::backend("cannot build the PostgreSQL pool", e))
}

/// One connection outside the pool (for migrations), its driver task spawned.
pub(crate) async fn connect_once(
    connection: &Connection,
) -> Result<tokio_postgres::Client, StoreError> {
    let unreachable = |e| {
        StoreError::backend(
            format!("cannot connect to PostgreSQL at {}", connection.target),
            e,
        )
    };
    match &connection.tls {
        Some(tls) => {
            let make = tokio_postgres_rustls::MakeRustlsConnect::new(tls.clone());
            let (client, driver) = connection.config.connect(make).await.map_err(unreachable)?;
            tokio::spawn(driver);
            Ok(client)
        }
        None => {
            let (client, driver) = connection
                .config
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(unreachable)?;
            tokio::spawn(driver);
            Ok(client)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_never_shows_the_password() {
        let c = parse("postgres://herald:s3cret@db.example:6543/herald").unwrap();
        assert_eq!(c.target.to_string(), "db.example:6543/herald");
        assert!(!format!("{:?}", c.target).contains("s3cret"));
        assert!(c.tls.is_none(), "TLS only when the URL asks for it");
    }

    #[test]
    fn tls_modes() {
        let off = parse("postgres://h@127.0.0.1/x?sslmode=disable").unwrap();
        assert!(off.tls.is_none());
        let full = parse("postgres://h@127.0.0.1/x?sslmode=verify-full").unwrap();
        assert!(full.tls.is_some());
        assert_eq!(full.config.get_ssl_mode(), SslMode::Require);
        let err = parse("postgres://h:pw@127.0.0.1/x?sslmode=sometimes")
            .err()
            .map(|e| e.chain())
            .unwrap_or_default();
        assert!(err.contains("sslmode") && !err.contains("pw@"), "{err}");
        let missing = parse("postgres://h@127.0.0.1/x?sslmode=require&sslrootcert=/nonexistent")
            .err()
            .map(|e| e.chain())
            .unwrap_or_default();
        assert!(missing.contains("sslrootcert"), "{missing}");
    }
}
