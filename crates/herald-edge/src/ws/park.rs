//! A WebSocket connection parking and coming back ([`crate::parking`]): its reservation of a
//! slot, its parked record ([`ParkedWs`]: the connection's state and its socket, no
//! task), and how the record resumes serving.

use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;

use herald_core::outbox::Batch;

use super::frame::FrameReader;
use super::session::Session;
use super::{Connection, ConnectionGauge};
use crate::conn::Conn;
use crate::parking::{raw, Parked, Ticket};
use crate::roster::Place;

impl Connection {
    /// Reserves a parking slot for this idle connection (the outbox then holds the slot's
    /// waker). Refused when the socket is TLS or parking is off (`None`), or when the outbox
    /// had something after all (which the caller gets to act on).
    pub(super) fn reserve_parking(&mut self, stream: &Conn) -> Result<Ticket, Option<Batch>> {
        if !matches!(stream, Conn::Plain(_)) {
            return Err(None);
        }
        let ticket = self.session.edge().parking.reserve(self.session.outbox())?;
        // The expiry timer is rebuilt on revival; the parking watches the expiry.
        self.expiry = None;
        Ok(ticket)
    }
}

/// Parks `connection` in its reserved slot, with its socket, its place on the roster (where it
/// stays while parked) and its gauge.
pub(super) fn park(
    connection: Connection,
    ticket: Ticket,
    stream: Conn,
    place: Place,
    gauge: ConnectionGauge,
) {
    let edge = connection.session.edge().clone();
    let Conn::Plain(tcp) = stream else {
        // Not reached: only a plain TCP connection reserves a slot.
        edge.parking.cancel(ticket);
        edge.keepalive.leave(place);
        return;
    };
    // Only what a connection between frames needs: the frame reader (empty) and the command
    // buffer are built again on revival.
    let Connection {
        session,
        heard_since_ping,
        ..
    } = connection;
    edge.parking.park(
        ticket,
        tcp,
        |socket| ParkedWs {
            session,
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
    session: Session,
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
            let mut connection = Connection {
                reader: FrameReader::new(session.edge().settings.max_frame_bytes),
                session,
                incoming: Vec::new(),
                heard_since_ping,
                outbox_first: false,
                expiry: None,
            };
            let mut stream = Conn::Plain(tcp);
            let served = connection.serve(&mut stream).await;
            Box::pin(connection.after(served, stream, place, gauge)).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_connection_is_its_session_and_socket() {
        // The session, the socket, the roster place and a flag: nothing of the frame reader,
        // the command buffer or the timers of a connection in a task.
        assert!(
            size_of::<ParkedWs>() <= size_of::<Session>() + 24,
            "{} bytes",
            size_of::<ParkedWs>()
        );
    }
}
