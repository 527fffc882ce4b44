//! The reader of a paged catch-up: one task per subscription whose first read was a full page,
//! ended when the subscription goes live (live and idle subscriptions have none). It reads the
//! pages its [`Subscription`]'s [`super::Pager`] asks for, as the outbox drains, taking turns
//! with the other pagers of the same outbox and holding one of the node's [`PageReads`] permits
//! while it reads the store.

use std::sync::Arc;
use std::task::Poll;

use tokio::sync::Semaphore;

use crate::hub::{NextRead, Shape, Subscription};
use crate::log::Retention;
use crate::name::ChannelName;
use crate::outbox::{CloseReason, Outbox};
use crate::telemetry::telemetry;

use super::tail::TailReads;
use super::Page;

/// The node-wide cap on catch-up page reads in flight: pages read and decoded at once, whatever
/// the number of connections catching up.
pub struct PageReads {
    permits: Semaphore,
}

impl PageReads {
    /// At most `n` page reads at once (at least one).
    pub fn new(n: usize) -> Arc<Self> {
        Arc::new(PageReads {
            permits: Semaphore::new(n.max(1)),
        })
    }

    /// Four per core of this machine.
    pub fn per_core() -> Arc<Self> {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self::new(4 * cores)
    }
}

/// One subscription's page reads, until it is live or ends.
pub(crate) struct PageReader {
    /// Reads through the channel's shared recent tail.
    pub tail: TailReads,
    /// The channel's retention (the tail serves only what the store is sure to hold).
    pub retention: Retention,
    pub channel: ChannelName,
    pub subscription: Arc<Subscription>,
    pub shape: Shape,
    pub reads: Arc<PageReads>,
    /// Catch-up bytes queued at or below which a page is due (half the budget).
    pub low_water: usize,
}

/// The turn among the pagers of one outbox, given back when dropped.
struct Turn<'a>(&'a Outbox);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.end_catchup_turn();
    }
}

impl PageReader {
    /// `poll`, or ready with `ended` if the subscription ended while it waited (checked after
    /// the waker was left, so an end in between is not missed: it wakes the waker).
    fn unless_ended<T>(&self, poll: Poll<T>, ended: T) -> Poll<T> {
        match poll {
            Poll::Pending if !self.subscription.is_catching_up() => Poll::Ready(ended),
            poll => poll,
        }
    }

    /// Reads pages until the subscription is live, ended, or its outbox closed.
    pub async fn run(self) {
        let outbox = self.subscription.outbox().clone();
        loop {
            let mine = std::future::poll_fn(|cx| {
                let turn = outbox.poll_catchup_turn(cx, self.low_water);
                self.unless_ended(turn, false)
            });
            if !mine.await {
                return;
            }
            let turn = Turn(&outbox);
            let request = match self.subscription.next_read() {
                NextRead::Done => return,
                NextRead::Wait => {
                    // Not due yet by the pager's own measure: wait for the writer to take all.
                    drop(turn);
                    std::future::poll_fn(|cx| {
                        let drained = outbox.poll_catchup_below(cx, 0);
                        self.unless_ended(drained, ())
                    })
                    .await;
                    continue;
                }
                NextRead::Read(request) => request,
            };
            let read = {
                let Ok(_permit) = self.reads.permits.acquire().await else {
                    return;
                };
                self.tail
                    .read_after(
                        &self.channel,
                        request.after,
                        request.limit,
                        None,
                        self.retention,
                    )
                    .await
            };
            telemetry().catchup_pages.increment(1);
            let slice = match read {
                Ok(slice) => slice,
                Err(e) => {
                    tracing::warn!(channel = %self.channel.as_str(), error = %e,
                        "a catch-up page read failed; closing the connection so it resumes");
                    self.subscription.end();
                    outbox.close(CloseReason::StoreUnavailable);
                    return;
                }
            };
            let page = Page {
                messages: slice.messages,
                last_seq: slice.state.last_seq,
            };
            match self.subscription.on_page(page, self.shape) {
                Ok(true) => return,
                Ok(false) => {}
                Err(gap) => {
                    tracing::info!(channel = %self.channel.as_str(), expected = gap.expected,
                        "retention overtook a paging catch-up; closing the connection");
                    self.subscription.end();
                    outbox.close(CloseReason::ResumeLost);
                    return;
                }
            }
            drop(turn);
        }
    }
}
