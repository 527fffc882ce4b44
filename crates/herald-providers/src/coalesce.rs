//! [`CoalescedWrites`]: a connection wrapper that lets the other tasks of the runtime run once
//! before each flush of HTTP/2 frames, so that requests sent by many tasks leave in one write.
//!
//! h2's connection task writes its buffered frames whenever it is polled, and a task that sends
//! a request wakes it at once; tokio runs a task woken that way next, so without this each
//! request would cost its own `writev` and TLS record. Here the first write of a flush
//! returns `Pending` after waking its own task, which tokio treats as a yield: the task goes to
//! the back of the run queue, the tasks already queued add their requests to h2's buffer, and
//! the next poll writes them all. An idle runtime polls the connection again at once, so a lone
//! request is not held back.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// An I/O stream whose writes yield once per flush; reads pass through.
#[derive(Debug)]
pub struct CoalescedWrites<T> {
    inner: T,
    /// This flush has yielded already: write on until it completes.
    yielded: bool,
}

impl<T> CoalescedWrites<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        CoalescedWrites {
            inner,
            yielded: false,
        }
    }

    /// Whether to write now; if not, the task is woken to come back after the others.
    fn ready_to_write(&mut self, cx: &mut Context<'_>) -> bool {
        if self.yielded {
            return true;
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        false
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for CoalescedWrites<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CoalescedWrites<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.ready_to_write(cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if !self.ready_to_write(cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        if flushed.is_ready() {
            // The next flush yields again.
            self.yielded = false;
        }
        flushed
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn writes_arrive_whole_and_in_order() {
        let (near, mut far) = tokio::io::duplex(1024);
        let mut near = CoalescedWrites::new(near);
        let check = async {
            near.write_all(b"first ").await.unwrap();
            near.write_all(b"second").await.unwrap();
            near.flush().await.unwrap();
            let mut got = [0u8; 12];
            far.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"first second");
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), check)
            .await
            .expect("no write is held back for good");
    }
}
