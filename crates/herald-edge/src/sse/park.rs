//! A directly served SSE stream parking and coming back ([`crate::parking`]): its parked
//! record ([`ParkedSse`]: the stream's state and its socket, no task), which answers a
//! keep-alive tick by itself.

use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::Arc;

use super::direct::{resume, Connection};
use super::SseStream;
use crate::conn::Conn;
use crate::driver::Marks;
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
    let (stream, marks) = connection.into_parts();
    let record = |socket| ParkedSse {
        edge: edge.clone(),
        stream,
        marks,
        socket,
        place,
    };
    edge.parking.park(t, tcp, record, edge.connections.token());
}

/// A parked SSE stream: all it holds while it waits without a task.
struct ParkedSse {
    edge: Arc<Edge>,
    stream: SseStream,
    /// The driver's marks (the keep-alive mark: events written since the last tick).
    marks: Marks,
    socket: std::net::TcpStream,
    place: Place,
}

impl Parked for ParkedSse {
    fn socket(&self) -> RawFd {
        raw(&self.socket)
    }

    fn expires(&self) -> Option<u64> {
        self.stream.expires
    }

    fn answer(&mut self, cause: Cause<'_>) -> bool {
        // Whatever the client sends (or its closing) is the revived task's to read.
        let Cause::Outbox(waker) = cause else {
            return false;
        };
        if !self.stream.outbox.take_lone_ping(waker) {
            return false;
        }
        // As in a task: a tick pings only a stream that wrote nothing since the tick before.
        let ping = !self.marks.take_active();
        !ping || send_ping(&self.socket, super::PING, &self.stream.outbox)
    }

    fn resume(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let ParkedSse {
                edge,
                stream,
                marks,
                socket,
                place,
            } = *self;
            let Ok(tcp) = tokio::net::TcpStream::from_std(socket) else {
                edge.keepalive.leave(place);
                return;
            };
            let connection = Connection::new(stream, marks);
            resume(edge, connection, Conn::Plain(tcp), place).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_stream_keeps_no_timer() {
        // The stream, the driver's two marks, the socket, the roster place and the edge: the
        // expiry timer (rebuilt on revival) is not kept. It was 144 bytes with it.
        assert!(
            size_of::<ParkedSse>() <= 128,
            "{} bytes",
            size_of::<ParkedSse>()
        );
    }
}
