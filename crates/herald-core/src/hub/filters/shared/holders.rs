//! Shared subscription groups across a cluster (docs/design/mqtt.md, "Shared subscriptions"):
//! which nodes hold members of one group, as this node sees them, and which of them delivers
//! each message, so each message goes to one member in the whole cluster with no round trip.
//!
//! **Ownership.** Every node with members of a group receives each of its messages (through
//! the app's feed); each computes the same owner by rendezvous hashing of the message's
//! (channel, seq) over the group's holders ([`owner_of`], a fixed function: the same on every
//! node and build), and only the owner gives it to one of its members. A holder joining or
//! leaving moves only the messages it wins or won, and needs no coordination per message.
//!
//! **Views.** A networked bus ([`ShareCluster`]) keeps each group's [`GroupHolders`] up to
//! date: it counts this node only once its own announcement came back along the stream that
//! brings the group's messages, as every other node counts it at that same point, so the
//! holders change at one point in each node's stream. What a change can lose or double is the
//! bus's to say (herald-bus-redis's `shares.rs`).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::watch;

use crate::message::{SharedMessage, StoredMessage};
use crate::name::topic::filter::TopicFilter;

/// The nodes holding one group in the cluster, as this node sees them (see the module doc).
pub struct GroupHolders {
    me: u64,
    /// Sorted, without duplicates; this node among them once it counts itself.
    nodes: RwLock<Vec<u64>>,
    /// Whether this node counts itself.
    counted: watch::Sender<bool>,
}

impl GroupHolders {
    /// A view of a group held by no node yet, for node `me`.
    pub fn new(me: u64) -> Arc<GroupHolders> {
        Arc::new(GroupHolders {
            me,
            nodes: RwLock::new(Vec::new()),
            counted: watch::channel(false).0,
        })
    }

    /// This node.
    pub fn me(&self) -> u64 {
        self.me
    }

    /// The holders, sorted.
    pub fn nodes(&self) -> Vec<u64> {
        self.nodes.read().clone()
    }

    /// Counts `node` as a holder (this node: see [`GroupHolders::count_me`]).
    pub fn add(&self, node: u64) {
        let mut nodes = self.nodes.write();
        if let Err(at) = nodes.binary_search(&node) {
            nodes.insert(at, node);
        }
    }

    /// Stops counting `node`; whether it was counted.
    pub fn remove(&self, node: u64) -> bool {
        let mut nodes = self.nodes.write();
        let found = nodes.binary_search(&node);
        if let Ok(at) = found {
            nodes.remove(at);
        }
        if node == self.me {
            self.counted.send_replace(false);
        }
        found.is_ok()
    }

    /// Counts this node: from now on it delivers the messages it owns.
    pub fn count_me(&self) {
        self.add(self.me);
        self.counted.send_replace(true);
    }

    /// Whether this node counts itself.
    pub fn is_counted(&self) -> bool {
        *self.counted.borrow()
    }

    /// Waits (at most `limit`) until this node counts itself.
    pub async fn until_counted(&self, limit: Duration) {
        let mut counted = self.counted.subscribe();
        let _ = tokio::time::timeout(limit, counted.wait_for(|c| *c)).await;
    }

    /// Whether this node delivers `message` to the group.
    #[inline]
    pub fn owns(&self, message: &StoredMessage) -> bool {
        owner_of(&self.nodes.read(), message, None) == Some(self.me)
    }

    /// The holder that delivers `message`.
    pub fn owner(&self, message: &StoredMessage) -> Option<u64> {
        owner_of(&self.nodes.read(), message, None)
    }

    /// The holder other than `except` that would deliver `message` without it.
    pub fn owner_besides(&self, message: &StoredMessage, except: u64) -> Option<u64> {
        owner_of(&self.nodes.read(), message, Some(except))
    }
}

/// The node among `nodes` (but `except`) that owns `message`: the highest score of
/// `score`. The same on every node and build.
pub fn owner_of(nodes: &[u64], message: &StoredMessage, except: Option<u64>) -> Option<u64> {
    if let [only] = nodes {
        return (Some(*only) != except).then_some(*only);
    }
    let key = message_key(message);
    nodes
        .iter()
        .copied()
        .filter(|n| Some(*n) != except)
        .max_by_key(|&node| (score(key, node), node))
}

/// The message's hashing key: FNV-1a of its channel's full name, mixed with its seq.
fn message_key(message: &StoredMessage) -> u64 {
    let channel = message
        .channel
        .as_str()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    mix(channel ^ mix(message.seq))
}

/// Node `node`'s rendezvous score for a message of key `key`.
fn score(key: u64, node: u64) -> u64 {
    mix(key ^ mix(node.rotate_left(17)))
}

/// SplitMix64's finalizer: every input bit reaches every output bit.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A networked bus's side of the share groups (see the module doc), set on the filter
/// registry ([`crate::hub::filters::FilterRegistry::set_share_cluster`]).
pub trait ShareCluster: Send + Sync {
    /// This node has the first member of `app`'s group `share_name` on `filter`: the view of
    /// its holders the group consults for each message (one made, or the one still kept for a
    /// group that left moments ago). Called under the registry's lock: it must only note it.
    fn joined(&self, app: &str, share_name: &str, filter: &Arc<TopicFilter>) -> Arc<GroupHolders>;
    /// The group's last member on this node left. Called under the registry's lock likewise.
    fn left(&self, app: &str, share_name: &str, filter: &Arc<TopicFilter>);
    /// Hands `message` (one a member that left had not acknowledged) to a member of the group
    /// on another holder; whether it was sent to one.
    fn hand_over(
        &self,
        app: &str,
        share_name: &str,
        filter: &TopicFilter,
        message: &SharedMessage,
    ) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::tests::msg;
    use crate::name::ChannelName;

    #[test]
    fn every_node_computes_the_same_owner_and_a_leaving_holder_moves_only_its_own() {
        let ch = ChannelName::parse("jobs/a").unwrap();
        let messages: Vec<_> = (1..=300).map(|seq| msg(&ch, seq)).collect();
        let (a, b, c) = (
            GroupHolders::new(11),
            GroupHolders::new(22),
            GroupHolders::new(33),
        );
        for view in [&a, &b, &c] {
            for node in [11, 22, 33] {
                view.add(node);
            }
        }
        let mut per_node = [0; 3];
        for m in &messages {
            let owners = [a.owns(m), b.owns(m), c.owns(m)];
            assert_eq!(owners.iter().filter(|o| **o).count(), 1, "one owner");
            let at = owners.iter().position(|o| *o).unwrap();
            per_node[at] += 1;
            // Without the owner, the others agree on who takes it; a message not owned by
            // the one leaving keeps its owner.
            let without = a.owner_besides(m, 33);
            if a.owner(m) != Some(33) {
                assert_eq!(without, a.owner(m));
            }
            assert_ne!(without, Some(33));
        }
        assert!(per_node.iter().all(|n| *n > 60), "{per_node:?}");
        // The function is fixed: the same owner on every build.
        let first = owner_of(&[11, 22, 33], &messages[0], None);
        assert_eq!(first, owner_of(&[33, 22, 11], &messages[0], None));
        assert_eq!(owner_of(&[7], &messages[0], Some(7)), None);
        assert!(!a.is_counted());
        a.count_me();
        assert!(a.is_counted());
        assert!(a.remove(11));
        assert!(!a.is_counted());
    }
}
