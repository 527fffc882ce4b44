//! The per-connection outbound queue. The hub pushes reference-counted frames into it without
//! ever blocking; the connection's writer takes everything queued at once and writes it in one
//! go (coalescing). A queue that grows past its byte limit is closed with
//! [`CloseReason::SlowConsumer`]: the publisher is never slowed by a slow reader, and the client
//! resumes from the log.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

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
}

impl OutFrame {
    fn cost(&self) -> usize {
        match self {
            OutFrame::Message(m) | OutFrame::Replayed(m) => m.data.len() + 64,
            OutFrame::Control(b) => b.len(),
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
}

impl CloseReason {
    /// Wire code for the reason.
    pub fn code(self) -> &'static str {
        match self {
            CloseReason::SlowConsumer => "slow_consumer",
            CloseReason::Shutdown => "shutdown",
            CloseReason::TokenExpired => "token_expired",
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
        }
    }
}

#[derive(Default)]
struct Queue {
    frames: VecDeque<OutFrame>,
    bytes: usize,
    closed: Option<CloseReason>,
}

/// A bounded queue of frames waiting to be written to one connection.
pub struct Outbox {
    queue: Mutex<Queue>,
    ready: Notify,
    limit_bytes: usize,
}

impl Outbox {
    /// An empty outbox that overflows past `limit_bytes` of queued frames.
    pub fn new(limit_bytes: usize) -> Arc<Self> {
        Arc::new(Outbox {
            queue: Mutex::new(Queue::default()),
            ready: Notify::new(),
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
            q.closed = Some(CloseReason::SlowConsumer);
            q.frames = VecDeque::new();
            q.bytes = 0;
            crate::telemetry::telemetry().slow_consumers.increment(1);
            drop(q);
            self.ready.notify_one();
            return false;
        }
        q.bytes += cost;
        q.frames.push_back(frame);
        let was_empty = q.frames.len() == 1;
        drop(q);
        if was_empty {
            self.ready.notify_one();
        }
        true
    }

    /// Queues frames regardless of the limit and without counting them against it: a
    /// subscribe's catch-up from the log, already bounded by retention. Live frames queued behind
    /// it still get the whole limit, so a large replay alone never makes a slow consumer.
    pub fn push_all_unbounded(&self, frames: impl IntoIterator<Item = OutFrame>) {
        let mut q = self.queue.lock();
        if q.closed.is_some() {
            return;
        }
        q.frames.extend(frames);
        let any = !q.frames.is_empty();
        drop(q);
        if any {
            self.ready.notify_one();
        }
    }

    /// Closes the outbox; queued frames are still handed out for anything but a slow consumer.
    pub fn close(&self, reason: CloseReason) {
        let mut q = self.queue.lock();
        if q.closed.is_none() {
            q.closed = Some(reason);
        }
        drop(q);
        self.ready.notify_one();
    }

    /// Takes every queued frame without waiting. Returns the frames and the close reason, if any.
    pub fn take(&self) -> (VecDeque<OutFrame>, Option<CloseReason>) {
        let mut q = self.queue.lock();
        q.bytes = 0;
        (std::mem::take(&mut q.frames), q.closed)
    }

    /// Waits until there is something to write or the outbox is closed, then takes it all.
    pub async fn next_batch(&self) -> (VecDeque<OutFrame>, Option<CloseReason>) {
        loop {
            let notified = self.ready.notified();
            let (frames, closed) = self.take();
            if !frames.is_empty() || closed.is_some() {
                return (frames, closed);
            }
            notified.await;
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
    async fn wakes_a_waiting_writer() {
        let o = Outbox::new(1000);
        let o2 = o.clone();
        let h = tokio::spawn(async move { o2.next_batch().await.0.len() });
        tokio::task::yield_now().await;
        o.push(ctl(1));
        assert_eq!(h.await.unwrap(), 1);
    }
}
