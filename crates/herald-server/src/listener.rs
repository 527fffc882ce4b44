//! The HTTP/1.1 accept loop. Herald serves its router with hyper's HTTP/1 connection directly
//! (rather than `axum::serve`, whose protocol sniffing wraps sockets in a private type) so that
//! a WebSocket upgrade hands the transport back the plain `TcpStream`, which its lean frame loop
//! needs. A fresh connection whose first request is an SSE stream is served by the transport
//! itself, without hyper ([`herald_edge::sse::serve_if_sse`] looks first). Shutdown stops
//! accepting and asks every connection to finish its request.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use herald_edge::Edge;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Accepts connections on `listener` and serves `app` on each until `shutdown` is cancelled.
/// Returns the (closed) tracker of the HTTP connections still finishing, for the caller to wait
/// on within its shutdown grace.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    edge: Arc<Edge>,
    shutdown: CancellationToken,
) -> TaskTracker {
    let connections = TaskTracker::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let http = Arc::new(http);
    loop {
        let (tcp, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors or similar: say so, back off a moment, go on.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let _ = tcp.set_nodelay(true);
        let (app, http, edge, stop) = (app.clone(), http.clone(), edge.clone(), shutdown.clone());
        // The first request is looked at in the connection's own task, so a slow client holds up
        // nothing else.
        connections.spawn(async move {
            let Some(tcp) = herald_edge::sse::serve_if_sse(&edge, tcp).await else {
                return;
            };
            // Boxed, so a task that streams SSE itself is not sized for hyper's connection.
            Box::pin(serve_http(&http, tcp, app, stop)).await;
        });
    }
    drop(listener);
    connections.close();
    connections
}

/// Serves one connection with hyper until it closes, or until shutdown lets it finish its
/// request.
async fn serve_http(
    http: &hyper::server::conn::http1::Builder,
    tcp: TcpStream,
    app: Router,
    stop: CancellationToken,
) {
    let service = TowerToHyperService::new(app);
    let connection = http
        .serve_connection(TokioIo::new(tcp), service)
        .with_upgrades();
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => return,
        _ = stop.cancelled() => connection.as_mut().graceful_shutdown(),
    }
    let _ = connection.await;
}
