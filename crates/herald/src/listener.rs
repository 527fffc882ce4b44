//! The HTTP/1.1 accept loop. Herald serves its router with hyper's HTTP/1 connection directly
//! (rather than `axum::serve`, whose protocol sniffing wraps sockets in a private type) so that
//! a WebSocket upgrade hands the transport back the plain `TcpStream`, which its lean frame loop
//! needs. Shutdown stops accepting and asks every connection to finish its request.

use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Accepts connections on `listener` and serves `app` on each until `shutdown` is cancelled.
/// Returns the (closed) tracker of the HTTP connections still finishing, for the caller to wait
/// on within its shutdown grace.
pub async fn serve(listener: TcpListener, app: Router, shutdown: CancellationToken) -> TaskTracker {
    let connections = TaskTracker::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
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
        let service = TowerToHyperService::new(app.clone());
        let connection = http
            .serve_connection(TokioIo::new(tcp), service)
            .with_upgrades();
        let stop = shutdown.clone();
        connections.spawn(async move {
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                _ = stop.cancelled() => connection.as_mut().graceful_shutdown(),
            }
            let _ = connection.await;
        });
    }
    drop(listener);
    connections.close();
    connections
}
