//! A client connection's byte stream, plain TCP or TLS: [`Conn`]. The transports that run their
//! own loop (WebSocket, SSE on a fresh connection, Meteor) wait on its readiness and read and
//! write it without blocking; hyper reads it through [`AsyncRead`]/[`AsyncWrite`].
//!
//! A plain connection is the `TcpStream` itself (the enum costs it nothing: the TLS variant is
//! one pointer, boxed), so the plain path is what it was. A TLS connection ([`tls::TlsConn`])
//! is a rustls server session over the socket, with bytes read ahead and not yet consumed (what
//! the SSE sniffer looked at) replayed first. A WebSocket connection that carries a byte stream
//! in binary messages (MQTT at `/mqtt`) is that stream ([`websocket::WsStream`]) over the
//! upgraded connection, so a protocol runs the same code over it as over TCP.

pub mod tls;
pub mod websocket;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub use tls::{TlsAcceptor, TlsConn};
pub use websocket::WsStream;

/// A client connection: plain TCP, or TLS over TCP.
#[derive(Debug)]
pub enum Conn {
    /// Plain TCP.
    Plain(TcpStream),
    /// A finished TLS handshake over TCP.
    Tls(Box<TlsConn>),
    /// A byte stream in a WebSocket's binary messages, over an upgraded plain or TLS
    /// connection.
    WebSocket(Box<WsStream>),
}

impl Conn {
    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(tcp) => tcp,
            Conn::Tls(tls) => tls.tcp(),
            Conn::WebSocket(ws) => ws.inner().tcp(),
        }
    }

    /// Moves the socket's readiness registration to the tokio runtime this is called in, for a
    /// connection accepted or served on another runtime: the runtime whose tasks wait on a
    /// socket should be the one whose reactor watches it, so its wakes stay on its threads.
    /// The connection is unchanged (its descriptor is duplicated and the duplicate registered
    /// here; the original is deregistered and closed). Must be called inside a runtime.
    pub fn register_here(&mut self) -> io::Result<()> {
        let tcp = match self {
            Conn::Plain(tcp) => tcp,
            Conn::Tls(tls) => tls.tcp_mut(),
            Conn::WebSocket(ws) => return ws.inner_mut().register_here(),
        };
        let duplicate = std::os::fd::AsFd::as_fd(tcp).try_clone_to_owned()?;
        let here = TcpStream::from_std(std::net::TcpStream::from(duplicate))?;
        drop(std::mem::replace(tcp, here));
        Ok(())
    }

    /// Whether this is a TLS connection (a WebSocket stream over TLS included).
    pub fn is_tls(&self) -> bool {
        match self {
            Conn::Plain(_) => false,
            Conn::Tls(_) => true,
            Conn::WebSocket(ws) => ws.inner().is_tls(),
        }
    }

    /// Whether the connection may park (`crate::parking`) as it is: plain TCP, or a
    /// WebSocket byte stream over plain TCP that holds nothing but its socket
    /// ([`WsStream::may_park`]). rustls's session is not parked.
    pub fn may_park(&self) -> bool {
        match self {
            Conn::Plain(_) => true,
            Conn::Tls(_) => false,
            Conn::WebSocket(ws) => ws.may_park(),
        }
    }

    /// Ready when a [`Conn::try_read`] would return something (bytes, the end, or an error)
    /// rather than `WouldBlock`, as far as the socket can tell; leaves `cx`'s waker with it.
    pub fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Conn::Plain(tcp) => tcp.poll_read_ready(cx),
            Conn::Tls(tls) => tls.poll_read_ready(cx),
            Conn::WebSocket(ws) => ws.poll_read_ready(cx),
        }
    }

    /// Waits until [`Conn::poll_read_ready`] is ready.
    pub async fn readable(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_read_ready(cx)).await
    }

    /// Reads what is there without waiting (`WouldBlock` when nothing is).
    pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(tcp) => tcp.try_read(buf),
            Conn::Tls(tls) => tls.try_read(buf),
            Conn::WebSocket(ws) => ws.try_read(buf),
        }
    }

    /// Writes what the connection takes without waiting (`WouldBlock` when nothing). A TLS
    /// connection may keep encrypted bytes it could not send yet: see
    /// [`Conn::has_unsent_output`].
    pub fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(tcp) => tcp.try_write(buf),
            Conn::Tls(tls) => tls.try_write(buf),
            Conn::WebSocket(ws) => ws.try_write(buf),
        }
    }

    /// Whether bytes already written are still held back for a full socket (TLS only: a plain
    /// socket's writes either go to the kernel or fail).
    pub fn has_unsent_output(&self) -> bool {
        match self {
            Conn::Plain(_) => false,
            Conn::Tls(tls) => tls.has_unsent_output(),
            Conn::WebSocket(ws) => ws.has_unsent_output(),
        }
    }

    /// Writes all of `buf` (and whatever is held back), waiting for the socket to drain.
    pub async fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        match self {
            Conn::Plain(tcp) => {
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
            Conn::Tls(tls) => tls.write_all(buf).await,
            Conn::WebSocket(ws) => Box::pin(ws.write_all(buf)).await,
        }
    }

    /// Waits for the first bytes of the connection and copies them into `buf` without
    /// consuming them (a later read returns them again). A WebSocket stream is never peeked
    /// (`Unsupported`): it exists only once its protocol is known.
    pub async fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(tcp) => tcp.peek(buf).await,
            Conn::Tls(tls) => tls.peek(buf).await,
            Conn::WebSocket(_) => Err(io::ErrorKind::Unsupported.into()),
        }
    }

    /// Copies what the socket holds into `buf` without consuming it or waiting
    /// (`WouldBlock` when nothing is there; always for TLS and a WebSocket stream, whose bytes
    /// are not the socket's).
    pub fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Conn::Plain(tcp) = self else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        let mut read = ReadBuf::new(buf);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match tcp.poll_peek(&mut cx, &mut read) {
            Poll::Ready(Ok(n)) => Ok(n),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Ends the connection from this side: a TLS connection sends its `close_notify` (within a
    /// second), so the peer can tell the end of a stream from a cut; a WebSocket stream its
    /// close frame first; a plain one has nothing to say before it is dropped.
    pub async fn finish(&mut self) {
        match self {
            Conn::Plain(_) => {}
            Conn::Tls(tls) => {
                let _ = tokio::time::timeout(
                    std::time::Duration::from_secs(1),
                    tokio::io::AsyncWriteExt::shutdown(&mut **tls),
                )
                .await;
            }
            Conn::WebSocket(ws) => ws.finish().await,
        }
    }

    /// [`Conn::finish`], then drops the connection.
    pub async fn close(mut self) {
        self.finish().await;
    }

    /// Whether the peer has closed its sending side, as far as is known without reading.
    pub async fn read_closed(&mut self) -> io::Result<bool> {
        match self {
            Conn::Plain(tcp) => Ok(tcp
                .ready(tokio::io::Interest::READABLE)
                .await?
                .is_read_closed()),
            Conn::Tls(tls) => Ok(tls.read_closed()),
            Conn::WebSocket(ws) => Ok(ws.read_closed()),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Conn::Tls(tls) => Pin::new(&mut **tls).poll_read(cx, buf),
            Conn::WebSocket(ws) => Pin::new(&mut **ws).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Conn::Tls(tls) => Pin::new(&mut **tls).poll_write(cx, buf),
            Conn::WebSocket(ws) => Pin::new(&mut **ws).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Conn::Tls(tls) => Pin::new(&mut **tls).poll_write_vectored(cx, bufs),
            Conn::WebSocket(ws) => Pin::new(&mut **ws).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(tcp) => tcp.is_write_vectored(),
            Conn::Tls(tls) => tls.is_write_vectored(),
            Conn::WebSocket(ws) => ws.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Conn::Tls(tls) => Pin::new(&mut **tls).poll_flush(cx),
            Conn::WebSocket(ws) => Pin::new(&mut **ws).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Conn::Tls(tls) => Pin::new(&mut **tls).poll_shutdown(cx),
            Conn::WebSocket(ws) => Pin::new(&mut **ws).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_connection_is_no_bigger_than_its_socket() {
        assert_eq!(
            std::mem::size_of::<Conn>(),
            std::mem::size_of::<TcpStream>()
        );
    }
}
