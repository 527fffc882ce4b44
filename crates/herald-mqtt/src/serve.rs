//! One MQTT connection, from the first byte to the close: [`serve`], which the MQTT listener
//! (`herald-server`'s `mqtt.rs`) calls for each accepted connection, inside the edge's
//! connection tracker (so shutdown waits for it), after a TLS handshake when the listener
//! serves TLS.
//!
//! First the CONNECT, read within the connect deadline (the edge's head deadline; a connection
//! that sends nothing, or not a whole CONNECT, in time is closed): a first packet that is not
//! CONNECT closes the connection [MQTT-3.1.0-1]; a CONNECT the codec refuses is answered as
//! [`crate::packet::ErrorResponse`] says (a CONNACK in the version the client understands, or
//! nothing); one `connect.rs` refuses gets its CONNACK. An accepted one gets a client session
//! registered as `Transport::Mqtt`, its client identifier (taken over from a connection that
//! held it, on this node or, in a cluster, another, once that one let go), its persistent
//! session opened ([`crate::session`]: a stored
//! one resumed, Session Present 1, its subscriptions made again from their positions before
//! the CONNACK goes, so nothing precedes it), its CONNACK, a place on the keep-alive roster
//! (which brings shutdown) and then runs on edge's driver as the MQTT `Wire` (`wire.rs`) until
//! it ends, parking while idle over plain TCP or WebSocket over plain TCP (`crate::park`); its
//! session's end is stored before the client identifier is let go. A fenced cluster node
//! (`crate::cluster`) refuses the CONNECT with 0x88 Server unavailable.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use herald_core::claims::{ClaimKey, ClusterHold};
use herald_core::lifecycle::Transport;
use herald_core::outbox::Outbox;
use herald_edge::conn::Conn;
use herald_edge::driver::{self, Connection, Ended, Marks, Served, Wire};
use herald_edge::roster::Place;
use herald_edge::session::ClientSession;
use herald_edge::Edge;

use crate::cluster::TAKEOVER_WAIT;
use crate::packet::{self, ConnAck, Packet, ProtocolVersion, ReasonCode};
use crate::park::Over;
use crate::session::Sessions;
use crate::settings::MqttSettings;
use crate::takeover::Claim;
use crate::wire::{encode_for, End, MqttWire, Start};

/// Serves one MQTT connection until it ends: `stream` is the accepted TCP connection (plain, or
/// TLS with its handshake done), `peer` its remote address, `edge` the server's transports
/// (sessions, live clients, keep-alive, shutdown), `settings` the listener's
/// [`MqttSettings`] and `sessions` its persistent sessions, shared by every connection. Ends
/// without an error: a connection's failures are its own.
pub async fn serve(
    mut stream: Conn,
    peer: SocketAddr,
    edge: Arc<Edge>,
    settings: Arc<MqttSettings>,
    sessions: Arc<Sessions>,
) {
    // Boxed, and gone once the connection runs: the CONNECT's read buffer, the session's
    // opening and the takeover are futures of kilobytes an idle connection's task would
    // otherwise keep for its whole life.
    // Bound where it is made: every local of this function is stored in the task.
    let Some(mut connection) = Box::pin(open(&mut stream, peer, &edge, settings, &sessions)).await
    else {
        return Box::pin(stream.close()).await;
    };
    let place = edge.keepalive.join(connection.wire.session.outbox());
    if sessions.fenced() {
        // Fenced while this connection was being accepted: looked at after joining the
        // roster, so either the fence's walk found it or this sees the fence.
        connection.wire.fence();
    }
    let served = connection.serve(&mut stream, &edge.parking).await;
    // Boxed: parking or the goodbye is no part of the idle connection's task.
    Box::pin(after(connection, served, stream, place, sessions)).await;
}

/// After the driver served the connection (fresh, or revived from parking, `crate::park`):
/// parks it in the slot it reserved, or ends it as `served` says.
pub(crate) async fn after(
    connection: Connection<MqttWire>,
    served: Served<End>,
    stream: Conn,
    place: Place,
    sessions: Arc<Sessions>,
) {
    let edge = connection.wire.session.edge().clone();
    let (ended, stream) = match (served, stream) {
        (Served::Parks(ticket), Conn::Plain(tcp)) => {
            return crate::park::park(connection, ticket, tcp, Over::Tcp, place, sessions);
        }
        (Served::Parks(ticket), Conn::WebSocket(ws)) => match ws.into_parked() {
            Ok((tcp, max_message)) => {
                // The listener's bound, which the revival makes the stream with again.
                debug_assert_eq!(
                    max_message,
                    crate::websocket::max_message(
                        &connection.wire.settings,
                        &connection.wire.session.edge().settings
                    )
                );
                let over = Over::WebSocket;
                return crate::park::park(connection, ticket, tcp, over, place, sessions);
            }
            // Not reached: only a stream that may park reserves a slot.
            Err(ws) => {
                edge.parking.cancel(ticket);
                (Ended::Gone, Conn::WebSocket(ws))
            }
        },
        (Served::Ends(ended), stream) => (ended, stream),
        // Not reached: a TLS connection does not reserve a slot.
        (Served::Parks(ticket), stream) => {
            edge.parking.cancel(ticket);
            (Ended::Gone, stream)
        }
    };
    edge.keepalive.leave(place);
    finish(connection.wire, stream, ended, &sessions).await;
}

/// Reads the CONNECT and opens what it asks for (see the module docs): the connection's
/// state once its CONNACK went, or `None` for a connection to close (refused, gone, or
/// silent past the connect deadline).
async fn open(
    stream: &mut Conn,
    peer: SocketAddr,
    edge: &Arc<Edge>,
    settings: Arc<MqttSettings>,
    sessions: &Arc<Sessions>,
) -> Option<Connection<MqttWire>> {
    crate::outbound::reserve_slots();
    let mut buf = BytesMut::new();
    let deadline = edge.settings.deadlines.head;
    let first = tokio::time::timeout(deadline, first_packet(stream, &mut buf, &settings));
    let connect = match first.await {
        Ok(Ok(Packet::Connect(connect))) => connect,
        // Not reached: the decoder accepts nothing but CONNECT first.
        Ok(Ok(_)) => {
            return None;
        }
        Ok(Err(Some((answer, version)))) => {
            let bytes = encode_for(&answer, version, u32::MAX);
            let _ = send_within(stream, bytes).await;
            return None;
        }
        Ok(Err(None)) | Err(_) => {
            tracing::debug!(%peer, "MQTT connection closed before a valid CONNECT");
            return None;
        }
    };
    let version = connect.protocol_version;
    let problem_information = connect.properties.request_problem_information;
    let client_max_packet = connect.properties.maximum_packet_size.map(|m| m.get());
    let client_receive_maximum = connect.properties.receive_maximum.get();
    let client_topic_alias_maximum = connect.properties.topic_alias_maximum;
    let session_expiry_zero = connect.properties.session_expiry_interval == 0;
    let accepted = match crate::connect::accept(edge, &settings, *connect).await {
        Ok(accepted) => accepted,
        Err(connack) => {
            tracing::debug!(%peer, code = connack.reason_code.name(), "MQTT CONNECT refused");
            let max = client_max_packet.unwrap_or(u32::MAX);
            let bytes = encode_for(&Packet::ConnAck(Box::new(connack)), version, max);
            let _ = send_within(stream, bytes).await;
            return None;
        }
    };
    if sessions.fenced() {
        // Cut off from the cluster's bus: the identifier cannot be claimed, and the other
        // nodes are about to take this one for lost (`crate::cluster`).
        let refusal = unavailable(
            accepted.connack,
            "this node lost the cluster's bus (Redis); connect to another node",
        );
        let max = client_max_packet.unwrap_or(u32::MAX);
        let bytes = encode_for(&Packet::ConnAck(Box::new(refusal)), version, max);
        let _ = send_within(stream, bytes).await;
        return None;
    }
    let outbox = Outbox::new(edge.settings.outbox_bytes);
    let session = ClientSession::new_for(
        Transport::Mqtt,
        edge.clone(),
        outbox,
        Some(accepted.client),
        Some(accepted.counted),
    );
    let app = session_app(&session);
    let (mut claim, previous) = Claim::take(&app, &accepted.client_id, session.outbox());
    if let Some(previous) = previous {
        let _ = tokio::time::timeout(TAKEOVER_WAIT, previous.wait()).await;
    }
    if let Some(claims) = sessions.cluster() {
        // The cluster's claim: a connection holding it on another node is taken over (and
        // its session's end stored, a will waiting there dealt with) before this goes on.
        let key = ClaimKey {
            app: app.clone(),
            name: accepted.client_id.clone(),
        };
        let hold = ClusterHold::claim(claims.clone(), key, accepted.clean_start, TAKEOVER_WAIT);
        claim.hold_in_cluster(hold.await);
    }
    let max = client_max_packet.unwrap_or(u32::MAX);
    let mut connack = accepted.connack;
    let expiry = sessions.granted_expiry(accepted.session_expiry);
    if version == ProtocolVersion::V5 && expiry != accepted.session_expiry {
        // Held to `mqtt.max_session_expiry`: the client is told the interval it has.
        connack.properties.session_expiry_interval = Some(expiry);
    }
    let will =
        (accepted.will.as_ref()).map(|w| crate::will::stored(w, version, &accepted.client_id));
    let opened = match sessions
        .open(
            &app,
            &accepted.client_id,
            accepted.clean_start,
            expiry,
            will,
        )
        .await
    {
        Ok(opened) => opened,
        Err(e) => {
            tracing::warn!(%peer, error = %e, "MQTT: the client's session could not be opened");
            let refusal = unavailable(connack, "the session store is unavailable");
            let bytes = encode_for(&Packet::ConnAck(Box::new(refusal)), version, max);
            let _ = send_within(stream, bytes).await;
            return None;
        }
    };
    connack.session_present = opened.present;
    let start = Start {
        version,
        anonymous: accepted.anonymous,
        problem_information,
        client_max_packet,
        client_receive_maximum,
        client_topic_alias_maximum,
        keep_alive: accepted.keep_alive,
        will: accepted.will,
        claim,
        session_expiry_zero,
        persist: opened.session,
        sys: sessions.sys.clone(),
    };
    let mut wire = MqttWire::new(session, settings, start, buf);
    if opened.resumed.is_some() {
        // Queued behind the CONNACK: the outbox is written only once the connection runs.
        wire.resume_session().await;
    }
    let connack = encode_for(&Packet::ConnAck(Box::new(connack)), version, max);
    if send_within(stream, connack).await.is_err() {
        wire.end_session().await;
        return None;
    }
    Some(Connection::new(wire, Marks::new(true)))
}

/// The connection's end, once it is off the keep-alive roster: the goodbye `ended` calls for,
/// the socket closed, the session's end stored and the client identifier let go.
async fn finish(mut wire: MqttWire, mut stream: Conn, ended: Ended<End>, sessions: &Sessions) {
    wire.goodbye(&mut stream, ended).await;
    stream.close().await;
    // Stored before the client identifier is let go (with the connection), so a connection
    // taking the session over finds it as this one left it.
    wire.end_session().await;
    // A will left waiting keeps the identifier the cluster's, so a CONNECT on another node
    // reaches it (`will.rs`).
    if let Some(hold) = wire.take_cluster_hold() {
        sessions.wills.hold_while_waiting(hold);
    }
}

/// The end of a connection revived from parking whose socket could not go back to the
/// runtime: as a connection gone, with nothing to tell the client.
pub(crate) async fn ended_without_socket(mut wire: MqttWire, sessions: &Sessions) {
    wire.will_due = crate::will::published_after(&Ended::Gone);
    wire.session.close();
    wire.end_session().await;
    if let Some(hold) = wire.take_cluster_hold() {
        sessions.wills.hold_while_waiting(hold);
    }
}

/// `connack` turned into a refusal: 0x88 Server unavailable (3.1.1: return code 3), with `why`
/// as its reason string.
fn unavailable(mut connack: ConnAck, why: &str) -> ConnAck {
    connack.reason_code = ReasonCode::ServerUnavailable;
    connack.session_present = false;
    connack.properties.reason_string = Some(why.to_owned());
    connack
}

/// The app of a session made with a client.
fn session_app(session: &ClientSession) -> herald_core::tenant::AppId {
    match session.client() {
        Ok(client) => client.app.clone(),
        // Not reached: the session was made with its client.
        Err(_) => herald_core::tenant::AppId::default_app(),
    }
}

/// Reads until the first packet is whole and decodes it: the CONNECT, or what the codec
/// answers a refused one with (a CONNACK in the version the client understands) or `None` to
/// close without an answer (a packet other than CONNECT, a malformed one, the client gone).
async fn first_packet(
    stream: &mut Conn,
    buf: &mut BytesMut,
    settings: &MqttSettings,
) -> Result<Packet, Option<(Packet, ProtocolVersion)>> {
    let mut chunk = [0u8; 4096];
    loop {
        match packet::decode(buf, None, settings.max_packet_size) {
            Ok(Some(packet)) => return Ok(packet),
            Ok(None) => {}
            Err(e) => return Err(e.answer()),
        }
        if stream.readable().await.is_err() {
            return Err(None);
        }
        match stream.try_read(&mut chunk) {
            Ok(0) => return Err(None),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err(None),
        }
    }
}

/// Writes `bytes` whole, giving the socket a few seconds.
async fn send_within(stream: &mut Conn, bytes: Vec<u8>) -> Result<(), ()> {
    match tokio::time::timeout(Duration::from_secs(5), driver::write_rest(stream, bytes)).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of what an async fn of five arguments returns.
    fn returned_size<A, B, C, D, E, F>(_: fn(A, B, C, D, E) -> F) -> usize {
        size_of::<F>()
    }

    #[test]
    fn a_running_connections_task_keeps_nothing_of_its_connect() {
        // The CONNECT's read chunk, the session's opening and the takeover are boxed and
        // gone: the task is the connection's state, the driver's loop and a few pointers (it
        // was 9,408 bytes in a debug build with them inline).
        let task = returned_size(serve);
        let state = size_of::<Connection<MqttWire>>();
        assert!(task <= state + 320, "{task} bytes for a state of {state}");
    }
}
