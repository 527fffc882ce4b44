//! The HTTP/2-over-TLS accept loop every mock provider runs: TLS handshake, HTTP/2 with the
//! mock's `SETTINGS_MAX_CONCURRENT_STREAMS`, each request's whole body handed to the mock's
//! handler, and an optional GOAWAY after a number of requests on one connection (what APNs does
//! to rebalance connections).
//!
//! A request whose body has already arrived when its headers are accepted (the common case: a
//! client writes HEADERS and DATA together) is answered on the connection's own task when the
//! handler can answer at once ([`Reply::Now`]); a body still arriving, or a handler that must
//! wait or work long ([`Reply::Later`]), gets a task of its own, so one slow request never
//! holds up the connection. Requests h2 has already read are taken together before any is
//! answered, so their answers leave in one write rather than one each.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use h2::server::SendResponse;
use http::{Request, Response};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util_free::Shutdown;

use crate::tls::MockTls;

/// A handler's answer: status and headers, and the body.
pub type Answer = (Response<()>, Bytes);

/// A handler's answer to come.
pub type LaterAnswer = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// What a handler gives back for one request.
pub enum Reply {
    /// The answer, made at once: sent from the connection's task.
    Now(Answer),
    /// An answer that must wait (a held request) or takes long to make (decryption): awaited on
    /// a task of its own.
    Later(LaterAnswer),
}

/// What a mock does with one request (its head and whole body).
pub type Handler = Arc<dyn Fn(Request<()>, Bytes) -> Reply + Send + Sync>;

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
    tcp: TcpStream,
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
    let mut batch = Vec::new();
    loop {
        let next = tokio::select! {
            next = conn.accept() => next,
            _ = shutdown.changed() => return Ok(()),
        };
        let Some(request) = next else { return Ok(()) };
        batch.push(request?);
        // Every request h2 has already read is taken before any is answered, so that their
        // answers leave together at the next poll of the connection, in one write.
        let mut closed = false;
        while batch.len() < BATCH {
            match accept_now(&mut conn) {
                Some(Some(request)) => batch.push(request?),
                Some(None) => {
                    closed = true;
                    break;
                }
                None => break,
            }
        }
        for (request, respond) in batch.drain(..) {
            served += 1;
            if options.goaway_after.is_some_and(|n| served == n) {
                conn.graceful_shutdown();
            }
            serve_request(&handler, request, respond);
        }
        if closed {
            return Ok(());
        }
    }
}

/// The most requests taken from a connection before they are answered.
const BATCH: usize = 256;

/// The connection's next request if h2 has one without waiting (`Some(None)`: the connection
/// ended). Polled once with a waker that does nothing: the loop's next `accept().await` polls
/// again with a real one.
fn accept_now(
    conn: &mut h2::server::Connection<tokio_rustls::server::TlsStream<TcpStream>, Bytes>,
) -> Option<Option<Accepted>> {
    let mut context = Context::from_waker(Waker::noop());
    match std::pin::pin!(conn.accept()).poll(&mut context) {
        Poll::Ready(next) => Some(next),
        Poll::Pending => None,
    }
}

/// What h2 gives for one accepted request.
type Accepted = Result<(Request<h2::RecvStream>, SendResponse<Bytes>), h2::Error>;

/// Answers one request: on this task when its body is here and the handler answers at once,
/// else on a task of its own.
fn serve_request(
    handler: &Handler,
    request: Request<h2::RecvStream>,
    mut respond: SendResponse<Bytes>,
) {
    let (head, mut body) = request.into_parts();
    match body_so_far(&mut body) {
        Body::Complete(data) => match handler(Request::from_parts(head, ()), data) {
            Reply::Now(answer) => respond_with(&mut respond, answer),
            Reply::Later(later) => {
                tokio::spawn(async move { respond_with(&mut respond, later.await) });
            }
        },
        Body::Arriving(mut data) => {
            let handler = handler.clone();
            tokio::spawn(async move {
                while let Some(chunk) = body.data().await {
                    let Ok(chunk) = chunk else { return };
                    let _ = body.flow_control().release_capacity(chunk.len());
                    data.extend_from_slice(&chunk);
                }
                let answer = match handler(Request::from_parts(head, ()), data.freeze()) {
                    Reply::Now(answer) => answer,
                    Reply::Later(later) => later.await,
                };
                respond_with(&mut respond, answer);
            });
        }
        Body::Failed => {}
    }
}

/// A request body as far as it has arrived.
enum Body {
    /// All of it.
    Complete(Bytes),
    /// What has arrived; more is to come.
    Arriving(BytesMut),
    /// The stream failed.
    Failed,
}

/// Takes what has arrived of `body` without waiting: it is polled with a waker that does
/// nothing, and a body still arriving is read on, with a real waker, by a task of its own.
fn body_so_far(body: &mut h2::RecvStream) -> Body {
    if body.is_end_stream() {
        return Body::Complete(Bytes::new());
    }
    let mut context = Context::from_waker(Waker::noop());
    // One chunk (the common case) is kept as it came, uncopied.
    let mut first: Option<Bytes> = None;
    let mut joined = BytesMut::new();
    loop {
        match body.poll_data(&mut context) {
            Poll::Ready(Some(Ok(chunk))) => {
                let _ = body.flow_control().release_capacity(chunk.len());
                match first.take() {
                    None if joined.is_empty() => first = Some(chunk),
                    earlier => {
                        if let Some(earlier) = earlier {
                            joined.extend_from_slice(&earlier);
                        }
                        joined.extend_from_slice(&chunk);
                    }
                }
            }
            Poll::Ready(Some(Err(_))) => return Body::Failed,
            Poll::Ready(None) => {
                return Body::Complete(first.unwrap_or_else(|| joined.freeze()));
            }
            Poll::Pending => {
                if let Some(first) = first {
                    joined.extend_from_slice(&first);
                }
                return Body::Arriving(joined);
            }
        }
    }
}

/// Sends `answer` on the request's stream (a client that has gone away is not an error).
fn respond_with(respond: &mut SendResponse<Bytes>, (response, bytes): Answer) {
    let empty = bytes.is_empty();
    let Ok(mut send) = respond.send_response(response, empty) else {
        return;
    };
    if !empty {
        let _ = send.send_data(bytes, true);
    }
}
