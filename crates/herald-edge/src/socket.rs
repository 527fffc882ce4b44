//! Writing to a connection's socket from the transports that run their own loop (WebSocket,
//! SSE on a fresh connection): first without waiting, which usually writes everything in one
//! syscall and touches no timer or waker; then, only if the socket was full, as it drains, with
//! a time limit.
//!
//! While a connection waits for its full socket ([`write_until_cut`]) it also watches its
//! outbox: if the hub closes it as a slow consumer meanwhile, what is still unwritten is cut
//! after the frame or event in progress (the rest of the backlog is dropped, as the outbox's own
//! queue already was), so the transport's `disconnect` goes out right behind what the socket
//! already holds, within [`SLOW_CONSUMER_GRACE`] of the cut ([`slow_consumer_goodbye`]): a
//! client that reads again within it reads its backlog, then why it was cut. The connection then
//! shuts its sending side down and reads (discarding) until the client closes or the grace ends,
//! so closing the socket never resets a connection whose last bytes the client has not read.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use herald_core::outbox::{CloseReason, Outbox};
use tokio::io::AsyncWrite;
use tokio::time::Instant;

use crate::conn::Conn;

/// How long a slow consumer's goodbye (`disconnect` and, on WebSocket, the close frame) waits for
/// its socket to take it, and then for the client to close, after the cut.
pub const SLOW_CONSUMER_GRACE: Duration = Duration::from_secs(60);

/// A write that cannot finish in this long means the peer is gone.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

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

/// How a write that waited for the socket ended.
pub(crate) enum Blocked {
    /// Everything was written.
    Written,
    /// The outbox was closed as a slow consumer: these bytes (the rest of the frame or event in
    /// progress) go before the goodbye.
    Cut(Vec<u8>),
    /// The socket failed, or took nothing more for `timeout`.
    Failed,
}

/// Writes `buf` (and, on TLS, what the session holds back) as the socket drains, within
/// `timeout`, unless `outbox` is closed as a slow consumer first: then what is unwritten is cut
/// where `cut_end(buf, written)` says the frame or event in progress ends (an offset into `buf`,
/// at least `written`).
pub(crate) async fn write_until_cut(
    conn: &mut Conn,
    outbox: &Outbox,
    mut buf: Vec<u8>,
    timeout: Duration,
    cut_end: impl FnOnce(&[u8], usize) -> usize,
) -> Blocked {
    let deadline = tokio::time::sleep(timeout);
    let mut deadline = std::pin::pin!(deadline);
    let mut written = 0;
    // Each poll writes what the socket takes (registering for more when it is full), and is
    // woken when the socket can take more, when the outbox is closed as a slow consumer, or at
    // the deadline.
    let ended = std::future::poll_fn(|cx| {
        loop {
            let progress = if written < buf.len() {
                Pin::new(&mut *conn)
                    .poll_write(cx, &buf[written..])
                    .map_ok(Some)
            } else {
                Pin::new(&mut *conn).poll_flush(cx).map_ok(|()| None)
            };
            match progress {
                Poll::Ready(Ok(Some(0))) | Poll::Ready(Err(_)) => {
                    return Poll::Ready(Some(Blocked::Failed))
                }
                Poll::Ready(Ok(Some(n))) => written += n,
                Poll::Ready(Ok(None)) => return Poll::Ready(Some(Blocked::Written)),
                Poll::Pending => break,
            }
        }
        if let Poll::Ready(CloseReason::SlowConsumer) = outbox.poll_closed(cx) {
            return Poll::Ready(None);
        }
        if deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Blocked::Failed));
        }
        Poll::Pending
    })
    .await;
    match ended {
        Some(ended) => ended,
        None => {
            let end = cut_end(&buf, written).clamp(written, buf.len());
            buf.truncate(end);
            buf.drain(..written);
            Blocked::Cut(buf)
        }
    }
}

/// Writes a slow consumer's goodbye within [`SLOW_CONSUMER_GRACE`], then shuts the sending side
/// down and waits, within what is left of the grace, for the client to close.
pub async fn slow_consumer_goodbye(conn: &mut Conn, bytes: Vec<u8>) {
    let until = Instant::now() + SLOW_CONSUMER_GRACE;
    let sent = tokio::time::timeout_at(until, conn.write_all(&bytes)).await;
    if !matches!(sent, Ok(Ok(()))) {
        return;
    }
    let _ = tokio::time::timeout_at(until, tokio::io::AsyncWriteExt::shutdown(conn)).await;
    let _ = tokio::time::timeout_at(until, drain_until_closed(conn)).await;
}

/// Reads and discards until the peer closes or the connection fails.
async fn drain_until_closed(conn: &mut Conn) {
    let mut chunk = [0u8; 512];
    loop {
        if conn.readable().await.is_err() {
            return;
        }
        match conn.try_read(&mut chunk) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
