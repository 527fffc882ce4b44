//! Writing to a connection's socket from the transports that run their own loop (WebSocket,
//! SSE on a fresh connection): first without waiting, which usually writes everything in one
//! syscall and touches no timer or waker; then, only if the socket was full, as it drains, with
//! a time limit.

use std::io;
use std::time::Duration;

use crate::conn::Conn;

/// A write that cannot finish in this long means the peer is gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What a first, non-blocking write achieved.
pub enum Sent {
    /// Everything went out.
    All,
    /// The socket is full; this rest must wait for it to drain ([`write_rest`]). Empty when
    /// only bytes a TLS session holds back are left.
    Part(Vec<u8>),
    /// The socket failed.
    Failed,
}

/// Writes as much of `buf` as the socket takes at once.
pub fn try_send(conn: &mut Conn, mut buf: Vec<u8>) -> Sent {
    let mut written = 0;
    while written < buf.len() {
        match conn.try_write(&buf[written..]) {
            Ok(0) => return Sent::Failed,
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                buf.drain(..written);
                return Sent::Part(buf);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Sent::Failed,
        }
    }
    if conn.has_unsent_output() {
        return Sent::Part(Vec::new());
    }
    Sent::All
}

/// Writes `buf`, first without waiting, then as the socket drains ([`write_rest`]).
pub async fn send(conn: &mut Conn, buf: Vec<u8>) -> io::Result<()> {
    match try_send(conn, buf) {
        Sent::All => Ok(()),
        Sent::Part(rest) => write_rest(conn, rest).await,
        Sent::Failed => Err(io::ErrorKind::BrokenPipe.into()),
    }
}

/// Writes `buf` as the socket drains, giving up after [`WRITE_TIMEOUT`].
pub async fn write_rest(conn: &mut Conn, buf: Vec<u8>) -> io::Result<()> {
    match tokio::time::timeout(WRITE_TIMEOUT, conn.write_all(&buf)).await {
        Ok(result) => result,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}
