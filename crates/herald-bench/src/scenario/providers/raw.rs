//! The raw baseline: HTTP/2 over TLS with `h2` and `tokio-rustls` directly, no Herald code. It
//! opens the same number of connections with the same HTTP/2 window settings as Herald's pool,
//! and sends ready-made requests on them, so the difference to Herald's client is what Herald
//! does per notification (request building, token handling, pooling, answer interpretation).

use std::sync::Arc;

use anyhow::{anyhow, Context};
use bytes::{Bytes, BytesMut};
use h2::client::SendRequest;
use http::{Request, StatusCode};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A TLS client configuration that trusts only `ca_pem` (the mock's certificate) and speaks h2.
pub(crate) fn tls_config(ca_pem: &[u8]) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots
            .add(cert.context("the mock's ca.pem")?)
            .context("the mock's ca.pem")?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// Opens `count` HTTP/2 connections to `url` (`https://host:port`).
pub(crate) async fn connect(
    url: &str,
    tls: Arc<rustls::ClientConfig>,
    count: usize,
) -> anyhow::Result<Vec<SendRequest<Bytes>>> {
    let uri: http::Uri = url.parse().with_context(|| format!("mock URL {url:?}"))?;
    let host = uri
        .host()
        .ok_or_else(|| anyhow!("no host in {url}"))?
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let connector = TlsConnector::from(tls);
    let mut senders = Vec::with_capacity(count);
    for _ in 0..count.max(1) {
        let tcp = TcpStream::connect((host.as_str(), port))
            .await
            .with_context(|| format!("connect to {host}:{port}"))?;
        tcp.set_nodelay(true)?;
        let name = ServerName::try_from(host.clone())?;
        let tls = connector.connect(name, tcp).await.context("TLS")?;
        // The same windows as herald-providers' pool, so only per-request work differs.
        let (sender, connection) = h2::client::Builder::new()
            .initial_window_size(1 << 20)
            .initial_connection_window_size(1 << 24)
            .handshake::<_, Bytes>(tls)
            .await
            .context("HTTP/2 handshake")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        senders.push(sender);
    }
    Ok(senders)
}

/// Sends one request with `body` (empty: none) and reads the whole answer.
pub(crate) async fn exchange(
    sender: SendRequest<Bytes>,
    request: Request<()>,
    body: Bytes,
) -> Result<(StatusCode, Bytes), String> {
    let mut sender = sender.ready().await.map_err(|e| e.to_string())?;
    let (response, mut stream) = sender
        .send_request(request, body.is_empty())
        .map_err(|e| e.to_string())?;
    if !body.is_empty() {
        stream.send_data(body, true).map_err(|e| e.to_string())?;
    }
    let (head, mut recv) = response.await.map_err(|e| e.to_string())?.into_parts();
    let mut data = BytesMut::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        let _ = recv.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    Ok((head.status, data.freeze()))
}

/// Turns an answer into the driver's result: `Ok` for `expected`, else the status and body.
pub(crate) fn expect(
    answer: Result<(StatusCode, Bytes), String>,
    expected: StatusCode,
) -> Result<(), String> {
    match answer {
        Ok((status, _)) if status == expected => Ok(()),
        Ok((status, body)) => Err(format!(
            "{status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        )),
        Err(e) => Err(e),
    }
}
