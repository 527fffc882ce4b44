//! The channels this node follows on Redis, each with its [`Sequencer`], in a sharded map (no
//! global lock on the delivery path). Whatever a sequencer releases is handed to the node's
//! fan-out while the channel's shard is locked, so two sources (this node's commits and the
//! Redis receiver) can never hand a channel's messages to the fan-out out of order.
//!
//! Lock order: a hub shard may be held while [`InterestQueue`] is locked (the hub's
//! [`herald_core::hub::InterestHook`]), never a `Followed` shard; nothing here calls into the
//! hub while holding a shard.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::time::Instant;

use herald_core::message::SharedMessage;
use herald_core::ChannelName;
use parking_lot::Mutex;

use crate::sequencer::Sequencer;

const SHARDS: usize = 32;

/// One followed channel.
#[derive(Default)]
pub(crate) struct Follow {
    pub(crate) sequencer: Sequencer,
    /// Redis confirmed the subscription (since the last reconnect).
    pub(crate) listening: bool,
    /// A log read for this channel is running.
    pub(crate) repairing: bool,
    /// Read the log after the last released seq once listening (it may have missed messages
    /// while not subscribed: at the start, after a reconnect).
    pub(crate) needs_read: bool,
    /// Whether the read of what this node committed before it followed the channel was left to
    /// the read once listening ([`StartRead`]).
    pub(crate) start_read: StartRead,
}

/// A channel's read of what was committed before this node followed it, at its start.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartRead {
    /// Done, or not needed.
    #[default]
    Done,
    /// Started while Redis was up: the read once Redis confirms the subscription covers it.
    Deferred,
    /// Deferred, but the subscription failed: read now, so that this node's own commits reach
    /// its subscribers while Redis is away.
    Owed,
}

/// The followed channels, and those needing a look from the maintenance task.
pub(crate) struct Followed {
    shards: Box<[Mutex<HashMap<ChannelName, Follow>>]>,
    hasher: RandomState,
    attention: Mutex<HashSet<ChannelName>>,
}

impl Followed {
    pub(crate) fn new() -> Followed {
        Followed {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            attention: Mutex::default(),
        }
    }

    fn shard(&self, channel: &ChannelName) -> &Mutex<HashMap<ChannelName, Follow>> {
        &self.shards[self.hasher.hash_one(channel.as_str()) as usize % SHARDS]
    }

    /// Starts following `channel` (not yet listening); `false` if it already was.
    pub(crate) fn follow(&self, channel: &ChannelName) -> bool {
        let mut shard = self.shard(channel).lock();
        if shard.contains_key(channel) {
            return false;
        }
        shard.insert(
            channel.clone(),
            Follow {
                needs_read: true,
                ..Follow::default()
            },
        );
        true
    }

    /// Stops following `channel`; `false` if it was not followed.
    pub(crate) fn unfollow(&self, channel: &ChannelName) -> bool {
        self.shard(channel).lock().remove(channel).is_some()
    }

    pub(crate) fn is_followed(&self, channel: &ChannelName) -> bool {
        self.shard(channel).lock().contains_key(channel)
    }

    /// Every followed channel.
    pub(crate) fn all(&self) -> Vec<ChannelName> {
        self.shards
            .iter()
            .flat_map(|s| s.lock().keys().cloned().collect::<Vec<_>>())
            .collect()
    }

    /// How many followed channels Redis has confirmed.
    pub(crate) fn listening(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().values().filter(|f| f.listening).count())
            .sum()
    }

    /// How many followed channels are being read from the log, or owe a read once listening.
    pub(crate) fn unrepaired(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.lock()
                    .values()
                    .filter(|f| f.repairing || f.needs_read || f.sequencer.next().is_none())
                    .count()
            })
            .sum()
    }

    /// Runs `f` on `channel`'s follow (if followed) with its shard locked; `deliver` is to be
    /// called, under that lock, with what the sequencer released. Marks the channel for
    /// attention if `f` leaves a gap or a read owed while listening. A channel not started is
    /// not marked: it waits for the hub's head floor, and is marked when it is followed and
    /// when the hub learns its first head (the interest hook's `head_known`), not each time
    /// it is touched (a subscribe storm's thousands of waiting channels were looked at every
    /// round).
    pub(crate) fn with<R>(
        &self,
        channel: &ChannelName,
        f: impl FnOnce(&mut Follow, Instant, &mut Vec<SharedMessage>) -> R,
        deliver: impl FnOnce(&[SharedMessage]),
    ) -> Option<R> {
        let now = Instant::now();
        let mut ready = Vec::new();
        let mut shard = self.shard(channel).lock();
        let follow = shard.get_mut(channel)?;
        let result = f(follow, now, &mut ready);
        if !ready.is_empty() {
            deliver(&ready);
        }
        let attend = follow.sequencer.has_gap() || (follow.needs_read && follow.listening);
        drop(shard);
        if attend {
            self.attention.lock().insert(channel.clone());
        }
        Some(result)
    }

    /// Runs `f` on `channel`'s follow (if followed), which it only reads: the repair task's
    /// look at what a channel needs. Marks the channel for attention again only while a gap is
    /// awaited (to see when it is overdue); what the task starts marks it when it ends.
    pub(crate) fn look<R>(
        &self,
        channel: &ChannelName,
        f: impl FnOnce(&Follow, Instant) -> R,
    ) -> Option<R> {
        let now = Instant::now();
        let shard = self.shard(channel).lock();
        let follow = shard.get(channel)?;
        let result = f(follow, now);
        let attend = follow.sequencer.has_gap();
        drop(shard);
        if attend {
            self.attention.lock().insert(channel.clone());
        }
        Some(result)
    }

    /// Marks `channel` for the maintenance task.
    pub(crate) fn attend(&self, channel: &ChannelName) {
        self.attention.lock().insert(channel.clone());
    }

    /// Takes the channels marked for attention.
    pub(crate) fn take_attention(&self) -> HashSet<ChannelName> {
        std::mem::take(&mut *self.attention.lock())
    }
}

/// Interest changes the hub reported, in order, for the subscription task.
#[derive(Default)]
pub(crate) struct InterestQueue {
    changes: Mutex<Vec<(ChannelName, bool)>>,
}

impl InterestQueue {
    pub(crate) fn push(&self, channel: &ChannelName, gained: bool) {
        self.changes.lock().push((channel.clone(), gained));
    }

    pub(crate) fn take(&self) -> Vec<(ChannelName, bool)> {
        std::mem::take(&mut *self.changes.lock())
    }
}
