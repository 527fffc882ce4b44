//! The subscriptions one client session holds, as a vector sorted by channel name: a few bytes
//! per entry and no hash table for the many connections that hold one or two.

use std::sync::Arc;

use herald_core::hub::Subscription;
use herald_core::ChannelName;

/// A session's subscriptions by channel (at most one per channel).
#[derive(Default)]
pub(crate) struct SubscriptionSet(Vec<(ChannelName, Arc<Subscription>)>);

impl SubscriptionSet {
    fn find(&self, channel: &ChannelName) -> Result<usize, usize> {
        self.0.binary_search_by(|(c, _)| c.cmp(channel))
    }

    pub(crate) fn contains(&self, channel: &ChannelName) -> bool {
        self.find(channel).is_ok()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &ChannelName> {
        self.0.iter().map(|(c, _)| c)
    }

    pub(crate) fn insert(&mut self, channel: ChannelName, sub: Arc<Subscription>) {
        match self.find(&channel) {
            Ok(at) => self.0[at].1 = sub,
            Err(at) => {
                // Most connections hold one subscription: room for exactly one at first, the
                // usual doubling after that.
                if self.0.capacity() == 0 {
                    self.0.reserve_exact(1);
                }
                self.0.insert(at, (channel, sub))
            }
        }
    }

    pub(crate) fn remove(&mut self, channel: &ChannelName) -> Option<Arc<Subscription>> {
        self.find(channel).ok().map(|at| self.0.remove(at).1)
    }

    /// Empties the set, handing back every entry.
    pub(crate) fn take(&mut self) -> Vec<(ChannelName, Arc<Subscription>)> {
        std::mem::take(&mut self.0)
    }

    /// Empties the set into its parked form.
    pub(crate) fn park(&mut self) -> ParkedSet {
        let mut entries = self.take();
        match (entries.pop(), entries.is_empty()) {
            (Some((channel, sub)), true) => ParkedSet::One(channel, sub),
            (Some(last), false) => {
                entries.push(last);
                ParkedSet::Many(entries.into_boxed_slice())
            }
            (None, _) => ParkedSet::default(),
        }
    }

    /// The set again from its parked form.
    pub(crate) fn revive(parked: ParkedSet) -> SubscriptionSet {
        let mut set = SubscriptionSet::default();
        match parked {
            ParkedSet::One(channel, sub) => set.insert(channel, sub),
            // Still sorted: it was parked from a sorted set.
            ParkedSet::Many(entries) => set.0 = entries.into_vec(),
        }
        set
    }
}

/// A parked session's subscriptions ([`SubscriptionSet::park`]): the one most connections hold
/// kept inline, with no allocation of its own; none or more in a slice exactly as long as they
/// are (an empty one allocates nothing). Two variants, so the enum fits in the 24 bytes of
/// `One` (a third would need a second invalid pointer value, which no pointer has).
pub(crate) enum ParkedSet {
    One(ChannelName, Arc<Subscription>),
    Many(Box<[(ChannelName, Arc<Subscription>)]>),
}

impl Default for ParkedSet {
    fn default() -> Self {
        ParkedSet::Many(Box::default())
    }
}

impl ParkedSet {
    /// Every entry, emptying the set.
    pub(crate) fn take(&mut self) -> Vec<(ChannelName, Arc<Subscription>)> {
        match std::mem::take(self) {
            ParkedSet::One(channel, sub) => vec![(channel, sub)],
            ParkedSet::Many(entries) => entries.into_vec(),
        }
    }
}
