//! The channels this node follows on Redis, each with its [`Sequencer`], in a sharded map (no
//! global lock on the delivery path). Whatever a sequencer releases is handed to the node's
//! fan-out while the channel's shard is locked, so two sources (this node's commits and the
//! Redis receiver) can never hand a channel's messages to the fan-out out of order.
//!
//! Lock order: a hub shard may be held while [`InterestQueue`] is locked (the hub's
//! [`herald_core::hub::InterestHook`]), never a `Followed` shard; nothing here calls into the
//! hub while holding a shard.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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

/// One followed channel.
#[derive(Default)]
pub(crate) struct Follow {
    pub(crate) sequencer: Sequencer,
    /// Redis confirmed the subscription (since the last reconnect).
    pub(crate) listening: bool,
    /// The take of interest changes ([`InterestQueue`]) whose round of subscriptions made the
    /// channel listening: a head read that began once that round had ended was read after
    /// Redis confirmed the subscription ([`Followed::note_head_read`]).
    pub(crate) listening_round: u64,
    /// A log read for this channel is running.
    pub(crate) repairing: bool,
    /// Read the log after the last released seq once listening (it may have missed messages
    /// while not subscribed: at the start, after a reconnect).
    pub(crate) needs_read: bool,
    /// Whether the read of what this node committed before it followed the channel was left to
    /// the read once listening ([`StartRead`]).
    pub(crate) start_read: StartRead,
    /// The channel's head as Redis told it to the engine after confirming this subscription
    /// (`crate::heads`): every later message of the channel arrives from Redis, so the
    /// repair task starts it without checking its head again, if its subscribers stand there.
    /// Cleared when messages may have been missed since (a reconnect, a lag).
    pub(crate) head_read: Option<u64>,
}

impl Follow {
    /// Messages may have been missed: read the log after what was released, once listening.
    pub(crate) fn owe_read(&mut self) {
        self.needs_read = true;
        self.head_read = None;
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
    marks: Arc<Marks>,
}

/// The channels marked for the repair task ([`Attention`]), apart from [`Followed`] so that the
/// hub's interest hook holds them itself (`crate::bus`'s hook marks a channel whose floor the
/// hub learned without reaching the bus's shared state through a weak reference each time).
#[derive(Default)]
pub(crate) struct Marks(Mutex<Attention>);

impl Marks {
    /// Marks `channel` (keeping the floor told with it, if any).
    pub(crate) fn attend(&self, channel: &ChannelName) {
        let mut attention = self.0.lock();
        if !attention.contains_key(channel) {
            attention.insert(channel.clone(), None);
        }
    }

    /// Marks `channel` with the hub's head floor `floor`, as the hub told it (the lowest told
    /// since the channel was marked stays).
    pub(crate) fn attend_at(&self, channel: &ChannelName, floor: u64) {
        let mut attention = self.0.lock();
        match attention.get_mut(channel) {
            Some(told) => *told = Some(told.map_or(floor, |told| told.min(floor))),
            None => {
                attention.insert(channel.clone(), Some(floor));
            }
        }
    }
}

impl Followed {
    pub(crate) fn new() -> Followed {
        Followed {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: ChannelHasher::default(),
            marks: Arc::default(),
        }
    }

    /// The channels marked for the repair task, for the hub's interest hook.
    pub(crate) fn marks(&self) -> &Arc<Marks> {
        &self.marks
    }

    fn shard(&self, channel: &ChannelName) -> &Mutex<ChannelMap<Follow>> {
        &self.shards[self.hasher.hash_one(channel.as_str()) as usize % SHARDS]
    }

    /// Starts following `channel` (not yet listening); `false` if it already was.
    pub(crate) fn follow(&self, channel: &ChannelName) -> bool {
        // One probe: the name's clone is a count raised (and dropped again if followed).
        match self.shard(channel).lock().entry(channel.clone()) {
            Entry::Occupied(_) => false,
            Entry::Vacant(vacant) => {
                vacant.insert(Follow {
                    needs_read: true,
                    ..Follow::default()
                });
                true
            }
        }
    }

    /// Stops following `channel`; `false` if it was not followed. A floor the hub told for it
    /// is forgotten with it: the hub's next entry for the channel has its own.
    pub(crate) fn unfollow(&self, channel: &ChannelName) -> bool {
        let followed = self.shard(channel).lock().remove(channel).is_some();
        if followed {
            self.marks.0.lock().remove(channel);
        }
        followed
    }

    pub(crate) fn is_followed(&self, channel: &ChannelName) -> bool {
        self.shard(channel).lock().contains_key(channel)
    }

    /// Records `head`, read once the round of subscriptions of take `round` had ended
    /// ([`InterestQueue::rounds_ended`]), as read after Redis confirmed `channel`'s subscription
    /// ([`Follow::head_read`]), if a round up to that one made it listening, it still is, and
    /// `still_exact` says nothing was lost since (no reconnect). A channel confirmed by a
    /// later round (a retry) is left to the repair task's check. Does not mark the channel for
    /// attention.
    pub(crate) fn note_head_read(
        &self,
        channel: &ChannelName,
        head: u64,
        round: u64,
        still_exact: impl FnOnce() -> bool,
    ) {
        let mut shard = self.shard(channel).lock();
        if let Some(follow) = shard.get_mut(channel) {
            if follow.listening
                && follow.listening_round <= round
                && follow.sequencer.next().is_none()
                && still_exact()
            {
                follow.head_read = Some(head);
            }
        }
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
        self.marks.attend(channel);
    }

    /// Marks `channel` for the maintenance task with the hub's head floor `floor`, as the hub
    /// told it (the lowest told since the channel was marked stays).
    pub(crate) fn attend_at(&self, channel: &ChannelName, floor: u64) {
        self.marks.attend_at(channel, floor);
    }

    /// Takes the channels marked for attention.
    pub(crate) fn take_attention(&self) -> Attention {
        std::mem::take(&mut *self.marks.0.lock())
    }
}

/// Interest changes the hub reported, in order, for the subscription task; and how far the
/// task has got with them, for head reads waiting for channels' subscriptions
/// (`crate::head_reads`).
#[derive(Default)]
pub(crate) struct InterestQueue {
    changes: Mutex<Vec<(ChannelName, bool)>>,
    /// Takes made, counted under the lock of `changes`.
    takes: AtomicU64,
    /// The last take whose round of subscriptions ended: its channels followed (or dropped
    /// again), `SSUBSCRIBE` sent, and those Redis confirmed marked listening with the take's
    /// number ([`Follow::listening_round`]).
    rounds_ended: AtomicU64,
    /// Woken when the task ended a round.
    progress: Notify,
    /// Woken when a change is pushed (the subscription task waits on it).
    changed: Notify,
}

impl InterestQueue {
    /// Queues a change and wakes the subscription task.
    pub(crate) fn push(&self, channel: &ChannelName, gained: bool) {
        self.changes.lock().push((channel.clone(), gained));
        self.changed.notify_one();
    }

    /// Woken at the next change pushed (or at once if one was pushed since the last wake).
    pub(crate) fn changed(&self) -> &Notify {
        &self.changed
    }

    /// The changes so far, and the take's number.
    pub(crate) fn take(&self) -> (Vec<(ChannelName, bool)>, u64) {
        let mut changes = self.changes.lock();
        let taken = self.takes.fetch_add(1, Ordering::AcqRel) + 1;
        (std::mem::take(&mut *changes), taken)
    }

    /// The take whose round, once ended, has dealt with every change pushed so far: the next
    /// one if changes are waiting, else the last one made.
    pub(crate) fn round_of_pushed(&self) -> u64 {
        let changes = self.changes.lock();
        self.takes.load(Ordering::Acquire) + u64::from(!changes.is_empty())
    }

    /// The round of take `taken` ended (see [`InterestQueue::rounds_ended`]).
    pub(crate) fn round_ended(&self, taken: u64) {
        self.rounds_ended.store(taken, Ordering::Release);
        self.progress.notify_waiters();
    }

    /// The last take whose round of subscriptions ended: every channel gained before
    /// [`InterestQueue::round_of_pushed`] was read is listening once this reaches the number it
    /// gave, unless its subscription failed (then it is retried in a later round) or it was
    /// dropped.
    pub(crate) fn rounds_ended(&self) -> u64 {
        self.rounds_ended.load(Ordering::Acquire)
    }

    /// Woken at the next round ended.
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

    /// A head read waits for the round that took every change pushed before it asked: the next
    /// take while changes wait, else the last one made (waiting for a take after it would
    /// wait for nothing until another channel is gained).
    #[test]
    fn a_head_read_waits_for_the_round_that_took_what_was_pushed() {
        let queue = InterestQueue::default();
        assert_eq!(
            queue.round_of_pushed(),
            0,
            "nothing pushed, nothing to wait for"
        );
        queue.push(&channel("a"), true);
        assert_eq!(queue.round_of_pushed(), 1, "waiting: the next take has it");
        let (changes, taken) = queue.take();
        assert_eq!((changes.len(), taken), (1, 1));
        assert_eq!(queue.round_of_pushed(), 1, "taken: that take's round");
        assert!(queue.rounds_ended() < 1);
        queue.round_ended(taken);
        assert!(queue.rounds_ended() >= queue.round_of_pushed());
    }

    /// A head read vouches only for channels a round it waited for made listening: one that
    /// Redis confirmed later (its subscription retried) may have missed a message published
    /// between the read and the confirmation, so the repair task checks it.
    #[test]
    fn a_head_read_is_noted_only_for_channels_confirmed_before_it() {
        let followed = Followed::new();
        let (early, late, deaf) = (channel("early"), channel("late"), channel("deaf"));
        for c in [&early, &late, &deaf] {
            assert!(followed.follow(c));
        }
        let listen = |c: &ChannelName, round: u64| {
            followed.with(
                c,
                |follow, _, _| {
                    follow.listening = true;
                    follow.listening_round = round;
                },
                |_| {},
            );
        };
        listen(&early, 3);
        listen(&late, 5);
        for c in [&early, &late, &deaf] {
            followed.note_head_read(c, 7, 4, || true);
        }
        let noted = |c: &ChannelName| followed.with(c, |f, _, _| f.head_read, |_| {}).flatten();
        assert_eq!(
            noted(&early),
            Some(7),
            "confirmed by round 3, read after round 4"
        );
        assert_eq!(noted(&late), None, "confirmed by round 5, after the read");
        assert_eq!(noted(&deaf), None, "not confirmed");
        listen(&deaf, 2);
        followed.note_head_read(&deaf, 7, 4, || false);
        assert_eq!(noted(&deaf), None, "a reconnect since the read began");
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
}
