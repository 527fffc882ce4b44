//! Each message once to the filters, whatever number of paths bring it
//! ([`super::FilterRegistry::set_feed`]). In a cluster a message can reach this node's filter
//! subscribers along two paths: its channel's own stream (the channel has exact subscribers
//! here) and its app's feed (docs/design/mqtt.md, "Wildcards"). Each path is in seq order for
//! one publishing node, and a path may bring a message twice (a repair from the log); this
//! remembers, per channel, the newest seq handed to the filters and which of the
//! [`WINDOW`] seqs below it were, as an anti-replay window does: a seq newer than the newest
//! goes, one in the window goes once, one older than the window is taken as handed already.
//!
//! **Bounded.** Channels are remembered in two generations: a channel not delivered to the
//! filters for [`GENERATION`] to twice that is forgotten (its next message simply goes). Both
//! paths bring a message within moments of each other, well within a generation.
//!
//! **Cost.** Only runs matching some filter subscriber come here, and only on a node whose
//! filters are fed by a networked bus: one lock and one map lookup per run.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::message::{Epoch, SharedMessage};
use crate::name::ChannelName;

/// Seqs below a channel's newest that are remembered one by one.
pub(crate) const WINDOW: u64 = 64;

/// How long a generation of remembered channels lasts.
pub(crate) const GENERATION: Duration = Duration::from_secs(60);

/// One channel's newest seq handed to the filters, and which of the [`WINDOW`] below it were.
#[derive(Clone)]
struct Seen {
    epoch: Epoch,
    newest: u64,
    /// Bit `i` set: seq `newest - 1 - i` was handed.
    below: u64,
}

impl Seen {
    fn new(epoch: Epoch, seq: u64) -> Seen {
        Seen {
            epoch,
            newest: seq,
            below: 0,
        }
    }

    /// Records `seq` (of `epoch`); whether it is new.
    fn take(&mut self, epoch: &Epoch, seq: u64) -> bool {
        if *epoch != self.epoch {
            *self = Seen::new(epoch.clone(), seq);
            return true;
        }
        if seq > self.newest {
            let shift = seq - self.newest;
            self.below = if shift > WINDOW {
                0
            } else {
                // The old newest becomes bit `shift - 1`.
                ((self.below << 1) | 1)
                    .checked_shl((shift - 1) as u32)
                    .unwrap_or(0)
            };
            self.newest = seq;
            return true;
        }
        if seq == self.newest {
            return false;
        }
        let back = self.newest - seq - 1;
        if back >= WINDOW {
            return false;
        }
        let bit = 1u64 << back;
        let new = self.below & bit == 0;
        self.below |= bit;
        new
    }
}

/// The channels' windows, in two generations (see the module doc).
pub(crate) struct DeliveredOnce {
    state: Mutex<Generations>,
}

struct Generations {
    current: HashMap<ChannelName, Seen>,
    previous: HashMap<ChannelName, Seen>,
    started: Instant,
}

impl DeliveredOnce {
    pub(crate) fn new() -> DeliveredOnce {
        DeliveredOnce {
            state: Mutex::new(Generations {
                current: HashMap::new(),
                previous: HashMap::new(),
                started: Instant::now(),
            }),
        }
    }

    /// The messages of `run` (one channel's) not handed to the filters before, recording them
    /// as handed now.
    pub(crate) fn take_new(&self, run: &[SharedMessage]) -> Vec<SharedMessage> {
        let Some(first) = run.first() else {
            return Vec::new();
        };
        let mut state = self.state.lock();
        if state.started.elapsed() >= GENERATION {
            state.previous = std::mem::take(&mut state.current);
            state.started = Instant::now();
        }
        let seen = match state.current.get_mut(&first.channel) {
            Some(seen) => seen,
            None => {
                let seen = state.previous.remove(&first.channel);
                let seen = seen.unwrap_or_else(|| {
                    // Below the first seq: taken as new.
                    Seen::new(first.epoch.clone(), first.seq.saturating_sub(1))
                });
                state.current.entry(first.channel.clone()).or_insert(seen)
            }
        };
        run.iter()
            .filter(|m| seen.take(&m.epoch, m.seq))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::tests::msg;

    fn seqs(run: &[SharedMessage]) -> Vec<u64> {
        run.iter().map(|m| m.seq).collect()
    }

    #[test]
    fn each_seq_goes_once_whichever_path_brings_it_first() {
        let once = DeliveredOnce::new();
        let ch = ChannelName::parse("a/b").unwrap();
        let run = |s: &[u64]| s.iter().map(|&n| msg(&ch, n)).collect::<Vec<_>>();
        assert_eq!(seqs(&once.take_new(&run(&[4, 5]))), [4, 5]);
        assert_eq!(
            seqs(&once.take_new(&run(&[4, 5, 6]))),
            [6],
            "the other path"
        );
        // Another node's older message overtaken by a newer one still goes, once.
        assert_eq!(seqs(&once.take_new(&run(&[9]))), [9]);
        assert_eq!(seqs(&once.take_new(&run(&[7, 8, 9, 10]))), [7, 8, 10]);
        assert_eq!(seqs(&once.take_new(&run(&[7, 8]))), Vec::<u64>::new());
        // Far behind the window: taken as handed.
        assert_eq!(seqs(&once.take_new(&run(&[10 + WINDOW * 2]))), [138]);
        assert_eq!(seqs(&once.take_new(&run(&[11]))), Vec::<u64>::new());
        assert_eq!(seqs(&once.take_new(&run(&[138 - WINDOW]))), [74]);
        assert_eq!(
            seqs(&once.take_new(&run(&[138 - WINDOW]))),
            Vec::<u64>::new()
        );
        // Another channel is its own.
        let other = ChannelName::parse("a/c").unwrap();
        assert_eq!(seqs(&once.take_new(&[msg(&other, 4)])), [4]);
    }
}
