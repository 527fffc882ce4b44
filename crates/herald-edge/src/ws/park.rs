//! A WebSocket connection parking and coming back ([`crate::parking`]): its parked record
//! ([`ParkedWs`]: the connection's state and its socket, no task) stored in the slot the driver
//! reserved, how it answers keep-alive pings and pongs while parked, and how the record resumes
//! serving.

use std::future::Future;
use std::io::Read;
use std::os::fd::RawFd;
use std::pin::Pin;

use super::session::Session;
use super::wire::WsWire;
use super::{after, serve, Connection, ConnectionGauge};
use crate::conn::Conn;
use crate::driver::Marks;
use crate::parking::{raw, send_ping, Cause, Parked, Ticket};
use crate::roster::Place;
use crate::session::ParkedSession;

/// A server ping frame with no payload, as [`super::frame::encode`] writes it.
const PING_FRAME: [u8; 2] = [0x89, 0x00];

/// The most a parked connection's socket is read on the parking thread: a few pongs. Anything
/// longer revives the connection.
const PONGS_READ: usize = 256;

/// Parks `connection` in its reserved slot, with its socket, its place on the roster (where it
/// stays while parked) and its gauge.
pub(super) fn park(
    connection: Connection,
    ticket: Ticket,
    stream: Conn,
    place: Place,
    gauge: ConnectionGauge,
) {
    let edge = connection.wire.session.edge().clone();
    let Conn::Plain(tcp) = stream else {
        // Not reached: only a plain TCP connection reserves a slot.
        edge.parking.cancel(ticket);
        edge.keepalive.leave(place);
        return;
    };
    // Only what a connection between frames needs: the frame reader (empty) and the command
    // buffer are built again on revival.
    let (WsWire { session, .. }, marks) = connection.into_parts();
    let heard_since_ping = marks.active();
    edge.parking.park(
        ticket,
        tcp,
        |socket| ParkedWs {
            session: session.park(),
            heard_since_ping,
            socket,
            place,
            gauge,
        },
        edge.connections.token(),
    );
}

/// A parked WebSocket connection: all it holds while it waits without a task.
struct ParkedWs {
    session: ParkedSession,
    heard_since_ping: bool,
    socket: std::net::TcpStream,
    place: Place,
    gauge: ConnectionGauge,
}

impl Parked for ParkedWs {
    fn socket(&self) -> RawFd {
        raw(&self.socket)
    }

    fn expires(&self) -> Option<u64> {
        self.session.expires()
    }

    fn answer(&mut self, cause: Cause<'_>) -> bool {
        match cause {
            // A client that did not answer the last ping is closed by its task (4002), as
            // any other wake is answered by it.
            Cause::Outbox(waker) => {
                let outbox = self.session.outbox();
                let pinged = self.heard_since_ping
                    && outbox.take_lone_ping(waker)
                    && send_ping(&self.socket, &PING_FRAME, outbox);
                if pinged {
                    self.heard_since_ping = false;
                }
                pinged
            }
            // Pongs only are read here; anything else is left for the revived task to read.
            Cause::Readable => {
                let mut buf = [0; PONGS_READ];
                let pongs = match self.socket.peek(&mut buf) {
                    Ok(n) if n < PONGS_READ && only_pongs(&buf[..n]) => n,
                    _ => return false,
                };
                match (&self.socket).read(&mut buf[..pongs]) {
                    Ok(n) if n == pongs => {
                        self.heard_since_ping = true;
                        true
                    }
                    _ => {
                        let _ = self.socket.shutdown(std::net::Shutdown::Both);
                        false
                    }
                }
            }
        }
    }

    fn resume(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let ParkedWs {
                session,
                heard_since_ping,
                socket,
                place,
                gauge,
            } = *self;
            let Ok(tcp) = tokio::net::TcpStream::from_std(socket) else {
                session.edge().keepalive.leave(place);
                return;
            };
            let wire = WsWire::new(Session::revive(session));
            let mut connection = Connection::new(wire, Marks::new(heard_since_ping));
            let mut stream = Conn::Plain(tcp);
            let served = serve(&mut connection, &mut stream).await;
            Box::pin(after(connection, served, stream, place, gauge)).await;
        })
    }
}

/// Whether `data` is one or more whole pong frames from a client (masked, unfragmented, with
/// at most 125 bytes of payload) and nothing else.
fn only_pongs(mut data: &[u8]) -> bool {
    if data.is_empty() {
        return false;
    }
    while let [first, second, ..] = *data {
        let len = usize::from(second & 0x7f);
        // FIN and the pong opcode; the mask bit; a control frame's short length.
        if first != 0x8A || second & 0x80 == 0 || len > 125 {
            return false;
        }
        let Some(rest) = data.get(2 + 4 + len..) else {
            return false;
        };
        data = rest;
    }
    data.is_empty()
}

#[cfg(test)]
mod tests {
    use super::super::frame::{self, Opcode};
    use super::*;

    #[test]
    fn the_ping_frame_is_an_empty_ping() {
        let mut encoded = Vec::new();
        frame::encode(&mut encoded, Opcode::Ping, b"");
        assert_eq!(encoded, PING_FRAME);
    }

    #[test]
    fn only_whole_masked_pongs_are_pongs() {
        let pong = [0x8A, 0x80, 1, 2, 3, 4];
        let pong_with_payload = [0x8A, 0x82, 1, 2, 3, 4, 9, 9];
        assert!(only_pongs(&pong));
        assert!(only_pongs(&[&pong[..], &pong_with_payload, &pong].concat()));
        assert!(!only_pongs(&[]), "nothing read is not a pong");
        assert!(!only_pongs(&pong[..5]), "a pong in part");
        assert!(!only_pongs(&[0x8A, 0x00]), "unmasked");
        assert!(!only_pongs(&[0x0A, 0x80, 1, 2, 3, 4]), "not final");
        assert!(!only_pongs(&[0x89, 0x80, 1, 2, 3, 4]), "a ping");
        assert!(!only_pongs(&[0x88, 0x82, 1, 2, 3, 4, 5, 6]), "a close");
        assert!(
            !only_pongs(&[&pong[..], &[0x81, 0x81, 1, 2, 3, 4, 5]].concat()),
            "then text"
        );
        assert!(
            !only_pongs(&[0x8A, 0xFE, 0, 200]),
            "too long for a control frame"
        );
    }

    #[test]
    fn a_parked_connection_fits_jemallocs_112_byte_class() {
        // The parked session, the socket, the roster place and a flag: nothing of the frame
        // reader, the command buffer or the timers of a connection in a task. The record is
        // boxed on its own: 112 bytes is a jemalloc size class, the next one 128 (where the
        // record was while the parked client's app id was two words and its rare claims and
        // grants two pointers, session 37), then 160 (while the parked client kept its token's
        // stamp, session 34), then 192 (while the parked client kept its device, `user_info`
        // and pattern sets inline).
        assert_eq!(
            size_of::<ParkedWs>(),
            size_of::<ParkedSession>() + 16,
            "the socket, place and flag share one 16-byte tail"
        );
        assert!(
            size_of::<ParkedWs>() <= 112,
            "{} bytes",
            size_of::<ParkedWs>()
        );
    }
}
