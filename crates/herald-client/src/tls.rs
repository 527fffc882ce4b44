//! TLS for `https://` and `wss://` servers: which certificates the client trusts. By default
//! the public web roots (webpki-roots); [`trust_ca_pem`] (the CLI's `--cacert FILE` or
//! `HERALD_CACERT`) adds a private CA, for every client this process makes from then on. The
//! HTTP clients ([`crate::api`], [`crate::sse`], [`crate::poll`]) and the WebSocket client
//! share the one configuration (ring, TLS 1.2 and 1.3; ALPN `http/1.1` for HTTP).

use std::sync::{Arc, RwLock};

use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

use crate::Error;

/// Extra trusted CA certificates (DER), added by [`trust_ca_pem`].
static EXTRA_ROOTS: RwLock<Vec<CertificateDer<'static>>> = RwLock::new(Vec::new());

/// Trusts the PEM certificates in `pem` (a private CA) besides the web roots, for clients made
/// after this call.
pub fn trust_ca_pem(pem: &[u8]) -> Result<(), Error> {
    let certs = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Tls(format!("the CA file is not valid PEM ({})", e.kind())))?;
    if certs.is_empty() {
        return Err(Error::Tls(
            "the CA file holds no PEM CERTIFICATE block".into(),
        ));
    }
    let mut roots = EXTRA_ROOTS.write().unwrap_or_else(|p| p.into_inner());
    roots.extend(certs);
    Ok(())
}

/// Reads `path` and trusts its PEM certificates ([`trust_ca_pem`]).
pub fn trust_ca_file(path: &std::path::Path) -> Result<(), Error> {
    let pem = std::fs::read(path)
        .map_err(|e| Error::Tls(format!("cannot read the CA file {}: {e}", path.display())))?;
    trust_ca_pem(&pem).map_err(|e| match e {
        Error::Tls(why) => Error::Tls(format!("{}: {why}", path.display())),
        other => other,
    })
}

/// The client configuration: web roots plus the trusted CAs, ALPN `alpn`.
pub fn client_config(alpn: &[&[u8]]) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for cert in EXTRA_ROOTS.read().unwrap_or_else(|p| p.into_inner()).iter() {
        // A CA the parser accepted but webpki cannot use is left out; the handshake then says
        // the server's certificate is unknown.
        let _ = roots.add(cert.clone());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("ring supports TLS 1.2 and 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// An HTTP client for the publisher API, SSE and long-poll, trusting what [`client_config`]
/// trusts.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .use_preconfigured_tls(Arc::unwrap_or_clone(client_config(&[b"http/1.1"])))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}
