//! Where each channel with subscribers on this node stands (its [`Head`]), and single-flight
//! loading of heads the hub does not know yet. Once a head is known, every committed message
//! of the channel passes through the hub and keeps it exact, so live-only subscribers never ask
//! the store. When many clients subscribe to a channel the hub does not know at the same
//! moment (a subscribe storm, a restart), one of them reads the store and the others wait for
//! that read instead of each making their own.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::message::Epoch;

/// The newest position of a channel, as seen by the hub (an empty epoch and seq 0 for a
/// channel that has no message yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The channel's epoch.
    pub epoch: Epoch,
    /// Seq of the newest committed message.
    pub last_seq: u64,
}

/// Where the heads of channels new to this node can be learned without reading the store: a
/// networked bus that sees every commit of the cluster keeps them (`RedisBus` keeps each
/// channel's newest seq in Redis, written with the message that moves it). Asked by the engine
/// for a batch of subscribes to channels the hub does not know, before the store
/// ([`crate::bus::Bus::head_source`]).
#[async_trait::async_trait]
pub trait HeadSource: Send + Sync {
    /// The heads of `channels`, in the same order (an empty epoch and seq 0 for a channel that
    /// never had a message), or `None` when the source cannot vouch for them now (not
    /// reachable, or not holding every channel's head): the engine then reads the store. A
    /// head may be older than a publish another node has answered, by that message's transit
    /// (as a head the hub learns from the bus may be); never newer than the log's.
    async fn heads(&self, channels: &[crate::ChannelName]) -> Option<Vec<Head>>;
}

/// What a new subscription learns about its channel's head when it registers.
pub enum HeadLookup {
    /// The hub knows the head.
    Known(Head),
    /// Nobody is reading it: this subscriber reads the store and reports back (through
    /// [`crate::hub::Hub::finish_head_load`]).
    Load,
    /// Another subscriber is reading it; wait for this, then ask the hub again.
    Wait(Arc<Notify>),
}

/// A channel entry's knowledge of its head.
#[derive(Default)]
pub(crate) struct HeadSlot {
    known: Option<Head>,
    loading: Option<Arc<Notify>>,
    /// The oldest head this slot was ever told of (see [`HeadSlot::floor`]).
    floor: Option<u64>,
    /// The channel's shared recent tail, while catch-ups read it ([`crate::catchup::tail`]);
    /// under this lock so that it and the head move together.
    pub(crate) tail: Option<Box<crate::catchup::tail::TailSlot>>,
}

impl HeadSlot {
    /// Called at registration, under the hub's lock.
    pub(crate) fn lookup(&mut self) -> HeadLookup {
        if let Some(head) = &self.known {
            return HeadLookup::Known(head.clone());
        }
        if let Some(loading) = &self.loading {
            return HeadLookup::Wait(loading.clone());
        }
        self.loading = Some(Arc::new(Notify::new()));
        HeadLookup::Load
    }

    pub(crate) fn known(&self) -> Option<Head> {
        self.known.clone()
    }

    /// A message was delivered. The hub delivers in seq order, but a publisher's answer may
    /// already have told the hub of a newer head ([`HeadSlot::learn`]), which stays.
    /// Returns the floor if this head moved it, as [`HeadSlot::learn`] does.
    pub(crate) fn delivered(&mut self, head: Head) -> Option<u64> {
        self.learn(head)
    }

    /// A head read from the store after a subscription registered, or told by a publish that
    /// has returned; an older one never wins.
    /// (A store that can reset a channel's log to a new epoch will need the epoch compared too;
    /// SQLite's logs only ever go from no epoch to their first.)
    /// Returns the floor ([`HeadSlot::floor`]) if this head moved it: the first head the slot
    /// was told of, or one older than any before.
    pub(crate) fn learn(&mut self, head: Head) -> Option<u64> {
        let seq = head.last_seq;
        let moved = self.floor.is_none_or(|floor| seq < floor);
        if moved {
            self.floor = Some(seq);
        }
        if self
            .known
            .as_ref()
            .is_none_or(|k| head.last_seq > k.last_seq)
        {
            self.known = Some(head);
        }
        moved.then_some(seq)
    }

    /// The oldest seq this slot was ever told (by a store read, a publish or a delivery): no
    /// subscriber of the entry can have caught up to less, because each one's catch-up read is
    /// reported here. A networked bus starts delivering a newly followed channel after it.
    pub(crate) fn floor(&self) -> Option<u64> {
        self.floor
    }

    /// Ends a load; returns whom to wake (after the lock is released).
    pub(crate) fn finish_load(&mut self) -> Option<Arc<Notify>> {
        self.loading.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(seq: u64) -> Head {
        Head {
            epoch: Epoch::new("e"),
            last_seq: seq,
        }
    }

    #[test]
    fn first_loads_others_wait_then_known() {
        let mut slot = HeadSlot::default();
        assert!(matches!(slot.lookup(), HeadLookup::Load));
        assert!(matches!(slot.lookup(), HeadLookup::Wait(_)));
        assert_eq!(slot.learn(head(4)), Some(4), "the first head is the floor");
        assert!(slot.finish_load().is_some());
        assert!(matches!(slot.lookup(), HeadLookup::Known(h) if h.last_seq == 4));
        assert_eq!(
            slot.learn(head(3)),
            Some(3),
            "an older head lowers the floor"
        );
        assert_eq!(
            slot.known().map(|h| h.last_seq),
            Some(4),
            "older read never wins"
        );
        assert_eq!(
            slot.delivered(head(5)),
            None,
            "a newer head leaves the floor"
        );
        assert_eq!(slot.known().map(|h| h.last_seq), Some(5));
        assert_eq!(slot.floor(), Some(3), "the oldest head it was told");
    }

    #[test]
    fn a_failed_load_lets_the_next_subscriber_load() {
        let mut slot = HeadSlot::default();
        assert!(matches!(slot.lookup(), HeadLookup::Load));
        assert!(slot.finish_load().is_some());
        assert!(matches!(slot.lookup(), HeadLookup::Load));
    }
}
