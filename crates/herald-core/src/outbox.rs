//! The per-connection outbound queue. The hub pushes reference-counted frames into it without
//! ever blocking; the connection's writer takes everything queued at once and writes it in one
//! go (coalescing). A queue that grows past its byte limit is closed with
//! [`CloseReason::SlowConsumer`]: the publisher is never slowed by a slow reader, and the client
//! resumes from the log.
//!
//! The writer waits by leaving its task's waker in the queue ([`Outbox::poll_batch`]), so a
//! waiting connection stores no future of its own; whoever queues the next frame wakes it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::fanout::drain::DrainTicket;
use crate::message::SharedMessage;

/// One queued frame.
#[derive(Debug, Clone)]
pub enum OutFrame {
    /// A live channel message; encoded by the transport from the message's shared frame cache.
    Message(SharedMessage),
    /// A message replayed from the log on subscribe: written exactly like [`OutFrame::Message`],
    /// but not counted in the publish-to-write latency (it may be hours old by design).
    Replayed(SharedMessage),
    /// An already-encoded control frame (a reply, an error, a subscribe confirmation).
    Control(Bytes),
    /// A presence channel's `presence` frame, encoded once per change as the WebSocket
    /// frame's text (`{"presence":{...}}`); the other transports write its body
    /// ([`crate::presence::frame_body`]) their own way. Live state, no message.
    Presence(Bytes),
}

impl OutFrame {
    fn cost(&self) -> usize {
        match self {
            OutFrame::Message(m) | OutFrame::Replayed(m) => m.data.len() + 64,
            OutFrame::Control(b) | OutFrame::Presence(b) => b.len(),
        }
    }
}

/// Why an outbox was closed; the transport tells the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The client read too slowly and its queue overflowed.
    SlowConsumer,
    /// The server is shutting down.
    Shutdown,
    /// The client's token expired.
    TokenExpired,
    /// An administrator disconnected the client or revoked its token
    /// (`POST /v1/apps/{id}/revoke`).
    Revoked,
    /// The client's app was deleted.
    AppDeleted,
    /// The app's token secret changed after the client's token was signed.
    SecretChanged,
    /// The client's device was deactivated or deleted.
    DeviceRevoked,
    /// The client went on sending commands through a whole burst of `rate_limited` refusals.
    RateLimited,
    /// Retention removed messages a paged catch-up had not read yet: the connection resumes
    /// again, and is told `recovered: false` for that channel by the usual rules.
    ResumeLost,
    /// A paged catch-up could not read its next page from the store.
    StoreUnavailable,
}

impl CloseReason {
    /// Wire code for the reason.
    pub fn code(self) -> &'static str {
        match self {
            CloseReason::SlowConsumer => "slow_consumer",
            CloseReason::Shutdown => "shutdown",
            CloseReason::TokenExpired => "token_expired",
            CloseReason::Revoked
            | CloseReason::AppDeleted
            | CloseReason::SecretChanged
            | CloseReason::DeviceRevoked => "revoked",
            CloseReason::RateLimited => "rate_limited",
            CloseReason::ResumeLost => "resume_lost",
            CloseReason::StoreUnavailable => "store_unavailable",
        }
    }

    /// Explanation for a person.
    pub fn message(self) -> &'static str {
        match self {
            CloseReason::SlowConsumer => {
                "the connection fell behind and its queue overflowed; resume from your last seq"
            }
            CloseReason::Shutdown => "the server is shutting down; reconnect and resume",
            CloseReason::TokenExpired => "the token expired; reconnect with a fresh token",
            CloseReason::Revoked => {
                "an administrator revoked this connection's access; do not reconnect with the \
                 same token"
            }
            CloseReason::AppDeleted => "the app was deleted; its tokens are no longer valid",
            CloseReason::SecretChanged => {
                "the app's token secret changed; get a token signed with the new secret"
            }
            CloseReason::DeviceRevoked => {
                "the device was deactivated or deleted; register it again before reconnecting"
            }
            CloseReason::RateLimited => {
                "the connection kept sending commands over its rate limit; reconnect later and \
                 send fewer commands"
            }
            CloseReason::ResumeLost => {
                "retention removed messages this connection's catch-up had not read yet; \
                 reconnect and resume from your last seq (the subscribe reply then says \
                 recovered: false)"
            }
            CloseReason::StoreUnavailable => {
                "the store could not be read to continue the catch-up; reconnect and resume \
                 from your last seq"
            }
        }
    }
}

#[derive(Default)]
struct Queue {
    frames: VecDeque<OutFrame>,
    bytes: usize,
    closed: Option<CloseReason>,
    /// A keep-alive ping is due ([`Outbox::request_ping`]).
    ping: bool,
    /// The writer waiting for something to write, if it is waiting.
    waiter: Option<Waker>,
    /// Paged catch-up's share of the queue, while a catch-up uses it; `None` (one word) on
    /// connections that are not catching up.
    catchup: Option<Box<CatchupQueue>>,
    /// Held while frames of a fan-out gather wait here, dropped when the writer takes them
    /// (see [`crate::fanout::drain`]).
    drain: Option<DrainTicket>,
}

/// What an outbox keeps of the paged catch-ups queuing to it.
#[derive(Default)]
struct CatchupQueue {
    /// Bytes of paged catch-up queued ([`Outbox::push_catchup`]), apart from `bytes`.
    bytes: usize,
    /// Pagers waiting for the writer to take what is queued, or for their turn
    /// ([`Outbox::poll_catchup_below`], [`Outbox::poll_catchup_turn`]).
    pagers: Vec<Waker>,
    /// A pager holds the turn: it is reading and queuing a page ([`Outbox::poll_catchup_turn`]).
    turn: bool,
}

impl Queue {
    /// Frames were queued: on the fan-out thread, in the middle of a gather, they are that
    /// gather's until the writer takes them (an outbox holding an older gather's keeps that one).
    fn hold_drain_ticket(&mut self) {
        if self.drain.is_none() {
            self.drain = crate::fanout::drain::ticket();
        }
    }

    /// Takes the waiting writer's waker, to be woken once the lock is released.
    fn waiter(&mut self) -> Option<Waker> {
        self.waiter.take()
    }

    /// Closes the queue as a slow consumer, dropping what it holds; returns the pagers to wake
    /// (after the lock is released), as [`Queue::drained`] does.
    fn overflow(&mut self) -> Vec<Waker> {
        self.closed = Some(CloseReason::SlowConsumer);
        self.frames = VecDeque::new();
        self.bytes = 0;
        self.drain = None;
        crate::telemetry::telemetry().slow_consumers.increment(1);
        self.drained()
    }

    /// The writer took everything queued: no catch-up is queued any more; returns the pagers
    /// to wake (after the lock is released).
    fn drained(&mut self) -> Vec<Waker> {
        let Some(catchup) = self.catchup.as_mut() else {
            return Vec::new();
        };
        if catchup.bytes > 0 {
            crate::telemetry::telemetry()
                .catchup_bytes
                .decrement(catchup.bytes as f64);
        }
        catchup.bytes = 0;
        let pagers = std::mem::take(&mut catchup.pagers);
        if !catchup.turn {
            self.catchup = None;
        }
        pagers
    }

    fn catchup_bytes(&self) -> usize {
        self.catchup.as_ref().map_or(0, |c| c.bytes)
    }

    fn wait_catchup(&mut self, cx: &mut Context<'_>) {
        let pagers = &mut self.catchup.get_or_insert_with(Box::default).pagers;
        if !pagers.iter().any(|w| w.will_wake(cx.waker())) {
            pagers.push(cx.waker().clone());
        }
    }
}

impl Drop for CatchupQueue {
    fn drop(&mut self) {
        if self.bytes > 0 {
            crate::telemetry::telemetry()
                .catchup_bytes
                .decrement(self.bytes as f64);
        }
    }
}

/// The most catch-up bytes one outbox has held queued at once, since the process started
/// (`herald_catchup_queued_max_bytes`).
static CATCHUP_QUEUED_MAX: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn wake_all(pagers: Vec<Waker>) {
    pagers.into_iter().for_each(Waker::wake);
}

/// Everything an outbox held when its writer looked.
#[derive(Debug, Default)]
pub struct Batch {
    /// The queued frames, oldest first.
    pub frames: VecDeque<OutFrame>,
    /// Why the outbox was closed, if it was.
    pub closed: Option<CloseReason>,
    /// A keep-alive ping is due.
    pub ping: bool,
}

/// A bounded queue of frames waiting to be written to one connection.
pub struct Outbox {
    queue: Mutex<Queue>,
    limit_bytes: usize,
}

fn wake(waiter: Option<Waker>) {
    if let Some(w) = waiter {
        w.wake();
    }
}

impl Outbox {
    /// An empty outbox that overflows past `limit_bytes` of queued frames.
    pub fn new(limit_bytes: usize) -> Arc<Self> {
        Arc::new(Outbox {
            queue: Mutex::new(Queue::default()),
            limit_bytes,
        })
    }

    /// Queues a frame. Returns false, and closes the outbox as a slow consumer, if the queue is
    /// over its limit; returns false if it is already closed.
    pub fn push(&self, frame: OutFrame) -> bool {
        let mut q = self.queue.lock();
        if q.closed.is_some() {
            return false;
        }
        let cost = frame.cost();
        if q.bytes + cost > self.limit_bytes && q.bytes > 0 {
            let pagers = q.overflow();
            let waiter = q.waiter();
            drop(q);
            wake(waiter);
            wake_all(pagers);
            return false;
        }
        q.bytes += cost;
        q.frames.push_back(frame);
        q.hold_drain_ticket();
        let waiter = q.waiter();
        drop(q);
        wake(waiter);
        true
    }

    /// Queues `frames` in order as [`Outbox::push`] would one by one (the same limit, the same
    /// slow-consumer close), under one lock and with one wake of the writer: the fan-out hands a
    /// subscriber every message of a commit for its channel at once. Returns how many it
    /// accepted (as `push` would have answered true for them, even though an overflow later in
    /// the same call drops them with the rest of the queue); after a refusal nothing more is.
    pub fn push_many(&self, frames: impl IntoIterator<Item = OutFrame>) -> usize {
        let frames = frames.into_iter();
        let mut q = self.queue.lock();
        if q.closed.is_some() {
            return 0;
        }
        let (least, most) = frames.size_hint();
        q.frames.reserve(most.unwrap_or(least));
        let mut queued = 0;
        let mut pagers = Vec::new();
        for frame in frames {
            let cost = frame.cost();
            if q.bytes + cost > self.limit_bytes && q.bytes > 0 {
                pagers = q.overflow();
                break;
            }
            q.bytes += cost;
            q.frames.push_back(frame);
            queued += 1;
        }
        if queued > 0 {
            q.hold_drain_ticket();
        }
        let waiter = if queued > 0 || q.closed.is_some() {
            q.waiter()
        } else {
            None
        };
        drop(q);
        wake(waiter);
        wake_all(pagers);
        queued
    }

    /// Queues frames regardless of the limit and without counting them against it: a
    /// subscribe's catch-up from the log, already bounded by retention. Live frames queued behind
    /// it still get the whole limit, so a large replay alone never makes a slow consumer.
    /// Returns false, queuing nothing, if the outbox is closed.
    pub fn push_all_unbounded(&self, frames: impl IntoIterator<Item = OutFrame>) -> bool {
        self.extend_unbounded(frames, |q, _| !q.frames.is_empty())
    }

    /// Queues `frames` outside the byte limit, then lets `count` see the queue and where the
    /// new frames start (under the same lock) and say whether to wake the writer. Returns
    /// false, queuing nothing, if the outbox is closed.
    fn extend_unbounded(
        &self,
        frames: impl IntoIterator<Item = OutFrame>,
        count: impl FnOnce(&mut Queue, usize) -> bool,
    ) -> bool {
        let mut q = self.queue.lock();
        if q.closed.is_some() {
            return false;
        }
        let before = q.frames.len();
        q.frames.extend(frames);
        let waiter = if count(&mut q, before) {
            q.waiter()
        } else {
            None
        };
        drop(q);
        wake(waiter);
        true
    }

    /// Queues a page of paged catch-up (see [`crate::catchup`]): like
    /// [`Outbox::push_all_unbounded`] (not counted against the slow-consumer limit), but counted
    /// apart so that a pager reads its next page only once the writer has taken enough of it
    /// ([`Outbox::catchup_queued`], [`Outbox::poll_catchup_below`]). Returns false, queuing
    /// nothing, if the outbox is closed.
    pub fn push_catchup(&self, frames: impl IntoIterator<Item = OutFrame>) -> bool {
        self.extend_unbounded(frames, |q, before| {
            let added: usize = q.frames.iter().skip(before).map(OutFrame::cost).sum();
            if added > 0 {
                let catchup = q.catchup.get_or_insert_with(Box::default);
                catchup.bytes += added;
                let queued = catchup.bytes;
                let metrics = crate::telemetry::telemetry();
                metrics.catchup_bytes.increment(added as f64);
                let max = &CATCHUP_QUEUED_MAX;
                if max.fetch_max(queued, std::sync::atomic::Ordering::Relaxed) < queued {
                    metrics.catchup_queued_max.set(queued as f64);
                }
            }
            q.frames.len() != before
        })
    }

    /// Bytes of paged catch-up queued and not yet taken by the writer.
    pub fn catchup_queued(&self) -> usize {
        self.queue.lock().catchup_bytes()
    }

    /// Ready once at most `bytes` of paged catch-up are queued, or the outbox is closed (a pager
    /// then stops); otherwise leaves the task's waker, woken when the writer takes what is
    /// queued.
    pub fn poll_catchup_below(&self, cx: &mut Context<'_>, bytes: usize) -> Poll<()> {
        let mut q = self.queue.lock();
        if q.catchup_bytes() <= bytes || q.closed.is_some() {
            return Poll::Ready(());
        }
        q.wait_catchup(cx);
        Poll::Pending
    }

    /// Pagers of one outbox take turns, so that together they queue what one would: ready with
    /// `true` once at most `bytes` of catch-up are queued and no other pager holds the turn,
    /// which it then holds until [`Outbox::end_catchup_turn`]; ready with `false` once the
    /// outbox is closed (the pager stops). Otherwise leaves the task's waker, woken when the
    /// writer takes what is queued or the turn is given back.
    pub fn poll_catchup_turn(&self, cx: &mut Context<'_>, bytes: usize) -> Poll<bool> {
        let mut q = self.queue.lock();
        if q.closed.is_some() {
            return Poll::Ready(false);
        }
        if q.catchup_bytes() <= bytes {
            let catchup = q.catchup.get_or_insert_with(Box::default);
            if !catchup.turn {
                catchup.turn = true;
                return Poll::Ready(true);
            }
        }
        q.wait_catchup(cx);
        Poll::Pending
    }

    /// Wakes the pagers waiting on this outbox (one of them ended: it stops waiting).
    pub fn wake_catchup(&self) {
        let pagers = self
            .queue
            .lock()
            .catchup
            .as_mut()
            .map(|c| std::mem::take(&mut c.pagers))
            .unwrap_or_default();
        wake_all(pagers);
    }

    /// Gives back the turn taken by [`Outbox::poll_catchup_turn`] and wakes the pagers waiting.
    pub fn end_catchup_turn(&self) {
        let mut q = self.queue.lock();
        let pagers = match q.catchup.as_mut() {
            Some(catchup) => {
                catchup.turn = false;
                let pagers = std::mem::take(&mut catchup.pagers);
                if catchup.bytes == 0 {
                    q.catchup = None;
                }
                pagers
            }
            None => Vec::new(),
        };
        drop(q);
        wake_all(pagers);
    }

    /// Closes the outbox; queued frames are still handed out for anything but a slow consumer.
    /// Returns whether this call closed it (false if it was closed already).
    pub fn close(&self, reason: CloseReason) -> bool {
        let mut q = self.queue.lock();
        let newly = q.closed.is_none();
        if newly {
            q.closed = Some(reason);
        }
        let waiter = q.waiter();
        let pagers = q
            .catchup
            .as_mut()
            .map(|c| std::mem::take(&mut c.pagers))
            .unwrap_or_default();
        drop(q);
        wake(waiter);
        wake_all(pagers);
        newly
    }

    /// Why the outbox was closed, if it was.
    pub fn closed(&self) -> Option<CloseReason> {
        self.queue.lock().closed
    }

    /// Whether the outbox is closed, without taking anything queued: ready with the reason once
    /// it is; otherwise leaves the task's waker (woken by the next frame, close or ping request,
    /// so a caller polls again). For a writer blocked on a full socket, which must hear of a
    /// slow-consumer close while it waits.
    pub fn poll_closed(&self, cx: &mut Context<'_>) -> Poll<CloseReason> {
        let mut q = self.queue.lock();
        if let Some(reason) = q.closed {
            return Poll::Ready(reason);
        }
        if !q.waiter.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            q.waiter = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Asks the writer to send a keep-alive ping; the next [`Batch`] says so.
    pub fn request_ping(&self) {
        let mut q = self.queue.lock();
        q.ping = true;
        let waiter = q.waiter();
        drop(q);
        wake(waiter);
    }

    /// For a writer that is not in a task (a parked connection, woken by `waker`'s wake): if
    /// the one thing to do is a keep-alive ping, takes the request and leaves `waker` to be woken
    /// by what comes next (true); otherwise leaves everything for the writer to take (false).
    pub fn take_lone_ping(&self, waker: &Waker) -> bool {
        let mut q = self.queue.lock();
        if !q.ping || !q.frames.is_empty() || q.closed.is_some() {
            return false;
        }
        q.ping = false;
        if !q.waiter.as_ref().is_some_and(|w| w.will_wake(waker)) {
            q.waiter = Some(waker.clone());
        }
        true
    }

    /// Takes every queued frame without waiting. Returns the frames and the close reason, if any.
    pub fn take(&self) -> (VecDeque<OutFrame>, Option<CloseReason>) {
        let mut q = self.queue.lock();
        q.bytes = 0;
        let pagers = q.drained();
        let taken = (std::mem::take(&mut q.frames), q.closed);
        let ticket = q.drain.take();
        drop(q);
        drop(ticket);
        wake_all(pagers);
        taken
    }

    /// Takes everything queued if there is anything to do (frames, a close, a ping); otherwise
    /// leaves the task's waker to be woken by the next of those, and is pending. One writer per
    /// outbox: a second writer's waker would replace the first's.
    pub fn poll_batch(&self, cx: &mut Context<'_>) -> Poll<Batch> {
        let mut q = self.queue.lock();
        if q.frames.is_empty() && q.closed.is_none() && !q.ping {
            if !q.waiter.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                q.waiter = Some(cx.waker().clone());
            }
            return Poll::Pending;
        }
        q.bytes = 0;
        let pagers = q.drained();
        let batch = Batch {
            frames: std::mem::take(&mut q.frames),
            closed: q.closed,
            ping: std::mem::take(&mut q.ping),
        };
        let ticket = q.drain.take();
        drop(q);
        drop(ticket);
        wake_all(pagers);
        Poll::Ready(batch)
    }

    /// Waits until there is something to write or the outbox is closed, then takes it all
    /// (ping requests are for [`Outbox::poll_batch`] writers and are ignored here).
    pub async fn next_batch(&self) -> (VecDeque<OutFrame>, Option<CloseReason>) {
        loop {
            let batch = std::future::poll_fn(|cx| self.poll_batch(cx)).await;
            if !batch.frames.is_empty() || batch.closed.is_some() {
                return (batch.frames, batch.closed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctl(n: usize) -> OutFrame {
        OutFrame::Control(Bytes::from(vec![b'x'; n]))
    }

    #[tokio::test]
    async fn a_lone_ping_is_taken_apart_and_anything_more_is_left_for_the_writer() {
        let o = Outbox::new(1000);
        let waker = std::task::Waker::noop().clone();
        assert!(!o.take_lone_ping(&waker), "nothing requested");
        o.request_ping();
        assert!(o.take_lone_ping(&waker));
        assert!(!o.take_lone_ping(&waker), "taken once");
        o.request_ping();
        assert!(o.push(ctl(10)));
        assert!(!o.take_lone_ping(&waker), "a frame waits too");
        let batch = std::future::poll_fn(|cx| o.poll_batch(cx)).await;
        assert!(batch.ping && batch.frames.len() == 1);
        o.request_ping();
        o.close(CloseReason::Shutdown);
        assert!(!o.take_lone_ping(&waker), "a close waits too");
    }

    #[tokio::test]
    async fn batches_everything_queued() {
        let o = Outbox::new(1000);
        assert!(o.push(ctl(10)));
        assert!(o.push(ctl(10)));
        let (frames, closed) = o.next_batch().await;
        assert_eq!(frames.len(), 2);
        assert!(closed.is_none());
        let (frames, _) = o.take();
        assert!(frames.is_empty());
    }

    #[tokio::test]
    async fn overflow_closes_as_slow_consumer() {
        let o = Outbox::new(100);
        assert!(o.push(ctl(60)));
        assert!(!o.push(ctl(60)));
        let (frames, closed) = o.next_batch().await;
        assert!(frames.is_empty());
        assert_eq!(closed, Some(CloseReason::SlowConsumer));
        assert!(!o.push(ctl(1)));
    }

    #[tokio::test]
    async fn a_writer_waiting_on_its_socket_hears_of_the_overflow_without_taking_frames() {
        let o = Outbox::new(100);
        assert!(o.push(ctl(60)));
        let waiting = {
            let o = o.clone();
            tokio::spawn(async move { std::future::poll_fn(|cx| o.poll_closed(cx)).await })
        };
        tokio::task::yield_now().await;
        assert!(!o.push(ctl(60)));
        let closed = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("woken by the overflow")
            .unwrap();
        assert_eq!(closed, CloseReason::SlowConsumer);
    }

    #[tokio::test]
    async fn push_many_queues_in_order_with_one_wake() {
        let o = Outbox::new(1000);
        let o2 = o.clone();
        let h = tokio::spawn(async move { o2.next_batch().await.0 });
        tokio::task::yield_now().await;
        assert_eq!(o.push_many((1..=3).map(ctl)), 3);
        let lens: Vec<usize> = h
            .await
            .unwrap()
            .into_iter()
            .map(|f| match f {
                OutFrame::Control(b) => b.len(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(lens, vec![1, 2, 3], "one batch, in order");
        assert_eq!(o.push_many(std::iter::empty()), 0);
    }

    #[tokio::test]
    async fn push_many_overflows_exactly_as_one_push_at_a_time() {
        let o = Outbox::new(100);
        assert_eq!(
            o.push_many((0..3).map(|_| ctl(40))),
            2,
            "the third overflows"
        );
        let (frames, closed) = o.next_batch().await;
        assert!(frames.is_empty(), "a slow consumer's queue is dropped");
        assert_eq!(closed, Some(CloseReason::SlowConsumer));
        assert_eq!(o.push_many((0..2).map(|_| ctl(1))), 0, "closed");
        let one = Outbox::new(10);
        assert_eq!(
            one.push_many([ctl(50)]),
            1,
            "an oversized frame fits an empty queue"
        );
    }

    #[tokio::test]
    async fn one_oversized_frame_still_fits_an_empty_queue() {
        let o = Outbox::new(10);
        assert!(o.push(ctl(50)));
        assert_eq!(o.take().0.len(), 1);
    }

    #[tokio::test]
    async fn catch_up_does_not_count_against_the_live_limit() {
        let o = Outbox::new(100);
        o.push_all_unbounded((0..10).map(|_| ctl(60)));
        assert!(
            o.push(ctl(60)),
            "live frame still fits after a large replay"
        );
        assert_eq!(o.take().0.len(), 11);
    }

    #[tokio::test]
    async fn ping_requests_wake_the_writer_and_are_handed_out_once() {
        let o = Outbox::new(1000);
        let o2 = o.clone();
        let h = tokio::spawn(async move { std::future::poll_fn(|cx| o2.poll_batch(cx)).await });
        tokio::task::yield_now().await;
        o.request_ping();
        let batch = h.await.unwrap();
        assert!(batch.ping && batch.frames.is_empty() && batch.closed.is_none());
        let waker = futures_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(o.poll_batch(&mut cx).is_pending(), "the ping was taken");
        o.push(ctl(1));
        match o.poll_batch(&mut cx) {
            Poll::Ready(b) => assert!(!b.ping && b.frames.len() == 1),
            Poll::Pending => panic!("a queued frame is ready"),
        }
    }

    #[tokio::test]
    async fn next_batch_waits_past_a_ping_for_frames() {
        let o = Outbox::new(1000);
        let o2 = o.clone();
        let h = tokio::spawn(async move { o2.next_batch().await.0.len() });
        tokio::task::yield_now().await;
        o.request_ping();
        tokio::task::yield_now().await;
        assert!(!h.is_finished(), "a ping alone is nothing to write");
        o.push(ctl(1));
        assert_eq!(h.await.unwrap(), 1);
    }

    #[tokio::test]
    async fn close_wakes_a_waiting_writer() {
        let o = Outbox::new(1000);
        let o2 = o.clone();
        let h = tokio::spawn(async move { o2.next_batch().await.1 });
        tokio::task::yield_now().await;
        o.close(CloseReason::Shutdown);
        assert_eq!(h.await.unwrap(), Some(CloseReason::Shutdown));
    }

    fn futures_waker() -> Waker {
        Waker::noop().clone()
    }

    #[tokio::test]
    async fn a_pager_waits_until_the_writer_takes_its_catch_up() {
        let o = Outbox::new(100);
        assert!(o.push_catchup((0..10).map(|_| ctl(60))));
        assert_eq!(o.catchup_queued(), 600);
        assert!(
            o.push(ctl(60)),
            "catch-up does not count against the live limit"
        );
        let pager = {
            let o = o.clone();
            tokio::spawn(async move {
                std::future::poll_fn(|cx| o.poll_catchup_below(cx, 50)).await;
                o.catchup_queued()
            })
        };
        tokio::task::yield_now().await;
        assert!(!pager.is_finished(), "600 bytes of catch-up still queued");
        let (frames, _) = o.next_batch().await;
        assert_eq!(frames.len(), 11);
        let queued = tokio::time::timeout(std::time::Duration::from_secs(5), pager)
            .await
            .expect("woken by the writer's take")
            .unwrap();
        assert_eq!(queued, 0);
    }

    #[tokio::test]
    async fn closing_releases_a_waiting_pager() {
        let o = Outbox::new(100);
        assert!(o.push_catchup([ctl(60)]));
        let pager = {
            let o = o.clone();
            tokio::spawn(async move {
                std::future::poll_fn(|cx| o.poll_catchup_below(cx, 0)).await;
            })
        };
        tokio::task::yield_now().await;
        o.close(CloseReason::Shutdown);
        tokio::time::timeout(std::time::Duration::from_secs(5), pager)
            .await
            .expect("woken by the close")
            .unwrap();
        assert!(!o.push_catchup([ctl(1)]), "nothing is queued once closed");
    }

    #[tokio::test]
    async fn wakes_a_waiting_writer() {
        let o = Outbox::new(1000);
        let o2 = o.clone();
        let h = tokio::spawn(async move { o2.next_batch().await.0.len() });
        tokio::task::yield_now().await;
        o.push(ctl(1));
        assert_eq!(h.await.unwrap(), 1);
    }
}
