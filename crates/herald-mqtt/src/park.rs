//! An idle MQTT connection parking and coming back (`herald_edge::parking`, as idle
//! WebSockets do after `park_idle_after`): its parked record ([`ParkedMqtt`]: the connection's
//! state in its parked form and its socket, no task) stored in the slot the driver reserved,
//! how it answers the client's PINGREQ while parked, and how the record resumes serving.
//!
//! Connections over plain TCP park, and so do connections over WebSocket (`/mqtt`) on a plain
//! TCP listener ([`Over`]): the WebSocket stream keeps nothing between frames but its socket
//! and its message bound, so the record keeps those and builds the stream again on revival.
//! Over TLS (`mqtt_tls`, or `/mqtt` on a TLS listener) a connection stays in its task: rustls's
//! session holds the connection's keys and record state, which the parking thread cannot peek
//! through for a PINGREQ (see docs/design/idle-connections.md).
//!
//! Parked, a connection keeps what it had in its task (its session, subscriptions, QoS 1 and 2
//! packets in flight, topic aliases, will and claim: `ParkedWire`), so its revival carries on
//! where it left off. It is revived into a task when its socket has anything but whole PINGREQ packets to
//! read (a PUBACK, a SUBSCRIBE, the client's close), when its outbox has something (a message,
//! a close for a revocation, a slow consumer or shutdown, a takeover of its client identifier),
//! or at the earlier of its token's expiry and its keep-alive deadline (one and a half times
//! the keep-alive after the last packet heard, [MQTT-3.1.2-22]: the task closes a client that
//! stayed silent, and parks again one that pinged meanwhile).
//!
//! A connection parks only when it waits for nothing but the client or the outbox: no packet
//! part-read, no message waiting for its packet identifier to be stored ([`MqttWire::may_park`]).

use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::Arc;

use herald_edge::conn::{Conn, WsStream};
use herald_edge::driver::Connection;
use herald_edge::parking::{raw, Cause, Parked, Ticket};
use herald_edge::roster::Place;

use crate::session::Sessions;
use crate::wire::{MqttWire, ParkedWire};

/// PINGREQ, as every MQTT version sends it.
const PINGREQ: [u8; 2] = [0xC0, 0x00];
/// PINGRESP, its answer.
const PINGRESP: [u8; 2] = [0xD0, 0x00];
/// The most a parked connection's socket is read on the parking thread: a few PINGREQs (over
/// WebSocket, a few binary frames of them). Anything longer revives the connection.
const PINGS_READ: usize = 64;

/// What a parked connection's socket carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Over {
    /// MQTT itself, on the MQTT listener.
    Tcp,
    /// MQTT in WebSocket binary messages (`/mqtt`). The stream's message bound is not kept:
    /// it is the listener's ([`crate::websocket::max_message`]), made again on revival.
    WebSocket,
}

/// Parks `connection` in its reserved slot, with its socket (carrying what `over` says) and its
/// place on the roster (where it stays while parked). The listener's sessions (for its
/// revival and end) are reached through the edge ([`herald_edge::attached`]), where the
/// server attached them: the record keeps no pointer of its own.
pub(crate) fn park(
    connection: Connection<MqttWire>,
    ticket: Ticket,
    tcp: tokio::net::TcpStream,
    over: Over,
    place: Place,
    sessions: Arc<Sessions>,
) {
    let edge = connection.wire.session.edge().clone();
    let (wire, marks) = connection.into_parts();
    let wire = wire.park(&sessions, marks, over);
    if !edge
        .attached
        .get::<Sessions>()
        .is_some_and(|attached| Arc::ptr_eq(&attached, &sessions))
    {
        // The server attaches its one `Sessions` as it starts them; this covers an edge
        // served without that step.
        edge.attached.attach(&sessions);
    }
    drop(sessions);
    edge.parking.park(
        ticket,
        tcp,
        |socket| ParkedMqtt {
            wire,
            socket,
            place,
        },
        edge.connections.token(),
    );
}

/// A parked MQTT connection: all it holds while it waits without a task.
struct ParkedMqtt {
    /// The connection's state in its parked form (with the driver's marks).
    wire: ParkedWire,
    socket: std::net::TcpStream,
    place: Place,
}

impl Parked for ParkedMqtt {
    fn socket(&self) -> RawFd {
        raw(&self.socket)
    }

    /// Its token's expiry or its keep-alive deadline (asked once, as it parks).
    fn expires(&self) -> Option<u64> {
        self.wire.expires()
    }

    fn answer(&mut self, cause: Cause<'_>) -> bool {
        match cause {
            // The roster's keep-alive ping request needs nothing (MQTT clients ping); anything
            // else in the outbox, or a takeover (which wakes it with a ping request), needs the
            // task.
            Cause::Outbox(waker) => {
                self.wire.may_stay_parked() && self.wire.session.outbox().take_lone_ping(waker)
            }
            Cause::Readable => self.answer_pings(),
        }
    }

    fn resume(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let ParkedMqtt {
                wire,
                socket,
                place,
            } = *self;
            let edge = wire.session.edge().clone();
            let Some(sessions) = edge.attached.get::<Sessions>() else {
                // Not reached while the server runs (it holds its sessions until its
                // connections ended): the connection ends, its session dropped as it is.
                edge.keepalive.leave(place);
                return;
            };
            let over = wire.over;
            let (wire, marks) = wire.revive(&sessions);
            let Ok(tcp) = tokio::net::TcpStream::from_std(socket) else {
                // Not reached in a runtime with I/O: the connection ends as gone.
                wire.session.edge().keepalive.leave(place);
                return Box::pin(crate::serve::ended_without_socket(wire, &sessions)).await;
            };
            let mut connection = Connection::new(wire, marks);
            let mut stream = match over {
                Over::Tcp => Conn::Plain(tcp),
                Over::WebSocket => {
                    let max_message = crate::websocket::max_message(
                        &connection.wire.settings,
                        &connection.wire.session.edge().settings,
                    );
                    let ws = WsStream::new(Conn::Plain(tcp), &[], max_message);
                    Conn::WebSocket(Box::new(ws))
                }
            };
            let edge = connection.wire.session.edge().clone();
            let served = connection.serve(&mut stream, &edge.parking).await;
            Box::pin(crate::serve::after(
                connection, served, stream, place, sessions,
            ))
            .await;
        })
    }
}

impl ParkedMqtt {
    /// Answers the PINGREQs the socket holds, if that is all it holds: true if the connection
    /// stays parked. If the PINGRESPs cannot be written at once nothing is read (the revived
    /// task answers); if they went in part the socket is shut down (the task then ends the
    /// connection as gone).
    fn answer_pings(&mut self) -> bool {
        let mut buf = [0; PINGS_READ];
        let peeked = match self.socket.peek(&mut buf) {
            Ok(n) if n < PINGS_READ => &buf[..n],
            _ => return false,
        };
        let (pings, answers) = match self.wire.over {
            Over::Tcp if only_pingreqs(peeked) => {
                (peeked.len(), PINGRESP.repeat(peeked.len() / PINGREQ.len()))
            }
            Over::WebSocket => match pingreqs_in_frames(peeked) {
                Some(count) => (peeked.len(), pingresps_in_a_frame(count)),
                None => return false,
            },
            Over::Tcp => return false,
        };
        match (&self.socket).write(&answers) {
            Ok(n) if n == answers.len() => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                return false;
            }
            _ => {
                let _ = self.socket.shutdown(std::net::Shutdown::Both);
                return false;
            }
        }
        match (&self.socket).read(&mut buf[..pings]) {
            Ok(n) if n == pings => {
                self.wire.heard_now();
                true
            }
            _ => {
                let _ = self.socket.shutdown(std::net::Shutdown::Both);
                false
            }
        }
    }
}

/// Whether `data` is one or more whole PINGREQ packets and nothing else.
fn only_pingreqs(data: &[u8]) -> bool {
    !data.is_empty()
        && data.len().is_multiple_of(PINGREQ.len())
        && data.chunks(PINGREQ.len()).all(|p| p == PINGREQ)
}

/// How many PINGREQs `data` holds if it is one or more whole binary frames from a WebSocket
/// client (final, masked, at most 125 bytes of payload) whose payloads are whole PINGREQs and
/// nothing else.
fn pingreqs_in_frames(mut data: &[u8]) -> Option<usize> {
    let mut count = 0;
    while let [first, second, ..] = *data {
        let len = usize::from(second & 0x7f);
        // FIN and the binary opcode; the mask bit; a short length.
        if first != 0x82 || second & 0x80 == 0 || len > 125 {
            return None;
        }
        let key = data.get(2..6)?;
        let payload = data.get(6..6 + len)?;
        let unmasked: Vec<u8> = (payload.iter().enumerate())
            .map(|(i, b)| b ^ key[i % 4])
            .collect();
        if !only_pingreqs(&unmasked) {
            return None;
        }
        count += len / PINGREQ.len();
        data = &data[6 + len..];
    }
    (count > 0 && data.is_empty()).then_some(count)
}

/// `count` PINGRESPs in one binary frame from the server (unmasked), as the WebSocket stream
/// would write them (`count` at most 62: the frame's length fits its first byte).
fn pingresps_in_a_frame(count: usize) -> Vec<u8> {
    let payload = PINGRESP.repeat(count);
    let mut frame = vec![0x82, payload.len() as u8];
    frame.extend_from_slice(&payload);
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's binary frame of `payload`, masked with `key`.
    fn client_frame(payload: &[u8], key: [u8; 4]) -> Vec<u8> {
        let mut frame = vec![0x82, 0x80 | payload.len() as u8];
        frame.extend_from_slice(&key);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        frame
    }

    #[test]
    fn only_whole_binary_frames_of_whole_pingreqs_are_answered_over_websocket() {
        let one = client_frame(&PINGREQ, [1, 2, 3, 4]);
        let two = client_frame(&[PINGREQ, PINGREQ].concat(), [9, 8, 7, 6]);
        assert_eq!(pingreqs_in_frames(&one), Some(1));
        assert_eq!(pingreqs_in_frames(&[&one[..], &two].concat()), Some(3));
        assert_eq!(
            pingreqs_in_frames(&[]),
            None,
            "nothing read (the client closed)"
        );
        assert_eq!(pingreqs_in_frames(&one[..7]), None, "a frame in part");
        let half = client_frame(&PINGREQ[..1], [1, 2, 3, 4]);
        assert_eq!(pingreqs_in_frames(&half), None, "a PINGREQ in part");
        let puback = client_frame(&[0x40, 0x02, 0x00, 0x01], [1, 2, 3, 4]);
        assert_eq!(pingreqs_in_frames(&[&one[..], &puback].concat()), None);
        let mut unmasked = vec![0x82, 0x02];
        unmasked.extend_from_slice(&PINGREQ);
        assert_eq!(pingreqs_in_frames(&unmasked), None, "unmasked");
        let mut ping = client_frame(&[], [1, 2, 3, 4]);
        ping[0] = 0x89;
        assert_eq!(pingreqs_in_frames(&ping), None, "a WebSocket ping");
        let mut text = one.clone();
        text[0] = 0x81;
        assert_eq!(pingreqs_in_frames(&text), None, "a text frame");
        let mut first_fragment = one.clone();
        first_fragment[0] = 0x02;
        assert_eq!(pingreqs_in_frames(&first_fragment), None, "not final");
    }

    #[test]
    fn pingresps_go_in_one_binary_frame() {
        assert_eq!(pingresps_in_a_frame(1), [0x82, 0x02, 0xD0, 0x00]);
        assert_eq!(
            pingresps_in_a_frame(2),
            [0x82, 0x04, 0xD0, 0x00, 0xD0, 0x00]
        );
    }

    #[test]
    fn only_whole_pingreqs_are_answered_while_parked() {
        assert!(only_pingreqs(&PINGREQ));
        assert!(only_pingreqs(&[0xC0, 0x00, 0xC0, 0x00]));
        assert!(!only_pingreqs(&[]), "nothing read (the client closed)");
        assert!(!only_pingreqs(&[0xC0]), "a PINGREQ in part");
        assert!(
            !only_pingreqs(&[0xC0, 0x00, 0x40, 0x02, 0x00, 0x01]),
            "then a PUBACK"
        );
        assert!(!only_pingreqs(&[0xE0, 0x00]), "a DISCONNECT");
    }

    #[test]
    fn a_lean_parked_connection_fits_jemallocs_128_byte_class() {
        eprintln!("ParkedMqtt (the record): {} B", size_of::<ParkedMqtt>());
        // The connection's state in its parked form (lean: one subscription and nothing
        // else inline, anything more boxed apart) with the socket and roster place: no task,
        // timer or driver loop. 128 bytes is a jemalloc size class, the next one 160, where it
        // was while the client's app id was two words, its rare claims and grants two
        // pointers, the claim two words with its cluster hold, and the record kept the
        // listener's sessions (session 37); 192 while the parked client session kept its
        // token's stamp (session 34). It was
        // 760 bytes (768 class) with every part kept as it is in a task, then 256 while it
        // kept its subscription's channel name (the client session's too) and the listener's
        // settings (its sessions' too), then 224 while it kept the keep-alive and the last
        // packet heard in milliseconds, the lone subscription's options and the client's
        // Maximum Packet Size in full, the WebSocket stream's message bound and an 8-byte
        // roster place.
        assert!(
            size_of::<ParkedMqtt>() <= 128,
            "{} bytes",
            size_of::<ParkedMqtt>()
        );
    }
}
