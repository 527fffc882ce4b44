//! The fan-out's backlog, counted in deliveries (a message times its channel's subscribers on
//! this node), and publishers' wait for room in it.
//!
//! A publish whose channel has subscribers here waits ([`Backlog::room`]) while more than the
//! limit of deliveries are queued for the fan-out thread, before it is stored. With the fan-out
//! thread pacing itself to the connections' writers (`super::drain`), a burst then waits in
//! front of the store instead of in thousands of outboxes, and a message is delivered within
//! about (limit + two gathers) / delivery rate of being stored, whatever the size of the burst.
//! Publishes to channels nobody here subscribes to never wait.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Default limit of queued deliveries before publishes wait: one gather (the most the fan-out
/// thread delivers at once), so the thread finds a whole gather queued each time it is ready for
/// one, and a message waits behind about three gathers in all (this queue, the gather being
/// delivered and the one its writers are taking), 130 ms at 3 M deliveries/s. Queued deliveries
/// beyond a gather would only add to every message's wait.
pub const DEFAULT_FANOUT_BACKLOG: usize = 128 * 1024;

/// Deliveries queued for the fan-out thread, and the publishers waiting for room.
pub struct Backlog {
    queued: AtomicUsize,
    limit: AtomicUsize,
    room: Notify,
    /// Publishes that had to wait for room (`herald_publishes_paced_total` counts them too).
    paced: AtomicU64,
}

impl Default for Backlog {
    fn default() -> Self {
        Backlog {
            queued: AtomicUsize::new(0),
            limit: AtomicUsize::new(DEFAULT_FANOUT_BACKLOG),
            room: Notify::new(),
            paced: AtomicU64::new(0),
        }
    }
}

impl Backlog {
    /// Deliveries queued for the fan-out thread now.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Publishes that have had to wait for room since the process started.
    pub fn paced(&self) -> u64 {
        self.paced.load(Ordering::Relaxed)
    }

    /// Sets how many deliveries may be queued before publishes wait (at least 1).
    pub fn set_limit(&self, deliveries: usize) {
        self.limit.store(deliveries.max(1), Ordering::Release);
        self.room.notify_waiters();
    }

    /// The limit of [`Backlog::set_limit`].
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Acquire)
    }

    pub(crate) fn add(&self, deliveries: usize) {
        self.queued.fetch_add(deliveries, Ordering::AcqRel);
    }

    pub(crate) fn remove(&self, deliveries: usize) {
        let before = self.queued.fetch_sub(deliveries, Ordering::AcqRel);
        let limit = self.limit();
        if before >= limit && before - deliveries < limit {
            self.room.notify_waiters();
        }
    }

    /// Waits until fewer deliveries than the limit are queued.
    pub async fn room(&self) {
        let mut counted = false;
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.queued() < self.limit() {
                return;
            }
            if !counted {
                counted = true;
                self.paced.fetch_add(1, Ordering::Relaxed);
                crate::telemetry::telemetry().publishes_paced.increment(1);
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn publishers_wait_while_the_backlog_is_full_and_go_once_it_drains() {
        let backlog = Arc::new(Backlog::default());
        backlog.set_limit(100);
        backlog.room().await; // empty: no wait
        assert_eq!(backlog.paced(), 0);
        backlog.add(150);
        let waiting = tokio::spawn({
            let backlog = backlog.clone();
            async move { backlog.room().await }
        });
        // Still full after taking 40: the publisher keeps waiting.
        while backlog.paced() == 0 {
            tokio::task::yield_now().await;
        }
        backlog.remove(40);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        backlog.remove(20); // 90 < 100: room
        tokio::time::timeout(Duration::from_secs(30), waiting)
            .await
            .expect("woken once there is room")
            .unwrap();
        assert_eq!(backlog.paced(), 1);
    }
}
