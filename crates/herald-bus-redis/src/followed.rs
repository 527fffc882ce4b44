//! The channels this node follows on Redis, each with its [`Sequencer`], in a sharded map (no
//! global lock on the delivery path). Whatever a sequencer releases is handed to the node's
//! fan-out while the channel's shard is locked, so two sources (this node's commits and the
//! Redis receiver) can never hand a channel's messages to the fan-out out of order.
//!
//! Lock order: a hub shard may be held while [`InterestQueue`] is locked (the hub's
//! [`herald_core::hub::InterestHook`]), never a `Followed` shard; nothing here calls into the
//! hub while holding a shard.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use herald_core::message::SharedMessage;
use herald_core::ChannelName;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::sequencer::Sequencer;

const SHARDS: usize = 32;

/// The hasher of the bus's maps and sets of channel names: foldhash, seeded at random per
/// process. A storm of subscribes to new channels hashes each name about ten times in the bus
/// (followed, attended, subscribed, counted for presence), and with std's SipHash that was a
/// tenth of a node's CPU (docs/benchmarks/history.md, session 31). A channel's name is chosen
/// by clients, but the seed is not known to them.
pub(crate) type ChannelHasher = foldhash::fast::RandomState;
/// A map keyed by channel name, with [`ChannelHasher`].
pub(crate) type ChannelMap<V> = HashMap<ChannelName, V, ChannelHasher>;
/// A set of channel names, with [`ChannelHasher`].
pub(crate) type ChannelSet = HashSet<ChannelName, ChannelHasher>;

/// One followed channel: 40 bytes, one in the bus's map per channel the node's subscribers
/// follow (a storm of subscribes to new channels touches one fresh entry per channel:
/// docs/benchmarks/history.md, session 36).
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
    /// The channel's head as Redis told it to the engine after confirming this subscription
    /// (`crate::heads`), plus one (`None`: none told; one word instead of `Option<u64>`'s two,
    /// see [`Follow`]'s size): every later message of the channel arrives from Redis, so the
    /// repair task starts it without checking its head again, if its subscribers stand there.
    /// Cleared when messages may have been missed since (a reconnect, a lag).
    head_read: Option<NonZeroU64>,
}

impl Follow {
    /// Messages may have been missed: read the log after what was released, once listening.
    pub(crate) fn owe_read(&mut self) {
        self.needs_read = true;
        self.head_read = None;
    }

    /// Takes the head Redis told the engine after confirming this subscription
    /// ([`Follow::head_read`]'s field), if any.
    pub(crate) fn take_head_read(&mut self) -> Option<u64> {
        self.head_read.take().map(|plus_one| plus_one.get() - 1)
    }

    fn set_head_read(&mut self, head: u64) {
        self.head_read = NonZeroU64::new(head.saturating_add(1));
    }
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

/// The channels marked for the repair task, each with the hub's head floor if the hub told
/// it (`InterestHook::head_known`): the task starts such a channel there without asking the
/// hub again.
pub(crate) type Attention = ChannelMap<Option<u64>>;

/// The followed channels, and those needing a look from the maintenance task.
pub(crate) struct Followed {
    shards: Box<[Mutex<ChannelMap<Follow>>]>,
    hasher: ChannelHasher,
    attention: Mutex<Attention>,
}

impl Followed {
    pub(crate) fn new() -> Followed {
        Followed {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: ChannelHasher::default(),
            attention: Mutex::default(),
        }
    }

    fn shard(&self, channel: &ChannelName) -> &Mutex<ChannelMap<Follow>> {
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

    /// Stops following `channel`; `false` if it was not followed. A floor the hub told for it
    /// is forgotten with it: the hub's next entry for the channel has its own.
    pub(crate) fn unfollow(&self, channel: &ChannelName) -> bool {
        let followed = self.shard(channel).lock().remove(channel).is_some();
        if followed {
            self.attention.lock().remove(channel);
        }
        followed
    }

    pub(crate) fn is_followed(&self, channel: &ChannelName) -> bool {
        self.shard(channel).lock().contains_key(channel)
    }

    /// Records `head`, read after Redis confirmed `channel`'s subscription
    /// ([`Follow::head_read`]), if it is still listening and `still_exact` says nothing was
    /// lost since (no reconnect). Does not mark the channel for attention.
    pub(crate) fn note_head_read(
        &self,
        channel: &ChannelName,
        head: u64,
        still_exact: impl FnOnce() -> bool,
    ) {
        let mut shard = self.shard(channel).lock();
        if let Some(follow) = shard.get_mut(channel) {
            if follow.listening && follow.sequencer.next().is_none() && still_exact() {
                follow.set_head_read(head);
            }
        }
    }

    /// Whether Redis confirmed `channel`'s subscription; `None` if it is not followed.
    pub(crate) fn is_listening(&self, channel: &ChannelName) -> Option<bool> {
        self.shard(channel).lock().get(channel).map(|f| f.listening)
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
    /// not marked, not even once Redis confirmed it: it waits for the hub's head floor, and is
    /// marked when it is followed if the hub knows its head already, and when the hub learns
    /// its first head (the interest hook's `head_known`), not each time it is touched (a
    /// subscribe storm's thousands of waiting channels were looked at every round, and each
    /// new channel two or three times before its head was known).
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
        // A channel not started owes no read yet: it is marked when the hub learns its head.
        let started = follow.sequencer.next().is_some();
        let attend =
            follow.sequencer.has_gap() || (follow.needs_read && follow.listening && started);
        drop(shard);
        if attend {
            self.attend(channel);
        }
        Some(result)
    }

    /// Runs `f` on `channel`'s follow (if followed): the repair task's look at what a channel
    /// needs, and what it starts, in one lookup; `deliver` as for [`Followed::with`]. Marks the
    /// channel for attention again only while a gap is awaited (to see when it is overdue):
    /// what the task starts marks it when it ends.
    pub(crate) fn step<R>(
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
        let attend = follow.sequencer.has_gap();
        drop(shard);
        if attend {
            self.attend(channel);
        }
        Some(result)
    }

    /// Marks `channel` for the maintenance task (keeping the floor told with it, if any).
    pub(crate) fn attend(&self, channel: &ChannelName) {
        let mut attention = self.attention.lock();
        if !attention.contains_key(channel) {
            attention.insert(channel.clone(), None);
        }
    }

    /// Marks `channel` for the maintenance task with the hub's head floor `floor`, as the hub
    /// told it (the lowest told since the channel was marked stays).
    pub(crate) fn attend_at(&self, channel: &ChannelName, floor: u64) {
        let mut attention = self.attention.lock();
        match attention.get_mut(channel) {
            Some(told) => *told = Some(told.map_or(floor, |told| told.min(floor))),
            None => {
                attention.insert(channel.clone(), Some(floor));
            }
        }
    }

    /// Takes the channels marked for attention.
    pub(crate) fn take_attention(&self) -> Attention {
        std::mem::take(&mut *self.attention.lock())
    }
}

/// Interest changes the hub reported, in order, for the subscription task; and how far the
/// task has got with them, for head reads waiting for channels' subscriptions
/// (`crate::heads`).
#[derive(Default)]
pub(crate) struct InterestQueue {
    changes: Mutex<Vec<(ChannelName, bool)>>,
    /// Takes made, counted under the lock of `changes`.
    takes: AtomicU64,
    /// The last take whose channels are all followed (or dropped again).
    settled: AtomicU64,
    /// Woken when the task settled a take or ended a round of subscriptions.
    progress: Notify,
}

impl InterestQueue {
    pub(crate) fn push(&self, channel: &ChannelName, gained: bool) {
        self.changes.lock().push((channel.clone(), gained));
    }

    /// The changes so far, and the take's number.
    pub(crate) fn take(&self) -> (Vec<(ChannelName, bool)>, u64) {
        let mut changes = self.changes.lock();
        let taken = self.takes.fetch_add(1, Ordering::AcqRel) + 1;
        (std::mem::take(&mut *changes), taken)
    }

    /// Takes made so far: a change pushed before this is read is in a later take at most.
    pub(crate) fn takes(&self) -> u64 {
        let _changes = self.changes.lock();
        self.takes.load(Ordering::Acquire)
    }

    /// Take `taken` is followed (its lost channels dropped).
    pub(crate) fn settle(&self, taken: u64) {
        self.settled.store(taken, Ordering::Release);
        self.progress.notify_waiters();
    }

    /// The last take settled.
    pub(crate) fn settled(&self) -> u64 {
        self.settled.load(Ordering::Acquire)
    }

    /// A round of subscriptions ended (some channels may be listening now).
    pub(crate) fn progressed(&self) {
        self.progress.notify_waiters();
    }

    /// Woken at the next settled take or round ended.
    pub(crate) fn progress(&self) -> &Notify {
        &self.progress
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(name: &str) -> ChannelName {
        ChannelName::parse(name).unwrap()
    }

    /// Redis confirming a channel new to the node (listening, a read owed) does not put it
    /// before the repair task while the hub does not know its head: the task could not start
    /// it, and the hub says when it can (`head_known`). A started channel is marked.
    #[test]
    fn a_channel_not_started_is_not_marked_when_redis_confirms_it() {
        let followed = Followed::new();
        let (new, started) = (channel("new"), channel("started"));
        assert!(followed.follow(&new) && followed.follow(&started));
        followed.with(
            &started,
            |follow, now, ready| follow.sequencer.start_after(0, now, ready),
            |_| {},
        );
        assert!(followed.take_attention().is_empty(), "nothing owed yet");
        for channel in [&new, &started] {
            followed.with(
                channel,
                |follow, _, _| {
                    follow.listening = true;
                    follow.needs_read = true;
                },
                |_| {},
            );
        }
        let marked: Vec<ChannelName> = followed.take_attention().into_keys().collect();
        assert_eq!(
            marked,
            vec![started],
            "channels for the repair task once Redis confirmed both"
        );
    }

    /// A followed channel's entry is 40 bytes (with its name, 56 in the map): 104 before
    /// session 36, and a storm of subscribes to new channels grows the map by one per channel.
    #[test]
    fn a_follow_is_five_words() {
        assert_eq!(std::mem::size_of::<Follow>(), 40);
        let mut follow = Follow::default();
        assert_eq!(follow.take_head_read(), None);
        follow.set_head_read(0);
        assert_eq!(follow.take_head_read(), Some(0), "a head of 0 is a head");
        assert_eq!(follow.take_head_read(), None, "taken");
        follow.set_head_read(7);
        follow.owe_read();
        assert_eq!(follow.take_head_read(), None, "cleared when a read is owed");
    }
}
