//! TLS for provider connections: the public web roots (as APNs, FCM and push services are
//! reached), plus any extra root certificate the configuration gives (a mock provider's
//! self-signed certificate, a company proxy), an optional client certificate (APNs certificate
//! auth), and ALPN `h2`.

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

/// A TLS configuration that cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The extra root certificate is not PEM or not a certificate.
    #[error("the CA certificate is not a PEM certificate: {0}")]
    BadCa(String),
    /// The client certificate or its key cannot be read.
    #[error("the client certificate cannot be used: {0}")]
    BadClientCertificate(String),
}

/// A client certificate and its private key, both PEM.
#[derive(Clone)]
pub struct ClientIdentity {
    /// The certificate chain, PEM.
    pub cert_pem: Vec<u8>,
    /// The private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientIdentity { .. }")
    }
}

/// Parses every certificate in `pem`.
pub fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no certificate found".into());
    }
    Ok(certs)
}

/// Parses the first private key in `pem`.
pub fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    rustls_pemfile::private_key(&mut &pem[..])
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no private key found".into())
}

/// A client configuration speaking HTTP/2 (ALPN `h2`) that trusts the web roots and `extra_ca`
/// (PEM, any number of certificates), presenting `identity` when given.
pub fn client_config(
    extra_ca: Option<&[u8]>,
    identity: Option<&ClientIdentity>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(pem) = extra_ca {
        for cert in certificates(pem).map_err(TlsError::BadCa)? {
            roots
                .add(cert)
                .map_err(|e| TlsError::BadCa(e.to_string()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::BadCa(e.to_string()))?
        .with_root_certificates(roots);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some(id) => {
            let chain = certificates(&id.cert_pem).map_err(TlsError::BadClientCertificate)?;
            let key = private_key(&id.key_pem).map_err(TlsError::BadClientCertificate)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsError::BadClientCertificate(e.to_string()))?
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}
