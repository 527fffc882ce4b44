//! One MQTT connection, from the first byte to the close: [`serve`], which the MQTT listener
//! (`herald-server`'s `mqtt.rs`) calls for each accepted connection, inside the edge's
//! connection tracker (so shutdown waits for it), after a TLS handshake when the listener
//! serves TLS.
//!
//! PLACEHOLDER, to be replaced by the connection's author (CONNECT handling, `wire.rs`,
//! `inflight.rs`): this body only closes the connection, so the listener, its configuration and
//! its tests can be wired before the connection itself lands. Keep the signature: the listener
//! calls it as it is.

use std::net::SocketAddr;
use std::sync::Arc;

use herald_edge::conn::Conn;
use herald_edge::Edge;

use crate::settings::MqttSettings;

/// Serves one MQTT connection until it ends: `stream` is the accepted TCP connection (plain, or
/// TLS with its handshake done), `peer` its remote address, `edge` the server's transports
/// (sessions, live clients, keep-alive, shutdown) and `settings` the listener's
/// [`MqttSettings`], shared by every connection. Ends without an error: a connection's failures
/// are its own.
pub async fn serve(stream: Conn, peer: SocketAddr, edge: Arc<Edge>, settings: Arc<MqttSettings>) {
    // The placeholder: no MQTT yet, the connection is closed at once.
    let _ = (peer, edge, settings);
    stream.close().await;
}
