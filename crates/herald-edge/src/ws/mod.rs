//! WebSocket at `/v1/ws`: JSON text frames (docs/protocol.md). The upgrade authenticates a
//! `?token=` or `Authorization: Bearer` token before accepting (`handshake`); the connection
//! then runs on the connection driver ([`crate::driver`]) as the WebSocket wire (`wire`): one
//! small task that waits for the socket to become readable (holding no read buffer while idle),
//! parses frames (`frame`), runs commands (`session`) and writes everything the outbox holds in
//! one write; idle, it parks (`park`).
//!
//! The codec ([`frame`]) and the opening handshake ([`handshake`]) are public, so another
//! protocol carried over WebSocket (at another path) reads and writes frames the same way.

pub mod frame;
pub mod handshake;
mod park;
mod session;
mod wire;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::{RawQuery, Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use herald_core::auth::Client;
use herald_core::outbox::Outbox;
use herald_core::telemetry::telemetry;

use crate::conn::Conn;
use crate::driver::{self, Ended, Marks, Served, Wire};
use crate::http::{client_token, error_response, query_pairs};
use crate::roster::Place;
use crate::Edge;
use handshake::Upgrade;
use session::Session;
use wire::{End, WsWire};

/// Recognises a fresh connection whose first request is a handshake at `/v1/ws`
/// ([`crate::detect`]): the HTTP listener keeps such a connection on the sessions' runtime,
/// where its WebSocket will run, rather than handing it to the HTTP runtime.
pub static DETECTOR: crate::detect::GetPath = crate::detect::GetPath::new("GET /v1/ws");

/// Accepts a WebSocket upgrade.
pub async fn upgrade(
    State(edge): State<Arc<Edge>>,
    RawQuery(query): RawQuery,
    mut request: Request,
) -> Response {
    let upgrade = match Upgrade::from_request(&mut request) {
        Ok(u) => u,
        Err(e) => return error_response(&e),
    };
    let pairs = query_pairs(query.as_deref());
    let token = client_token(&pairs, request.headers());
    if let Some(token) = &token {
        // An app's JWKS key set not cached yet (or lacking the token's key) is fetched first.
        edge.tokens.prepare(token).await;
    }
    let client = match token {
        Some(token) => match edge.tokens.verify(&token) {
            Ok(client) => Some(client),
            Err(e) => return error_response(&e),
        },
        None if edge.settings.allow_anonymous => Some(Client::anonymous()),
        None => None,
    };
    // An app at its connection limit is refused before the upgrade.
    let counted = match client
        .as_ref()
        .map(|c| edge.usage.connect(&c.app))
        .transpose()
    {
        Ok(counted) => counted,
        Err(e) => return error_response(&e),
    };
    // Served on the HTTP runtime (not the sessions'), the connection moves to the sessions'.
    let elsewhere = edge.sessions.as_ref().filter(|sessions| {
        tokio::runtime::Handle::try_current().map_or(true, |here| here.id() != sessions.id())
    });
    let (response, socket) = upgrade.accept(elsewhere.is_some());
    // Everything the connection keeps is built here and owned by the task as one value, which
    // `Connection::run` borrows: moved into a second future, it would be stored twice.
    let outbox = Outbox::new(edge.settings.outbox_bytes);
    let session = Session::new(edge.clone(), outbox, client, counted);
    let mut connection = Connection::new(WsWire::new(session), Marks::new(true));
    // The upgrade future is boxed so its memory is freed once the socket is handed over,
    // instead of staying part of every idle connection's task.
    let socket = Box::pin(socket);
    let run = async move {
        // Boxed: the upgrade and the first steps are no part of the idle connection's task.
        let Some((mut stream, place, gauge, end)) = Box::pin(open(&mut connection, socket)).await
        else {
            return;
        };
        let served = match end {
            Some(end) => Served::Ends(Ended::Wire(end)),
            None => serve(&mut connection, &mut stream).await,
        };
        // Boxed: parking or saying goodbye is no part of the idle connection's task.
        Box::pin(after(connection, served, stream, place, gauge)).await;
    };
    match elsewhere {
        Some(sessions) => edge.connections.spawn_on(run, sessions),
        None => edge.connections.spawn(run),
    };
    response.into_response()
}

struct ConnectionGauge;

impl ConnectionGauge {
    fn new() -> Self {
        telemetry().connections_ws.increment(1.0);
        ConnectionGauge
    }
}

impl Drop for ConnectionGauge {
    fn drop(&mut self) {
        telemetry().connections_ws.decrement(1.0);
    }
}

/// One WebSocket connection's state: the driver's connection over the WebSocket wire (the
/// session and the frame parser). An idle connection is this value, its socket and its outbox.
type Connection = driver::Connection<WsWire>;

/// Starts the connection once `socket` (the finished upgrade) yields the TCP stream and the
/// bytes read past the handshake: what [`driver::Connection::serve`] then serves.
async fn open(
    connection: &mut Connection,
    socket: Pin<Box<impl Future<Output = Option<(Conn, Bytes)>>>>,
) -> Option<(Conn, Place, ConnectionGauge, Option<End>)> {
    let (stream, read_ahead) = socket.await?;
    let gauge = ConnectionGauge::new();
    let wire = &mut connection.wire;
    let end = match wire.reader.feed(&read_ahead, &mut wire.incoming) {
        Ok(()) => None,
        Err(e) => Some(End::BadFrame(e)),
    };
    drop(read_ahead);
    let place = wire.session.edge().keepalive.join(wire.session.outbox());
    // Boxed: only device connections open an inbox, and the others should not carry the
    // future's state.
    Box::pin(wire.session.start()).await;
    Some((stream, place, gauge, end))
}

/// Serves the connection (fresh, or revived from parking) until it ends or parks. The socket,
/// the roster place and the rest are the caller's: passed by value into this future they would
/// be stored twice in the connection's task (an `async fn` keeps its arguments apart from its
/// locals).
async fn serve(connection: &mut Connection, stream: &mut Conn) -> Served<End> {
    let edge = connection.wire.session.edge().clone();
    connection.serve(stream, &edge.parking).await
}

/// After [`serve`]: parks the connection in its reserved slot, or ends it (telling the client
/// why, as `served` says).
async fn after(
    mut connection: Connection,
    served: Served<End>,
    mut stream: Conn,
    place: Place,
    gauge: ConnectionGauge,
) {
    let ended = match served {
        Served::Parks(ticket) => return park::park(connection, ticket, stream, place, gauge),
        Served::Ends(ended) => ended,
    };
    let _gauge = gauge;
    connection.wire.session.edge().keepalive.leave(place);
    connection.wire.goodbye(&mut stream, ended).await;
    if stream.is_tls() {
        stream.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn future_size<A: 'static, B: 'static, F>(_: fn(&'static mut A, &'static mut B) -> F) -> usize {
        size_of::<F>()
    }

    #[test]
    fn an_idle_connections_task_keeps_little_besides_its_state() {
        // What the serving future keeps besides the connection it borrows: the references, the
        // idle timer, the one wait in progress. (It was 328 bytes before the driver.)
        let serving = future_size::<Connection, Conn, _>(serve);
        assert!(serving <= 160, "{serving} bytes");
    }
}
