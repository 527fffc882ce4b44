//! Bounded, paged catch-up: the state machine of one subscription that resumes from a cursor
//! behind its channel's head (docs/design/bounded-catchup.md). It owns no I/O: the caller reads
//! the pages it asks for from the log, queues the frames it hands back, and feeds it the live
//! messages the hub delivers. Each [`crate::hub::Subscription`] holds one while it catches up
//! (the hub's `deliver` calls [`Pager::on_live`]), and [`crate::engine::Catchup`] runs the reads
//! ([`pages`] owns that task).
//!
//! The phases:
//! - [`Phase::Behind`]: the subscription reads the log page by page, each page sized to what the
//!   outbox has drained, and **drops** live messages (they are already in the log, because the
//!   hub delivers only committed messages, and a later page reads them).
//! - [`Phase::Closing`]: the last page read reached the log's head, so the subscription parks
//!   live messages from now on (as the hub's hold-back does today) and reads once more. If that
//!   closing read is short too, it queues the page and the parked messages above its cursor and
//!   goes live; if the page is full, publishers outran it: it drops what it parked and goes
//!   back to `Behind`.
//! - [`Phase::Live`]: live messages are queued as they come (skipping any the last page already
//!   covered, since a message can reach the hub after a read saw it in the log).
//!
//! A new subscription starts `Closing` (it is registered, parking, before its first read), so a
//! short catch-up takes one read and goes live exactly as today.

/// Messages read per page at most, whatever the budget.
pub const MAX_PAGE: usize = 1000;

/// Guessed cost of a message before the first page says (see [`Sequenced::cost`]).
const GUESSED_COST: usize = 256;

/// The size of a subscription's first read with `budget` bytes free: what [`Pager::next_read`]
/// would ask for before any page.
pub fn first_page_limit(budget: usize) -> usize {
    (budget.max(1) / GUESSED_COST).clamp(1, MAX_PAGE)
}

/// Queued catch-up bytes at or below which the next page is read: half the budget, so the
/// writer always has the other half queued while the next page is read.
fn low_water(budget: usize) -> usize {
    budget / 2
}

/// What the pager needs to know of a message.
pub trait Sequenced: Clone {
    /// Its seq in its channel.
    fn seq(&self) -> u64;
    /// What it costs queued in an outbox, in bytes (as [`crate::outbox::Outbox`] counts it).
    fn cost(&self) -> usize;
}

impl Sequenced for crate::message::SharedMessage {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn cost(&self) -> usize {
        self.data.len() + 64
    }
}

/// Where a paged catch-up stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading pages; live messages are dropped (a later page reads them from the log).
    Behind,
    /// At the log's head as of the last read: parking live messages during one more read.
    Closing,
    /// Caught up; live messages are queued as they come.
    Live,
}

/// A read the caller must make: up to `limit` messages with a seq greater than `after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    /// Read messages with a seq greater than this.
    pub after: u64,
    /// At most this many.
    pub limit: usize,
}

/// What a page read gave back.
#[derive(Debug)]
pub struct Page<M> {
    /// The messages read, in seq order (unfiltered: the caller filters what it queues).
    pub messages: Vec<M>,
    /// The channel's newest seq at the time of the read.
    pub last_seq: u64,
}

/// Frames to queue after a page, in order.
#[derive(Debug)]
pub struct PageDone<M> {
    /// The page's messages, then (when the catch-up went live) the parked ones above it.
    pub frames: Vec<M>,
    /// Whether the catch-up is now live.
    pub live: bool,
}

/// The log no longer holds every message after the cursor (retention removed some while the
/// catch-up was paging): exact resume is no longer possible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the log no longer holds seq {expected}: retention removed it during the catch-up")]
pub struct Gap {
    /// The first seq that should have been read and was not.
    pub expected: u64,
}

/// What to do with a live message the hub delivered.
#[derive(Debug, PartialEq, Eq)]
pub enum LiveAction<M> {
    /// Queue it now.
    Queue(M),
    /// Nothing: parked, dropped while behind (a page will read it), or already covered.
    Nothing,
    /// Too many parked during a closing read: close the connection as a slow consumer.
    Overflow,
}

/// The paged catch-up of one subscription (see the module docs).
#[derive(Debug)]
pub struct Pager<M> {
    phase: Phase,
    /// Seq of the last message handed out to be queued (or the resume point).
    cursor: u64,
    parked: Vec<M>,
    max_parked: usize,
    /// The limit of the read in flight, if one is.
    reading: Option<usize>,
    budget: usize,
    /// Mean cost of the messages read so far (a guess before the first page).
    mean_cost: usize,
}

impl<M: Sequenced> Pager<M> {
    /// A catch-up resuming after `after`, queuing at most about `budget` bytes of catch-up at a
    /// time (the outbox's limit), parking at most `max_parked` live messages while closing.
    pub fn new(after: u64, budget: usize, max_parked: usize) -> Self {
        Pager {
            phase: Phase::Closing,
            cursor: after,
            parked: Vec::new(),
            max_parked,
            reading: None,
            budget: budget.max(1),
            mean_cost: GUESSED_COST,
        }
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Seq of the last message handed out to be queued.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Live messages parked now.
    pub fn parked(&self) -> usize {
        self.parked.len()
    }

    /// The first read, which the caller made before it knew where the subscription resumes (a
    /// subscribe reads the channel's state and its first page in one store call): resume after
    /// `after` with `page`, which was read with `limit`. Then as [`Pager::on_page`].
    pub fn on_first_page(
        &mut self,
        after: u64,
        limit: usize,
        page: Page<M>,
    ) -> Result<PageDone<M>, Gap> {
        self.cursor = after;
        self.reading = Some(limit.max(1));
        self.on_page(page)
    }

    /// Ends a catch-up that has nothing to read (no cursor to resume, or one that cannot be
    /// resumed): caught up to `cursor`, so live from there. Returns the parked messages above
    /// it. Exactly a first page that came back empty at the log's head; only before any page
    /// was read (in [`Phase::Closing`], where nothing was dropped).
    pub fn finish_at(&mut self, cursor: u64) -> Vec<M> {
        let empty = Page {
            messages: Vec::new(),
            last_seq: cursor,
        };
        self.on_first_page(cursor, 1, empty)
            .map(|done| done.frames)
            .unwrap_or_default()
    }

    /// A live message from the hub (which delivers a channel's messages in seq order, each
    /// after it is committed to the log).
    pub fn on_live(&mut self, message: M) -> LiveAction<M> {
        match self.phase {
            Phase::Live if message.seq() > self.cursor => {
                self.cursor = message.seq();
                LiveAction::Queue(message)
            }
            Phase::Live | Phase::Behind => LiveAction::Nothing,
            Phase::Closing if self.parked.len() >= self.max_parked => LiveAction::Overflow,
            Phase::Closing => {
                self.parked.push(message);
                LiveAction::Nothing
            }
        }
    }

    /// The next page to read, if one is due: none while live, while a read is in flight, or
    /// while more than half the budget of catch-up is still queued (`queued` bytes; the caller
    /// asks again when its outbox drains). Sized so the page should fit in what is free.
    pub fn next_read(&mut self, queued: usize) -> Option<PageRequest> {
        if self.phase == Phase::Live || self.reading.is_some() || queued > low_water(self.budget) {
            return None;
        }
        let free = self.budget - queued;
        let limit = (free / self.mean_cost.max(1)).clamp(1, MAX_PAGE);
        self.reading = Some(limit);
        Some(PageRequest {
            after: self.cursor,
            limit,
        })
    }

    /// The read asked for by [`Pager::next_read`] came back. Returns what to queue, in order,
    /// or the gap that ends exact resume (the caller then ends the subscription).
    ///
    /// # Panics
    /// If no read was asked for (a bug in the caller, never a client's doing).
    pub fn on_page(&mut self, page: Page<M>) -> Result<PageDone<M>, Gap> {
        let limit = self.reading.take().expect("on_page without next_read");
        let mut expected = self.cursor + 1;
        for m in &page.messages {
            if m.seq() != expected {
                return Err(Gap { expected });
            }
            expected += 1;
        }
        let short = page.messages.len() < limit;
        if short && page.last_seq >= expected {
            // A short page that stops before the log's head: the rest was trimmed meanwhile.
            return Err(Gap { expected });
        }
        if !page.messages.is_empty() {
            let cost: usize = page.messages.iter().map(Sequenced::cost).sum();
            self.mean_cost = (cost / page.messages.len()).max(1);
        }
        self.cursor = expected - 1;
        let mut frames = page.messages;
        match (self.phase, short) {
            (Phase::Closing, true) => {
                let cursor = self.cursor;
                frames.extend(
                    std::mem::take(&mut self.parked)
                        .into_iter()
                        .filter(|m| m.seq() > cursor),
                );
                if let Some(last) = frames.last() {
                    self.cursor = self.cursor.max(last.seq());
                }
                self.phase = Phase::Live;
            }
            (Phase::Closing, false) => {
                self.parked = Vec::new();
                self.phase = Phase::Behind;
            }
            (Phase::Behind, true) => self.phase = Phase::Closing,
            (Phase::Behind, false) => {}
            (Phase::Live, _) => unreachable!("no read is asked for while live"),
        }
        Ok(PageDone {
            live: self.phase == Phase::Live,
            frames,
        })
    }
}

pub mod pages;
pub mod tail;

#[cfg(test)]
mod tests;
