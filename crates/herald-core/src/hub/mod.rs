//! The fan-out hub: which connections are subscribed to which channel, and delivery of each
//! committed message to them. The registry is sharded by channel name so publish and subscribe
//! on different channels never contend on one lock; delivery takes a shard's read lock only.
//! This module owns the registry (the shards and their channel entries, each with its known
//! head and its subscribers), the delivery of committed messages to a channel's subscribers,
//! and the hooks told of interest and deliveries; what one subscriber does with a message it is
//! handed (filter, park while catching up, queue) is `subscription`'s.
//!
//! A networked bus follows only the channels this node has subscribers for: the hub tells an
//! [`InterestHook`] when it makes a channel's entry (the first local subscriber) and when it
//! forgets one (after the entry lingered empty, see `ShardMap::emptied`). A [`DeliveryMeter`]
//! is told how many deliveries each run of a channel's messages made (per-app counts).
//!
//! Lifecycle events ([`crate::lifecycle`]) are told as they happen, under the shard's lock so
//! a channel's reach its listeners in order: a subscription made and ended, and the channel
//! occupied (its first subscriber here) and vacated (its last one left), at once, whatever the
//! linger keeps. While nobody wants a subscription or channel kind of event
//! ([`crate::lifecycle::Kinds`]), that costs the subscribe and unsubscribe paths one relaxed
//! atomic load each, and the delivery path nothing.

use std::collections::VecDeque;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use hashbrown::hash_table::{Entry, HashTable};
use parking_lot::{Mutex, RwLock};

use crate::catchup::tail::{TailBudget, DEFAULT_TAIL_CACHE_BYTES};
use crate::fanout::backlog::Backlog;
use crate::head::{Head, HeadLookup, HeadSlot};
use crate::lifecycle::{Kinds, Lifecycle};
use crate::message::SharedMessage;
use crate::name::ChannelName;
use crate::outbox::Outbox;
use crate::presence::Presence;
use crate::telemetry::telemetry;

pub mod filters;
mod subscription;

use filters::FilterRegistry;
pub use subscription::{Admit, Filter, NextRead, Shape, Subscription, Tally};

const SHARDS: usize = 64;

/// Told, once per run of a channel's messages delivered (not once per subscriber), how many
/// deliveries the hub queued for the channel's subscribers on this node: messages times
/// subscribers, as `herald_deliveries_total` counts them. Called on the fan-out thread under a
/// hub shard's read lock: it must only count (no blocking, no call back into the hub).
pub trait DeliveryMeter: Send + Sync {
    /// `n` deliveries of messages of `channel`.
    fn delivered(&self, channel: &ChannelName, n: u64);
}

/// Told when a channel gains local interest (the hub makes its entry for its first subscriber)
/// and when it loses it (the hub forgets the entry). Called under a hub shard's lock: it must
/// only note the change (no blocking, no call back into the hub).
pub trait InterestHook: Send + Sync {
    /// `channel` has its first local subscriber.
    fn gained(&self, channel: &ChannelName);
    /// The hub no longer follows `channel`.
    fn lost(&self, channel: &ChannelName);
    /// `channel`'s entry was told its first head, by a store read, a publish or a delivery,
    /// or a head older than any before: [`Hub::head_floor`] is now `floor`. A bus waiting for
    /// the floor can start the channel at it now, without asking the hub again.
    fn head_known(&self, _channel: &ChannelName, _floor: u64) {}
    /// `channel`'s count of local subscribers is now `count` (a subscription made or ended):
    /// a bus that tells the cluster these counts writes the last count told of each channel
    /// since its last write, instead of reading every channel's count each time. Told under
    /// the channel's shard lock, so a channel's counts are told in the order they were made.
    fn subscribers_changed(&self, _channel: &ChannelName, _count: usize) {}
}

/// A channel with subscribers on this node. While it exists every committed message of the
/// channel passes through [`Hub::deliver`], so `head` is exact once known, and subscribers
/// without a cursor never need to ask the store where the channel stands.
#[derive(Default)]
struct ChannelEntry {
    subs: Vec<Arc<Subscription>>,
    /// `subs[i].id` at `ids[i]`: unsubscribing scans these compact ids instead of following a
    /// pointer per subscription (tens of thousands of subscribers leaving one channel at once
    /// made that scan the hottest code of a long-poll reconnect storm).
    ids: Vec<u64>,
    head: Mutex<HeadSlot>,
    /// When the last subscriber left, while the entry lingers (see [`ShardMap`]).
    emptied: Option<Instant>,
}

/// How long a channel whose last subscriber left keeps its entry, and with it its known head:
/// a client that comes back (a long-poll or Meteor request after each message, a reconnect)
/// then needs no store read to learn where the channel stands. A channel that never had a
/// message keeps it only if the store cannot say so without a read
/// ([`Hub::set_linger_unpublished`]).
const LINGER: Duration = Duration::from_secs(60);

/// Most lingering entries per shard; past it the oldest go first.
const MAX_LINGERING: usize = 512;

/// A channel's name with its hash, computed once per hub operation: the shard is picked by
/// some of its bits ([`Hub::shard`]) and the shard's table probes with all of them, so no
/// operation hashes a name twice, and a table that grows moves its slots by their stored hash.
#[derive(Clone, Copy)]
struct Key<'a> {
    hash: u64,
    name: &'a ChannelName,
}

/// A channel's entry in its shard's table, with the name and hash it is found by.
struct Slot {
    hash: u64,
    name: ChannelName,
    entry: ChannelEntry,
}

/// One shard: its channel entries, and the entries left empty, oldest first. A lingering entry
/// stays exact, because every committed message of its channel still passes through
/// [`Hub::deliver`].
#[derive(Default)]
struct ShardMap {
    entries: HashTable<Slot>,
    emptied: VecDeque<(u64, ChannelName, Instant)>,
}

impl ShardMap {
    fn get(&self, key: Key<'_>) -> Option<&ChannelEntry> {
        self.get_slot(key).map(|slot| &slot.entry)
    }

    /// The channel's entry with the name the hub keeps for it (what the interest hook is told:
    /// a bus holding that name finds it in the hub again without reading its bytes).
    fn get_slot(&self, key: Key<'_>) -> Option<&Slot> {
        self.entries.find(key.hash, |slot| slot.name == *key.name)
    }

    fn get_slot_mut(&mut self, key: Key<'_>) -> Option<&mut Slot> {
        self.entries
            .find_mut(key.hash, |slot| slot.name == *key.name)
    }

    /// The channel's entry, made empty if it had none; with `true` if it was made.
    fn get_or_make(&mut self, key: Key<'_>) -> (&ChannelName, &mut ChannelEntry, bool) {
        match self
            .entries
            .entry(key.hash, |slot| slot.name == *key.name, |slot| slot.hash)
        {
            Entry::Occupied(found) => {
                let slot = found.into_mut();
                (&slot.name, &mut slot.entry, false)
            }
            Entry::Vacant(vacant) => {
                let slot = vacant
                    .insert(Slot {
                        hash: key.hash,
                        name: key.name.clone(),
                        entry: ChannelEntry::default(),
                    })
                    .into_mut();
                (&slot.name, &mut slot.entry, true)
            }
        }
    }

    /// Lets `channel`'s now empty entry linger, if its head is worth keeping (known, and for a
    /// channel that never had a message only if `unpublished` says so), and drops the entries
    /// that have lingered too long or too many; calls `forgot` with each entry dropped.
    fn emptied(
        &mut self,
        channel: Key<'_>,
        now: Instant,
        unpublished: bool,
        mut forgot: impl FnMut(&ChannelName),
    ) {
        let worth = |entry: &ChannelEntry| {
            entry
                .head
                .lock()
                .known()
                .is_some_and(|head| unpublished || head.last_seq > 0)
        };
        match self
            .entries
            .find_entry(channel.hash, |slot| slot.name == *channel.name)
        {
            Ok(mut found) if worth(&found.get().entry) => {
                found.get_mut().entry.emptied = Some(now);
                self.emptied
                    .push_back((channel.hash, channel.name.clone(), now));
            }
            Ok(found) => {
                found.remove();
                forgot(channel.name);
            }
            Err(_) => forgot(channel.name),
        }
        while let Some((_, _, at)) = self.emptied.front() {
            if self.emptied.len() <= MAX_LINGERING && now.duration_since(*at) < LINGER {
                break;
            }
            let Some((hash, name, at)) = self.emptied.pop_front() else {
                break;
            };
            // Only if it is still empty since that moment (not re-used, nor emptied again).
            if let Ok(found) = self.entries.find_entry(hash, |slot| slot.name == name) {
                let entry = &found.get().entry;
                if entry.subs.is_empty() && entry.emptied == Some(at) {
                    found.remove();
                    forgot(&name);
                }
            }
        }
    }
}

type Shard = RwLock<ShardMap>;

/// The sharded registry of subscriptions.
pub struct Hub {
    shards: Box<[Shard]>,
    hasher: RandomState,
    next_id: AtomicU64,
    interest: OnceLock<Arc<dyn InterestHook>>,
    /// Told of each channel's deliveries ([`Hub::set_delivery_meter`]).
    meter: OnceLock<Arc<dyn DeliveryMeter>>,
    /// Catch-up bytes a subscription queues at a time ([`Hub::set_catchup_budget`]).
    catchup_budget: AtomicUsize,
    /// The node-wide bound on the channels' shared recent tails ([`crate::catchup::tail`]).
    tail_budget: Arc<TailBudget>,
    /// Deliveries queued for the fan-out thread, which publishes wait for room in.
    backlog: Backlog,
    /// Whether a channel that never had a message lingers ([`Hub::set_linger_unpublished`]).
    linger_unpublished: AtomicBool,
    /// Told of subscriptions and of channels occupied and vacated ([`Hub::lifecycle`]).
    lifecycle: Arc<Lifecycle>,
    /// The members of this node's presence channels ([`Hub::presence`]).
    presence: Arc<Presence>,
    /// Subscriptions to topic filters, consulted after each run's exact subscribers
    /// ([`Hub::filters`]).
    filters: Arc<FilterRegistry>,
}

/// Default of [`Hub::set_catchup_budget`] (the `catchup_bytes` setting's default).
pub const DEFAULT_CATCHUP_BUDGET: usize = 64 * 1024;

impl Default for Hub {
    fn default() -> Self {
        let lifecycle = Lifecycle::new();
        Hub {
            presence: Presence::new(lifecycle.clone()),
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            hasher: RandomState::new(),
            next_id: AtomicU64::new(1),
            interest: OnceLock::new(),
            meter: OnceLock::new(),
            catchup_budget: AtomicUsize::new(DEFAULT_CATCHUP_BUDGET),
            tail_budget: TailBudget::new(DEFAULT_TAIL_CACHE_BYTES),
            backlog: Backlog::default(),
            linger_unpublished: AtomicBool::new(true),
            lifecycle,
            filters: FilterRegistry::new(),
        }
    }
}

impl Hub {
    /// An empty hub.
    pub fn new() -> Arc<Self> {
        Arc::new(Hub::default())
    }

    /// This node's lifecycle registry: listeners join it to hear of subscriptions, channels
    /// occupied and vacated, and (once the live-client registry shares it,
    /// [`crate::live::LiveClients::set_lifecycle`]) connections.
    pub fn lifecycle(&self) -> &Arc<Lifecycle> {
        &self.lifecycle
    }

    /// This node's presence registry ([`crate::presence`]): the members of its presence
    /// channels, which subscriptions to them join ([`Subscription::set_presence`]).
    pub fn presence(&self) -> &Arc<Presence> {
        &self.presence
    }

    /// This node's subscriptions to topic filters ([`filters`]): the fan-out hands each run
    /// of a channel's messages to the subscribers whose filters match it, after the channel's
    /// own subscribers.
    pub fn filters(&self) -> &Arc<FilterRegistry> {
        &self.filters
    }

    /// The fan-out's backlog of deliveries, which publishes wait for room in (see
    /// [`crate::fanout::backlog`]).
    pub fn backlog(&self) -> &Backlog {
        &self.backlog
    }

    /// Whether the entry of a channel that never had a message lingers once its last subscriber
    /// leaves (yes unless set). Lingering spares the next subscriber a store read; a store that
    /// answers for such channels from memory (SQLite's known-channel set) has none to spare,
    /// and then lingering only costs: a subscribe storm to new channels spent a third of its
    /// CPU letting each channel's entry go later, when it was no longer in the cache
    /// (docs/benchmarks.md, session 16).
    pub fn set_linger_unpublished(&self, linger: bool) {
        self.linger_unpublished.store(linger, Ordering::Relaxed);
    }

    /// Sets how many bytes of catch-up a new subscription queues at a time (its paged reads are
    /// sized so that about this much is queued; see [`crate::catchup`]).
    pub fn set_catchup_budget(&self, bytes: usize) {
        self.catchup_budget.store(bytes.max(1), Ordering::Relaxed);
    }

    /// What [`Hub::set_catchup_budget`] set.
    pub fn catchup_budget(&self) -> usize {
        self.catchup_budget.load(Ordering::Relaxed)
    }

    /// Sets the node-wide bytes the channels' shared recent tails may hold (the
    /// `tail_cache_bytes` setting; 0 turns the tail cache off).
    pub fn set_tail_cache_bytes(&self, bytes: usize) {
        self.tail_budget.set_limit(bytes);
    }

    /// The node-wide bound on the channels' shared recent tails.
    pub fn tail_budget(&self) -> &Arc<TailBudget> {
        &self.tail_budget
    }

    /// Runs `f` on the channel's head slot under its lock, if the channel has an entry.
    pub(crate) fn with_head_slot<T>(
        &self,
        channel: &ChannelName,
        f: impl FnOnce(&mut HeadSlot, &Arc<TailBudget>) -> T,
    ) -> Option<T> {
        let key = self.key(channel);
        self.shard(key)
            .read()
            .get(key)
            .map(|entry| f(&mut entry.head.lock(), &self.tail_budget))
    }

    /// Sets the hook told of channels gaining and losing local interest (a networked bus);
    /// `false` if one was already set. Channels with entries already are not reported.
    pub fn set_interest_hook(&self, hook: Arc<dyn InterestHook>) -> bool {
        self.interest.set(hook).is_ok()
    }

    /// Sets the meter told of each channel's deliveries on this node; `false` if one was
    /// already set.
    pub fn set_delivery_meter(&self, meter: Arc<dyn DeliveryMeter>) -> bool {
        self.meter.set(meter).is_ok()
    }

    /// Counts `n` deliveries of `channel`'s messages: the node's metric and the meter.
    fn count_deliveries(&self, channel: &ChannelName, n: u64) {
        telemetry().deliveries.increment(n);
        if let Some(meter) = self.meter.get().filter(|_| n > 0) {
            meter.delivered(channel, n);
        }
    }

    /// The oldest head the hub was told of for `channel` since it made the channel's entry (by
    /// a store read, a publish or a delivery), `None` if it has no entry or was told nothing
    /// yet. Every subscriber of the channel caught up to at least this seq, so delivering every
    /// seq after it, in order, leaves none of them with a gap.
    pub fn head_floor(&self, channel: &ChannelName) -> Option<u64> {
        let key = self.key(channel);
        self.shard(key)
            .read()
            .get(key)
            .and_then(|entry| entry.head.lock().floor())
    }

    /// `channel` with its hash.
    fn key<'a>(&self, channel: &'a ChannelName) -> Key<'a> {
        Key {
            hash: self.hasher.hash_one(channel.as_str()),
            name: channel,
        }
    }

    /// The shard of `key`: picked by bits 32 and up of its hash, which the shard's table uses
    /// neither for a slot's position (the low bits) nor for its tag (the top seven bits), so the
    /// channels of one shard spread over all of its table.
    fn shard(&self, key: Key<'_>) -> &Shard {
        &self.shards[(key.hash >> 32) as usize % SHARDS]
    }

    /// Registers a subscription in catch-up mode; it receives nothing until
    /// [`Subscription::go_live`]. Also says what the hub knows of the channel's head (see
    /// [`HeadLookup`]); a subscriber told to load it must call [`Hub::finish_head_load`].
    pub fn subscribe(
        &self,
        channel: &ChannelName,
        outbox: Arc<Outbox>,
    ) -> (Arc<Subscription>, HeadLookup) {
        let (sub, head, _) = self.subscribe_with(channel, outbox, Filter::default());
        (sub, head)
    }

    /// [`Hub::subscribe`] with a filter on what the subscription receives. Also gives the
    /// channel's name as the hub keeps it: a subscriber that holds on to that one, rather than
    /// its own copy, shares it with every other subscriber of the channel (one allocation, not
    /// one per connection).
    pub fn subscribe_with(
        &self,
        channel: &ChannelName,
        outbox: Arc<Outbox>,
        filter: Filter,
    ) -> (Arc<Subscription>, HeadLookup, ChannelName) {
        let sub = Arc::new(Subscription::new(
            self.next_id.fetch_add(1, Ordering::Relaxed),
            outbox,
            filter,
            self.catchup_budget.load(Ordering::Relaxed),
        ));
        let key = self.key(channel);
        let mut shard = self.shard(key).write();
        let (name, entry, made) = shard.get_or_make(key);
        let name = name.clone();
        if made {
            if let Some(hook) = self.interest.get() {
                hook.gained(channel);
            }
        }
        entry.emptied = None;
        let first = entry.subs.is_empty();
        entry.subs.push(sub.clone());
        entry.ids.push(sub.id());
        let head = entry.head.lock().lookup();
        // One relaxed load while no subscription or channel kind is wanted.
        let emitted = self.lifecycle.emitted();
        if emitted.intersects(Kinds::SUBSCRIBED | Kinds::CHANNEL_OCCUPIED) {
            self.lifecycle
                .subscribed(emitted, &name, sub.outbox(), first);
        }
        if let Some(hook) = self.interest.get() {
            hook.subscribers_changed(&name, entry.subs.len());
        }
        drop(shard);
        telemetry().subscriptions.increment(1.0);
        (sub, head, name)
    }

    /// Tells the hub where a channel stood according to the store, read after a subscription
    /// was registered; the newer of that and what the hub has seen is kept.
    pub fn learn_head(&self, channel: &ChannelName, head: Head) {
        let key = self.key(channel);
        if let Some(slot) = self.shard(key).read().get_slot(key) {
            let floor = slot.entry.head.lock().learn(head);
            if let Some(floor) = floor {
                self.tell_head_known(&slot.name, floor);
            }
        }
    }

    /// Tells the interest hook that `channel`'s entry (named as the hub keeps it) has its
    /// floor known or lowered, to `floor`.
    fn tell_head_known(&self, channel: &ChannelName, floor: u64) {
        if let Some(hook) = self.interest.get() {
            hook.head_known(channel, floor);
        }
    }

    /// Ends a head load started by [`HeadLookup::Load`]: records the head read (if the read
    /// succeeded) and wakes the subscribers waiting for it.
    pub fn finish_head_load(&self, channel: &ChannelName, head: Option<Head>) {
        let key = self.key(channel);
        let waiters = self.shard(key).read().get_slot(key).and_then(|found| {
            let mut slot = found.entry.head.lock();
            if let Some(floor) = head.and_then(|head| slot.learn(head)) {
                self.tell_head_known(&found.name, floor);
            }
            slot.finish_load()
        });
        if let Some(waiters) = waiters {
            waiters.notify_waiters();
        }
    }

    /// The channel's head, if the hub knows it.
    pub fn known_head(&self, channel: &ChannelName) -> Option<Head> {
        let key = self.key(channel);
        self.shard(key)
            .read()
            .get(key)
            .and_then(|entry| entry.head.lock().known())
    }

    /// Removes a subscription; returns whether it was registered.
    pub fn unsubscribe(&self, channel: &ChannelName, id: u64) -> bool {
        let key = self.key(channel);
        let mut shard = self.shard(key).write();
        let Some(Slot { name, entry, .. }) = shard.get_slot_mut(key) else {
            return false;
        };
        let Some(pos) = entry.ids.iter().position(|&s| s == id) else {
            return false;
        };
        let gone = entry.subs.swap_remove(pos);
        gone.end();
        // Given back once the shard's lock is released (the presence lock comes after it).
        let membership = gone.take_presence();
        entry.ids.swap_remove(pos);
        let emitted = self.lifecycle.emitted();
        if emitted.intersects(Kinds::UNSUBSCRIBED | Kinds::CHANNEL_VACATED) {
            self.lifecycle
                .unsubscribed(emitted, channel, gone.outbox(), entry.subs.is_empty());
        }
        if let Some(hook) = self.interest.get() {
            hook.subscribers_changed(name, entry.subs.len());
        }
        if entry.subs.is_empty() {
            let hook = self.interest.get();
            let unpublished = self.linger_unpublished.load(Ordering::Relaxed);
            shard.emptied(key, Instant::now(), unpublished, |gone| {
                if let Some(hook) = hook {
                    hook.lost(gone);
                }
            });
        }
        drop(shard);
        drop(membership);
        telemetry().subscriptions.decrement(1.0);
        true
    }

    /// Number of subscriptions to `channel` on this node.
    pub fn subscriber_count(&self, channel: &ChannelName) -> usize {
        let key = self.key(channel);
        self.shard(key).read().get(key).map_or(0, |e| e.subs.len())
    }

    /// The channels with subscriptions on this node that `wanted` accepts, with how many
    /// each has, in no order. It walks every shard: for an occasional read (a Pusher
    /// channels query), not for the publish or subscribe path.
    pub fn occupied_channels(
        &self,
        mut wanted: impl FnMut(&ChannelName) -> bool,
    ) -> Vec<(ChannelName, usize)> {
        let mut found = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.read();
            found.extend(
                shard
                    .entries
                    .iter()
                    .filter(|slot| !slot.entry.subs.is_empty() && wanted(&slot.name))
                    .map(|slot| (slot.name.clone(), slot.entry.subs.len())),
            );
        }
        found
    }

    /// Delivers committed messages, in order, to the subscriptions of their channels. Each run
    /// of consecutive messages of one channel is handed to every subscriber at once (one outbox
    /// lock and one wake per subscriber for the whole run), so a group commit of many messages
    /// to a busy channel costs its subscribers' writers one wake, not one per message.
    /// Then each run goes to the filter subscribers it matches ([`Hub::filters`]): while there
    /// are none, that costs one atomic load per call. Counted by no commit: every filter
    /// registered now takes them (the fan-out's gathers go through `Hub::deliver_gather`).
    pub fn deliver_all(&self, messages: &[SharedMessage]) {
        self.deliver_gather(messages, filters::UNCOUNTED);
    }

    /// [`Hub::deliver_all`] for the fan-out's gather of commits up to its count `last_commit`:
    /// a filter registered at or after that count does not take them (`filters`' "Commits
    /// before a filter").
    pub(crate) fn deliver_gather(&self, messages: &[SharedMessage], last_commit: u64) {
        let filters = self.filters.is_active().then_some(last_commit);
        for run in messages.chunk_by(|a, b| a.channel == b.channel) {
            self.deliver_run(run, filters);
        }
    }

    /// Hands messages to the filter subscribers they match, and only to them: a networked bus's
    /// feed of an app's messages from every node ([`filters::FilterFeed`]). Neither the
    /// channels' exact subscribers nor their heads are touched (their messages come along each
    /// channel's own stream); a connection holding a channel's exact subscription is passed
    /// over for it, as in [`Hub::deliver_all`], and a message handed to the filters already
    /// along the channel's stream is not handed again.
    pub fn deliver_filters_only(&self, messages: &[SharedMessage]) {
        if !self.filters.is_active() {
            return;
        }
        for run in messages.chunk_by(|a, b| a.channel == b.channel) {
            let key = self.key(&run[0].channel);
            let shard = self.shard(key).read();
            let exact = shard.get(key).map_or(&[][..], |entry| &entry.subs[..]);
            self.deliver_to_filters(run, exact, true, filters::UNCOUNTED);
        }
    }

    /// Hands a run of one channel's messages to the filter subscribers it matches, except
    /// those holding one of `exact` (the channel's own subscriptions) too, and those
    /// registered at or after `commit` (see [`filters::FilterRegistry::deliver_run`]).
    #[cold]
    fn deliver_to_filters(
        &self,
        run: &[SharedMessage],
        exact: &[Arc<Subscription>],
        from_feed: bool,
        commit: u64,
    ) {
        let n = self.filters.deliver_run(run, exact, from_feed, commit);
        if let (Some(last), true) = (run.last(), n > 0) {
            self.count_deliveries(&last.channel, n);
        }
    }

    /// Delivers a run of consecutive messages of one channel (see [`Hub::deliver_all`]), then,
    /// if `filters` (the count of the gather's last commit), to the filter subscribers it
    /// matches, under the same shard lock (so whether a subscriber holds the channel's exact
    /// subscription is decided with it).
    fn deliver_run(&self, run: &[SharedMessage], filters: Option<u64>) {
        let Some(last) = run.last() else {
            return;
        };
        let key = self.key(&last.channel);
        let shard = self.shard(key).read();
        let Some(Slot { name, entry, .. }) = shard.get_slot(key) else {
            if let Some(commit) = filters {
                self.deliver_to_filters(run, &[], false, commit);
            }
            return;
        };
        {
            let mut head = entry.head.lock();
            // Each move lowers the floor: the last one is where it stands.
            let mut moved = None;
            for message in run {
                moved = head
                    .delivered(Head {
                        epoch: message.epoch.clone(),
                        last_seq: message.seq,
                    })
                    .or(moved);
            }
            head.tail_delivered_run(run);
            if let Some(floor) = moved {
                self.tell_head_known(name, floor);
            }
        }
        for sub in &entry.subs {
            sub.deliver_run(run);
        }
        self.count_deliveries(&last.channel, (entry.subs.len() * run.len()) as u64);
        if let Some(commit) = filters {
            self.deliver_to_filters(run, &entry.subs, false, commit);
        }
    }

    /// Delivers one message to every subscription of its channel, then to the filter
    /// subscribers it matches.
    pub fn deliver(&self, message: &SharedMessage) {
        let filters = self.filters.is_active();
        let key = self.key(&message.channel);
        let shard = self.shard(key).read();
        let Some(Slot { name, entry, .. }) = shard.get_slot(key) else {
            if filters {
                let one = std::slice::from_ref(message);
                self.deliver_to_filters(one, &[], false, filters::UNCOUNTED);
            }
            return;
        };
        {
            let mut head = entry.head.lock();
            let moved = head.delivered(Head {
                epoch: message.epoch.clone(),
                last_seq: message.seq,
            });
            head.tail_delivered(message);
            if let Some(floor) = moved {
                self.tell_head_known(name, floor);
            }
        }
        for sub in &entry.subs {
            sub.deliver(message);
        }
        self.count_deliveries(&message.channel, entry.subs.len() as u64);
        if filters {
            let one = std::slice::from_ref(message);
            self.deliver_to_filters(one, &entry.subs, false, filters::UNCOUNTED);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::message::{Epoch, StoredMessage};
    use crate::outbox::OutFrame;

    pub(super) fn msg(ch: &ChannelName, seq: u64) -> SharedMessage {
        crate::message::test_message(ch, seq, b"{}")
    }

    pub(crate) fn seqs(outbox: &Outbox) -> Vec<u64> {
        outbox
            .take()
            .0
            .into_iter()
            .filter_map(|f| match f {
                OutFrame::Message(m) | OutFrame::Replayed(m) => Some(m.seq),
                OutFrame::Control(_) | OutFrame::Presence(_) => None,
            })
            .collect()
    }

    #[test]
    fn subscribers_are_given_one_shared_copy_of_the_channels_name() {
        let hub = Hub::new();
        let first = ChannelName::parse("news").unwrap();
        let again = ChannelName::parse("news").unwrap();
        assert_ne!(first.as_str().as_ptr(), again.as_str().as_ptr());
        let (_, _, kept) = hub.subscribe_with(&first, Outbox::new(1 << 20), Filter::default());
        let (_, _, given) = hub.subscribe_with(&again, Outbox::new(1 << 20), Filter::default());
        assert_eq!(given, again);
        assert_eq!(
            given.as_str().as_ptr(),
            kept.as_str().as_ptr(),
            "the second subscriber gets the entry's name, not its own"
        );
        let other = ChannelName::parse("sport").unwrap();
        let (_, _, sport) = hub.subscribe_with(&other, Outbox::new(1 << 20), Filter::default());
        assert_eq!(sport, other);
    }

    #[test]
    fn delivering_commits_together_keeps_each_channels_order_and_filters() {
        let hub = Hub::new();
        let (a, b) = (
            ChannelName::parse("a").unwrap(),
            ChannelName::parse("b").unwrap(),
        );
        let both = Outbox::new(1 << 20);
        let odd_b = Outbox::new(1 << 20);
        let counted = Arc::new(AtomicU64::new(0));
        let tally = counted.clone();
        for ch in [&a, &b] {
            let (sub, _) = hub.subscribe(ch, both.clone());
            sub.go_live(vec![], 0);
        }
        let (sub, _, _) = hub.subscribe_with(
            &b,
            odd_b.clone(),
            Filter {
                admit: Some(Arc::new(|m: &StoredMessage| m.seq % 2 == 1)),
                tally: Some(Arc::new(move |n| {
                    tally.fetch_add(n, Ordering::Relaxed);
                })),
            },
        );
        // Caught up to 2 already: live delivery skips 1 and 2.
        sub.go_live(vec![], 2);
        let commits = [
            msg(&a, 1),
            msg(&a, 2),
            msg(&b, 1),
            msg(&b, 2),
            msg(&b, 3),
            msg(&a, 3),
            msg(&b, 4),
            msg(&b, 5),
        ];
        hub.deliver_all(&commits);
        let got: Vec<(String, u64)> = both
            .take()
            .0
            .into_iter()
            .filter_map(|f| match f {
                OutFrame::Message(m) => Some((m.channel.public().to_string(), m.seq)),
                _ => None,
            })
            .collect();
        let want: Vec<(String, u64)> = commits
            .iter()
            .map(|m| (m.channel.public().to_string(), m.seq))
            .collect();
        assert_eq!(got, want, "every message, in commit order");
        assert_eq!(seqs(&odd_b), vec![3, 5]);
        assert_eq!(counted.load(Ordering::Relaxed), 2);
        assert_eq!(hub.known_head(&b).map(|h| h.last_seq), Some(5));
    }

    /// Records what the hub tells a delivery meter.
    #[derive(Default)]
    struct Recorded(Mutex<Vec<(String, u64)>>);

    impl DeliveryMeter for Recorded {
        fn delivered(&self, channel: &ChannelName, n: u64) {
            self.0.lock().push((channel.as_str().to_string(), n));
        }
    }

    #[test]
    fn the_delivery_meter_is_told_each_channels_deliveries_once_per_run() {
        let hub = Hub::new();
        let meter = Arc::new(Recorded::default());
        assert!(hub.set_delivery_meter(meter.clone()));
        assert!(!hub.set_delivery_meter(meter.clone()), "set once");
        let (a, b, quiet) = (
            ChannelName::parse("a").unwrap(),
            ChannelName::parse("b").unwrap(),
            ChannelName::parse("quiet").unwrap(),
        );
        let subs: Vec<_> = [&a, &a, &b]
            .into_iter()
            .map(|ch| {
                let (sub, _) = hub.subscribe(ch, Outbox::new(1 << 20));
                sub.go_live(vec![], 0);
                sub
            })
            .collect();
        hub.deliver(&msg(&a, 1));
        hub.deliver_all(&[msg(&a, 2), msg(&a, 3), msg(&b, 1), msg(&quiet, 1)]);
        assert_eq!(
            *meter.0.lock(),
            vec![
                ("a".to_string(), 2),
                ("a".to_string(), 4),
                ("b".to_string(), 1)
            ],
            "messages times subscribers, one call per run; none for a channel without any"
        );
        drop(subs);
    }

    #[tokio::test]
    async fn concurrent_subscribers_share_one_head_load() {
        let hub = Hub::new();
        let ch = ChannelName::parse("storm").unwrap();
        let (_, first) = hub.subscribe(&ch, Outbox::new(1024));
        assert!(matches!(first, HeadLookup::Load));
        let (_, second) = hub.subscribe(&ch, Outbox::new(1024));
        let HeadLookup::Wait(loading) = second else {
            panic!("second subscriber should wait for the first one's load");
        };
        let waiter = {
            let hub = hub.clone();
            let ch = ch.clone();
            tokio::spawn(async move {
                let notified = loading.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if hub.known_head(&ch).is_none() {
                    notified.await;
                }
                hub.known_head(&ch)
            })
        };
        tokio::task::yield_now().await;
        hub.finish_head_load(
            &ch,
            Some(Head {
                epoch: Epoch::new("e"),
                last_seq: 9,
            }),
        );
        assert_eq!(waiter.await.unwrap().map(|h| h.last_seq), Some(9));
    }

    #[test]
    fn unsubscribe_stops_delivery_and_counts() {
        let hub = Hub::new();
        let ch = ChannelName::parse("a/b").unwrap();
        let out = Outbox::new(1 << 20);
        let (s1, _) = hub.subscribe(&ch, out.clone());
        let (s2, _) = hub.subscribe(&ch, out.clone());
        s1.go_live(vec![], 0);
        s2.go_live(vec![], 0);
        assert_eq!(hub.subscriber_count(&ch), 2);
        assert!(hub.unsubscribe(&ch, s1.id()));
        assert!(!hub.unsubscribe(&ch, s1.id()));
        hub.deliver(&msg(&ch, 1));
        assert_eq!(seqs(&out), vec![1]);
        assert!(hub.unsubscribe(&ch, s2.id()));
        assert_eq!(hub.subscriber_count(&ch), 0);
    }

    #[test]
    fn occupied_channels_are_the_ones_with_subscribers() {
        let hub = Hub::new();
        let out = Outbox::new(1 << 20);
        let a = ChannelName::parse("presence-a").unwrap();
        let b = ChannelName::parse("presence-b").unwrap();
        let news = ChannelName::parse("news").unwrap();
        let (a1, _) = hub.subscribe(&a, out.clone());
        let (_a2, _) = hub.subscribe(&a, out.clone());
        let (b1, _) = hub.subscribe(&b, out.clone());
        let (_n, _) = hub.subscribe(&news, out.clone());
        let presence = |c: &ChannelName| c.as_str().starts_with("presence-");
        let mut found = hub.occupied_channels(presence);
        found.sort();
        assert_eq!(found, vec![(a.clone(), 2), (b.clone(), 1)]);
        assert!(hub.unsubscribe(&b, b1.id()));
        assert!(hub.unsubscribe(&a, a1.id()));
        assert_eq!(hub.occupied_channels(presence), vec![(a, 1)]);
    }

    #[test]
    fn an_emptied_channel_keeps_its_head_for_the_next_subscriber_within_bounds() {
        let hub = Hub::new();
        let ch = ChannelName::parse("poll").unwrap();
        let (sub, lookup) = hub.subscribe(&ch, Outbox::new(1024));
        assert!(matches!(lookup, HeadLookup::Load));
        hub.finish_head_load(
            &ch,
            Some(Head {
                epoch: Epoch::new("e"),
                last_seq: 7,
            }),
        );
        assert!(hub.unsubscribe(&ch, sub.id()));
        hub.deliver(&msg(&ch, 8)); // still followed while it lingers
        let (_, lookup) = hub.subscribe(&ch, Outbox::new(1024));
        match lookup {
            HeadLookup::Known(head) => assert_eq!(head.last_seq, 8),
            _ => panic!("the head should be known"),
        }
        // A channel whose head was never learned does not linger.
        let other = ChannelName::parse("unknown").unwrap();
        let (s, _) = hub.subscribe(&other, Outbox::new(1024));
        hub.unsubscribe(&other, s.id());
        assert!(matches!(
            hub.subscribe(&other, Outbox::new(1024)).1,
            HeadLookup::Load
        ));
        // Lingering is bounded.
        let n = MAX_LINGERING * SHARDS * 2;
        for i in 0..n {
            let c = ChannelName::parse(&format!("c{i}")).unwrap();
            let (s, _) = hub.subscribe(&c, Outbox::new(64));
            hub.finish_head_load(
                &c,
                Some(Head {
                    epoch: Epoch::new("e"),
                    last_seq: 1,
                }),
            );
            hub.unsubscribe(&c, s.id());
        }
        let held: usize = hub.shards.iter().map(|s| s.read().entries.len()).sum();
        assert!(held <= MAX_LINGERING * SHARDS + 2, "{held} entries held");
    }

    #[test]
    fn a_channel_that_never_had_a_message_lingers_only_if_the_hub_is_told_to() {
        let hub = Hub::new();
        let empty = |name: &str, hub: &Hub| {
            let ch = ChannelName::parse(name).unwrap();
            let (sub, _) = hub.subscribe(&ch, Outbox::new(1024));
            let head = Head {
                epoch: Epoch::new(""),
                last_seq: 0,
            };
            hub.finish_head_load(&ch, Some(head));
            assert!(hub.unsubscribe(&ch, sub.id()));
            hub.known_head(&ch).map(|h| h.last_seq)
        };
        assert_eq!(empty("kept", &hub), Some(0), "lingers by default");
        hub.set_linger_unpublished(false);
        assert_eq!(empty("gone", &hub), None, "forgotten at once");
        // A channel with messages still lingers.
        let ch = ChannelName::parse("published").unwrap();
        let (sub, _) = hub.subscribe(&ch, Outbox::new(1024));
        hub.finish_head_load(
            &ch,
            Some(Head {
                epoch: Epoch::new("e"),
                last_seq: 3,
            }),
        );
        assert!(hub.unsubscribe(&ch, sub.id()));
        assert_eq!(hub.known_head(&ch).map(|h| h.last_seq), Some(3));
    }

    #[test]
    fn unsubscribing_in_any_order_removes_exactly_that_subscriber() {
        let hub = Hub::new();
        let ch = ChannelName::parse("many").unwrap();
        let boxes: Vec<_> = (0..5).map(|_| Outbox::new(1 << 20)).collect();
        let subs: Vec<_> = boxes
            .iter()
            .map(|o| {
                let (s, _) = hub.subscribe(&ch, o.clone());
                s.go_live(vec![], 0);
                s
            })
            .collect();
        for i in [1, 4, 0] {
            assert!(hub.unsubscribe(&ch, subs[i].id()));
        }
        hub.deliver(&msg(&ch, 1));
        let got: Vec<usize> = boxes.iter().map(|o| seqs(o).len()).collect();
        assert_eq!(got, vec![0, 0, 1, 1, 0]);
        assert_eq!(hub.subscriber_count(&ch), 2);
    }

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl InterestHook for Recorder {
        fn gained(&self, channel: &ChannelName) {
            self.0.lock().push(format!("+{channel}"));
        }
        fn lost(&self, channel: &ChannelName) {
            self.0.lock().push(format!("-{channel}"));
        }
    }

    /// What a networked bus is told besides interest: each channel's floor when it becomes
    /// known or lower, and each count of subscribers, under the name the hub keeps (the same
    /// allocation, which the bus's lookups in the hub then match without reading its bytes).
    #[derive(Default)]
    struct Tells {
        floors: Mutex<Vec<(ChannelName, u64)>>,
        counts: Mutex<Vec<(ChannelName, usize)>>,
    }

    impl InterestHook for Tells {
        fn gained(&self, _: &ChannelName) {}
        fn lost(&self, _: &ChannelName) {}
        fn head_known(&self, channel: &ChannelName, floor: u64) {
            self.floors.lock().push((channel.clone(), floor));
        }
        fn subscribers_changed(&self, channel: &ChannelName, count: usize) {
            self.counts.lock().push((channel.clone(), count));
        }
    }

    #[test]
    fn the_interest_hook_is_told_each_floor_and_count_under_the_hubs_name() {
        let hub = Hub::new();
        let tells = Arc::new(Tells::default());
        assert!(hub.set_interest_hook(tells.clone()));
        let first = ChannelName::parse("told").unwrap();
        let (a, _, kept) = hub.subscribe_with(&first, Outbox::new(64), Filter::default());
        // Another allocation of the same name, as a later subscriber or a publish has it.
        let other = ChannelName::parse("told").unwrap();
        let (b, _) = hub.subscribe(&other, Outbox::new(64));
        let head = |last_seq| Head {
            epoch: Epoch::new("e"),
            last_seq,
        };
        hub.learn_head(&other, head(6));
        hub.finish_head_load(&other, Some(head(4)));
        hub.learn_head(&other, head(5));
        hub.deliver(&msg(&other, 7));
        hub.deliver_all(&[msg(&other, 8), msg(&other, 9)]);
        hub.unsubscribe(&other, a.id());
        hub.unsubscribe(&other, b.id());
        let floors: Vec<u64> = tells.floors.lock().iter().map(|(_, f)| *f).collect();
        assert_eq!(
            floors,
            vec![6, 4],
            "the first head, then one older: the floor each time it moved, not after"
        );
        assert_eq!(hub.head_floor(&other), Some(4));
        let counts: Vec<usize> = tells.counts.lock().iter().map(|(_, n)| *n).collect();
        assert_eq!(counts, vec![1, 2, 1, 0], "each count as it was made");
        let names = tells
            .floors
            .lock()
            .iter()
            .map(|(c, _)| c.clone())
            .collect::<Vec<_>>();
        let counted = tells
            .counts
            .lock()
            .iter()
            .map(|(c, _)| c.clone())
            .collect::<Vec<_>>();
        for told in names.iter().chain(&counted) {
            assert!(
                std::ptr::eq(told.as_str(), kept.as_str()),
                "told under the hub's own name, not the caller's copy"
            );
        }
    }

    #[test]
    fn the_interest_hook_hears_of_first_subscribers_and_forgotten_entries() {
        let hub = Hub::new();
        let recorder = Arc::new(Recorder::default());
        assert!(hub.set_interest_hook(recorder.clone()));
        let ch = ChannelName::parse("watched").unwrap();
        let (a, _) = hub.subscribe(&ch, Outbox::new(64));
        let (b, _) = hub.subscribe(&ch, Outbox::new(64));
        assert_eq!(hub.head_floor(&ch), None, "told nothing yet");
        hub.learn_head(
            &ch,
            Head {
                epoch: Epoch::new("e"),
                last_seq: 6,
            },
        );
        hub.finish_head_load(
            &ch,
            Some(Head {
                epoch: Epoch::new("e"),
                last_seq: 4,
            }),
        );
        hub.deliver(&msg(&ch, 7));
        assert_eq!(hub.head_floor(&ch), Some(4), "the oldest head told");
        hub.unsubscribe(&ch, a.id());
        hub.unsubscribe(&ch, b.id());
        // The head is known, so the entry lingers: interest is not lost yet.
        assert_eq!(*recorder.0.lock(), vec!["+watched".to_string()]);
        // A channel whose head was never learned is forgotten at once.
        let other = ChannelName::parse("brief").unwrap();
        let (c, _) = hub.subscribe(&other, Outbox::new(64));
        hub.unsubscribe(&other, c.id());
        assert_eq!(
            *recorder.0.lock(),
            vec!["+watched".to_string(), "+brief".into(), "-brief".into()]
        );
    }
}
