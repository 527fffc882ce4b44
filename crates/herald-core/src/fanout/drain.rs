//! How far the connections' writers are behind the fan-out thread.
//!
//! The fan-out thread hands a gather of committed messages to thousands of outboxes in a few
//! milliseconds; the writers that turn those outboxes into socket writes take far longer. Left
//! alone, the thread would run ahead and a burst would wait in the outboxes, where nothing
//! bounds how long a message waits (only how many bytes one connection may hold). So each gather
//! carries a [`DrainWatch`]: the first frame it queues in an outbox leaves a [`DrainTicket`] there,
//! and the writer's next take of that outbox drops it. Before the thread delivers a gather, it
//! waits until the one two gathers back has been taken by all but a few of its outboxes
//! ([`DrainWatch::wait`]), so at most about two gathers wait for writers at once, and the rest of a
//! burst waits in the fan-out queue, where publishers are paced by it
//! ([`super::backlog::Backlog`]).
//!
//! A few outboxes that are slow to be taken (a slow consumer, a client on a bad network) are let
//! go: the wait ends once all but 1 % (and at least [`STRAGGLERS`]) are taken, and after
//! [`MAX_WAIT`] in any case. A slow consumer never holds publishers back; it is closed by its
//! outbox's byte limit, as before. An outbox that still holds a ticket of an older gather does not
//! take one of the next, so stragglers are not counted again.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Outboxes of a gather that may still be untaken when the fan-out moves on, at least.
pub(crate) const STRAGGLERS: usize = 64;

/// Longest the fan-out thread waits for the writers of one gather.
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(50);

/// The outboxes one gather queued frames in, counted down as their writers take them.
pub(crate) struct DrainWatch {
    /// Tickets issued and not yet dropped.
    pending: AtomicUsize,
    /// Tickets issued.
    issued: AtomicUsize,
    /// `pending` at which the fan-out thread wants to hear (`usize::MAX` until armed).
    wake_at: AtomicUsize,
    /// The fan-out thread.
    thread: Thread,
}

/// Held by an outbox while it holds frames of a gather; dropped when its writer takes them (or
/// the outbox is closed or dropped).
pub(crate) struct DrainTicket(Arc<DrainWatch>);

impl Drop for DrainTicket {
    fn drop(&mut self) {
        let left = self.0.pending.fetch_sub(1, Ordering::AcqRel) - 1;
        if left == self.0.wake_at.load(Ordering::Acquire) {
            self.0.thread.unpark();
        }
    }
}

thread_local! {
    /// The gather being delivered by this thread (only the fan-out thread sets one).
    static DELIVERING: RefCell<Option<Arc<DrainWatch>>> = const { RefCell::new(None) };
}

/// A ticket of the gather this thread is delivering, if it is the fan-out thread in the middle
/// of one: called by an outbox that queues a frame and holds no ticket yet.
pub(crate) fn ticket() -> Option<DrainTicket> {
    DELIVERING.with(|current| {
        current.borrow().as_ref().map(|watch| {
            watch.pending.fetch_add(1, Ordering::AcqRel);
            watch.issued.fetch_add(1, Ordering::Relaxed);
            DrainTicket(watch.clone())
        })
    })
}

impl DrainWatch {
    /// A watch for a gather the calling thread is about to deliver.
    pub(crate) fn new() -> Arc<DrainWatch> {
        Arc::new(DrainWatch {
            pending: AtomicUsize::new(0),
            issued: AtomicUsize::new(0),
            wake_at: AtomicUsize::new(usize::MAX),
            thread: std::thread::current(),
        })
    }

    /// Runs `deliver` with this watch's tickets handed to the outboxes it queues to.
    pub(crate) fn deliver<R>(self: &Arc<Self>, deliver: impl FnOnce() -> R) -> R {
        DELIVERING.with(|current| *current.borrow_mut() = Some(self.clone()));
        let out = deliver();
        DELIVERING.with(|current| *current.borrow_mut() = None);
        self.wake_at.store(self.enough(), Ordering::Release);
        out
    }

    /// Untaken outboxes few enough to move on.
    fn enough(&self) -> usize {
        (self.issued.load(Ordering::Relaxed) / 100).max(STRAGGLERS)
    }

    /// Waits until all but a few of this gather's outboxes were taken by their writers, or
    /// `longest` passed. Returns whether it had to wait.
    pub(crate) fn wait(&self, longest: Duration) -> bool {
        let enough = self.enough();
        if self.pending.load(Ordering::Acquire) <= enough {
            return false;
        }
        let deadline = Instant::now() + longest;
        loop {
            let now = Instant::now();
            if now >= deadline || self.pending.load(Ordering::Acquire) <= enough {
                return true;
            }
            std::thread::park_timeout(deadline - now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_exist_only_inside_a_delivery_and_count_down_when_dropped() {
        assert!(ticket().is_none());
        let watch = DrainWatch::new();
        let tickets: Vec<_> = watch.deliver(|| (0..200).filter_map(|_| ticket()).collect());
        assert!(ticket().is_none());
        assert_eq!(tickets.len(), 200);
        assert_eq!(watch.pending.load(Ordering::Acquire), 200);
        // 200 issued: moving on needs at most 64 untaken.
        let mut tickets = tickets;
        tickets.truncate(64);
        assert_eq!(watch.pending.load(Ordering::Acquire), 64);
        assert!(!watch.wait(Duration::from_secs(60)));
    }

    #[test]
    fn the_wait_ends_when_writers_take_enough() {
        let watch = DrainWatch::new();
        let tickets: Vec<_> = watch.deliver(|| (0..1000).filter_map(|_| ticket()).collect());
        let started = Instant::now();
        let taker = std::thread::spawn(move || {
            // The writers take all but 10 (fewer than the 64 stragglers let go).
            let mut tickets = tickets;
            tickets.truncate(10);
            tickets
        });
        watch.wait(Duration::from_secs(300));
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "woken by the writers' takes, not by the deadline"
        );
        assert!(watch.pending.load(Ordering::Acquire) <= 64);
        drop(taker.join().unwrap());
        assert_eq!(watch.pending.load(Ordering::Acquire), 0);
    }

    #[test]
    fn the_wait_gives_up_on_stragglers_after_its_longest() {
        let watch = DrainWatch::new();
        let _held: Vec<_> = watch.deliver(|| (0..1000).filter_map(|_| ticket()).collect());
        assert!(watch.wait(Duration::from_millis(20)));
        assert_eq!(watch.pending.load(Ordering::Acquire), 1000);
    }
}
