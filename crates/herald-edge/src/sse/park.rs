//! A directly served SSE stream parking and coming back ([`crate::parking`]): its parked
//! record ([`ParkedSse`]: the stream's state and its socket, no task), which answers a
//! keep-alive tick by itself.

use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::Arc;

use super::direct::{resume, Connection};
use crate::conn::Conn;
use crate::parking::{raw, send_ping, Cause, Parked, Ticket};
use crate::roster::Place;
use crate::Edge;

/// Parks an idle stream in its reserved slot (only a plain TCP stream reserves one).
pub(super) fn park(edge: &Arc<Edge>, connection: Connection, conn: Conn, place: Place, t: Ticket) {
    let Conn::Plain(tcp) = conn else {
        edge.parking.cancel(t);
        edge.keepalive.leave(place);
        return;
    };
    let record = |socket| ParkedSse {
        edge: edge.clone(),
        connection,
        socket,
        place,
    };
    edge.parking.park(t, tcp, record, edge.connections.token());
}

/// A parked SSE stream: all it holds while it waits without a task.
struct ParkedSse {
    edge: Arc<Edge>,
    connection: Connection,
    socket: std::net::TcpStream,
    place: Place,
}

impl Parked for ParkedSse {
    fn socket(&self) -> RawFd {
        raw(&self.socket)
    }

    fn expires(&self) -> Option<u64> {
        self.connection.stream.expires
    }

    fn answer(&mut self, cause: Cause<'_>) -> bool {
        // Whatever the client sends (or its closing) is the revived task's to read.
        let Cause::Outbox(waker) = cause else {
            return false;
        };
        if !self.connection.stream.outbox.take_lone_ping(waker) {
            return false;
        }
        let ping = self.connection.lone_tick();
        !ping || send_ping(&self.socket, super::PING, &self.connection.stream.outbox)
    }

    fn resume(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let ParkedSse {
                edge,
                connection,
                socket,
                place,
            } = *self;
            let Ok(tcp) = tokio::net::TcpStream::from_std(socket) else {
                edge.keepalive.leave(place);
                return;
            };
            resume(edge, connection, Conn::Plain(tcp), place).await;
        })
    }
}
