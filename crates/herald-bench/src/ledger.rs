//! Exactly-once accounting of what a resuming subscriber received (`herald bench failover`): one
//! [`Ledger`] per channel counts each seq's arrivals, so that against the seqs that were
//! published (1 to `expected` on a channel of the run's own) it tells the messages lost (never
//! arrived), the duplicates (a seq that arrived again) and the deliveries out of order (a seq
//! that arrived after a higher one); a [`Tally`] sums ledgers and clients across a worker and
//! across workers, with the first few lost messages named.

use serde::{Deserialize, Serialize};

/// Most seqs a ledger counts one by one; an arrival beyond is only counted as unexpected
/// (the bench publishes a few messages per channel).
const MAX_TRACKED_SEQ: u64 = 1 << 20;

/// Lost messages (and error messages) a tally names.
pub const MAX_SAMPLES: usize = 10;

/// What one arrival was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The next seq after every earlier one.
    InOrder,
    /// A seq never seen before, arriving after a higher one (it fills a gap).
    OutOfOrder,
    /// A seq that had arrived already.
    Duplicate,
    /// A seq beyond what a ledger tracks, or 0.
    Unexpected,
}

/// The arrivals of one channel's messages at one client.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// Times each seq arrived: `counts[s - 1]` for seq `s`.
    counts: Vec<u8>,
    /// The highest seq that arrived (the cursor a client resumes from, as the SDK's position:
    /// the last message handed out).
    highest: u64,
    /// Every seq from 1 to this one arrived.
    contiguous: u64,
    /// The epoch of the first message; "" before any.
    epoch: String,
    /// When `contiguous` last grew (unix nanos).
    completed_ns: u64,
    /// Deliveries.
    received: u64,
    duplicates: u64,
    out_of_order: u64,
    unexpected: u64,
    epoch_changes: u64,
}

impl Ledger {
    /// Records the arrival of `seq` of `epoch` at `now_ns`.
    pub fn record(&mut self, seq: u64, epoch: &str, now_ns: u64) -> Arrival {
        self.received += 1;
        if self.epoch.is_empty() {
            self.epoch = epoch.to_owned();
        } else if !epoch.is_empty() && epoch != self.epoch {
            self.epoch_changes += 1;
        }
        if seq == 0 || seq > MAX_TRACKED_SEQ {
            self.unexpected += 1;
            return Arrival::Unexpected;
        }
        let at = (seq - 1) as usize;
        if self.counts.len() <= at {
            self.counts.resize(at + 1, 0);
        }
        let seen_before = self.counts[at] > 0;
        self.counts[at] = self.counts[at].saturating_add(1);
        if seen_before {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        let arrival = if seq < self.highest {
            self.out_of_order += 1;
            Arrival::OutOfOrder
        } else {
            Arrival::InOrder
        };
        self.highest = self.highest.max(seq);
        let before = self.contiguous;
        while self
            .counts
            .get(self.contiguous as usize)
            .is_some_and(|c| *c > 0)
        {
            self.contiguous += 1;
        }
        if self.contiguous > before {
            self.completed_ns = now_ns;
        }
        arrival
    }

    /// The cursor to resume from: the epoch ("" before any message) and the last seq received.
    pub fn position(&self) -> (&str, u64) {
        (&self.epoch, self.highest)
    }

    /// Whether every seq from 1 to `expected` arrived.
    pub fn complete(&self, expected: u64) -> bool {
        self.contiguous >= expected
    }

    /// When the last of seqs 1 to `expected` arrived, if they all did (unix nanos).
    pub fn completed_ns(&self, expected: u64) -> Option<u64> {
        self.complete(expected).then_some(self.completed_ns)
    }

    /// The seqs from 1 to `expected` that never arrived.
    pub fn missing(&self, expected: u64) -> impl Iterator<Item = u64> + '_ {
        (self.contiguous + 1..=expected.min(MAX_TRACKED_SEQ))
            .filter(|s| self.counts.get((s - 1) as usize).is_none_or(|c| *c == 0))
    }

    /// Arrivals of seqs above `expected` (none were published) and of untracked seqs.
    fn beyond(&self, expected: u64) -> u64 {
        let above: u64 = self
            .counts
            .iter()
            .skip(expected.min(MAX_TRACKED_SEQ) as usize)
            .map(|c| u64::from(*c))
            .sum();
        above + self.unexpected
    }

    /// Adds this channel's figures against `expected` published seqs to `t`, naming lost
    /// messages as `channel#seq`.
    pub fn account(&self, channel: &str, expected: u64, t: &mut Tally) {
        t.channels += 1;
        t.received += self.received;
        t.duplicates += self.duplicates;
        t.out_of_order += self.out_of_order;
        t.unexpected += self.beyond(expected);
        t.epoch_changes += self.epoch_changes;
        for seq in self.missing(expected) {
            t.lost += 1;
            if t.lost_samples.len() < MAX_SAMPLES {
                t.lost_samples.push(format!("{channel}#{seq}"));
            }
        }
    }
}

/// Ledgers and clients summed (a worker's, then every worker's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    /// Clients accounted.
    pub clients: u64,
    /// Channels accounted.
    pub channels: u64,
    /// Clients that received every expected message of every channel and are connected.
    pub caught_up: u64,
    /// Deliveries.
    pub received: u64,
    /// Published seqs that never arrived.
    pub lost: u64,
    /// The first few of them, as `channel#seq`.
    pub lost_samples: Vec<String>,
    /// Arrivals of a seq that had arrived already.
    pub duplicates: u64,
    /// Arrivals of a seq after a higher one.
    pub out_of_order: u64,
    /// Arrivals of seqs that were never published.
    pub unexpected: u64,
    /// Messages whose epoch differed from the channel's first.
    pub epoch_changes: u64,
    /// Clients whose connection was lost (at least once).
    pub disconnected: u64,
    /// Clients that, after losing their connection, resubscribed every channel with its cursor
    /// and were answered.
    pub resumed: u64,
    /// Resume replies that said `recovered: false` (the resume was not exact).
    pub not_recovered: u64,
    /// Clients that had messages pending when they resumed (a reply's seq past their cursor).
    pub with_pending: u64,
    /// Messages pending at resume, all clients (each reply's seq less the cursor sent).
    pub pending_at_resume: u64,
    /// Connection attempts after a loss.
    pub reconnect_attempts: u64,
    /// Of those, the ones that could not connect or were refused before resuming.
    pub reconnect_failures: u64,
    /// Clients resumed on each node (`IP:PORT` and count), in address order.
    pub resumed_on: Vec<(String, u64)>,
    /// First and last loss of a connection (unix nanos; 0 when none).
    pub first_loss_ns: u64,
    /// See `first_loss_ns`.
    pub last_loss_ns: u64,
    /// When the last client's resume was answered (unix nanos; 0 when none).
    pub last_resumed_ns: u64,
    /// When the last caught-up client received its last expected message (unix nanos).
    pub last_caught_up_ns: u64,
    /// Each resumed client's time from being allowed to reconnect to its resume answered (an
    /// `hdrhistogram` in µs, as [`crate::stats::encode`] gives it; "" when none).
    #[serde(default)]
    pub resume_hist: String,
    /// A few errors.
    pub errors: Vec<String>,
}

impl Tally {
    /// Adds `other` to this one.
    pub fn merge(&mut self, other: &Tally) {
        self.clients += other.clients;
        self.channels += other.channels;
        self.caught_up += other.caught_up;
        self.received += other.received;
        self.lost += other.lost;
        for s in &other.lost_samples {
            if self.lost_samples.len() < MAX_SAMPLES {
                self.lost_samples.push(s.clone());
            }
        }
        self.duplicates += other.duplicates;
        self.out_of_order += other.out_of_order;
        self.unexpected += other.unexpected;
        self.epoch_changes += other.epoch_changes;
        self.disconnected += other.disconnected;
        self.resumed += other.resumed;
        self.not_recovered += other.not_recovered;
        self.with_pending += other.with_pending;
        self.pending_at_resume += other.pending_at_resume;
        self.reconnect_attempts += other.reconnect_attempts;
        self.reconnect_failures += other.reconnect_failures;
        for (node, n) in &other.resumed_on {
            self.count_resumed_on(node, *n);
        }
        self.first_loss_ns = min_nonzero(self.first_loss_ns, other.first_loss_ns);
        self.last_loss_ns = self.last_loss_ns.max(other.last_loss_ns);
        self.last_resumed_ns = self.last_resumed_ns.max(other.last_resumed_ns);
        self.last_caught_up_ns = self.last_caught_up_ns.max(other.last_caught_up_ns);
        for e in &other.errors {
            self.error(e.clone());
        }
        if !other.resume_hist.is_empty() {
            let mut mine = self.resume_times();
            if let Ok(theirs) = crate::stats::decode(&other.resume_hist) {
                crate::stats::merge(&mut mine, &theirs);
            }
            self.resume_hist = crate::stats::encode(&mine);
        }
    }

    /// The resume times ([`Tally::resume_hist`]), empty when none.
    pub fn resume_times(&self) -> hdrhistogram::Histogram<u64> {
        Some(&self.resume_hist)
            .filter(|h| !h.is_empty())
            .and_then(|h| crate::stats::decode(h).ok())
            .unwrap_or_else(crate::stats::histogram)
    }

    /// Counts `n` clients resumed on `node`.
    pub fn count_resumed_on(&mut self, node: &str, n: u64) {
        match self
            .resumed_on
            .binary_search_by(|(k, _)| k.as_str().cmp(node))
        {
            Ok(i) => self.resumed_on[i].1 += n,
            Err(i) => self.resumed_on.insert(i, (node.to_owned(), n)),
        }
    }

    /// Keeps `e` if it is new and there is room.
    pub fn error(&mut self, e: String) {
        if self.errors.len() < MAX_SAMPLES && !self.errors.contains(&e) {
            self.errors.push(e);
        }
    }

    /// Whether every message arrived exactly once and in order, and every resume was exact.
    pub fn exact(&self) -> bool {
        self.lost == 0
            && self.duplicates == 0
            && self.out_of_order == 0
            && self.unexpected == 0
            && self.epoch_changes == 0
            && self.not_recovered == 0
    }
}

/// The smaller of two times, 0 meaning none.
fn min_nonzero(a: u64, b: u64) -> u64 {
    match (a, b) {
        (0, x) | (x, 0) => x,
        (a, b) => a.min(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records `seqs` in one ledger (epoch "e", arrival times 1, 2, 3...) and accounts it
    /// against `expected`.
    fn replay(seqs: &[u64], expected: u64) -> (Ledger, Tally) {
        let mut ledger = Ledger::default();
        for (i, seq) in seqs.iter().enumerate() {
            ledger.record(*seq, "e", i as u64 + 1);
        }
        let mut t = Tally::default();
        ledger.account("ch/0", expected, &mut t);
        (ledger, t)
    }

    #[test]
    fn every_seq_once_in_order_is_exact() {
        let (ledger, t) = replay(&[1, 2, 3, 4, 5], 5);
        assert!(ledger.complete(5));
        assert_eq!(ledger.completed_ns(5), Some(5));
        assert_eq!(ledger.position(), ("e", 5));
        assert_eq!(
            (t.received, t.lost, t.duplicates, t.out_of_order),
            (5, 0, 0, 0)
        );
        assert!(t.exact(), "{t:?}");
    }

    #[test]
    fn a_seq_that_never_arrives_is_lost_and_named() {
        // 3 skipped, and 6 (the last published) never came.
        let (ledger, t) = replay(&[1, 2, 4, 5], 6);
        assert!(!ledger.complete(6));
        assert_eq!(ledger.completed_ns(6), None);
        assert_eq!(ledger.missing(6).collect::<Vec<_>>(), vec![3, 6]);
        assert_eq!(t.lost, 2);
        assert_eq!(t.lost_samples, vec!["ch/0#3", "ch/0#6"]);
        assert_eq!((t.duplicates, t.out_of_order), (0, 0));
        assert!(!t.exact());
    }

    #[test]
    fn a_seq_that_arrives_again_is_a_duplicate_not_a_loss() {
        // A resume from a cursor one too early replays 3 again.
        let (ledger, t) = replay(&[1, 2, 3, 3, 4], 4);
        assert!(ledger.complete(4));
        assert_eq!(
            (t.received, t.lost, t.duplicates, t.out_of_order),
            (5, 0, 1, 0)
        );
        assert!(!t.exact());
    }

    #[test]
    fn a_seq_after_a_higher_one_is_out_of_order_and_completes_the_channel() {
        let (ledger, t) = replay(&[1, 3, 2, 4], 4);
        assert!(ledger.complete(4));
        assert_eq!(ledger.completed_ns(4), Some(4));
        assert_eq!((t.lost, t.duplicates, t.out_of_order), (0, 0, 1));
        assert!(!t.exact());
        // The resume cursor is the last seq handed out, as the SDK's.
        assert_eq!(ledger.position(), ("e", 4));
    }

    #[test]
    fn seqs_never_published_and_epoch_changes_are_counted() {
        let (_, t) = replay(&[1, 2, 3], 2);
        assert_eq!((t.lost, t.unexpected), (0, 1));
        let mut ledger = Ledger::default();
        ledger.record(1, "a", 1);
        ledger.record(2, "b", 2);
        ledger.record(0, "a", 3);
        let mut t = Tally::default();
        ledger.account("x", 2, &mut t);
        assert_eq!((t.epoch_changes, t.unexpected, t.lost), (1, 1, 0));
        assert!(!t.exact());
    }

    #[test]
    fn nothing_received_is_every_seq_lost_with_a_bounded_list() {
        let (ledger, t) = replay(&[], 25);
        assert_eq!(ledger.position(), ("", 0));
        assert_eq!(t.lost, 25);
        assert_eq!(t.lost_samples.len(), MAX_SAMPLES);
        assert_eq!(t.lost_samples[0], "ch/0#1");
    }

    #[test]
    fn tallies_merge_by_sum_and_keep_the_extremes() {
        let mut a = Tally {
            clients: 2,
            lost: 1,
            lost_samples: vec!["a#1".into()],
            first_loss_ns: 50,
            last_resumed_ns: 70,
            ..Default::default()
        };
        a.count_resumed_on("127.0.0.1:2", 1);
        let mut b = Tally {
            clients: 3,
            duplicates: 2,
            first_loss_ns: 40,
            last_resumed_ns: 60,
            last_caught_up_ns: 90,
            ..Default::default()
        };
        b.count_resumed_on("127.0.0.1:1", 2);
        b.count_resumed_on("127.0.0.1:2", 4);
        a.merge(&b);
        assert_eq!((a.clients, a.lost, a.duplicates), (5, 1, 2));
        assert_eq!(
            (a.first_loss_ns, a.last_resumed_ns, a.last_caught_up_ns),
            (40, 70, 90)
        );
        assert_eq!(
            a.resumed_on,
            vec![
                ("127.0.0.1:1".to_string(), 2),
                ("127.0.0.1:2".to_string(), 5)
            ]
        );
        let mut none = Tally::default();
        none.merge(&Tally::default());
        assert_eq!(none.first_loss_ns, 0);
        assert!(none.resume_hist.is_empty() && none.resume_times().is_empty());
        let times = |ms: &[u64]| {
            let mut h = crate::stats::histogram();
            for m in ms {
                crate::stats::record_ns(&mut h, m * 1_000_000);
            }
            Tally {
                resume_hist: crate::stats::encode(&h),
                ..Default::default()
            }
        };
        let mut a = times(&[10, 20]);
        a.merge(&times(&[1000]));
        let h = a.resume_times();
        assert_eq!(h.len(), 3);
        assert_eq!(crate::stats::LatencyMs::of(&h).max, 1000.447);
    }
}
