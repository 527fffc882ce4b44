//! The subscriptions one client session holds, as a vector sorted by channel name: a few bytes
//! per entry and no hash table for the many connections that hold one or two.

use std::sync::Arc;

use herald_core::hub::Subscription;
use herald_core::ChannelName;

/// Entries [`SubscriptionSet::insert_all`] inserts one by one (a connection's few subscribes
/// keep the vector's exact first allocation).
const INSERT_ONE_BY_ONE: usize = 4;

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

    /// Inserts every entry as [`Self::insert`] would one after another (a channel already
    /// held, or named twice, keeps the last subscription given for it), sorting once: many
    /// entries inserted one by one would each move the tail of the vector.
    pub(crate) fn insert_all(&mut self, mut entries: Vec<(ChannelName, Arc<Subscription>)>) {
        if entries.len() <= INSERT_ONE_BY_ONE {
            for (channel, sub) in entries {
                self.insert(channel, sub);
            }
            return;
        }
        // Stable sorts: of two entries for one channel, the later given stays after the other.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        self.0.append(&mut entries);
        // Two sorted runs: the sort merges them.
        self.0.sort_by(|a, b| a.0.cmp(&b.0));
        // `later` is removed and `kept` (before it) takes its subscription, as an insert
        // would replace it.
        self.0.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(&mut later.1, &mut kept.1);
            }
            same
        });
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

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::hub::Hub;
    use herald_core::outbox::Outbox;

    #[test]
    fn insert_all_is_inserts_one_after_another() {
        let hub = Hub::new();
        let outbox = Outbox::new(1 << 20);
        let name = |n: &str| ChannelName::parse(n).unwrap();
        let sub = |n: &str| hub.subscribe(&name(n), outbox.clone()).0;
        let given = [
            "s7", "s10", "s1", "s3", "s10", "s0", "s2", "s1x", "s9", "s4", "s05",
        ];
        // Bulk inserts (more than one by one), into a set holding some of them already.
        let mut bulk = SubscriptionSet::default();
        let mut one_by_one = SubscriptionSet::default();
        for held in ["s3", "s8", "s0"] {
            let s = sub(held);
            bulk.insert(name(held), s.clone());
            one_by_one.insert(name(held), s);
        }
        let entries: Vec<_> = given.iter().map(|n| (name(n), sub(n))).collect();
        for (channel, s) in entries.clone() {
            one_by_one.insert(channel, s);
        }
        bulk.insert_all(entries);
        let ids = |set: &SubscriptionSet| -> Vec<(String, u64)> {
            set.0.iter().map(|(c, s)| (c.to_string(), s.id())).collect()
        };
        assert_eq!(ids(&bulk), ids(&one_by_one));
        let names: Vec<_> = bulk.keys().map(|c| c.to_string()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted, "sorted, each channel once");
        assert_eq!(bulk.len(), 11);
    }
}
