//! A WebSocket connection parking and coming back ([`crate::parking`]): what it parks with
//! ([`ToPark`]), its parked record ([`ParkedWs`]: the connection's state and its socket, no
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

/// A connection on its way to parking: its reserved slot (the outbox holds the slot's waker),
/// its socket, and its place on the roster (where it stays while parked).
pub(super) struct ToPark {
    ticket: Ticket,
    tcp: tokio::net::TcpStream,
    place: Place,
    gauge: ConnectionGauge,
}

/// What a connection that could not park gets back: its socket, its place and gauge, and
/// what its outbox held, if that was the reason.
type NotParked = (Conn, (Place, ConnectionGauge), Option<Batch>);

impl Connection {
    /// Reserves a parking slot for this idle connection. Refused (handing everything back)
    /// when the outbox had something after all, or parking is off.
    pub(super) fn park(
        &mut self,
        stream: Conn,
        place: Place,
        gauge: ConnectionGauge,
    ) -> Result<ToPark, NotParked> {
        let Conn::Plain(tcp) = stream else {
            return Err((stream, (place, gauge), None));
        };
        match self.session.edge().parking.reserve(self.session.outbox()) {
            Ok(ticket) => {
                // The expiry timer is rebuilt on revival; the parking watches the expiry.
                self.expiry = None;
                Ok(ToPark {
                    ticket,
                    tcp,
                    place,
                    gauge,
                })
            }
            Err(batch) => Err((Conn::Plain(tcp), (place, gauge), batch)),
        }
    }
}

/// Parks `connection` in its reserved slot.
pub(super) fn park(connection: Connection, to_park: ToPark) {
    let ToPark {
        ticket,
        tcp,
        place,
        gauge,
    } = to_park;
    let edge = connection.session.edge().clone();
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
            let serving = connection.serve(Conn::Plain(tcp), place, gauge, None);
            if let Some(to_park) = serving.await {
                park(connection, to_park);
            }
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
