//! A TLS client connection ([`TlsConn`]): a rustls server session over the TCP socket (through
//! tokio-rustls), with the non-blocking reads, writes and readiness the lean loops need. Bytes
//! read ahead to look at a request (the SSE sniffer cannot peek through TLS) are kept and
//! replayed to whichever reader comes next.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;

use super::Conn;

/// Accepts TLS connections with a server configuration (whose certificate may be swapped
/// while it serves: its resolver decides at each handshake).
#[derive(Clone)]
pub struct TlsAcceptor(tokio_rustls::TlsAcceptor);

impl std::fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsAcceptor { .. }")
    }
}

impl TlsAcceptor {
    /// An acceptor with `config`.
    pub fn new(config: Arc<ServerConfig>) -> TlsAcceptor {
        TlsAcceptor(tokio_rustls::TlsAcceptor::from(config))
    }

    /// Finishes the TLS handshake of a fresh connection within `limit` (the first-byte
    /// deadline: a client that opens TCP and never finishes its handshake is closed then).
    /// `None` when it failed or took too long (said at DEBUG: scanners and plain-HTTP clients
    /// do this all day).
    pub async fn accept(&self, tcp: TcpStream, limit: Duration) -> Option<Conn> {
        match tokio::time::timeout(limit, self.0.accept(tcp)).await {
            Ok(Ok(stream)) => Some(Conn::Tls(Box::new(TlsConn::new(stream)))),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "TLS handshake failed");
                None
            }
            Err(_) => {
                tracing::debug!(?limit, "TLS handshake did not finish in time; closing");
                None
            }
        }
    }
}

/// Most bytes read ahead while peeking (the sniffer looks at 8 KiB at most).
const MAX_READ_AHEAD: usize = 16 * 1024;

/// A TLS connection whose handshake is done.
pub struct TlsConn {
    stream: TlsStream<TcpStream>,
    /// Plaintext read but not yet consumed (peeked), returned by the next reads.
    replay: Vec<u8>,
    /// The peer closed its side (a read returned the end).
    eof: bool,
}

impl std::fmt::Debug for TlsConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConn")
            .field("peer", &self.tcp().peer_addr().ok())
            .field("replay", &self.replay.len())
            .finish_non_exhaustive()
    }
}

impl TlsConn {
    /// Wraps a stream whose handshake is finished.
    pub fn new(stream: TlsStream<TcpStream>) -> TlsConn {
        TlsConn {
            stream,
            replay: Vec::new(),
            eof: false,
        }
    }

    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        self.stream.get_ref().0
    }

    /// The TCP socket underneath, to move its registration ([`super::Conn::register_here`]).
    pub(crate) fn tcp_mut(&mut self) -> &mut TcpStream {
        self.stream.get_mut().0
    }

    /// Ready when plaintext (or the end, or an error) is there to read, or the socket has bytes.
    pub fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.replay.is_empty() || self.eof {
            return Poll::Ready(Ok(()));
        }
        let (tcp, session) = self.stream.get_mut();
        match session.process_new_packets() {
            Ok(state) if state.plaintext_bytes_to_read() == 0 && !state.peer_has_closed() => {
                tcp.poll_read_ready(cx)
            }
            // Plaintext, the end, or an error the next read reports.
            _ => Poll::Ready(Ok(())),
        }
    }

    /// Reads decrypted bytes without waiting.
    pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.replay.is_empty() {
            let n = buf.len().min(self.replay.len());
            buf[..n].copy_from_slice(&self.replay[..n]);
            self.replay.drain(..n);
            if self.replay.is_empty() {
                self.replay = Vec::new();
            }
            return Ok(n);
        }
        self.read_now(buf)
    }

    /// One read of the TLS stream that does not wait (its waker does nothing: the caller waits
    /// with [`TlsConn::poll_read_ready`]).
    fn read_now(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut read = ReadBuf::new(buf);
        match Pin::new(&mut self.stream).poll_read(&mut cx, &mut read) {
            Poll::Ready(Ok(())) => {
                let n = read.filled().len();
                self.eof |= n == 0 && !buf.is_empty();
                Ok(n)
            }
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Encrypts and sends what the connection takes without waiting; what the socket did not
    /// take yet stays with the session ([`TlsConn::has_unsent_output`]).
    pub fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut cx = Context::from_waker(Waker::noop());
        match Pin::new(&mut self.stream).poll_write(&mut cx, buf) {
            Poll::Ready(result) => result,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Whether encrypted bytes wait for the socket to drain.
    pub fn has_unsent_output(&self) -> bool {
        self.stream.get_ref().1.wants_write()
    }

    /// Writes `buf` and everything held back, waiting as the socket drains.
    pub async fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.stream.write_all(buf).await?;
        self.stream.flush().await
    }

    /// Waits for plaintext, reads what is there (up to a bound) ahead, and copies it into
    /// `buf` without consuming it. Returns 0 at the end of the stream.
    pub async fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut failed = None;
            while !self.eof && self.replay.len() < MAX_READ_AHEAD.min(buf.len()) {
                let mut chunk = [0u8; 4096];
                match self.read_now(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => self.replay.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            if !self.replay.is_empty() || self.eof || buf.is_empty() {
                let n = buf.len().min(self.replay.len());
                buf[..n].copy_from_slice(&self.replay[..n]);
                return Ok(n);
            }
            if let Some(e) = failed {
                return Err(e);
            }
            std::future::poll_fn(|cx| self.stream.get_ref().0.poll_read_ready(cx)).await?;
        }
    }

    /// Whether the peer has closed its side (seen by a read).
    pub fn read_closed(&self) -> bool {
        self.eof
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.replay.is_empty() {
            let n = buf.remaining().min(this.replay.len());
            buf.put_slice(&this.replay[..n]);
            this.replay.drain(..n);
            if this.replay.is_empty() {
                this.replay = Vec::new();
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
