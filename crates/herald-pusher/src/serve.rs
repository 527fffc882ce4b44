//! The client protocol's endpoint, `GET /app/{key}` on the HTTP listener: the WebSocket
//! upgrade (edge's handshake), the checks Pusher makes of a new connection, and the connection
//! run on edge's driver as the Pusher [`Wire`] (`wire.rs`).
//!
//! The upgrade is accepted whatever the key and query say, as Pusher does, so the refusal
//! reaches the client as Pusher's: `pusher:error` with the code, then a close frame with it:
//! an unknown key is 4001, a missing `protocol` 4008, one other than 5 to 7 4007, an app at its
//! connection limit 4004. An accepted connection is told `pusher:connection_established` (its
//! socket id and activity timeout) first, registers with the node's live clients as
//! [`Transport::Pusher`] (lifecycle events, webhooks, revocation, shutdown) and joins the
//! keep-alive roster, and joins the node's Pusher connections ([`crate::connections`]: closed
//! with 4001 if its key goes). Idle, a plain-TCP connection parks (`park.rs`) as Herald's
//! WebSocket does; the task holds the connection's state, a small serving future and nothing
//! else (the upgrade and the goodbye are boxed apart).
//!
//! [`DETECTOR`] recognises the handshake from the connection's first bytes, so the HTTP
//! listener keeps the connection on the sessions' runtime, where it will run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use herald_core::auth::{Client, TokenStamp};
use herald_core::lifecycle::Transport;
use herald_core::outbox::{OutFrame, Outbox};
use herald_core::pattern::PatternSet;
use herald_core::tenant::AppId;
use herald_edge::conn::Conn;
use herald_edge::detect::{Detector, Verdict};
use herald_edge::driver::{Connection, Ended, Marks, Served, Wire};
use herald_edge::roster::Place;
use herald_edge::session::ClientSession;
use herald_edge::ws::handshake::Upgrade;
use herald_edge::Edge;

use crate::credentials::service::PusherCredentials;
use crate::frame::{self, codes, PROTOCOLS};
use crate::session::PusherSession;
use crate::settings::ClientSettings;
use crate::wire::{goodbye, End, PusherWire};

/// What the endpoint needs.
pub struct PusherClients {
    /// The server's transports (sessions, live clients, keep-alive, shutdown).
    pub edge: Arc<Edge>,
    /// Apps' Pusher credentials (a connection's key finds its app).
    pub credentials: Arc<PusherCredentials>,
    /// Keep-alive and client-event settings.
    pub settings: ClientSettings,
    /// The node's webhooks, told client events and cache misses (`pusher.client_event`,
    /// `pusher.cache_miss`) when an endpoint wants them.
    pub hooks: Option<Arc<herald_hooks::Hooks>>,
}

/// The router of the client protocol: `GET /app/{key}`.
pub fn router(state: Arc<PusherClients>) -> Router {
    Router::new()
        .route("/app/{key}", get(upgrade))
        .with_state(state)
}

/// Recognises a WebSocket handshake at `/app/...` from a connection's first bytes.
pub static DETECTOR: AppPath = AppPath;

/// A `GET /app/` request line ([`DETECTOR`]).
#[derive(Debug, Clone, Copy)]
pub struct AppPath;

impl Detector for AppPath {
    fn detect(&self, prefix: &[u8]) -> Verdict {
        const WANTED: &[u8] = b"GET /app/";
        let seen = prefix.len().min(WANTED.len());
        if prefix[..seen] != WANTED[..seen] {
            Verdict::NotMine
        } else if prefix.len() < WANTED.len() {
            Verdict::Undecided
        } else {
            Verdict::Mine
        }
    }
}

/// This process's number, the first part of its socket ids.
static PROCESS: LazyLock<u32> = LazyLock::new(|| rand::random::<u32>() % 1_000_000_000);

/// The second part of the next socket id: a counter from a random start, unique in the
/// process (so also a connection's number among the node's Pusher connections).
fn next_socket_number() -> u64 {
    static NEXT: LazyLock<AtomicU64> =
        LazyLock::new(|| AtomicU64::new(u64::from(rand::random::<u32>())));
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The socket id of this process's connection `number`: the process's number, a dot, the
/// connection's.
pub(crate) fn socket_id(number: u64) -> String {
    format!("{}.{number}", *PROCESS)
}

/// What a new connection turned out to be.
enum Start {
    /// Served, as this app.
    Accepted {
        credentials: Arc<crate::credentials::cache::OpenCredentials>,
        counted: herald_core::usage::ConnectionGuard,
    },
    /// Refused with this code and message.
    Refused(u16, String),
}

/// Accepts a WebSocket upgrade at `/app/{key}`.
async fn upgrade(
    State(clients): State<Arc<PusherClients>>,
    Path(key): Path<String>,
    RawQuery(query): RawQuery,
    mut request: Request,
) -> Response {
    let upgrade = match Upgrade::from_request(&mut request) {
        Ok(u) => u,
        Err(e) => {
            let text = format!(
                "{}: /app/{{key}} takes a Pusher WebSocket connection\n",
                e.message
            );
            return (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                Body::from(text),
            )
                .into_response();
        }
    };
    let start = check(&clients, &key, query.as_deref()).await;
    let served_by = clients.clone();
    // Served on the HTTP runtime (not the sessions'), the connection moves to the sessions'.
    let elsewhere = clients.edge.sessions.as_ref().filter(|sessions| {
        tokio::runtime::Handle::try_current().map_or(true, |here| here.id() != sessions.id())
    });
    let (response, socket) = upgrade.accept(elsewhere.is_some());
    let socket = Box::pin(socket);
    let run = async move {
        let Some((mut stream, read_ahead)) = socket.await else {
            return;
        };
        let (credentials, counted) = match start {
            Start::Refused(code, message) => {
                tracing::debug!(code, %message, "Pusher connection refused");
                goodbye(&mut stream, End::Error(code, message), Vec::new()).await;
                stream.close().await;
                return;
            }
            Start::Accepted {
                credentials,
                counted,
            } => (credentials, counted),
        };
        let (mut connection, place, early) = open(served_by, read_ahead, credentials, counted);
        let served = match early {
            Some(ended) => Served::Ends(ended),
            None => serve(&mut connection, &mut stream).await,
        };
        // Boxed: parking or saying goodbye is no part of the idle connection's task.
        Box::pin(after(connection, served, stream, place)).await;
    };
    match elsewhere {
        Some(sessions) => clients.edge.connections.spawn_on(run, sessions),
        None => clients.edge.connections.spawn(run),
    };
    response.into_response()
}

/// Pusher's checks of a new connection: the key, the protocol version, the app's connection
/// limit.
async fn check(clients: &PusherClients, key: &str, query: Option<&str>) -> Start {
    let credentials = match clients.credentials.by_key(key).await {
        Ok(Some(credentials)) => credentials,
        Ok(None) => {
            return Start::Refused(
                codes::APP_NOT_FOUND,
                format!("App key {key} does not exist"),
            )
        }
        Err(e) => {
            tracing::warn!(error = %e, "a Pusher key could not be looked up");
            return Start::Refused(
                codes::OVER_CAPACITY,
                "The server cannot look up the app now; try again later".into(),
            );
        }
    };
    let protocol = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .find(|(k, _)| k == "protocol")
        .map(|(_, v)| v.into_owned());
    match protocol.as_deref().map(str::parse::<u32>) {
        None => {
            return Start::Refused(
                codes::NO_PROTOCOL,
                "No protocol version supplied: connect with ?protocol=7".into(),
            )
        }
        Some(Ok(p)) if PROTOCOLS.contains(&p) => {}
        Some(_) => {
            return Start::Refused(
                codes::UNSUPPORTED_PROTOCOL,
                format!(
                    "Unsupported protocol version {}: this server speaks protocol {} to {}",
                    protocol.unwrap_or_default(),
                    PROTOCOLS.start(),
                    PROTOCOLS.end()
                ),
            )
        }
    }
    match clients.edge.usage.connect(&credentials.app) {
        Ok(counted) => Start::Accepted {
            credentials,
            counted,
        },
        Err(e) => Start::Refused(
            codes::OVER_QUOTA,
            format!("Application is over connection quota: {}", e.message),
        ),
    }
}

/// The connection's client: the app, and no token patterns (each subscription is granted for
/// its channel alone).
fn client_of(app: AppId) -> Client {
    Client {
        app,
        device: None,
        sub: String::new(),
        expires: None,
        subscribe: PatternSet::default(),
        publish: PatternSet::default(),
        token: TokenStamp::default(),
        user_info: None,
    }
}

/// Starts an accepted connection: its session and wire (`connection_established` queued, its
/// place among the node's Pusher connections in the session), its place on the keep-alive
/// roster, and how it ends at once if what was read past the handshake is not WebSocket.
fn open(
    clients: Arc<PusherClients>,
    read_ahead: Bytes,
    credentials: Arc<crate::credentials::cache::OpenCredentials>,
    counted: herald_core::usage::ConnectionGuard,
) -> (Connection<PusherWire>, Place, Option<Ended<End>>) {
    crate::outbound::reserve_slot();
    let edge = clients.edge.clone();
    let number = next_socket_number();
    let socket_id = socket_id(number);
    let outbox = Outbox::new(edge.settings.outbox_bytes);
    outbox.push(OutFrame::Control(frame::connection_established(
        &socket_id,
        clients.settings.activity_timeout.as_secs(),
    )));
    let client = client_of(credentials.app.clone());
    let session = ClientSession::new_for(
        Transport::Pusher,
        edge.clone(),
        outbox,
        Some(client),
        Some(counted),
    );
    // In the node's Pusher connections while it runs (parked too): closed if its key goes.
    let registered =
        clients
            .credentials
            .connections()
            .register(number, &credentials, session.outbox());
    let mut wire = PusherWire::new(PusherSession::new(
        session,
        socket_id,
        credentials,
        clients,
        registered,
    ));
    let early = wire
        .reader
        .feed(&read_ahead, &mut wire.incoming)
        .err()
        .map(|e| Ended::Wire(End::BadFrame(e)));
    let place = edge.keepalive.join(wire.session.outbox());
    (Connection::new(wire, Marks::new(true)), place, early)
}

/// Serves the connection (fresh, or revived from parking) until it ends or parks. The socket
/// and the connection are the caller's, borrowed, so the idle task stores each once.
pub(crate) async fn serve(
    connection: &mut Connection<PusherWire>,
    stream: &mut Conn,
) -> Served<End> {
    let edge = connection.wire.session.edge().clone();
    connection.serve(stream, &edge.parking).await
}

/// After [`serve`]: parks the connection in its reserved slot, or ends it (the goodbye Pusher
/// says for how it ended, then the socket closed; dropping the connection takes it out of the
/// node's Pusher connections).
pub(crate) async fn after(
    mut connection: Connection<PusherWire>,
    served: Served<End>,
    mut stream: Conn,
    place: Place,
) {
    let ended = match served {
        Served::Parks(ticket) => return crate::park::park(connection, ticket, stream, place),
        Served::Ends(ended) => ended,
    };
    connection.wire.session.edge().keepalive.leave(place);
    connection.wire.goodbye(&mut stream, ended).await;
    stream.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_detector_claims_app_paths_only() {
        assert_eq!(
            DETECTOR.detect(b"GET /app/abc?protocol=7 HTTP/1.1"),
            Verdict::Mine
        );
        assert_eq!(DETECTOR.detect(b"GET /ap"), Verdict::Undecided);
        assert_eq!(DETECTOR.detect(b"GET /apps/1/events"), Verdict::NotMine);
        assert_eq!(DETECTOR.detect(b"POST /app/x"), Verdict::NotMine);
    }

    fn future_size<A: 'static, B: 'static, F>(_: fn(&'static mut A, &'static mut B) -> F) -> usize {
        size_of::<F>()
    }

    #[test]
    fn an_idle_connections_task_keeps_little_besides_its_state() {
        // What the serving future keeps besides the connection it borrows, as a WebSocket's
        // (the whole connection's future was 2,768 bytes in a debug build before).
        let serving = future_size::<Connection<PusherWire>, Conn, _>(serve);
        assert!(serving <= 160, "{serving} bytes");
    }

    #[test]
    fn socket_ids_are_pushers_form_and_unique() {
        let a = socket_id(next_socket_number());
        let b = socket_id(next_socket_number());
        assert_ne!(a, b);
        for id in [a, b] {
            crate::event::check_socket_id(&id).unwrap();
        }
    }
}
