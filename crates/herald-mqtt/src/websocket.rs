//! MQTT over WebSocket at `GET /mqtt` on the HTTP listener (MQTT 5.0 and 3.1.1 section 6), for
//! browsers: over TLS (`wss://`) when the HTTP listener serves TLS. `herald-server` merges
//! [`router`] into the HTTP router when `mqtt.websocket` is on.
//!
//! The upgrade must offer the subprotocol `mqtt` (MQTT 5.0 and 3.1.1, [MQTT-6.0.0-3]) or
//! `mqttv3.1` (what some clients, Paho's JavaScript among them, send): the answer names the one
//! chosen, the first of the client's that is one of them ([`SUBPROTOCOLS`]). An upgrade without
//! either, or a request that is no WebSocket upgrade, is answered `400` with a JSON error that
//! says so. Credentials are MQTT's own (CONNECT's user name and password), so the upgrade itself
//! checks none.
//!
//! The connection is then edge's WebSocket byte stream ([`WsStream`]: binary messages' payloads
//! joined, whatever their boundaries; a text message closes it, [MQTT-6.0.0-1]) run by the same
//! code as a TCP connection, [`crate::serve::serve`]: the CONNECT and its deadline, the app's
//! connection limit, `Transport::Mqtt` in lifecycle events, the listener's persistent sessions
//! ([`Sessions`], shared with the TCP listener). Both bounds apply: a WebSocket frame or message
//! over the larger of `mqtt.max_packet_size` and `max_frame_bytes` closes the connection with
//! 1009, a packet over `mqtt.max_packet_size` (in one message or across several) as on TCP (v5:
//! DISCONNECT 0x95).
//!
//! Off, `/mqtt` answers `404` saying so ([`switched_off_router`]).
//!
//! [`DETECTOR`] recognises the handshake from a connection's first bytes, so the HTTP listener
//! keeps the connection on the sessions' runtime, where it will run.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use herald_core::{ErrorCode, HeraldError};
use herald_edge::conn::{Conn, WsStream};
use herald_edge::detect::GetPath;
use herald_edge::ws::handshake::{offered_protocols, Upgrade};
use herald_edge::{error_response, Edge, EdgeSettings};

use crate::session::Sessions;
use crate::settings::MqttSettings;

/// The subprotocols `/mqtt` accepts: `mqtt` (MQTT 5.0 and 3.1.1 name it so) and `mqttv3.1`.
pub const SUBPROTOCOLS: [&str; 2] = ["mqtt", "mqttv3.1"];

/// Recognises a `GET /mqtt` handshake from a connection's first bytes.
pub static DETECTOR: GetPath = GetPath::new("GET /mqtt");

/// What the endpoint needs: the same as the TCP listener.
pub struct MqttOverWebSocket {
    /// The server's transports (sessions, live clients, keep-alive, shutdown).
    pub edge: Arc<Edge>,
    /// The MQTT listener's settings.
    pub settings: Arc<MqttSettings>,
    /// The persistent sessions, shared with the TCP listener.
    pub sessions: Arc<Sessions>,
}

/// The router of MQTT over WebSocket: `GET /mqtt`.
pub fn router(state: Arc<MqttOverWebSocket>) -> Router {
    Router::new().route("/mqtt", get(upgrade)).with_state(state)
}

/// The router of `/mqtt` while `mqtt.websocket` is off: `404`, as any unknown path, saying
/// which setting serves it (an operator pointing Home Assistant's WebSocket transport, or a
/// browser's mqtt.js, at a server without it otherwise reads only "no such endpoint").
pub fn switched_off_router() -> Router {
    Router::new().route("/mqtt", get(switched_off))
}

async fn switched_off() -> Response {
    error_response(&HeraldError::new(
        ErrorCode::NotFound,
        "MQTT over WebSocket (/mqtt) is off on this server: mqtt.websocket = true \
         (HERALD_MQTT_WEBSOCKET=true) serves it",
    ))
}

/// The subprotocol to answer with: the first the client offered that `/mqtt` accepts, as the
/// client spelled it.
pub fn choose_subprotocol<'a>(offered: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    offered
        .into_iter()
        .find(|p| SUBPROTOCOLS.iter().any(|s| s.eq_ignore_ascii_case(p)))
}

/// The largest WebSocket message an `/mqtt` stream takes: a packet as large as
/// `mqtt.max_packet_size` fits in one, and never less than the edge's frame bound. A parked
/// connection makes its stream again with it (`crate::park`).
pub(crate) fn max_message(settings: &MqttSettings, edge: &EdgeSettings) -> usize {
    usize::try_from(settings.max_packet_size)
        .map_or(usize::MAX, |max| max.max(edge.max_frame_bytes))
}

/// Accepts an upgrade at `/mqtt` and serves the connection as MQTT.
async fn upgrade(State(state): State<Arc<MqttOverWebSocket>>, mut request: Request) -> Response {
    let chosen = choose_subprotocol(offered_protocols(request.headers())).map(str::to_owned);
    let upgrade = match Upgrade::from_request(&mut request) {
        Ok(upgrade) => upgrade,
        Err(e) => {
            return error_response(&HeraldError::bad_request(format!(
                "/mqtt takes MQTT over WebSocket (subprotocol mqtt): {}",
                e.message
            )))
        }
    };
    let Some(chosen) = chosen else {
        return error_response(&HeraldError::bad_request(
            "/mqtt takes MQTT over WebSocket: the upgrade must offer the subprotocol mqtt (or \
             mqttv3.1) in Sec-WebSocket-Protocol",
        ));
    };
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |info| info.0);
    let edge = state.edge.clone();
    // Served on the HTTP runtime (not the sessions'), the connection moves to the sessions'.
    let elsewhere = edge.sessions.clone().filter(|sessions| {
        tokio::runtime::Handle::try_current().map_or(true, |here| here.id() != sessions.id())
    });
    let (response, socket) = upgrade.with_protocol(&chosen).accept(elsewhere.is_some());
    let socket = Box::pin(socket);
    let max_message = max_message(&state.settings, &edge.settings);
    let (settings, sessions) = (state.settings.clone(), state.sessions.clone());
    let serving = edge.clone();
    let run = async move {
        let Some((conn, read_ahead)) = socket.await else {
            return;
        };
        let stream = WsStream::new(conn, &read_ahead, max_message);
        drop(read_ahead);
        let stream = Conn::WebSocket(Box::new(stream));
        crate::serve::serve(stream, peer, serving, settings, sessions).await;
    };
    match elsewhere {
        Some(runtime) => edge.connections.spawn_on(run, &runtime),
        None => edge.connections.spawn(run),
    };
    response.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mqtt_or_mqttv3_1_is_chosen_as_the_client_spelled_it() {
        assert_eq!(choose_subprotocol(["mqtt"]), Some("mqtt"));
        assert_eq!(
            choose_subprotocol(["x", "mqttv3.1", "mqtt"]),
            Some("mqttv3.1")
        );
        assert_eq!(choose_subprotocol(["MQTT"]), Some("MQTT"));
        assert_eq!(choose_subprotocol(["mqtt5", "wamp"]), None);
        assert_eq!(choose_subprotocol([]), None);
    }
}
