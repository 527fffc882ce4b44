//! The connection driver: the one loop every long-lived connection that Herald serves on its own
//! (not through hyper) runs on, whatever its wire protocol. Herald's WebSocket (`crate::ws`) and
//! its directly served SSE streams (`crate::sse`) are two [`Wire`]s over it; another protocol (an
//! MQTT or Pusher crate) is a third by implementing [`Wire`] the same way.
//!
//! A [`Connection`] is a wire's state plus what the loop keeps: the token's expiry timer (only for
//! a token that expires), whose turn it is to be looked at first, and one keep-alive mark. An
//! idle connection is that value, its socket and its outbox: [`Connection::serve`] waits by
//! leaving its waker with the socket's readiness, the outbox, the expiry timer and the idle timer
//! (no stored futures, no read buffer), and wakes for one of four things:
//!
//! - **readable**: the wire reads what the socket has without waiting and decodes it
//!   ([`Wire::read`]); decoded input ([`Wire::has_input`]) is handled before the next wait
//!   ([`Wire::handle_input`], the one step that may wait, boxed so its futures are no part of an
//!   idle connection);
//! - **outbox**: the wire encodes the whole batch (frames, a keep-alive ping the roster asked
//!   for, the goodbye of a closed outbox) into one buffer ([`Wire::encode`]), which goes out with
//!   one non-blocking write, usually one syscall. Only if the socket is full does the driver wait
//!   for it (`socket::write_until_cut`), within a time limit and watching the outbox: a
//!   slow-consumer close meanwhile cuts what is unwritten after the frame in progress
//!   ([`Wire::cut_end`]) and the connection ends with [`Ended::Cut`];
//! - **expiry**: [`Wire::expired`] says whether that ends the connection or queues its goodbye;
//! - **idle**: after `park_idle_after` with nothing to do (and only for a plain TCP socket, or a
//!   WebSocket byte stream over one, while [`Conn::may_park`], [`Wire::is_between_frames`] and
//!   [`Wire::may_park`]), the connection reserves a slot in the
//!   [`Parking`] and [`Connection::serve`] returns [`Served::Parks`]: the caller then stores its
//!   parked record there ([`crate::parking::Parked`], [`Parking::park`]) and the task ends. The
//!   record's `resume` serves the connection again with [`Connection::serve`].
//!
//! Everything is generic over the wire (static dispatch, no allocation or syscall of the
//! driver's own per delivery). How the connection ends is the caller's: after
//! [`Served::Ends`] it takes the connection off the keep-alive roster, says the wire's goodbye
//! ([`Wire::goodbye`]) and closes a TLS session, in the order its protocol needs.
//!
//! A protocol runs on the driver in five steps (`crate::ws` is the worked example, `crate::sse`'s
//! `direct.rs` the smallest): implement [`Wire`] for the connection's state; build
//! [`Connection::new`] with the wire and [`Marks::new`]; put its outbox on the keep-alive roster
//! (`Edge::keepalive`, which sends ping requests and the shutdown close through it); loop on
//! [`Connection::serve`] with the edge's [`Parking`]; and act on what it returns: on
//! [`Served::Parks`], take [`Connection::into_parts`] into a record implementing
//! [`crate::parking::Parked`] (which answers lone keep-alive pings without a task and resumes
//! into [`Connection::serve`]) and store it with [`Parking::park`], with the edge's connection
//! tracker token so shutdown waits for it; on [`Served::Ends`], leave the roster, say
//! [`Wire::goodbye`] and close a TLS session. The parked record must stay small: it is what an
//! idle connection costs (docs/design/idle-connections.md; Herald's WebSocket record is pinned at
//! 192 bytes, SSE's at 128).
//!
//! Transports that do not hold a connection in this loop (long-poll, a hyper-served SSE body,
//! Meteor's subscribers) share the batch helpers of [`drain`].

pub mod drain;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use herald_core::outbox::{Batch, CloseReason, Outbox};

use crate::conn::Conn;
use crate::http::secs_until;
use crate::parking::idle::{IdleTimer, TaskTimer};
use crate::parking::{Parking, Ticket};
use crate::socket::{try_send, write_until_cut, Blocked, Sent};

pub use crate::socket::{
    send, slow_consumer_goodbye, write_rest, SLOW_CONSUMER_GRACE, WRITE_TIMEOUT,
};

/// A wire protocol, as the driver runs it: what a connection speaking it keeps (its session,
/// its decoder, its subscriptions) and how it reads, encodes and says goodbye.
///
/// Every method but [`Wire::handle_input`] and [`Wire::goodbye`] runs without waiting. The
/// keep-alive mark passed to [`Wire::encode`] is the connection's "activity since the last
/// tick", as the wire counts it (the driver sets it when it hands input to
/// [`Wire::handle_input`]): a WebSocket closes a client that answered no ping since the last
/// tick, an SSE stream pings only when it wrote nothing since the last tick.
pub trait Wire: Send {
    /// How the wire ends a connection (a close code, a reason to tell the client), for
    /// [`Ended::Wire`].
    type End: Send;
    /// What [`Wire::encode`] keeps of a batch to find, if its write blocks and is cut, where the
    /// frame in progress ends ([`Wire::cut_end`]); `()` when the bytes alone say it.
    type Cuts: Send + Sync;

    /// The connection's outbound queue.
    fn outbox(&self) -> &Outbox;

    /// When the client's token expires (seconds since the Unix epoch), if it does. Read before
    /// every wait: a change (a WebSocket `connect` with a new token) re-arms the timer.
    fn expires(&self) -> Option<u64>;

    /// Whether no frame is part-read: a connection in the middle of one does not count as
    /// idle, so it waits for the rest in its task.
    fn is_between_frames(&self) -> bool {
        true
    }

    /// Whether the connection may park now; if not, it stays in its task another delay (a
    /// WebSocket whose command budget is still refilling).
    fn may_park(&self) -> bool {
        true
    }

    /// Whether decoded input waits for [`Wire::handle_input`].
    fn has_input(&self) -> bool {
        false
    }

    /// Handles the decoded input (commands, a client's ping or close); may wait (the driver
    /// boxes this future). Returns how the connection ends, if it does.
    fn handle_input<'a>(
        &'a mut self,
        conn: &'a mut Conn,
    ) -> impl Future<Output = Option<Ended<Self::End>>> + Send + 'a {
        let _ = conn;
        std::future::ready(None)
    }

    /// The socket is readable: reads what it has (without waiting, within a budget) and
    /// decodes it. Returns how the connection ends, if it does (the client closed it, or sent
    /// what the protocol refuses).
    fn read(&mut self, conn: &mut Conn) -> Option<Ended<Self::End>>;

    /// Encodes a batch from the outbox into the bytes to write, all of it coalesced: its
    /// frames, a keep-alive ping if `batch.ping` asks for one (and `active`, the keep-alive
    /// mark, says so; the wire updates the mark), and what a closed outbox says.
    fn encode(&mut self, batch: Batch, active: &mut bool) -> Encoded<Self>;

    /// Where the frame in progress ends in `rest` (an offset of at least `at`, of which `at`
    /// bytes are written), when a blocked write is cut off; `sent` bytes of the batch went out
    /// before `rest`, `cuts` is what [`Wire::encode`] kept.
    fn cut_end(cuts: &Self::Cuts, sent: usize, rest: &[u8], at: usize) -> usize;

    /// The token expired: how the connection ends, or `None` if the wire queued its goodbye in
    /// the outbox instead (and [`Wire::expires`] now says `None`).
    fn expired(&mut self) -> Option<Ended<Self::End>>;

    /// Tells the client why the connection ends, as `ended` says (nothing when it is gone);
    /// called by the connection's own ending, once it is off the roster.
    fn goodbye<'a>(
        &'a mut self,
        conn: &'a mut Conn,
        ended: Ended<Self::End>,
    ) -> impl Future<Output = ()> + Send + 'a;
}

/// A batch as a wire encoded it ([`Wire::encode`]).
pub struct Encoded<W: Wire + ?Sized> {
    /// Everything to write, in one buffer; empty when there is nothing to write.
    pub bytes: Vec<u8>,
    /// What finds the frame in progress if the write is cut ([`Wire::cut_end`]).
    pub cuts: W::Cuts,
    /// The connection ends once these bytes are written, this way.
    pub ends: Option<Ended<W::End>>,
    /// The bytes end with the wire's goodbye (an SSE `disconnect` event): if the socket takes
    /// only part of them, the rest is written whole (never cut), within
    /// [`SLOW_CONSUMER_GRACE`] when the outbox was closed as a slow consumer.
    pub last: bool,
}

/// How a connection ends.
#[derive(Debug)]
pub enum Ended<E> {
    /// As the wire decided.
    Wire(E),
    /// The socket is gone or failed: nothing more can be sent.
    Gone,
    /// The outbox was closed as a slow consumer while a write waited for the socket: these
    /// bytes (the rest of the frame in progress) go before the goodbye.
    Cut(Vec<u8>),
}

/// How [`Connection::serve`] stopped.
pub enum Served<E> {
    /// The connection ends.
    Ends(Ended<E>),
    /// It had nothing to do for `park_idle_after` and parks in this reserved slot.
    Parks(Ticket),
}

/// The loop's marks that outlive a parking: whose turn it is to be looked at first and the
/// keep-alive mark ([`Wire`]). Two bytes, so a parked record may keep them.
#[derive(Debug, Clone, Copy)]
pub struct Marks {
    /// The outbox is looked at before the socket on the next wake.
    outbox_first: bool,
    /// Activity since the last keep-alive tick, as the wire counts it.
    active: bool,
}

impl Marks {
    /// Marks for a fresh connection (or one revived from a record that keeps only the
    /// keep-alive mark): `active` is the keep-alive mark.
    pub fn new(active: bool) -> Marks {
        Marks {
            outbox_first: false,
            active,
        }
    }

    /// The keep-alive mark: activity since the last tick.
    pub fn active(&self) -> bool {
        self.active
    }

    /// Takes the keep-alive mark, leaving it unset (a tick passed).
    pub fn take_active(&mut self) -> bool {
        std::mem::take(&mut self.active)
    }
}

/// What woke an idle connection.
enum Wake {
    /// The socket has something to read (or failed).
    Readable(io::Result<()>),
    /// The outbox has frames, a close or a ping request.
    Outbox(Batch),
    /// The token expired.
    Expired,
    /// Nothing happened for a whole `park_idle_after`: the connection may park.
    Idle,
}

/// What [`Connection::step`] made of a wake.
enum Step<E, F> {
    /// Wait for the next wake.
    Wait,
    /// The connection ends.
    Ends(Ended<E>),
    /// It parks in this reserved slot.
    Parks(Ticket),
    /// The socket took only part of a batch: this finishes writing it.
    Blocked(Pin<Box<F>>),
}

/// One connection as the driver serves it: the wire's state and the loop's (see the module
/// docs).
pub struct Connection<W> {
    /// The wire protocol's state.
    pub wire: W,
    /// The token's expiry timer, boxed and only for tokens that expire, so a connection without
    /// one carries no timer; re-armed when [`Wire::expires`] changes, dropped while parked.
    expiry: Option<(u64, Pin<Box<TaskTimer>>)>,
    marks: Marks,
}

impl<W: Wire> Connection<W> {
    /// A connection to serve: `wire`'s state with the loop's `marks`.
    pub fn new(wire: W, marks: Marks) -> Self {
        Connection {
            wire,
            expiry: None,
            marks,
        }
    }

    /// The wire's state and the loop's marks, as a parked record keeps them (the expiry timer
    /// is rebuilt on revival).
    pub fn into_parts(self) -> (W, Marks) {
        (self.wire, self.marks)
    }

    /// Serves the connection (fresh, or revived from parking) until it ends, or until it has
    /// had nothing to do for `park_idle_after` and reserves a slot in `parking` (only a plain
    /// TCP connection, or a WebSocket byte stream over one between frames, does: rustls's
    /// session is not parked, [`Conn::may_park`]). The
    /// socket is the caller's, borrowed: passed by value into this future it would be stored
    /// twice in the connection's task.
    pub async fn serve(&mut self, conn: &mut Conn, parking: &Parking) -> Served<W::End> {
        let mut idle = if conn.is_tls() {
            None
        } else {
            IdleTimer::new(parking.delay())
        };
        loop {
            if self.wire.has_input() {
                self.marks.active = true;
                // Boxed: the (large) command futures exist only while commands run.
                match Box::pin(self.wire.handle_input(conn)).await {
                    Some(ended) => return Served::Ends(ended),
                    None => continue,
                }
            }
            let expires = self.wire.expires();
            if self.expiry.as_ref().map(|(exp, _)| *exp) != expires {
                self.expiry = expires.map(|exp| (exp, TaskTimer::after(secs_until(exp))));
            }
            // Scoped, as is every value but the boxed write: what lives across the write's
            // wait is stored in every idle connection's task.
            let blocked = {
                let wake = std::future::poll_fn(|cx| self.poll_wake(conn, idle.as_mut(), cx));
                let wake = wake.await;
                match self.step(conn, wake, &mut idle, parking) {
                    Step::Wait => continue,
                    Step::Ends(ended) => return Served::Ends(ended),
                    Step::Parks(ticket) => return Served::Parks(ticket),
                    Step::Blocked(write) => write,
                }
            };
            if let Some(ended) = blocked.await {
                return Served::Ends(ended);
            }
        }
    }

    /// Acts on what woke the connection, without waiting; a write the socket did not take
    /// whole comes back as the (boxed) future that finishes it.
    fn step<'a>(
        &'a mut self,
        conn: &'a mut Conn,
        wake: Wake,
        idle: &mut Option<IdleTimer>,
        parking: &Parking,
    ) -> Step<W::End, impl Future<Output = Option<Ended<W::End>>> + Send + 'a> {
        let wake = match wake {
            // Its parked form cannot keep what it still waits for: it stays here another
            // delay.
            Wake::Idle if !self.wire.may_park() => {
                if let Some(timer) = idle.as_mut() {
                    timer.busy();
                }
                return Step::Wait;
            }
            Wake::Idle => match parking.reserve(self.wire.outbox()) {
                Ok(ticket) => {
                    // The parking watches the expiry; the timer is rebuilt on revival.
                    self.expiry = None;
                    return Step::Parks(ticket);
                }
                Err(Some(batch)) => {
                    idle.as_mut().map(IdleTimer::busy);
                    Wake::Outbox(batch)
                }
                Err(None) => {
                    *idle = None;
                    return Step::Wait;
                }
            },
            wake => {
                idle.as_mut().map(IdleTimer::busy);
                wake
            }
        };
        let ended = match wake {
            Wake::Idle => None,
            Wake::Readable(Ok(())) => self.wire.read(conn),
            Wake::Readable(Err(_)) => Some(Ended::Gone),
            Wake::Outbox(batch) => {
                let encoded = self.wire.encode(batch, &mut self.marks.active);
                match write_now(conn, encoded) {
                    Ok(ends) => ends,
                    // Boxed: only a connection whose socket is full waits for it.
                    Err(blocked) => {
                        return Step::Blocked(Box::pin(blocked.finish(conn, self.wire.outbox())))
                    }
                }
            }
            Wake::Expired => self.wire.expired(),
        };
        match ended {
            Some(ended) => Step::Ends(ended),
            None => Step::Wait,
        }
    }

    /// Looks at the socket, the outbox, the expiry timer and the idle timer, the first two in
    /// turns so neither a flood of input nor a flood of messages starves the other direction;
    /// pending (with the waker left with each) when none has anything.
    fn poll_wake(
        &mut self,
        conn: &mut Conn,
        idle: Option<&mut IdleTimer>,
        cx: &mut Context<'_>,
    ) -> Poll<Wake> {
        self.marks.outbox_first = !self.marks.outbox_first;
        if self.marks.outbox_first {
            if let Poll::Ready(batch) = self.wire.outbox().poll_batch(cx) {
                return Poll::Ready(Wake::Outbox(batch));
            }
        }
        if let Poll::Ready(ready) = conn.poll_read_ready(cx) {
            return Poll::Ready(Wake::Readable(ready));
        }
        if !self.marks.outbox_first {
            if let Poll::Ready(batch) = self.wire.outbox().poll_batch(cx) {
                return Poll::Ready(Wake::Outbox(batch));
            }
        }
        if let Some((_, sleep)) = &mut self.expiry {
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Wake::Expired);
            }
        }
        // A frame read in part keeps the connection in its task until the rest arrives (as
        // does a WebSocket frame around it, `Conn::may_park`).
        if let Some(idle) = idle.filter(|_| self.wire.is_between_frames() && conn.may_park()) {
            if idle.poll_idle(cx).is_ready() {
                return Poll::Ready(Wake::Idle);
            }
        }
        Poll::Pending
    }
}

/// Writes an encoded batch as far as the socket takes it at once (usually all of it, in one
/// syscall): how the connection ends, if it does, or what waits for the socket.
fn write_now<W: Wire>(
    conn: &mut Conn,
    encoded: Encoded<W>,
) -> Result<Option<Ended<W::End>>, BlockedWrite<W>> {
    let Encoded {
        bytes,
        cuts,
        ends,
        last,
    } = encoded;
    // Nothing to write: no syscall. (A blocked write before this one was flushed whole, so a
    // TLS session holds nothing back here.)
    if bytes.is_empty() {
        return Ok(ends);
    }
    let total = bytes.len();
    match try_send(conn, bytes) {
        Sent::All => Ok(ends),
        Sent::Failed => Ok(Some(Ended::Gone)),
        Sent::Part(rest) => Err(BlockedWrite {
            sent: total - rest.len(),
            rest,
            cuts,
            ends,
            last,
        }),
    }
}

/// The part of a batch a full socket did not take.
struct BlockedWrite<W: Wire> {
    rest: Vec<u8>,
    /// Bytes of the batch written before `rest`.
    sent: usize,
    cuts: W::Cuts,
    ends: Option<Ended<W::End>>,
    last: bool,
}

impl<W: Wire> BlockedWrite<W> {
    /// Writes the rest as the socket drains, within [`WRITE_TIMEOUT`], cut after the frame in
    /// progress if `outbox` is closed as a slow consumer meanwhile; a batch that ends with the
    /// wire's goodbye is written whole instead. Returns how the connection ends, if it does.
    async fn finish(self, conn: &mut Conn, outbox: &Outbox) -> Option<Ended<W::End>> {
        let BlockedWrite {
            rest,
            sent,
            cuts,
            ends,
            last,
        } = self;
        if last {
            if outbox.closed() == Some(CloseReason::SlowConsumer) {
                slow_consumer_goodbye(conn, rest).await;
            } else {
                let _ = write_rest(conn, rest).await;
            }
            return ends.or(Some(Ended::Gone));
        }
        let cut_end = |rest: &[u8], at: usize| W::cut_end(&cuts, sent, rest, at);
        match write_until_cut(conn, outbox, rest, WRITE_TIMEOUT, cut_end).await {
            Blocked::Written => ends,
            Blocked::Cut(rest) => Some(Ended::Cut(rest)),
            Blocked::Failed => Some(Ended::Gone),
        }
    }
}
