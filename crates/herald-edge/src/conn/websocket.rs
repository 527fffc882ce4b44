//! A byte stream carried in a WebSocket's binary messages ([`WsStream`]), for a protocol that
//! runs over WebSocket the code it runs over TCP (MQTT at `/mqtt`, MQTT 5.0 and 3.1.1 section
//! 6): what it reads is the binary messages' payloads, joined, whatever their boundaries (a
//! packet may span several messages, a message may hold several packets); what it writes goes
//! out as binary messages, one per write.
//!
//! Underneath is the upgraded connection (plain or TLS) and edge's frame codec
//! ([`crate::ws::frame`]), so the frame and message bound, masking and fragmentation are the
//! same as on `/v1/ws`. The WebSocket's own traffic stays here: a ping is answered with a pong
//! (written at once if the socket takes it, else ahead of the next write), a close ends the
//! stream (answered with a close, echoing its code), a text message or a frame the codec refuses
//! fails the read (`InvalidData`) and is answered with a close (1003 for text, as MQTT's
//! [MQTT-6.0.0-1] says the connection is closed; the codec's code otherwise). Finishing the
//! stream ([`super::Conn::finish`]) sends a normal close first.
//!
//! A read that gives bytes reads the socket until it has some or the socket has nothing more
//! (`WouldBlock`), so readiness waits behave as on a socket.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::Conn;
use crate::ws::frame::{self, close, FrameReader, Incoming, Opcode};

/// The socket's bytes read in one go.
const READ_CHUNK: usize = 8 * 1024;

/// Most bytes one read takes from the socket while they carry no payload (pings, say) before it
/// gives other work a turn (`WouldBlock`; the socket is still readable, so it comes back).
const READ_BUDGET: usize = 64 * 1024;

/// Pongs are queued only while less than this waits for the socket: a client that pings and
/// never reads is not answered beyond it (RFC 6455 5.5.3 lets a pong answer only the latest).
const MAX_UNSENT_FOR_PONG: usize = 4 * 1024;

/// A byte stream in a WebSocket's binary messages, over the upgraded connection.
#[derive(Debug)]
pub struct WsStream {
    /// The upgraded connection.
    inner: Conn,
    /// Reassembles the client's frames.
    reader: Reader,
    /// Payload bytes received and not read yet.
    received: Vec<u8>,
    /// Encoded frames not written to the socket yet (a pong, or the rest of a write).
    unsent: Vec<u8>,
    /// How the stream stopped: the client's close or the socket's end (`None`), or an error
    /// every later read returns.
    stopped: Option<Option<io::ErrorKind>>,
    /// A close frame was queued or sent: no other frame may follow it.
    close_sent: bool,
}

/// The frame reader, which has no `Debug` of its own.
struct Reader(FrameReader);

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FrameReader { .. }")
    }
}

impl WsStream {
    /// The stream over `inner` (a connection whose upgrade was answered), with `read_ahead`
    /// (bytes the client sent past its handshake) read first; frames and messages over
    /// `max_message` bytes are refused (close 1009).
    pub fn new(inner: Conn, read_ahead: &[u8], max_message: usize) -> WsStream {
        let mut stream = WsStream {
            inner,
            reader: Reader(FrameReader::new(max_message)),
            received: Vec::new(),
            unsent: Vec::new(),
            stopped: None,
            close_sent: false,
        };
        if !read_ahead.is_empty() {
            stream.take_frames(read_ahead);
        }
        stream
    }

    /// Whether the stream holds nothing but its socket and its message bound, so it may park
    /// ([`WsStream::into_parked`]): over plain TCP, no frame or message part-read, no payload
    /// received and not read, nothing unsent, not closed either way.
    pub fn may_park(&self) -> bool {
        matches!(self.inner, Conn::Plain(_))
            && self.reader.0.is_idle()
            && self.received.is_empty()
            && self.unsent.is_empty()
            && self.stopped.is_none()
            && !self.close_sent
    }

    /// The socket and message bound of a stream that [`WsStream::may_park`], for a parked
    /// connection to keep: [`WsStream::new`] over the socket with that bound (and nothing read
    /// ahead) is the same stream again. A stream that may not park is given back.
    pub fn into_parked(self: Box<Self>) -> Result<(tokio::net::TcpStream, usize), Box<WsStream>> {
        if !self.may_park() {
            return Err(self);
        }
        let max_message = self.reader.0.max_message();
        let this = *self;
        match this.inner {
            Conn::Plain(tcp) => Ok((tcp, max_message)),
            inner => Err(Box::new(WsStream { inner, ..this })),
        }
    }

    /// The upgraded connection underneath.
    pub fn inner(&self) -> &Conn {
        &self.inner
    }

    /// The upgraded connection underneath, mutably (to move its registration).
    pub(crate) fn inner_mut(&mut self) -> &mut Conn {
        &mut self.inner
    }

    /// Decodes `bytes` of frames: payloads to `received`, pongs and closes to `unsent`; a
    /// stop is recorded in `stopped`.
    fn take_frames(&mut self, bytes: &[u8]) {
        let mut others = Vec::new();
        let fed = self
            .reader
            .0
            .feed_stream(bytes, &mut self.received, &mut others);
        for message in others {
            if self.stopped.is_some() {
                break;
            }
            match message {
                Incoming::Ping(payload) => {
                    if !self.close_sent && self.unsent.len() < MAX_UNSENT_FOR_PONG {
                        frame::encode(&mut self.unsent, Opcode::Pong, &payload);
                    }
                }
                Incoming::Pong | Incoming::Binary => {}
                Incoming::Close(code) => {
                    self.queue_close(close::echo(code));
                    self.stopped = Some(None);
                }
                Incoming::Text(_) => {
                    self.queue_close(close::UNSUPPORTED_DATA);
                    self.stopped = Some(Some(io::ErrorKind::InvalidData));
                }
            }
        }
        if let Err(e) = fed {
            if self.stopped.is_none() {
                self.queue_close(e.close_code());
                self.stopped = Some(Some(io::ErrorKind::InvalidData));
            }
        }
        self.flush_now();
    }

    /// Queues a close frame with `code`, unless one went already.
    fn queue_close(&mut self, code: u16) {
        if !std::mem::replace(&mut self.close_sent, true) {
            frame::encode_close(&mut self.unsent, code);
        }
    }

    /// Writes what is unsent as far as the socket takes it now; an error is left for the next
    /// write to meet.
    fn flush_now(&mut self) {
        while !self.unsent.is_empty() {
            match self.inner.try_write(&self.unsent) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    self.unsent.drain(..n);
                }
            }
        }
        if self.unsent.capacity() > READ_CHUNK {
            self.unsent = Vec::new();
        }
    }

    /// Copies received bytes into `buf`.
    fn take_received(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.received.len());
        buf[..n].copy_from_slice(&self.received[..n]);
        self.received.drain(..n);
        if self.received.is_empty() {
            // Nothing kept between messages.
            self.received = Vec::new();
        }
        n
    }

    /// Ready when a [`WsStream::try_read`] would return something rather than `WouldBlock`, as
    /// far as the socket can tell.
    pub fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.received.is_empty() || self.stopped.is_some() {
            return Poll::Ready(Ok(()));
        }
        self.inner.poll_read_ready(cx)
    }

    /// Reads payload bytes without waiting: `WouldBlock` when the socket has nothing more (or
    /// gave `READ_BUDGET` bytes without payload), 0 once the client closed.
    pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut chunk = [0u8; READ_CHUNK];
        let mut budget = READ_BUDGET;
        loop {
            if !self.received.is_empty() || buf.is_empty() {
                return Ok(self.take_received(buf));
            }
            match self.stopped {
                Some(None) => return Ok(0),
                Some(Some(kind)) => return Err(kind.into()),
                None => {}
            }
            if budget == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            match self.inner.try_read(&mut chunk) {
                Ok(0) => self.stopped = Some(None),
                Ok(n) => {
                    budget = budget.saturating_sub(n);
                    self.take_frames(&chunk[..n]);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Accepts `buf` as one binary message without waiting, if what was written before has
    /// gone to the socket (else `WouldBlock`); what the socket does not take at once stays
    /// here ([`WsStream::has_unsent_output`]).
    pub fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.flush_now();
        if !self.unsent.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.queue_message(buf)?;
        self.flush_now();
        Ok(buf.len())
    }

    /// Encodes `buf` as a binary message into what is unsent.
    fn queue_message(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.close_sent {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if !buf.is_empty() {
            frame::encode(&mut self.unsent, Opcode::Binary, buf);
        }
        Ok(())
    }

    /// Whether frames wait for the socket to drain (here or in a TLS session below).
    pub fn has_unsent_output(&self) -> bool {
        !self.unsent.is_empty() || self.inner.has_unsent_output()
    }

    /// Writes `buf` as one binary message, and everything unsent before it, waiting for the
    /// socket to drain.
    pub async fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.queue_message(buf)?;
        self.flush().await
    }

    /// Writes everything unsent, waiting for the socket to drain.
    async fn flush(&mut self) -> io::Result<()> {
        let unsent = std::mem::take(&mut self.unsent);
        self.inner.write_all(&unsent).await
    }

    /// Writes what is unsent as the socket drains, with `cx`'s waker left with it.
    fn poll_flush_unsent(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.unsent.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.unsent) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.unsent.drain(..n);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    /// Ends the stream from this side: a normal close frame (unless a close went already),
    /// written within a second, then the connection's own end (a TLS `close_notify`).
    pub async fn finish(&mut self) {
        self.queue_close(close::NORMAL);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), self.flush()).await;
        Box::pin(self.inner.finish()).await;
    }

    /// Whether the client closed the stream (its close frame, or the socket's end, was read).
    pub fn read_closed(&self) -> bool {
        self.stopped.is_some()
    }
}

impl AsyncRead for WsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.try_read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match this.inner.poll_read_ready(cx) {
                        Poll::Ready(Ok(())) => continue,
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        Poll::Pending => return Poll::Pending,
                    }
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for WsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match this.poll_flush_unsent(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        this.queue_message(buf)?;
        // Written as far as the socket takes it; the rest goes with the next write or flush.
        let _ = this.poll_flush_unsent(cx);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flush_unsent(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.queue_close(close::NORMAL);
        match this.poll_flush_unsent(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// A masked client frame.
    fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [3, 1, 4, 1];
        let mut out = vec![0x80 | opcode, 0x80 | payload.len() as u8];
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
        out
    }

    /// A server-side stream and the client's raw socket.
    async fn pair(read_ahead: &[u8]) -> (WsStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (WsStream::new(Conn::Plain(server), read_ahead, 64), client)
    }

    async fn read_some(stream: &mut WsStream) -> io::Result<Vec<u8>> {
        let mut buf = [0u8; 64];
        let n = stream.read(&mut buf).await?;
        Ok(buf[..n].to_vec())
    }

    #[tokio::test]
    async fn binary_payloads_are_one_stream_and_writes_are_binary_messages() {
        let (mut stream, mut client) = pair(&client_frame(0x2, b"ab")).await;
        let mut bytes = client_frame(0x9, b"hi");
        bytes.extend(client_frame(0x2, b"cd"));
        client.write_all(&bytes).await.unwrap();
        let mut got = read_some(&mut stream).await.unwrap();
        while got.len() < 4 {
            got.extend(read_some(&mut stream).await.unwrap());
        }
        assert_eq!(got, b"abcd");
        stream.write_all(b"xyz").await.unwrap();
        let mut answer = [0u8; 9];
        client.read_exact(&mut answer).await.unwrap();
        assert_eq!(answer, [0x8A, 2, b'h', b'i', 0x82, 3, b'x', b'y', b'z']);
        // The client's close ends the stream, answered with the same code.
        client
            .write_all(&client_frame(0x8, &1000u16.to_be_bytes()))
            .await
            .unwrap();
        assert_eq!(read_some(&mut stream).await.unwrap(), b"");
        stream.finish().await;
        let mut close = [0u8; 4];
        client.read_exact(&mut close).await.unwrap();
        assert_eq!(close, [0x88, 2, 0x03, 0xE8]);
    }

    #[tokio::test]
    async fn a_text_message_fails_the_stream_with_a_1003_close() {
        let (mut stream, mut client) = pair(b"").await;
        client.write_all(&client_frame(0x1, b"{}")).await.unwrap();
        let e = read_some(&mut stream).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let mut close = [0u8; 4];
        client.read_exact(&mut close).await.unwrap();
        assert_eq!(close, [0x88, 2, 0x03, 0xEB]);
    }

    #[tokio::test]
    async fn a_message_over_the_bound_fails_the_stream_with_a_1009_close() {
        let (mut stream, mut client) = pair(b"").await;
        client
            .write_all(&client_frame(0x2, &[0; 100]))
            .await
            .unwrap();
        let e = read_some(&mut stream).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let mut close = [0u8; 4];
        client.read_exact(&mut close).await.unwrap();
        assert_eq!(close, [0x88, 2, 0x03, 0xF1]);
    }
}
