//! An idle MQTT connection parking and coming back (`herald_edge::parking`, as idle
//! WebSockets do after `park_idle_after`): its parked record ([`ParkedMqtt`]: the connection's
//! state and its socket, no task) stored in the slot the driver reserved, how it answers the
//! client's PINGREQ while parked, and how the record resumes serving.
//!
//! Parked, a connection keeps everything it had in its task (its session, subscriptions,
//! QoS 1 and 2 packets in flight, will and claim), so its revival carries on where it left
//! off. It is revived into a task when its socket has anything but whole PINGREQ packets to
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

use herald_edge::conn::Conn;
use herald_edge::driver::{Connection, Marks};
use herald_edge::parking::{raw, Cause, Parked, Ticket};
use herald_edge::roster::Place;

use crate::session::Sessions;
use crate::wire::MqttWire;

/// PINGREQ, as every MQTT version sends it.
const PINGREQ: [u8; 2] = [0xC0, 0x00];
/// PINGRESP, its answer.
const PINGRESP: [u8; 2] = [0xD0, 0x00];
/// The most a parked connection's socket is read on the parking thread: a few PINGREQs.
/// Anything longer revives the connection.
const PINGS_READ: usize = 64;

/// Parks `connection` in its reserved slot, with its socket, its place on the roster (where it
/// stays while parked) and the listener's sessions (for its end).
pub(crate) fn park(
    connection: Connection<MqttWire>,
    ticket: Ticket,
    tcp: tokio::net::TcpStream,
    place: Place,
    sessions: Arc<Sessions>,
) {
    let edge = connection.wire.session.edge().clone();
    let (wire, marks) = connection.into_parts();
    let expires = wire.parked_expiry();
    edge.parking.park(
        ticket,
        tcp,
        |socket| ParkedMqtt {
            wire,
            marks,
            socket,
            expires,
            place,
            sessions,
        },
        edge.connections.token(),
    );
}

/// A parked MQTT connection: all it holds while it waits without a task.
struct ParkedMqtt {
    wire: MqttWire,
    marks: Marks,
    socket: std::net::TcpStream,
    /// When it is revived at the latest: its token's expiry or its keep-alive deadline.
    expires: Option<u64>,
    place: Place,
    sessions: Arc<Sessions>,
}

impl Parked for ParkedMqtt {
    fn socket(&self) -> RawFd {
        raw(&self.socket)
    }

    fn expires(&self) -> Option<u64> {
        self.expires
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
                marks,
                socket,
                place,
                sessions,
                ..
            } = *self;
            let Ok(tcp) = tokio::net::TcpStream::from_std(socket) else {
                // Not reached in a runtime with I/O: the connection ends as gone.
                wire.session.edge().keepalive.leave(place);
                return Box::pin(crate::serve::ended_without_socket(wire, &sessions)).await;
            };
            let mut connection = Connection::new(wire, marks);
            let mut stream = Conn::Plain(tcp);
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
        let pings = match self.socket.peek(&mut buf) {
            Ok(n) if n < PINGS_READ && only_pingreqs(&buf[..n]) => n,
            _ => return false,
        };
        let answers = PINGRESP.repeat(pings / PINGREQ.len());
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_parked_connection_fits_jemallocs_1024_byte_class() {
        // The connection's whole state with the socket and roster place: no task, timer or
        // driver loop. 1,024 bytes is a jemalloc size class, the next one 1,280.
        assert!(
            size_of::<ParkedMqtt>() <= 1024,
            "{} bytes",
            size_of::<ParkedMqtt>()
        );
    }
}
