//! TLS on the server's listeners: the certificate and key files ([`TlsFiles`], read by
//! [`certificate::load`]), the rustls server configurations built on them with modern defaults
//! (TLS 1.2 and 1.3 only, rustls' default cipher suites on the ring provider, ALPN `http/1.1`
//! on the HTTP ports), and [`ServerTls::reload`], which swaps the certificate for every new
//! handshake while open connections keep theirs (the `herald` binary calls it on SIGHUP).

pub mod certificate;

use std::sync::Arc;

use arc_swap::ArcSwap;
use herald_edge::conn::TlsAcceptor;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

pub use certificate::{CertificateInfo, TlsError, TlsFiles};

/// The certificate every new handshake gets; swapped whole by a reload.
#[derive(Debug)]
struct CurrentCertificate(ArcSwap<CertifiedKey>);

impl ResolvesServerCert for CurrentCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

/// A server's TLS: the files, the certificate being served, and the acceptors of its ports.
pub struct ServerTls {
    files: TlsFiles,
    current: Arc<CurrentCertificate>,
    /// For HTTP ports (the API and Meteor's subscriber port): ALPN `http/1.1`.
    http: TlsAcceptor,
    /// For line protocols (Meteor's controller port): no ALPN.
    lines: TlsAcceptor,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Loads `files` and builds the acceptors; logs the certificate at INFO and what is wrong
    /// with it at WARN.
    pub fn open(files: TlsFiles) -> Result<ServerTls, TlsError> {
        let (key, info) = certificate::load(&files)?;
        log_loaded(&files, &info, "TLS certificate loaded");
        let current = Arc::new(CurrentCertificate(ArcSwap::new(key)));
        let http = TlsAcceptor::new(server_config(current.clone(), &[b"http/1.1"]));
        let lines = TlsAcceptor::new(server_config(current.clone(), &[]));
        Ok(ServerTls {
            files,
            current,
            http,
            lines,
        })
    }

    /// Reads the files again and serves the new certificate to every new handshake; open
    /// connections keep the one they started with. On error the old certificate stays.
    pub fn reload(&self) -> Result<CertificateInfo, TlsError> {
        let (key, info) = certificate::load(&self.files)?;
        self.current.0.store(key);
        log_loaded(&self.files, &info, "TLS certificate reloaded");
        Ok(info)
    }

    /// The acceptor of HTTP ports.
    pub fn http_acceptor(&self) -> TlsAcceptor {
        self.http.clone()
    }

    /// The acceptor of line-protocol ports.
    pub fn line_acceptor(&self) -> TlsAcceptor {
        self.lines.clone()
    }
}

fn log_loaded(files: &TlsFiles, info: &CertificateInfo, what: &str) {
    tracing::info!(
        cert = %files.cert.display(),
        subject = %info.subject,
        issuer = %info.issuer,
        serial = %info.serial,
        not_after = %info.not_after_text,
        "{what}"
    );
    for warning in info.warnings() {
        tracing::warn!(cert = %files.cert.display(), key = %files.key.display(), "{warning}");
    }
}

/// TLS 1.2 and 1.3 with rustls' default cipher suites (ring), no client certificates, the
/// certificate from `current`, and `alpn` (empty: none).
fn server_config(current: Arc<CurrentCertificate>, alpn: &[&[u8]]) -> Arc<ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("ring supports TLS 1.2 and 1.3")
        .with_no_client_auth()
        .with_cert_resolver(current);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}
