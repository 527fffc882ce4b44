//! The HTTP/1.1 accept loop. Herald serves its router with hyper's HTTP/1 connection directly
//! (rather than `axum::serve`, whose protocol sniffing wraps sockets in a private type) so that
//! a WebSocket upgrade hands the transport back the plain `TcpStream`, which its lean frame loop
//! needs. A fresh connection's first bytes are looked at once, within the first-byte and head
//! deadlines, by the registered detectors ([`DETECTORS`], [`herald_edge::detect`]): a first
//! request that is an SSE stream is served by the transport itself, without hyper
//! ([`herald_edge::sse::serve_detected`]); a WebSocket handshake stays on this runtime, where
//! its session runs; anything else goes to hyper. On the HTTP runtime, a plain connection whose requests are whole
//! one-message publishes is answered without hyper until its first other request
//! ([`herald_edge::direct_publish`], which leaves that request unread for hyper). Hyper reads through a [`TimedStream`], which closes a connection whose
//! next request's head stops arriving or that stays idle between requests too long, and every
//! request body is a [`TimedBody`], which must arrive whole within its deadline
//! ([`herald_edge::deadlines`]). Shutdown stops accepting and asks every connection to finish
//! its request. With TLS, each connection's handshake runs first in its own task, within the
//! first-byte deadline; the connection is then a [`Conn::Tls`] and everything above is the same.
//! A source address over its rate of new connections is answered `429` before any of this
//! ([`herald_edge::refuse`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use herald_edge::conn::{Conn, TlsAcceptor};
use herald_edge::deadlines::{Deadlines, RequestPhase, TimedBody, TimedStream};
use herald_edge::detect::{detect, Detected, Detector};
use herald_edge::direct_publish::{self, Served};
use herald_edge::Edge;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::runtime::Handle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Accepts connections on `listener` (TLS ones when `tls` is given) and serves `app` on each
/// until `shutdown` is cancelled. Hyper serves them on `http_runtime` when given
/// ([`crate::http_runtime`]); SSE streams served directly stay on this runtime.
/// Returns the (closed) tracker of the HTTP connections still finishing, for the caller to wait
/// on within its shutdown grace.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    publish: direct_publish::Handler,
    edge: Arc<Edge>,
    shutdown: CancellationToken,
    tls: Option<TlsAcceptor>,
    http_runtime: Option<Handle>,
) -> TaskTracker {
    let connections = TaskTracker::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    // The head and keep-alive deadlines are the `TimedStream`'s (hyper's own header timer would
    // close a cut-short head without the 408 answer).
    http.timer(TokioTimer::new()).header_read_timeout(None);
    let http = Arc::new(http);
    loop {
        let (tcp, peer) = tokio::select! {
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
        if let Err(wait) = edge.limits.check_connection(peer.ip()) {
            connections.spawn(herald_edge::refuse::too_many_connections(tcp, wait));
            continue;
        }
        let (app, http, edge, stop) = (app.clone(), http.clone(), edge.clone(), shutdown.clone());
        let app = (app, publish.clone());
        let hand_off = http_runtime
            .as_ref()
            .map(|runtime| (runtime.clone(), connections.clone()));
        // The handshake and the first request are looked at in the connection's own task, so a
        // slow client holds up nothing else. A plain connection's task holds nothing of TLS.
        match &tls {
            None => {
                connections.spawn(serve_connection(
                    Conn::Plain(tcp),
                    peer,
                    app,
                    http,
                    edge,
                    stop,
                    hand_off,
                ));
            }
            Some(tls) => {
                let tls = tls.clone();
                connections.spawn(async move {
                    let limit = edge.settings.deadlines.first_byte;
                    if let Some(conn) = Box::pin(tls.accept(tcp, limit)).await {
                        serve_connection(conn, peer, app, http, edge, stop, hand_off).await;
                    }
                });
            }
        }
    }
    drop(listener);
    connections.close();
    connections
}

/// The protocols recognised on a fresh connection's first bytes ([`detect`]), in order: the
/// first whose detector says [`Verdict::Mine`](herald_edge::detect::Verdict) serves the
/// connection (see [`serve_connection`]); a connection no detector claims is HTTP's, served by
/// hyper (with one-message publishes answered without it first).
static DETECTORS: [&dyn Detector; 4] = [
    &herald_edge::sse::DETECTOR,
    &herald_edge::ws::DETECTOR,
    &herald_pusher::serve::DETECTOR,
    &herald_mqtt::websocket::DETECTOR,
];
/// [`DETECTORS`]' index of an SSE stream served directly.
const SSE: usize = 0;
/// [`DETECTORS`]' index of a WebSocket handshake at `/v1/ws`.
const WEBSOCKET: usize = 1;
/// [`DETECTORS`]' index of a Pusher WebSocket handshake at `/app/{key}`.
const PUSHER: usize = 2;
/// [`DETECTORS`]' index of an MQTT over WebSocket handshake at `/mqtt`.
const MQTT: usize = 3;

/// What a fresh connection's first bytes made of it.
enum First {
    /// An SSE stream, whose request was taken out of the socket (`None`: the socket failed).
    Sse(Option<Box<herald_edge::sse::SseRequest>>),
    /// HTTP for hyper, whose first byte arrived at the instant given; a WebSocket handshake if
    /// the flag says so.
    Http(Instant, bool),
    /// Over: nothing came in time, or a late head was answered.
    Done,
}

/// Serves a fresh connection as the protocol its first bytes show ([`DETECTORS`]): its SSE
/// stream, a WebSocket handshake on this runtime, anything else with hyper ([`serve_hyper`]).
async fn serve_connection(
    mut conn: Conn,
    peer: SocketAddr,
    app: (Router, direct_publish::Handler),
    http: Arc<hyper::server::conn::http1::Builder>,
    edge: Arc<Edge>,
    stop: CancellationToken,
    hand_off: Option<(Handle, TaskTracker)>,
) {
    // Boxed: the look (and taking an SSE request's head out of the socket, or answering a late
    // head) is no part of a directly served SSE stream's task.
    let first = Box::pin(async {
        let detected = tokio::select! {
            detected = detect(&mut conn, &edge.settings.deadlines, &DETECTORS) => detected,
            _ = edge.shutdown.cancelled() => Detected::Gone,
        };
        match detected {
            Detected::Chosen {
                index: SSE, prefix, ..
            } => First::Sse(herald_edge::sse::take_request(&mut conn, prefix).await),
            Detected::Chosen { index, started, .. } => {
                First::Http(started, matches!(index, WEBSOCKET | PUSHER | MQTT))
            }
            Detected::Other(started) => First::Http(started, false),
            Detected::Gone => First::Done,
            Detected::Late => {
                herald_edge::sse::answer_late(&mut conn, &edge.settings.deadlines).await;
                First::Done
            }
        }
    })
    .await;
    let (head_started, websocket) = match first {
        First::Sse(Some(request)) => {
            return herald_edge::sse::serve_detected(&edge, conn, request).await
        }
        First::Http(started, websocket) => (started, websocket),
        First::Sse(None) | First::Done => return,
    };
    // Boxed: a future is as large as its largest step for as long as it lives, and a task that
    // streams SSE itself lives as long as its stream (hyper's steps made every connection's
    // task 232 B larger).
    Box::pin(serve_hyper(
        conn,
        peer,
        head_started,
        websocket,
        app,
        http,
        edge,
        stop,
        hand_off,
    ))
    .await;
}

/// Serves a connection with hyper: with `hand_off`, in a task of its own on that runtime,
/// tracked with the others, unless its first request is a WebSocket handshake (`websocket`):
/// that connection's session runs here, so it stays.
#[allow(clippy::too_many_arguments)]
async fn serve_hyper(
    mut conn: Conn,
    peer: SocketAddr,
    head_started: Instant,
    websocket: bool,
    (app, publish): (Router, direct_publish::Handler),
    http: Arc<hyper::server::conn::http1::Builder>,
    edge: Arc<Edge>,
    stop: CancellationToken,
    hand_off: Option<(Handle, TaskTracker)>,
) {
    let deadlines = edge.settings.deadlines;
    drop(edge);
    if hand_off.is_some() && websocket {
        serve_http(&http, conn, peer, head_started, deadlines, app, stop).await;
        return;
    }
    let moves = hand_off.is_some();
    let serve = async move {
        if moves {
            if let Err(e) = conn.register_here() {
                tracing::debug!(error = %e, "could not move a connection to the HTTP runtime");
                return;
            }
        }
        serve_publishes_then_http(
            &http,
            conn,
            peer,
            head_started,
            deadlines,
            (app, publish),
            stop,
        )
        .await;
    };
    match hand_off {
        Some((runtime, connections)) => {
            connections.spawn_on(serve, &runtime);
        }
        None => serve.await,
    }
}

/// Serves one-message publishes without hyper for as long as they are all the connection
/// sends ([`direct_publish`]), then hyper from the first other request on.
async fn serve_publishes_then_http(
    http: &hyper::server::conn::http1::Builder,
    mut conn: Conn,
    peer: SocketAddr,
    head_started: Instant,
    deadlines: Deadlines,
    (app, publish): (Router, direct_publish::Handler),
    stop: CancellationToken,
) {
    let head_started =
        match direct_publish::serve(&mut conn, &publish, deadlines.keepalive, &stop).await {
            Served::Closed => return,
            Served::HandOff { served: 0 } => head_started,
            // Its next request has arrived: hyper's head deadline starts now.
            Served::HandOff { .. } => Instant::now(),
        };
    serve_http(http, conn, peer, head_started, deadlines, app, stop).await;
}

/// Serves one connection with hyper until it closes, a deadline passes, or shutdown lets it
/// finish its request.
async fn serve_http(
    http: &hyper::server::conn::http1::Builder,
    conn: Conn,
    peer: SocketAddr,
    head_started: Instant,
    deadlines: Deadlines,
    app: Router,
    stop: CancellationToken,
) {
    let phase = RequestPhase::default();
    let io = TimedStream::new(conn, phase.clone(), deadlines, head_started);
    let router = TowerToHyperService::new(app);
    let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
        // The request is handled until its response body is done: no head or keep-alive
        // deadline meanwhile (a long-poll waits, a stream streams).
        let guard = phase.begin();
        let mut request = request.map(|body| TimedBody::new(Body::new(body), deadlines.body));
        // Who the peer is: for the audit log, and for the log-in rate limit by address.
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        let answer = hyper::service::Service::call(&router, request);
        async move {
            let response = answer.await?;
            Ok::<_, std::convert::Infallible>(response.map(|body| guard.hold(body)))
        }
    });
    let connection = http
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => return,
        _ = stop.cancelled() => connection.as_mut().graceful_shutdown(),
    }
    let _ = connection.await;
}
