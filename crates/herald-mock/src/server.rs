//! The HTTP/2-over-TLS accept loop every mock provider runs: TLS handshake, HTTP/2 with the
//! mock's `SETTINGS_MAX_CONCURRENT_STREAMS`, one task per request that reads the whole body and
//! hands it to the mock's handler, and an optional GOAWAY after a number of requests on one
//! connection (what APNs does to rebalance connections).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::{Request, Response};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util_free::Shutdown;

use crate::tls::MockTls;

/// A handler's answer: status and headers, and the body.
pub type Answer = (Response<()>, Bytes);

/// What a mock does with one request (its head and whole body).
pub type Handler =
    Arc<dyn Fn(Request<()>, Bytes) -> Pin<Box<dyn Future<Output = Answer> + Send>> + Send + Sync>;

/// How the accept loop treats connections.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` announced to clients.
    pub max_concurrent_streams: u32,
    /// Send GOAWAY after this many requests on one connection (finishing those in flight).
    pub goaway_after: Option<u64>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            max_concurrent_streams: 1000,
            goaway_after: None,
        }
    }
}

mod tokio_util_free {
    //! A stop signal without another dependency: the accept loop ends when the sender drops.
    pub type Shutdown = tokio::sync::watch::Receiver<()>;
}

/// A running mock server: its address; dropping it (or calling [`RunningServer::stop`]) stops
/// the accept loop and every connection.
#[derive(Debug)]
pub struct RunningServer {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: tokio::sync::watch::Sender<()>,
}

impl RunningServer {
    /// Stops accepting and closes every connection.
    pub fn stop(self) {
        drop(self.stop);
    }
}

/// Serves `handler` on `listener` with `tls` until the returned server is dropped.
pub fn serve(
    listener: TcpListener,
    tls: &MockTls,
    options: ServerOptions,
    handler: Handler,
) -> std::io::Result<RunningServer> {
    let addr = listener.local_addr()?;
    let (stop, shutdown) = tokio::sync::watch::channel(());
    let acceptor = TlsAcceptor::from(tls.config.clone());
    tokio::spawn(accept_loop(listener, acceptor, options, handler, shutdown));
    Ok(RunningServer { addr, stop })
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    options: ServerOptions,
    handler: Handler,
    mut shutdown: Shutdown,
) {
    loop {
        let (tcp, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(error = %e, "mock accept failed");
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let options = options.clone();
        let handler = handler.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            if let Err(e) = connection(tcp, acceptor, options, handler, shutdown).await {
                tracing::debug!(error = %e, "mock connection ended");
            }
        });
    }
}

async fn connection(
    tcp: tokio::net::TcpStream,
    acceptor: TlsAcceptor,
    options: ServerOptions,
    handler: Handler,
    mut shutdown: Shutdown,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let tls = acceptor.accept(tcp).await?;
    let mut conn = h2::server::Builder::new()
        .max_concurrent_streams(options.max_concurrent_streams)
        .handshake::<_, Bytes>(tls)
        .await?;
    let mut served: u64 = 0;
    loop {
        let next = tokio::select! {
            next = conn.accept() => next,
            _ = shutdown.changed() => return Ok(()),
        };
        let Some(request) = next else { return Ok(()) };
        let (request, mut respond) = request?;
        served += 1;
        if options.goaway_after.is_some_and(|n| served == n) {
            conn.graceful_shutdown();
        }
        let handler = handler.clone();
        tokio::spawn(async move {
            let (head, mut body) = request.into_parts();
            let mut data = BytesMut::new();
            while let Some(chunk) = body.data().await {
                let Ok(chunk) = chunk else { return };
                let _ = body.flow_control().release_capacity(chunk.len());
                data.extend_from_slice(&chunk);
            }
            let (response, bytes) = handler(Request::from_parts(head, ()), data.freeze()).await;
            let empty = bytes.is_empty();
            let Ok(mut send) = respond.send_response(response, empty) else {
                return;
            };
            if !empty {
                let _ = send.send_data(bytes, true);
            }
        });
    }
}
