//! Writing to a connection's socket from the transports that run their own loop (WebSocket,
//! SSE on a fresh connection): first without waiting, which usually writes everything in one
//! syscall and touches no timer or waker; then, only if the socket was full, as it drains, with
//! a time limit.

use std::io;
use std::time::Duration;

use tokio::net::TcpStream;

/// A write that cannot finish in this long means the peer is gone.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What a first, non-blocking write achieved.
pub enum Sent {
    /// Everything went out.
    All,
    /// The socket is full; this rest must wait for it to drain ([`write_rest`]).
    Part(Vec<u8>),
    /// The socket failed.
    Failed,
}

/// Writes as much of `buf` as the socket takes at once.
pub fn try_send(tcp: &TcpStream, mut buf: Vec<u8>) -> Sent {
    let mut written = 0;
    while written < buf.len() {
        match tcp.try_write(&buf[written..]) {
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
    Sent::All
}

/// Writes `buf`, first without waiting, then as the socket drains ([`write_rest`]).
pub async fn send(tcp: &TcpStream, buf: Vec<u8>) -> io::Result<()> {
    match try_send(tcp, buf) {
        Sent::All => Ok(()),
        Sent::Part(rest) => write_rest(tcp, rest).await,
        Sent::Failed => Err(io::ErrorKind::BrokenPipe.into()),
    }
}

/// Writes `buf` as the socket drains, giving up after [`WRITE_TIMEOUT`].
pub async fn write_rest(tcp: &TcpStream, buf: Vec<u8>) -> io::Result<()> {
    match tokio::time::timeout(WRITE_TIMEOUT, write_all(tcp, &buf)).await {
        Ok(result) => result,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}

async fn write_all(tcp: &TcpStream, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match tcp.try_write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => tcp.writable().await?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
