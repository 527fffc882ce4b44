//! An idle Pusher connection parked ([`herald_edge::parking`]) as Herald's WebSocket parks:
//! after `park_idle_after` with nothing to do, a plain-TCP connection leaves its task and waits
//! as one small record ([`ParkedPusher`]: its session in its parked form, `parked.rs`, with
//! its place in the node's Pusher connections; its socket; its place on the keep-alive
//! roster), with no task, future or tokio registration of its own.
//!
//! Pusher's keep-alive goes on without a task:
//!
//! - at a roster tick (the outbox's lone ping request), the rule of `wire.rs` is applied to
//!   the parked session: nothing to send (stays parked), `pusher:ping` sent with one
//!   non-blocking write (stays parked), or a ping gone unanswered for the pong timeout, which
//!   revives the connection so its task closes it with 4201 as before;
//! - a readable socket holding only whole `pusher:ping` and `pusher:pong` frames from the
//!   client is answered (a `pusher:pong` for each ping, written first with one non-blocking
//!   write) and then read; the client counts as heard from.
//!
//! Anything else revives the connection into a task, which carries on where it left off: a
//! message, presence or watchlist frame or a close in its outbox (a revocation,
//! `terminate_connections`, its key gone, shutdown), any other client frame (a subscribe, a
//! client event, a close, the end of the stream). The session keeps all it must (its
//! client-event window included; a connection parks only with a fresh command budget), so a
//! revived connection behaves as one that never parked.

use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::RawFd;
use std::pin::Pin;
use std::time::Instant;

use herald_edge::conn::Conn;
use herald_edge::driver::{Connection, Marks};
use herald_edge::parking::{raw, send_ping, Cause, Parked, Ticket};
use herald_edge::roster::Place;
use herald_edge::ws::frame::{self as ws, FrameReader, Incoming, Opcode};

use crate::frame::{self, ClientFrame};
use crate::parked::ParkedPusherSession;
use crate::session::PusherSession;
use crate::wire::PusherWire;

/// The most a parked connection's socket is read on the parking thread: a few pings. Anything
/// longer revives the connection.
const PINGS_READ: usize = 512;

/// Parks `connection` in its reserved slot, with its socket and its place on the roster
/// (where it stays while parked).
pub(crate) fn park(connection: Connection<PusherWire>, ticket: Ticket, stream: Conn, place: Place) {
    let edge = connection.wire.session.edge().clone();
    let Conn::Plain(tcp) = stream else {
        // Not reached: only a plain TCP connection reserves a slot.
        edge.parking.cancel(ticket);
        edge.keepalive.leave(place);
        return;
    };
    // The frame reader (between frames, so empty) and the input list are built again on
    // revival.
    let (PusherWire { session, .. }, _) = connection.into_parts();
    edge.parking.park(
        ticket,
        tcp,
        |socket| ParkedPusher {
            session: session.park(),
            socket,
            place,
        },
        edge.connections.token(),
    );
}

/// A parked Pusher connection: all it holds while it waits without a task.
pub(crate) struct ParkedPusher {
    session: ParkedPusherSession,
    socket: std::net::TcpStream,
    place: Place,
}

impl ParkedPusher {
    /// A keep-alive tick: Pusher's rule applied without a task (see the module docs).
    fn tick(&mut self, waker: &std::task::Waker) -> bool {
        let outbox = self.session.outbox();
        if !outbox.take_lone_ping(waker) {
            return false;
        }
        let now = Instant::now();
        match self.session.liveness.due(now, self.session.settings()) {
            Ok(false) => true,
            Ok(true) => {
                let mut ping = Vec::new();
                ws::encode(&mut ping, Opcode::Text, &frame::ping());
                // Not sent: `send_ping` asked the revived task to send it.
                let sent = send_ping(&self.socket, &ping, outbox);
                if sent {
                    self.session.liveness.pinged(now);
                }
                sent
            }
            // The ping went unanswered: the revived task closes the connection (4201).
            Err(_) => {
                outbox.request_ping();
                false
            }
        }
    }

    /// The socket is readable: answers and reads the client's pings if that is all it sent.
    fn read_pings(&mut self) -> bool {
        let mut buf = [0; PINGS_READ];
        let read = match self.socket.peek(&mut buf) {
            Ok(n) if n > 0 && n < PINGS_READ => n,
            _ => return false,
        };
        let Some(pings) = only_pings(&buf[..read]) else {
            return false;
        };
        let mut pongs = Vec::new();
        for _ in 0..pings {
            ws::encode(&mut pongs, Opcode::Text, &frame::pong());
        }
        // The answers first: if the socket takes none of them, nothing is read and the revived
        // task reads the pings and answers them itself.
        match (&self.socket).write(&pongs) {
            Ok(n) if n == pongs.len() => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                return false
            }
            _ => return self.shut(),
        }
        match (&self.socket).read(&mut buf[..read]) {
            Ok(n) if n == read => {
                self.session.liveness.heard(Instant::now());
                true
            }
            _ => self.shut(),
        }
    }

    /// Shuts the socket down (a frame was left in part), so the revived task ends the
    /// connection as gone.
    fn shut(&self) -> bool {
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
        false
    }
}

/// How many `pusher:ping` frames `data` holds, if it is only whole `pusher:ping` and
/// `pusher:pong` frames (masked text frames, as a client sends them) and at least one.
fn only_pings(data: &[u8]) -> Option<usize> {
    let mut reader = FrameReader::new(PINGS_READ);
    let mut frames = Vec::new();
    reader.feed(data, &mut frames).ok()?;
    if !reader.is_idle() || frames.is_empty() {
        return None;
    }
    let mut pings = 0;
    for f in &frames {
        let Incoming::Text(text) = f else {
            return None;
        };
        match ClientFrame::parse(text) {
            Ok(ClientFrame::Ping) => pings += 1,
            Ok(ClientFrame::Pong) => {}
            _ => return None,
        }
    }
    Some(pings)
}

impl Parked for ParkedPusher {
    fn socket(&self) -> RawFd {
        raw(&self.socket)
    }

    fn expires(&self) -> Option<u64> {
        None
    }

    fn answer(&mut self, cause: Cause<'_>) -> bool {
        match cause {
            Cause::Outbox(waker) => self.tick(waker),
            Cause::Readable => self.read_pings(),
        }
    }

    fn resume(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let ParkedPusher {
                session,
                socket,
                place,
            } = *self;
            let Ok(tcp) = tokio::net::TcpStream::from_std(socket) else {
                session.edge().keepalive.leave(place);
                return;
            };
            let session = PusherSession::revive(session);
            let mut connection = Connection::new(PusherWire::new(session), Marks::new(true));
            let mut stream = Conn::Plain(tcp);
            let served = crate::serve::serve(&mut connection, &mut stream).await;
            Box::pin(crate::serve::after(connection, served, stream, place)).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked_text(text: &str) -> Vec<u8> {
        let mut out = vec![0x81, 0x80 | u8::try_from(text.len()).unwrap(), 1, 2, 3, 4];
        out.extend(
            text.bytes()
                .zip([1, 2, 3, 4].iter().cycle())
                .map(|(b, m)| b ^ m),
        );
        out
    }

    #[test]
    fn only_whole_client_pings_are_answered_while_parked() {
        let ping = masked_text(r#"{"event":"pusher:ping","data":{}}"#);
        assert_eq!(only_pings(&ping), Some(1));
        assert_eq!(only_pings(&[ping.clone(), ping.clone()].concat()), Some(2));
        let pong = masked_text(r#"{"event":"pusher:pong","data":{}}"#);
        assert_eq!(only_pings(&pong), Some(0), "a pong is read, not answered");
        assert_eq!(only_pings(&[pong, ping.clone()].concat()), Some(1));
        assert_eq!(only_pings(&[]), None, "nothing read");
        assert_eq!(only_pings(&ping[..ping.len() - 1]), None, "a ping in part");
        let subscribe = masked_text(r#"{"event":"pusher:subscribe","data":{"channel":"a"}}"#);
        assert_eq!(only_pings(&[ping.clone(), subscribe].concat()), None);
        assert_eq!(only_pings(&[0x88, 0x80, 1, 2, 3, 4]), None, "a close");
        let unmasked = [&[0x81, 0x03][..], b"abc"].concat();
        assert_eq!(only_pings(&unmasked), None);
    }

    #[test]
    fn a_parked_connection_fits_jemallocs_160_byte_class() {
        // The parked session, the socket and the roster place: nothing of the frame reader,
        // the command budget or the rare parts of a session (boxed apart, for a connection
        // that has any). 160 bytes is a jemalloc size class: the record was 192 bytes until
        // the parked client left its token's stamp to the live-client registry (session 34),
        // 200 bytes (224-byte class) until the roster's place shrank to 4 bytes (session 33),
        // 240 bytes (256-byte class) while the parked client kept its device, `user_info` and
        // pattern sets inline, and the session boxed whole was 488 bytes (512-byte class)
        // besides a 48-byte record before that.
        assert_eq!(
            size_of::<ParkedPusher>(),
            size_of::<ParkedPusherSession>() + 8,
            "the socket and place share one 8-byte tail"
        );
        assert!(
            size_of::<ParkedPusher>() <= 160,
            "{} bytes",
            size_of::<ParkedPusher>()
        );
    }
}
