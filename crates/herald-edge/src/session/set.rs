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
}
