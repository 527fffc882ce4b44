//! A write the socket could not take at once, and a slow consumer's goodbye.
//!
//! While a connection waits for its full socket to drain, it also watches its outbox: if the
//! hub closes it as a slow consumer meanwhile, what is still unwritten is cut after the frame in
//! progress (the rest of the backlog is dropped, as the outbox's own queue already was), so the
//! `disconnect` frame and the close frame go out right behind what the socket already holds.
//! They get [`SLOW_CONSUMER_GRACE`] to reach the socket, from the cut: a client that reads
//! again within it reads its backlog, then why it was cut. The connection then shuts down its
//! sending side and reads (discarding) until the client closes or the grace ends, so closing the
//! socket never resets a connection whose last bytes the client has not read yet.

use std::future::Future;
use std::io;
use std::task::Poll;
use std::time::Duration;

use herald_core::outbox::{CloseReason, Outbox};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// How long a slow consumer's `disconnect` and close frames wait for its socket to take them,
/// and then for the client to close, after it is cut.
pub(super) const SLOW_CONSUMER_GRACE: Duration = Duration::from_secs(60);

/// A write that waits for the socket: bytes not yet written, and where each frame in them ends
/// (offsets into `buf`), so a cut never splits a frame.
pub(super) struct Pending {
    pub buf: Vec<u8>,
    pub frame_ends: Vec<usize>,
}

/// How a blocked write ended.
pub(super) enum Blocked {
    /// Everything was written.
    Written,
    /// The outbox was closed as a slow consumer: these bytes (the rest of the frame in
    /// progress) go before the goodbye.
    Cut(Vec<u8>),
    /// The socket failed, or took nothing for `timeout`.
    Failed,
}

/// Writes `pending` as the socket drains, within `timeout`, unless the outbox is closed as a
/// slow consumer first.
pub(super) async fn write_until_cut(
    stream: &TcpStream,
    outbox: &Outbox,
    mut pending: Pending,
    timeout: Duration,
) -> Blocked {
    let deadline = tokio::time::sleep(timeout);
    let mut deadline = std::pin::pin!(deadline);
    let mut written = 0;
    loop {
        while written < pending.buf.len() {
            match stream.try_write(&pending.buf[written..]) {
                Ok(0) => return Blocked::Failed,
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Blocked::Failed,
            }
        }
        if written == pending.buf.len() {
            return Blocked::Written;
        }
        // Woken when the socket can take more (or failed: the next write says so), when the
        // outbox is closed as a slow consumer, or at the deadline.
        let in_time = std::future::poll_fn(|cx| {
            if let Poll::Ready(CloseReason::SlowConsumer) = outbox.poll_closed(cx) {
                return Poll::Ready(true);
            }
            if stream.poll_write_ready(cx).is_ready() {
                return Poll::Ready(true);
            }
            if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(false);
            }
            Poll::Pending
        })
        .await;
        if !in_time {
            return Blocked::Failed;
        }
        if outbox.closed() == Some(CloseReason::SlowConsumer) {
            let end = pending
                .frame_ends
                .iter()
                .copied()
                .find(|end| *end > written)
                .unwrap_or(written);
            pending.buf.truncate(end);
            pending.buf.drain(..written);
            return Blocked::Cut(pending.buf);
        }
    }
}

/// Writes a slow consumer's goodbye (`bytes`: the rest of the frame in progress, the
/// `disconnect` frame, the close frame) within the grace, then shuts the sending side down and
/// waits, within what is left of the grace, for the client to close.
pub(super) async fn slow_consumer_goodbye(stream: &mut TcpStream, bytes: Vec<u8>) {
    let until = Instant::now() + SLOW_CONSUMER_GRACE;
    let sent = tokio::time::timeout_at(until, stream.write_all(&bytes)).await;
    if !matches!(sent, Ok(Ok(()))) {
        return;
    }
    let _ = stream.shutdown().await;
    let _ = tokio::time::timeout_at(until, drain_until_closed(stream)).await;
}

/// Reads and discards until the peer closes or the socket fails.
async fn drain_until_closed(stream: &TcpStream) {
    let mut chunk = [0u8; 512];
    loop {
        if stream.readable().await.is_err() {
            return;
        }
        match stream.try_read(&mut chunk) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
