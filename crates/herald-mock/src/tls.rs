//! The self-signed certificate a mock provider serves, for `localhost`, `127.0.0.1` and any
//! extra names, and the rustls server configuration (ALPN `h2`) built on it.

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;

/// A certificate or TLS configuration that could not be made.
#[derive(Debug, thiserror::Error)]
#[error("mock TLS setup failed: {0}")]
pub struct TlsError(pub String);

/// A mock's certificate: its PEM (what a client adds as an extra root) and the TLS
/// configuration that serves it.
#[derive(Clone)]
pub struct MockTls {
    /// The certificate, PEM: give it to the client as its CA.
    pub cert_pem: String,
    /// Server configuration with ALPN `h2`.
    pub config: Arc<ServerConfig>,
}

impl std::fmt::Debug for MockTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MockTls { .. }")
    }
}

/// Makes a new self-signed certificate for `localhost`, `127.0.0.1` and `extra_names`.
pub fn self_signed(extra_names: &[&str]) -> Result<MockTls, TlsError> {
    self_signed_with_client_ca(extra_names, None)
}

/// Like [`self_signed`]; with `client_ca_pem`, a client must present a certificate that chains
/// to one of its certificates, or the handshake fails (APNs certificate auth).
pub fn self_signed_with_client_ca(
    extra_names: &[&str],
    client_ca_pem: Option<&str>,
) -> Result<MockTls, TlsError> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    names.extend(extra_names.iter().map(|n| n.to_string()));
    let certified =
        rcgen::generate_simple_self_signed(names).map_err(|e| TlsError(e.to_string()))?;
    let cert_pem = certified.cert.pem();
    let chain = vec![CertificateDer::from(certified.cert.der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()));
    // AES-128-GCM first, and the server's order wins: the cheapest suite of TLS 1.3 with AES-NI
    // (a client's default order asks for AES-256-GCM first).
    let mut provider = rustls::crypto::ring::default_provider();
    provider
        .cipher_suites
        .sort_by_key(|suite| suite.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    let provider = Arc::new(provider);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(e.to_string()))?;
    let builder = match client_ca_pem {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in rustls_pemfile::certs(&mut pem.as_bytes()) {
                let cert = cert.map_err(|e| TlsError(format!("client CA: {e}")))?;
                roots
                    .add(cert)
                    .map_err(|e| TlsError(format!("client CA: {e}")))?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|e| TlsError(format!("client CA: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    config.ignore_client_order = true;
    Ok(MockTls {
        cert_pem,
        config: Arc::new(config),
    })
}
