//! The MQTT listener: binds `mqtt_listen` (with a deep accept queue, over TLS when `mqtt_tls`)
//! and, once the server is ready, accepts connections until shutdown, handing each to
//! [`herald_mqtt::serve::serve`] in the edge's connection tracker, with the listener's
//! persistent sessions ([`herald_mqtt::session::Sessions`], over the node's store). Connections end as every
//! transport's do: shutdown, revocations and app deletion reach them through the live clients
//! and the roster; this loop only stops accepting. MQTT over WebSocket (`mqtt.websocket`) is
//! `/mqtt` on the HTTP listener ([`websocket_router`], [`herald_mqtt::websocket`]), with the
//! same sessions ([`start_sessions`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use herald_core::bus::Bus;
use herald_edge::conn::{Conn, TlsAcceptor};
use herald_edge::Edge;
use herald_mqtt::session::Sessions;
use herald_mqtt::websocket::MqttOverWebSocket;
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;

use crate::error::ServerError;
use crate::settings::{MqttPort, ServerSettings};
use crate::wiring::Parts;

/// The persistent MQTT sessions (over the node's store), started when MQTT is served at all:
/// on its TCP listener (`mqtt_listen`) or over WebSocket (`mqtt.websocket`); both share them.
/// On a cluster node they join the cluster's claims of client identifiers. The stored wills of
/// sessions no connection holds (a crash cut them) wait for their delay and are published
/// through `edge` ([`Sessions::recover_wills`]).
pub(crate) fn start_sessions(
    settings: &ServerSettings,
    parts: &Parts,
    edge: &Arc<Edge>,
) -> Option<Arc<Sessions>> {
    let port = &settings.mqtt;
    if port.listen.is_none() && !port.websocket {
        return None;
    }
    let store = parts.store.mqtt_sessions.clone();
    let shared = settings.cluster.shared_store();
    let sessions = Sessions::start(store, &port.settings, shared);
    // On a cluster node, client identifiers are the cluster's (herald-mqtt's `cluster.rs`).
    if let Some(claims) = parts.bus.claims() {
        sessions.join_cluster(claims);
    }
    sessions.recover_wills(edge.clone());
    // Parked MQTT connections reach the sessions through the edge (herald-mqtt's `park.rs`).
    edge.attached.attach(&sessions);
    Some(sessions)
}

/// The router of `/mqtt` when `mqtt.websocket` is on (and so `sessions` were started); off,
/// one that answers `404` naming the setting.
pub(crate) fn websocket_router(
    port: &MqttPort,
    edge: &Arc<Edge>,
    sessions: &Option<Arc<Sessions>>,
) -> Option<Router> {
    let Some(sessions) = sessions.as_ref().filter(|_| port.websocket) else {
        return Some(herald_mqtt::websocket::switched_off_router());
    };
    tracing::info!("MQTT over WebSocket at /mqtt");
    Some(herald_mqtt::websocket::router(Arc::new(
        MqttOverWebSocket {
            edge: edge.clone(),
            settings: sessions.settings().clone(),
            sessions: sessions.clone(),
        },
    )))
}

/// The bound MQTT listener, not yet accepting.
pub(crate) struct MqttListener {
    listener: TcpListener,
    /// Its TLS acceptor, when it serves TLS.
    tls: Option<TlsAcceptor>,
}

impl MqttListener {
    /// Binds the listener if `port` has an address, or returns `None`. With `port.tls`, it
    /// serves TLS with `tls` (the server's certificate, no ALPN: MQTT clients rarely send one,
    /// and one that sends `mqtt` is served all the same).
    pub(crate) fn bind(
        port: &MqttPort,
        tls: Option<&crate::tls::ServerTls>,
    ) -> Result<Option<MqttListener>, ServerError> {
        let Some(addr) = port.listen else {
            return Ok(None);
        };
        let tls = match (port.tls, tls) {
            (false, _) => None,
            (true, Some(tls)) => Some(tls.line_acceptor()),
            (true, None) => return Err(ServerError::MqttTlsWithoutCertificate),
        };
        let settings = &port.settings;
        if settings.allow_anonymous {
            if settings.anonymous_rules.is_empty() {
                tracing::warn!(
                    app = %settings.anonymous_app,
                    "mqtt.allow_anonymous is on with no mqtt.anonymous_rules: anonymous MQTT \
                     clients may connect but neither publish nor subscribe"
                );
            } else {
                tracing::warn!(
                    app = %settings.anonymous_app,
                    rules = settings.anonymous_rules.len(),
                    "MQTT clients without credentials are accepted (mqtt.allow_anonymous): a \
                     development mode"
                );
            }
        }
        let listener = crate::meteor::bind(addr, " (mqtt)")?;
        Ok(Some(MqttListener { listener, tls }))
    }

    /// The bound address (the real port when asked for port 0).
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Starts accepting on `tasks`, with the persistent `sessions` ([`start_sessions`]); the
    /// accept loop ends at the edge's shutdown.
    pub(crate) fn serve(self, edge: Arc<Edge>, sessions: Arc<Sessions>, tasks: &TaskTracker) {
        if let Some(addr) = self.local_addr() {
            tracing::info!(%addr, tls = self.tls.is_some(), "MQTT listening");
        }
        tasks.spawn(accept_loop(self, edge, sessions));
    }
}

/// Accepts until shutdown. Each connection runs in the edge's connection tracker (which
/// shutdown waits for); over TLS its handshake runs there too, within the first-byte deadline,
/// so a client that never finishes it holds up nothing else.
async fn accept_loop(listener: MqttListener, edge: Arc<Edge>, sessions: Arc<Sessions>) {
    let MqttListener { listener, tls } = listener;
    // The sessions' settings: one `Arc` for the listener's connections and `/mqtt`'s.
    let settings = sessions.settings().clone();
    let shutdown = edge.shutdown.clone();
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                // Over the source address's connection limit: closed at once.
                Ok((_, peer)) if edge.limits.check_connection(peer.ip()).is_err() => continue,
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "mqtt accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let _ = tcp.set_nodelay(true);
        let (edge_here, settings, sessions) = (edge.clone(), settings.clone(), sessions.clone());
        match &tls {
            None => {
                edge.connections.spawn(herald_mqtt::serve::serve(
                    Conn::Plain(tcp),
                    peer,
                    edge_here,
                    settings,
                    sessions,
                ));
            }
            Some(tls) => {
                let tls = tls.clone();
                let limit = edge.settings.deadlines.first_byte;
                edge.connections.spawn(async move {
                    if let Some(conn) = Box::pin(tls.accept(tcp, limit)).await {
                        herald_mqtt::serve::serve(conn, peer, edge_here, settings, sessions).await;
                    }
                });
            }
        }
    }
}
