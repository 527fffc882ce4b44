//! Deadlines for every state of an HTTP connection that is not a stream: [`Deadlines`] (the
//! settings), [`TimedStream`] (the socket hyper serves, which enforces the deadlines of the
//! states between requests: the request head and an idle keep-alive connection),
//! [`RequestPhase`] (what tells it a request is being handled) and [`TimedBody`] (the whole
//! request body within its deadline).
//!
//! A connection is in one of these states, each with its deadline:
//! - fresh, nothing received: `first_byte` (enforced before hyper, by
//!   the listener's protocol detection, [`crate::detect`]);
//! - the head of a request arriving: `head`, from its first byte; a head that stops mid-way is
//!   answered `408 request_timeout` (when the connection can still take an answer) and closed;
//! - a request being handled: no deadline here. Its body, while the handler reads it, must
//!   arrive whole within `body` ([`TimedBody`]); long-poll waits, SSE streams and WebSocket
//!   connections have their own keep-alive rules;
//! - between requests (keep-alive): `keepalive`, then it is closed without an answer.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;

use axum::body::{Body, Bytes};
use herald_core::{ErrorCode, HeraldError};
use hyper::body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::conn::Conn;
use crate::parse_errors::{self, ParseErrorRewrite, MAX_HEAD_BYTES};

/// How long each state of a connection may last (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// A fresh connection's first byte (HTTP and the Meteor subscriber port).
    pub first_byte: Duration,
    /// The rest of a request head, from its first byte (HTTP and the Meteor subscriber port).
    pub head: Duration,
    /// A request body, whole, from when the handler starts reading it.
    pub body: Duration,
    /// An idle HTTP connection between requests.
    pub keepalive: Duration,
    /// A Meteor controller connection between complete command lines.
    pub meteor_control_idle: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            first_byte: Duration::from_secs(20),
            head: Duration::from_secs(20),
            body: Duration::from_secs(60),
            keepalive: Duration::from_secs(120),
            meteor_control_idle: Duration::from_secs(300),
        }
    }
}

/// The message of a `408 request_timeout` answer to a head or body that stopped arriving.
pub fn request_timeout(what: &str, limit: Duration) -> HeraldError {
    HeraldError::new(
        ErrorCode::RequestTimeout,
        format!(
            "the request {what} did not arrive within {}s; the connection is closed",
            limit.as_secs_f64()
        ),
    )
}

/// Whether a request is being handled on a connection: set when hyper hands the service a
/// parsed head, cleared when the response body is done (or dropped), which wakes the
/// connection's [`TimedStream`] so its keep-alive deadline starts at once.
#[derive(Debug, Clone, Default)]
pub struct RequestPhase(Arc<PhaseState>);

#[derive(Debug, Default)]
struct PhaseState {
    active: AtomicBool,
    /// How many requests have begun (wrapping): a head's byte count starts again with each.
    begun: AtomicU32,
    /// The connection's task, waiting while a request is handled.
    waiting: Mutex<Option<Waker>>,
}

impl RequestPhase {
    /// Marks a request as being handled until the returned guard is dropped.
    pub fn begin(&self) -> RequestGuard {
        self.0.begun.fetch_add(1, Ordering::Relaxed);
        self.0.active.store(true, Ordering::Release);
        RequestGuard(self.0.clone())
    }

    fn active(&self) -> bool {
        self.0.active.load(Ordering::Acquire)
    }

    /// How many requests have begun on the connection (wrapping).
    fn begun(&self) -> u32 {
        self.0.begun.load(Ordering::Acquire)
    }

    /// Wakes `cx`'s task when the request ends.
    fn wake_at_end(&self, cx: &Context<'_>) {
        let mut waiting = self.0.waiting.lock().unwrap_or_else(|p| p.into_inner());
        *waiting = Some(cx.waker().clone());
    }
}

/// Ends the request it was made for when dropped (keep it with the response body).
#[derive(Debug)]
pub struct RequestGuard(Arc<PhaseState>);

impl RequestGuard {
    /// A response body that keeps the request going until it is done or dropped.
    pub fn hold(self, body: Body) -> Body {
        Body::new(HeldBody {
            inner: body,
            _guard: self,
        })
    }
}

/// A response body holding its request's [`RequestGuard`].
struct HeldBody {
    inner: Body,
    _guard: RequestGuard,
}

impl hyper::body::Body for HeldBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.active.store(false, Ordering::Release);
        let waiting = self
            .0
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(waker) = waiting {
            waker.wake();
        }
    }
}

/// Which deadline a [`TimedStream`] is counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// A request is being handled: none.
    Request,
    /// Between requests, nothing of the next one yet.
    Idle,
    /// Part of a head has arrived.
    Head,
}

/// The socket of an HTTP connection as hyper reads it, with the head and keep-alive deadlines:
/// when one passes, a read fails with `TimedOut` (after a `408` answer for a head cut short),
/// so hyper closes the connection. [`TimedStream::into_inner`] gives the socket back (a
/// WebSocket upgrade takes it).
#[derive(Debug)]
pub struct TimedStream {
    tcp: Conn,
    phase: RequestPhase,
    deadlines: Deadlines,
    waiting: Waiting,
    /// When the state in `waiting` ends (meaningless while a request is handled).
    deadline: Instant,
    /// Armed only when a read has to wait, at `deadline` or up to [`TIMER_SLACK`] before it
    /// (it then checks and waits again): moving a timer on every request costs more than the
    /// request's own parsing, so a connection busy with requests does not move it.
    timer: Pin<Box<Sleep>>,
    /// A write did not complete: answering now could interleave with an unsent response.
    write_pending: bool,
    /// hyper's own error answers, given a JSON body on their way out.
    parse_errors: ParseErrorRewrite,
    /// The head being read: bytes read since the request before it began (counted by
    /// [`RequestPhase::begun`]), bounded by [`MAX_HEAD_BYTES`].
    head: HeadCount,
}

/// The bytes of the request head being read, so one over [`MAX_HEAD_BYTES`] is refused
/// whatever size the reads that bring it are (hyper's own bound depends on them).
#[derive(Debug, Default)]
struct HeadCount {
    /// [`RequestPhase::begun`] when counting started: a new request starts a new count.
    after_request: u32,
    read: u32,
    /// A `\n` was read: the request line is complete (an overlong head is then `431`, not
    /// `414`).
    line_ended: bool,
}

/// How early an armed timer may fire before the deadline it stands for (it then re-arms).
const TIMER_SLACK: Duration = Duration::from_secs(1);

impl TimedStream {
    /// Wraps a connection whose first request's head started arriving at `head_started`.
    pub fn new(
        tcp: Conn,
        phase: RequestPhase,
        deadlines: Deadlines,
        head_started: Instant,
    ) -> TimedStream {
        TimedStream {
            tcp,
            phase,
            deadlines,
            waiting: Waiting::Head,
            deadline: head_started + deadlines.head,
            timer: Box::pin(tokio::time::sleep_until(head_started + deadlines.head)),
            write_pending: false,
            parse_errors: ParseErrorRewrite::default(),
            head: HeadCount::default(),
        }
    }

    /// The connection.
    pub fn into_inner(self) -> Conn {
        self.tcp
    }

    /// Moves to the state `phase` and the bytes just read say, and sets its deadline (the
    /// timer is armed only when a read waits).
    fn track(&mut self, got_bytes: bool) {
        let next = if self.phase.active() {
            Waiting::Request
        } else if got_bytes && self.waiting != Waiting::Request {
            Waiting::Head
        } else if self.waiting == Waiting::Request {
            Waiting::Idle
        } else {
            self.waiting
        };
        if next == self.waiting {
            return;
        }
        self.waiting = next;
        let limit = match next {
            Waiting::Request => return,
            Waiting::Idle => self.deadlines.keepalive,
            Waiting::Head => self.deadlines.head,
        };
        self.deadline = Instant::now() + limit;
    }

    /// Waits for the current state's deadline: arms the timer if it would fire after the
    /// deadline or more than [`TIMER_SLACK`] before it, and re-arms it when it fires early.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let armed = self.timer.deadline();
            if armed > self.deadline || armed + TIMER_SLACK < self.deadline {
                self.timer.as_mut().reset(self.deadline);
            }
            ready!(self.timer.as_mut().poll(cx));
            if Instant::now() >= self.deadline {
                return Poll::Ready(());
            }
            self.timer.as_mut().reset(self.deadline);
        }
    }

    /// Reads bytes of a request head (or of what follows it in the same read), never more than
    /// [`MAX_HEAD_BYTES`] since the request before; past that, answers `431` (`414` when the
    /// request line has not ended) and fails the read, so hyper closes the connection.
    fn poll_read_head(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let begun = self.phase.begun();
        if begun != self.head.after_request {
            self.head = HeadCount {
                after_request: begun,
                ..HeadCount::default()
            };
        }
        let room = MAX_HEAD_BYTES.saturating_sub(self.head.read as usize);
        if room == 0 {
            return Poll::Ready(Err(self.refuse_head()));
        }
        let before = buf.filled().len();
        if buf.remaining() <= room {
            ready!(Pin::new(&mut self.tcp).poll_read(cx, buf))?;
        } else {
            // Only a read that could pass the limit is narrowed (hyper's usual reads are
            // smaller than the limit): into a part of `buf`, zeroed first.
            let mut part = ReadBuf::new(buf.initialize_unfilled_to(room));
            ready!(Pin::new(&mut self.tcp).poll_read(cx, &mut part))?;
            let n = part.filled().len();
            buf.advance(n);
        }
        let got = &buf.filled()[before..];
        self.head.read += got.len() as u32;
        if !self.head.line_ended {
            self.head.line_ended = got.contains(&b'\n');
        }
        Poll::Ready(Ok(()))
    }

    /// A request head passed [`MAX_HEAD_BYTES`]: answers it if the connection can take it.
    fn refuse_head(&mut self) -> io::Error {
        if !self.write_pending {
            let answer = parse_errors::head_too_large(self.head.line_ended);
            // Best effort, as the 408 of `expire`.
            let _ = self.tcp.try_write(&answer);
        }
        tracing::debug!("request head over {MAX_HEAD_BYTES} bytes; closing");
        io::Error::new(io::ErrorKind::InvalidData, "request head too large")
    }

    /// The deadline passed: answers a cut-short head if the connection can take it.
    fn expire(&mut self) -> io::Error {
        if self.waiting == Waiting::Head && !self.write_pending {
            let e = request_timeout("head", self.deadlines.head);
            let (status, body) = herald_proto::http::error_answer(&e);
            let reason = axum::http::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("");
            let mut answer = format!(
                "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            )
            .into_bytes();
            answer.extend_from_slice(&body);
            // Best effort: the answer is small and the socket idle, so it fits its buffer (a
            // TLS connection's session holds what the socket does not take, and is dropped).
            let _ = self.tcp.try_write(&answer);
        }
        let what = match self.waiting {
            Waiting::Head => "request head",
            _ => "keep-alive",
        };
        tracing::debug!(what, "connection deadline passed; closing");
        io::Error::new(io::ErrorKind::TimedOut, format!("{what} deadline passed"))
    }
}

impl AsyncRead for TimedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        this.track(false);
        let before = buf.filled().len();
        let read = if this.waiting == Waiting::Request {
            Pin::new(&mut this.tcp).poll_read(cx, buf)
        } else {
            this.poll_read_head(cx, buf)
        };
        match read {
            Poll::Ready(result) => {
                this.track(buf.filled().len() > before);
                Poll::Ready(result)
            }
            Poll::Pending if this.waiting == Waiting::Request => {
                this.phase.wake_at_end(cx);
                // The request may have ended meanwhile: look again.
                if this.phase.active() {
                    Poll::Pending
                } else {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            }
            Poll::Pending => {
                ready!(this.poll_deadline(cx));
                Poll::Ready(Err(this.expire()))
            }
        }
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled =
            this.parse_errors
                .poll_write_vectored(&mut this.tcp, cx, &[io::IoSlice::new(buf)]);
        self.write_pending = polled.is_pending();
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled = this
            .parse_errors
            .poll_write_vectored(&mut this.tcp, cx, bufs);
        self.write_pending = polled.is_pending();
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// A request body that must arrive whole within its deadline, counted from the handler's first
/// read; past it, a read fails with an [`io::Error`] of kind `TimedOut` (which
/// `herald-api`'s `read_body` answers `408 request_timeout`). Its size hint is the inner body's, so a declared `Content-Length` can
/// be refused before anything is read.
pub struct TimedBody {
    inner: Body,
    limit: Duration,
    timer: Option<Pin<Box<Sleep>>>,
}

impl TimedBody {
    /// `inner` with the deadline `limit`.
    pub fn new(inner: Body, limit: Duration) -> TimedBody {
        TimedBody {
            inner,
            limit,
            timer: None,
        }
    }
}

impl hyper::body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let limit = this.limit;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(Some(Err(Box::new(io::Error::new(
            io::ErrorKind::TimedOut,
            "request body deadline passed",
        )))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
