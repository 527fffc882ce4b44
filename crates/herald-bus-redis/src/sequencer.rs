//! [`Sequencer`]: one channel's order on a receiving node, as a pure, synchronous type (the
//! caller passes the time in). Messages of a channel reach a node from several places (its own
//! commits, other nodes' publishes through Redis, reads from the log) and may arrive out of
//! order, twice, or not at all. The sequencer releases only the next seq after the last one it
//! released, holds newer ones, drops older ones (duplicates), and says when the missing seq
//! has been awaited long enough that the caller should read the gap from the log.
//!
//! Until it knows where to start ([`Sequencer::start_after`], given the hub's
//! [`herald_core::hub::Hub::head_floor`] once the node listens to the channel) it only holds.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use herald_core::message::SharedMessage;

/// Most messages one channel holds while waiting; past it newer ones are dropped (they are read
/// from the log with the gap).
pub const MAX_HELD: usize = 4096;

/// A range of seqs to read from the log: every seq after `after`, up to `up_to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The last seq released.
    pub after: u64,
    /// The newest seq heard of.
    pub up_to: u64,
}

/// One channel's reorder buffer.
///
/// 24 bytes while nothing is held or awaited, as almost every followed channel is: it sits in
/// each entry of the bus's map of followed channels, and a storm of subscribes to new channels
/// touches one fresh entry per channel (docs/benchmarks/history.md, session 36).
#[derive(Debug, Default)]
pub struct Sequencer {
    /// The seq to release next; 0 until started (a started sequencer's is at least 1: seqs
    /// start at 1).
    next: u64,
    /// The newest seq heard of (a message held or released, or a head notice).
    heard: u64,
    /// What is held, and since when a gap is awaited; `None` while neither.
    waiting: Option<Box<Waiting>>,
}

/// The rare part of a [`Sequencer`]: messages that came early, and the gap's wait.
#[derive(Debug, Default)]
struct Waiting {
    held: BTreeMap<u64, SharedMessage>,
    /// Since when `next` has been missing while something newer is known.
    since: Option<Instant>,
}

impl Sequencer {
    /// A sequencer that holds everything until [`Sequencer::start_after`].
    pub fn new() -> Self {
        Sequencer::default()
    }

    /// The seq it will release next, once started.
    pub fn next(&self) -> Option<u64> {
        (self.next != 0).then_some(self.next)
    }

    /// Starts releasing after `floor` (ignored once started): drops what it held up to
    /// `floor` and appends to `ready` what follows it without a gap.
    pub fn start_after(&mut self, floor: u64, now: Instant, ready: &mut Vec<SharedMessage>) {
        if self.next != 0 {
            return;
        }
        self.next = floor + 1;
        if let Some(waiting) = &mut self.waiting {
            waiting.held = waiting.held.split_off(&(floor + 1));
        }
        self.release(now, ready);
    }

    /// Takes one message: appends to `ready`, in seq order, whatever can now be released.
    pub fn offer(&mut self, message: SharedMessage, now: Instant, ready: &mut Vec<SharedMessage>) {
        self.heard = self.heard.max(message.seq);
        if self.next != 0 && message.seq < self.next {
            return; // a duplicate
        }
        if self.next != 0 && message.seq == self.next {
            self.next += 1;
            ready.push(message);
        } else {
            let held = &mut self.waiting.get_or_insert_with(Box::default).held;
            if held.len() < MAX_HELD {
                held.entry(message.seq).or_insert(message);
            }
        }
        self.release(now, ready);
    }

    /// Moves past seqs before `seq` that can no longer be had (the log's retention removed
    /// them): releases from `seq` on. Ignored before the start or if already past it.
    pub fn skip_to(&mut self, seq: u64, now: Instant, ready: &mut Vec<SharedMessage>) {
        if self.next != 0 && self.next < seq {
            self.next = seq;
            self.release(now, ready);
        }
    }

    /// Notes that the channel has reached at least `head` (a head notice, or a log read).
    pub fn heard_of(&mut self, head: u64, now: Instant) {
        self.heard = self.heard.max(head);
        self.update_wait(now, false);
    }

    /// The gap the caller should read from the log, if the next seq has been awaited for at
    /// least `wait`.
    pub fn overdue_gap(&self, now: Instant, wait: Duration) -> Option<Gap> {
        let since = self.waiting.as_ref()?.since?;
        let next = self.next()?;
        (now.duration_since(since) >= wait).then_some(Gap {
            after: next - 1,
            up_to: self.heard,
        })
    }

    /// Whether something newer than the next seq is known (a gap is being awaited).
    pub fn has_gap(&self) -> bool {
        self.waiting.as_ref().is_some_and(|w| w.since.is_some())
    }

    /// How many messages it holds.
    pub fn held(&self) -> usize {
        self.waiting.as_ref().map_or(0, |w| w.held.len())
    }

    fn release(&mut self, now: Instant, ready: &mut Vec<SharedMessage>) {
        if self.next == 0 {
            return;
        }
        let before = self.next;
        if let Some(waiting) = &mut self.waiting {
            // Drop anything held that is no longer newer (released meanwhile).
            while let Some(entry) = waiting.held.first_entry() {
                if *entry.key() < self.next {
                    entry.remove();
                } else if *entry.key() == self.next {
                    ready.push(entry.remove());
                    self.next += 1;
                } else {
                    break;
                }
            }
        }
        let progressed = self.next != before;
        self.update_wait(now, progressed);
    }

    /// Starts, keeps or ends the gap's wait; frees the rare part once nothing is held or
    /// awaited.
    fn update_wait(&mut self, now: Instant, progressed: bool) {
        let gap = self.next != 0 && self.heard >= self.next;
        if gap {
            let waiting = self.waiting.get_or_insert_with(Box::default);
            waiting.since = match waiting.since {
                Some(since) if !progressed => Some(since),
                _ => Some(now),
            };
        } else if let Some(waiting) = &mut self.waiting {
            waiting.since = None;
            if waiting.held.is_empty() {
                self.waiting = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use herald_core::message::{Epoch, StoredMessage};
    use herald_core::ChannelName;
    use std::sync::Arc;

    fn m(seq: u64) -> SharedMessage {
        Arc::new(StoredMessage::new(
            ChannelName::parse("c").unwrap(),
            Epoch::new("e"),
            seq,
            None,
            0,
            Bytes::new(),
        ))
    }

    fn seqs(ready: &mut Vec<SharedMessage>) -> Vec<u64> {
        ready.drain(..).map(|m| m.seq).collect()
    }

    const WAIT: Duration = Duration::from_millis(30);

    #[test]
    fn releases_in_order_holding_what_comes_early() {
        let t = Instant::now();
        let mut s = Sequencer::new();
        let mut ready = Vec::new();
        s.start_after(4, t, &mut ready);
        s.offer(m(6), t, &mut ready); // B's 6 reaches Redis before A's 5
        assert!(seqs(&mut ready).is_empty());
        assert!(s.has_gap());
        s.offer(m(5), t, &mut ready);
        assert_eq!(seqs(&mut ready), vec![5, 6]);
        assert!(!s.has_gap());
        s.offer(m(7), t, &mut ready);
        assert_eq!(seqs(&mut ready), vec![7]);
    }

    #[test]
    fn duplicates_and_old_seqs_are_dropped() {
        let t = Instant::now();
        let mut s = Sequencer::new();
        let mut ready = Vec::new();
        s.start_after(0, t, &mut ready);
        for seq in [1, 1, 2, 1, 3, 3, 2] {
            s.offer(m(seq), t, &mut ready);
        }
        assert_eq!(seqs(&mut ready), vec![1, 2, 3]);
        s.offer(m(5), t, &mut ready);
        s.offer(m(5), t, &mut ready);
        assert_eq!(s.held(), 1);
    }

    #[test]
    fn holds_until_started_then_drops_what_the_floor_covers() {
        let t = Instant::now();
        let mut s = Sequencer::new();
        let mut ready = Vec::new();
        for seq in [9, 7, 8, 11] {
            s.offer(m(seq), t, &mut ready);
        }
        assert!(ready.is_empty(), "nothing before the start");
        assert_eq!(
            s.overdue_gap(t + WAIT * 10, WAIT),
            None,
            "no gap before the start"
        );
        s.start_after(7, t, &mut ready);
        assert_eq!(seqs(&mut ready), vec![8, 9]);
        assert_eq!(s.next(), Some(10));
        // Starting again changes nothing.
        s.start_after(2, t, &mut ready);
        assert_eq!(s.next(), Some(10));
    }

    #[test]
    fn a_gap_is_overdue_after_the_wait_and_restarts_with_progress() {
        let t = Instant::now();
        let mut s = Sequencer::new();
        let mut ready = Vec::new();
        s.start_after(0, t, &mut ready);
        s.offer(m(1), t, &mut ready);
        s.offer(m(3), t, &mut ready);
        s.offer(m(5), t, &mut ready);
        assert_eq!(s.overdue_gap(t + WAIT / 2, WAIT), None, "not yet");
        assert_eq!(
            s.overdue_gap(t + WAIT, WAIT),
            Some(Gap { after: 1, up_to: 5 })
        );
        // 2 arrives late: 2 and 3 go, and 4 gets its own full wait.
        let later = t + WAIT * 2;
        s.offer(m(2), later, &mut ready);
        assert_eq!(seqs(&mut ready), vec![1, 2, 3]);
        assert_eq!(s.overdue_gap(later + WAIT / 2, WAIT), None);
        assert_eq!(
            s.overdue_gap(later + WAIT, WAIT),
            Some(Gap { after: 3, up_to: 5 })
        );
        // The repair reads 4 and 5 from the log.
        s.offer(m(4), later, &mut ready);
        s.offer(m(5), later, &mut ready);
        assert_eq!(seqs(&mut ready), vec![4, 5]);
        assert!(!s.has_gap());
    }

    #[test]
    fn a_head_notice_alone_opens_a_gap() {
        let t = Instant::now();
        let mut s = Sequencer::new();
        let mut ready = Vec::new();
        s.start_after(3, t, &mut ready);
        s.heard_of(3, t);
        assert!(!s.has_gap(), "nothing newer than what was released");
        s.heard_of(6, t);
        assert_eq!(
            s.overdue_gap(t + WAIT, WAIT),
            Some(Gap { after: 3, up_to: 6 })
        );
    }

    #[test]
    fn seqs_the_log_no_longer_has_are_skipped() {
        let t = Instant::now();
        let mut s = Sequencer::new();
        let mut ready = Vec::new();
        s.start_after(2, t, &mut ready);
        s.offer(m(9), t, &mut ready);
        s.skip_to(8, t, &mut ready);
        assert!(ready.is_empty());
        s.offer(m(8), t, &mut ready);
        assert_eq!(seqs(&mut ready), vec![8, 9]);
        s.skip_to(5, t, &mut ready);
        assert_eq!(s.next(), Some(10), "never backwards");
    }

    #[test]
    fn holding_is_bounded() {
        let t = Instant::now();
        let mut s = Sequencer::new();
        let mut ready = Vec::new();
        s.start_after(0, t, &mut ready);
        for seq in 2..(MAX_HELD as u64 + 100) {
            s.offer(m(seq), t, &mut ready);
        }
        assert_eq!(s.held(), MAX_HELD);
        let gap = s.overdue_gap(t + WAIT, WAIT).unwrap();
        assert_eq!(
            gap.up_to,
            MAX_HELD as u64 + 99,
            "what was dropped is still read"
        );
    }

    /// A sequencer with nothing held and no gap awaited is three words (the bus keeps one per
    /// followed channel): what is held, and the wait, are allocated only while there is some,
    /// and freed once there is none again.
    #[test]
    fn an_idle_sequencer_is_three_words_and_frees_what_it_held() {
        assert_eq!(std::mem::size_of::<Sequencer>(), 24);
        let t = Instant::now();
        let mut s = Sequencer::new();
        let mut ready = Vec::new();
        s.offer(m(2), t, &mut ready);
        assert!(s.waiting.is_some(), "held before the start");
        s.start_after(0, t, &mut ready);
        assert!(s.has_gap());
        s.offer(m(1), t, &mut ready);
        assert_eq!(seqs(&mut ready), vec![1, 2]);
        assert!(s.waiting.is_none(), "nothing held or awaited");
        s.heard_of(5, t);
        assert!(s.has_gap() && s.waiting.is_some());
        s.skip_to(6, t, &mut ready);
        assert!(!s.has_gap() && s.waiting.is_none(), "the gap skipped");
    }
}
