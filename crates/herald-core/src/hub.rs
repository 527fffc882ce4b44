//! The fan-out hub: which connections are subscribed to which channel, and delivery of each
//! committed message to them. The registry is sharded by channel name so publish and subscribe
//! on different channels never contend on one lock; delivery takes a shard's read lock only.
//!
//! A networked bus follows only the channels this node has subscribers for: the hub tells an
//! [`InterestHook`] when it makes a channel's entry (the first local subscriber) and when it
//! forgets one (after the entry lingered empty, see `ShardMap::emptied`). A [`DeliveryMeter`]
//! is told how many deliveries each run of a channel's messages made (per-app counts).
//!
//! A new subscription starts in catch-up mode: it holds a [`Pager`] that parks live messages
//! until the subscriber has queued its reply and the history it missed (or, paging a long
//! catch-up, drops them while a later page will read them), then it goes live. That is what
//! makes resume exact (no gap, no duplicate) without blocking publishers.

use std::collections::VecDeque;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use hashbrown::hash_table::{Entry, HashTable};
use parking_lot::{Mutex, RwLock};

use crate::catchup::tail::{TailBudget, DEFAULT_TAIL_CACHE_BYTES};
use crate::catchup::{Gap, LiveAction, Page, PageDone, PageRequest, Pager};
use crate::fanout::backlog::Backlog;
use crate::head::{Head, HeadLookup, HeadSlot};
use crate::message::{SharedMessage, StoredMessage};
use crate::name::ChannelName;
use crate::outbox::{CloseReason, OutFrame, Outbox};
use crate::telemetry::telemetry;

const SHARDS: usize = 64;

/// Decides which of a channel's messages a subscription receives (live and replayed); a
/// device's subscription to its app's broadcast log keeps only pushes whose audience admits it.
pub type Admit = Arc<dyn Fn(&StoredMessage) -> bool + Send + Sync>;

/// Told how many messages were queued for a subscription (replayed and live), as they are
/// queued: a device's usage counts its deliveries with it.
pub type Tally = Arc<dyn Fn(u64) + Send + Sync>;

/// What a subscription receives ([`Admit`]) and who counts what it was sent ([`Tally`]).
#[derive(Clone, Default)]
pub struct Filter {
    /// Keeps only the messages it admits; none means all.
    pub admit: Option<Admit>,
    /// Counts the messages queued.
    pub tally: Option<Tally>,
}

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
}

/// About how many bytes of a run of messages one outbox lock queues (see
/// [`Subscription::send_live_run`]).
const RUN_PIECE_BYTES: usize = 16 * 1024;

/// Live messages a subscription may park while catching up before it counts as slow.
const MAX_PARKED: usize = 10_000;

/// One connection's subscription to one channel.
pub struct Subscription {
    id: u64,
    outbox: Arc<Outbox>,
    live: AtomicBool,
    /// Seq up to which the subscriber was caught up from the log. A message committed before
    /// that read can still reach the hub afterwards (the commit sink runs after the commit), so
    /// live delivery skips anything at or below it.
    caught_up_to: AtomicU64,
    /// The catch-up while the subscription is not live ([`crate::catchup`]): parks live messages
    /// while a read may miss them, drops them while a later page will read them. `None` once
    /// live, or once the subscription ended (unsubscribed, or its catch-up lost its place).
    catchup: Mutex<Option<Box<Pager<SharedMessage>>>>,
    filter: Filter,
}

/// What a catch-up's reader does next ([`Subscription::next_read`]).
#[derive(Debug, PartialEq, Eq)]
pub enum NextRead {
    /// Read this page.
    Read(PageRequest),
    /// Wait for the outbox to drain, then ask again.
    Wait,
    /// Nothing more: the subscription is live, or it ended.
    Done,
}

impl Subscription {
    /// Whether this subscription receives `message`.
    pub fn admits(&self, message: &StoredMessage) -> bool {
        self.filter
            .admit
            .as_ref()
            .is_none_or(|admit| admit(message))
    }

    fn tally(&self, n: u64) {
        if let Some(tally) = self.filter.tally.as_ref().filter(|_| n > 0) {
            tally(n);
        }
    }

    /// Queues a live message unless the catch-up already covered it.
    fn send_live(&self, message: &SharedMessage) {
        if message.seq > self.caught_up_to.load(Ordering::Relaxed)
            && self.outbox.push(OutFrame::Message(message.clone()))
        {
            self.tally(1);
        }
    }

    /// Queues the live messages of `run` (consecutive messages of this subscription's channel,
    /// in commit order) that the catch-up did not cover, with one lock of the outbox and one wake
    /// of its writer.
    ///
    /// The run goes in pieces of about [`RUN_PIECE_BYTES`], the lock released between them, so
    /// a writer draining the outbox meanwhile makes room as it did between single messages: a
    /// backlog gathered while the fan-out thread waited for a core is no more likely to overflow
    /// a reader's queue than the same messages delivered one at a time.
    fn send_live_run(&self, run: &[SharedMessage]) {
        let caught_up_to = self.caught_up_to.load(Ordering::Relaxed);
        let mut queued = 0;
        let mut rest = run;
        while !rest.is_empty() {
            let mut bytes = 0;
            let len = rest
                .iter()
                .position(|m| {
                    bytes += m.data.len() + 64;
                    bytes >= RUN_PIECE_BYTES
                })
                .map_or(rest.len(), |last| last + 1);
            let (piece, after) = rest.split_at(len);
            queued += self.outbox.push_many(
                piece
                    .iter()
                    .filter(|m| m.seq > caught_up_to && self.admits(m))
                    .map(|m| OutFrame::Message(m.clone())),
            );
            rest = after;
        }
        self.tally(queued as u64);
    }

    /// Delivers `run` (see [`Subscription::send_live_run`]); while catching up, each message is
    /// parked as [`Subscription::deliver`] parks it.
    fn deliver_run(&self, run: &[SharedMessage]) {
        if let [message] = run {
            return self.deliver(message);
        }
        if self.live.load(Ordering::Acquire) {
            return self.send_live_run(run);
        }
        for message in run {
            self.deliver(message);
        }
    }

    /// The subscription's id, unique in this process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The outbox the subscription queues to.
    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    /// Whether the subscription is live (caught up).
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }

    fn deliver(&self, message: &SharedMessage) {
        if !self.admits(message) {
            return;
        }
        if self.live.load(Ordering::Acquire) {
            self.send_live(message);
            return;
        }
        let mut catchup = self.catchup.lock();
        if self.live.load(Ordering::Acquire) {
            drop(catchup);
            self.send_live(message);
            return;
        }
        let Some(pager) = catchup.as_mut() else {
            return; // ended
        };
        match pager.on_live(message.clone()) {
            LiveAction::Nothing => {}
            LiveAction::Queue(m) => {
                // Only a live pager queues, and a live pager is dropped as it goes live.
                drop(catchup);
                self.send_live(&m);
            }
            LiveAction::Overflow => {
                drop(catchup);
                self.outbox.close(CloseReason::SlowConsumer);
            }
        }
    }

    /// The next page this subscription's catch-up needs, if one is due now (see
    /// [`Pager::next_read`]: paced by the catch-up bytes its outbox still holds).
    pub fn next_read(&self) -> NextRead {
        let mut catchup = self.catchup.lock();
        match catchup.as_mut() {
            None => NextRead::Done,
            Some(pager) => match pager.next_read(self.outbox.catchup_queued()) {
                Some(request) => NextRead::Read(request),
                None => NextRead::Wait,
            },
        }
    }

    /// A page asked for by [`Subscription::next_read`] came back: queues it (what the filter
    /// admits, shaped by `shape`), and, when it reached the log's head, the parked live
    /// messages above it, and goes live. Returns whether the subscription is now live (or
    /// ended), or the [`Gap`] that ends exact resume (the subscription then ends: see
    /// [`Subscription::end`]).
    pub fn on_page(&self, page: Page<SharedMessage>, shape: Shape) -> Result<bool, Gap> {
        self.take_page(Vec::new(), |pager| pager.on_page(page), shape)
    }

    /// Queues `first` (reply frames) and the first page, read with `limit` after `after`, as
    /// [`Subscription::on_page`] does.
    pub fn on_first_page(
        &self,
        first: Vec<OutFrame>,
        after: u64,
        limit: usize,
        page: Page<SharedMessage>,
        shape: Shape,
    ) -> Result<bool, Gap> {
        self.take_page(
            first,
            |pager| pager.on_first_page(after, limit, page),
            shape,
        )
    }

    fn take_page(
        &self,
        first: Vec<OutFrame>,
        read: impl FnOnce(&mut Pager<SharedMessage>) -> Result<PageDone<SharedMessage>, Gap>,
        shape: Shape,
    ) -> Result<bool, Gap> {
        let mut catchup = self.catchup.lock();
        let Some(pager) = catchup.as_mut() else {
            return Ok(true);
        };
        let done = read(pager)?;
        let mut messages = done.frames;
        messages.retain(|m| self.admits(m));
        if let Some(shape) = shape {
            shape(&mut messages);
        }
        let n = messages.len() as u64;
        let frames = first
            .into_iter()
            .chain(messages.into_iter().map(OutFrame::Replayed));
        if self.outbox.push_catchup(frames) {
            self.tally(n);
        }
        if done.live {
            self.caught_up_to.store(pager.cursor(), Ordering::Relaxed);
            *catchup = None;
            self.live.store(true, Ordering::Release);
        }
        Ok(done.live)
    }

    /// Ends the catch-up without going live: the subscription receives nothing more (its
    /// reader stops). For a catch-up that lost its place, and for an unsubscribe.
    pub fn end(&self) {
        let ended = self.catchup.lock().take();
        if ended.is_some() {
            self.outbox.wake_catchup();
        }
    }

    /// Whether the subscription is still catching up (neither live nor ended).
    pub fn is_catching_up(&self) -> bool {
        self.catchup.lock().is_some()
    }

    /// Queues `first` (reply and catch-up frames), then every parked live message with a seq
    /// above `caught_up_to`, and switches to live delivery (which keeps skipping seqs up to
    /// `caught_up_to`), all under the parking lock so no live message can slip in between.
    pub fn go_live(&self, first: Vec<OutFrame>, caught_up_to: u64) {
        let mut catchup = self.catchup.lock();
        self.caught_up_to.store(caught_up_to, Ordering::Relaxed);
        let mut frames = first;
        if let Some(mut pager) = catchup.take() {
            frames.extend(
                pager
                    .finish_at(caught_up_to)
                    .into_iter()
                    .map(OutFrame::Message),
            );
        }
        let messages = frames
            .iter()
            .filter(|f| matches!(f, OutFrame::Message(_) | OutFrame::Replayed(_)))
            .count();
        if self.outbox.push_all_unbounded(frames) {
            self.tally(messages as u64);
        }
        self.live.store(true, Ordering::Release);
    }
}

/// Reshapes each page of a catch-up before it is queued (a device inbox drops pushes a later
/// one in the same page replaces).
pub type Shape = Option<fn(&mut Vec<SharedMessage>)>;

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
        self.entries
            .find(key.hash, |slot| slot.name == *key.name)
            .map(|slot| &slot.entry)
    }

    fn get_mut(&mut self, key: Key<'_>) -> Option<&mut ChannelEntry> {
        self.entries
            .find_mut(key.hash, |slot| slot.name == *key.name)
            .map(|slot| &mut slot.entry)
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
}

/// Default of [`Hub::set_catchup_budget`] (the `catchup_bytes` setting's default).
pub const DEFAULT_CATCHUP_BUDGET: usize = 64 * 1024;

impl Default for Hub {
    fn default() -> Self {
        Hub {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            hasher: RandomState::new(),
            next_id: AtomicU64::new(1),
            interest: OnceLock::new(),
            meter: OnceLock::new(),
            catchup_budget: AtomicUsize::new(DEFAULT_CATCHUP_BUDGET),
            tail_budget: TailBudget::new(DEFAULT_TAIL_CACHE_BYTES),
            backlog: Backlog::default(),
            linger_unpublished: AtomicBool::new(true),
        }
    }
}

impl Hub {
    /// An empty hub.
    pub fn new() -> Arc<Self> {
        Arc::new(Hub::default())
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
        let sub = Arc::new(Subscription {
            filter,
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            outbox,
            live: AtomicBool::new(false),
            caught_up_to: AtomicU64::new(0),
            catchup: Mutex::new(Some(Box::new(Pager::new(
                0,
                self.catchup_budget.load(Ordering::Relaxed),
                MAX_PARKED,
            )))),
        });
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
        entry.subs.push(sub.clone());
        entry.ids.push(sub.id);
        let head = entry.head.lock().lookup();
        drop(shard);
        telemetry().subscriptions.increment(1.0);
        (sub, head, name)
    }

    /// Tells the hub where a channel stood according to the store, read after a subscription
    /// was registered; the newer of that and what the hub has seen is kept.
    pub fn learn_head(&self, channel: &ChannelName, head: Head) {
        let key = self.key(channel);
        if let Some(entry) = self.shard(key).read().get(key) {
            entry.head.lock().learn(head);
        }
    }

    /// Ends a head load started by [`HeadLookup::Load`]: records the head read (if the read
    /// succeeded) and wakes the subscribers waiting for it.
    pub fn finish_head_load(&self, channel: &ChannelName, head: Option<Head>) {
        let key = self.key(channel);
        let waiters = self.shard(key).read().get(key).and_then(|entry| {
            let mut slot = entry.head.lock();
            if let Some(head) = head {
                slot.learn(head);
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
        let Some(entry) = shard.get_mut(key) else {
            return false;
        };
        let Some(pos) = entry.ids.iter().position(|&s| s == id) else {
            return false;
        };
        entry.subs.swap_remove(pos).end();
        entry.ids.swap_remove(pos);
        if entry.subs.is_empty() {
            let hook = self.interest.get();
            let unpublished = self.linger_unpublished.load(Ordering::Relaxed);
            shard.emptied(key, Instant::now(), unpublished, |gone| {
                if let Some(hook) = hook {
                    hook.lost(gone);
                }
            });
        }
        telemetry().subscriptions.decrement(1.0);
        true
    }

    /// Number of subscriptions to `channel` on this node.
    pub fn subscriber_count(&self, channel: &ChannelName) -> usize {
        let key = self.key(channel);
        self.shard(key).read().get(key).map_or(0, |e| e.subs.len())
    }

    /// Delivers committed messages, in order, to the subscriptions of their channels. Each run
    /// of consecutive messages of one channel is handed to every subscriber at once (one outbox
    /// lock and one wake per subscriber for the whole run), so a group commit of many messages
    /// to a busy channel costs its subscribers' writers one wake, not one per message.
    pub fn deliver_all(&self, messages: &[SharedMessage]) {
        for run in messages.chunk_by(|a, b| a.channel == b.channel) {
            self.deliver_run(run);
        }
    }

    /// Delivers a run of consecutive messages of one channel (see [`Hub::deliver_all`]).
    fn deliver_run(&self, run: &[SharedMessage]) {
        let Some(last) = run.last() else {
            return;
        };
        let key = self.key(&last.channel);
        let shard = self.shard(key).read();
        if let Some(entry) = shard.get(key) {
            {
                let mut head = entry.head.lock();
                for message in run {
                    head.delivered(Head {
                        epoch: message.epoch.clone(),
                        last_seq: message.seq,
                    });
                }
                head.tail_delivered_run(run);
            }
            for sub in &entry.subs {
                sub.deliver_run(run);
            }
            self.count_deliveries(&last.channel, (entry.subs.len() * run.len()) as u64);
        }
    }

    /// Delivers one message to every subscription of its channel.
    pub fn deliver(&self, message: &SharedMessage) {
        let key = self.key(&message.channel);
        let shard = self.shard(key).read();
        if let Some(entry) = shard.get(key) {
            {
                let mut head = entry.head.lock();
                head.delivered(Head {
                    epoch: message.epoch.clone(),
                    last_seq: message.seq,
                });
                head.tail_delivered(message);
            }
            for sub in &entry.subs {
                sub.deliver(message);
            }
            self.count_deliveries(&message.channel, entry.subs.len() as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Epoch, StoredMessage};
    use bytes::Bytes;

    fn msg(ch: &ChannelName, seq: u64) -> SharedMessage {
        crate::message::test_message(ch, seq, b"{}")
    }

    fn seqs(outbox: &Outbox) -> Vec<u64> {
        outbox
            .take()
            .0
            .into_iter()
            .filter_map(|f| match f {
                OutFrame::Message(m) | OutFrame::Replayed(m) => Some(m.seq),
                OutFrame::Control(_) => None,
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

    #[test]
    fn a_run_parks_while_catching_up_and_overflows_as_a_slow_consumer() {
        let hub = Hub::new();
        let ch = ChannelName::parse("r").unwrap();
        let out = Outbox::new(1 << 20);
        let (sub, _) = hub.subscribe(&ch, out.clone());
        hub.deliver_all(&[msg(&ch, 1), msg(&ch, 2), msg(&ch, 3)]);
        assert!(seqs(&out).is_empty(), "parked while catching up");
        sub.go_live(vec![OutFrame::Replayed(msg(&ch, 1))], 1);
        hub.deliver_all(&[msg(&ch, 4), msg(&ch, 5)]);
        assert_eq!(seqs(&out), vec![1, 2, 3, 4, 5]);

        let small = Outbox::new(200);
        let (sub, _) = hub.subscribe(&ch, small.clone());
        sub.go_live(vec![], 5);
        let big = |seq| {
            Arc::new(StoredMessage::new(
                ch.clone(),
                Epoch::new("e"),
                seq,
                None,
                0,
                Bytes::from(vec![b'1'; 100]),
            ))
        };
        hub.deliver_all(&[big(6), big(7), big(8)]);
        assert_eq!(small.closed(), Some(CloseReason::SlowConsumer));
        assert!(seqs(&small).is_empty());
        assert_eq!(
            seqs(&out),
            vec![6, 7, 8],
            "the other subscriber is unaffected"
        );
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

    #[test]
    fn the_tally_counts_what_is_queued_and_nothing_else() {
        let hub = Hub::new();
        let ch = ChannelName::parse("inbox").unwrap();
        let out = Outbox::new(1 << 20);
        let counted = Arc::new(AtomicU64::new(0));
        let tally = counted.clone();
        let filter = Filter {
            // Odd seqs only.
            admit: Some(Arc::new(|m: &StoredMessage| m.seq % 2 == 1)),
            tally: Some(Arc::new(move |n| {
                tally.fetch_add(n, Ordering::Relaxed);
            })),
        };
        let (sub, _, _) = hub.subscribe_with(&ch, out.clone(), filter);
        for seq in [3, 4, 5] {
            hub.deliver(&msg(&ch, seq)); // parked: 3 and 5 (4 is not admitted)
        }
        assert_eq!(counted.load(Ordering::Relaxed), 0, "parked is not sent");
        // The catch-up covered up to 3: one reply, two replayed messages; parked 3 is dropped.
        sub.go_live(
            vec![
                OutFrame::Control(bytes::Bytes::from_static(b"reply")),
                OutFrame::Replayed(msg(&ch, 1)),
                OutFrame::Replayed(msg(&ch, 3)),
            ],
            3,
        );
        assert_eq!(seqs(&out), vec![1, 3, 5]);
        assert_eq!(counted.load(Ordering::Relaxed), 3);
        hub.deliver(&msg(&ch, 6));
        hub.deliver(&msg(&ch, 7));
        assert_eq!(counted.load(Ordering::Relaxed), 4, "live: 7 only");
        out.close(CloseReason::Shutdown);
        hub.deliver(&msg(&ch, 9));
        assert_eq!(
            counted.load(Ordering::Relaxed),
            4,
            "a closed outbox takes nothing"
        );
    }

    #[test]
    fn a_paging_subscription_drops_live_messages_while_behind_and_parks_while_closing() {
        let hub = Hub::new();
        let ch = ChannelName::parse("news").unwrap();
        let out = Outbox::new(1 << 20);
        let (sub, _) = hub.subscribe(&ch, out.clone());
        let page = |seqs: std::ops::RangeInclusive<u64>, last_seq| Page {
            messages: seqs.map(|seq| msg(&ch, seq)).collect(),
            last_seq,
        };
        hub.deliver(&msg(&ch, 5)); // parked: the first read is in flight
        let live = sub.on_first_page(Vec::new(), 0, 3, page(1..=3, 5), None);
        assert_eq!(live, Ok(false), "that first page (1..=3) was full: behind");
        hub.deliver(&msg(&ch, 6)); // dropped: a page reads it
        assert_eq!(seqs(&out), vec![1, 2, 3], "no live message while behind");
        let NextRead::Read(request) = sub.next_read() else {
            panic!("a page is due once the outbox drained");
        };
        assert_eq!(request.after, 3);
        assert_eq!(sub.next_read(), NextRead::Wait, "one read at a time");
        // The next page (4..=6) reached the head: parking again.
        assert_eq!(sub.on_page(page(4..=6, 6), None), Ok(false));
        hub.deliver(&msg(&ch, 6)); // a late delivery of a seq the page covered
        hub.deliver(&msg(&ch, 7));
        assert_eq!(seqs(&out), vec![4, 5, 6], "parked, not queued");
        let NextRead::Read(request) = sub.next_read() else {
            panic!("the closing read is due");
        };
        assert_eq!(request.after, 6);
        let empty = Page {
            messages: Vec::new(),
            last_seq: 6,
        };
        assert_eq!(sub.on_page(empty, None), Ok(true), "live");
        assert_eq!(sub.next_read(), NextRead::Done);
        hub.deliver(&msg(&ch, 7));
        hub.deliver(&msg(&ch, 8));
        assert_eq!(seqs(&out), vec![7, 8], "the parked 7 once, then live");
    }

    #[test]
    fn a_trim_under_a_paging_subscription_ends_it() {
        let hub = Hub::new();
        let ch = ChannelName::parse("news").unwrap();
        let out = Outbox::new(1 << 20);
        let (sub, _) = hub.subscribe(&ch, out.clone());
        let full = Page {
            messages: (1..=3).map(|seq| msg(&ch, seq)).collect(),
            last_seq: 9,
        };
        assert_eq!(sub.on_first_page(Vec::new(), 0, 3, full, None), Ok(false));
        assert!(matches!(sub.next_read(), NextRead::Read(_)));
        let holed = Page {
            messages: (6..=9).map(|seq| msg(&ch, seq)).collect(),
            last_seq: 9,
        };
        assert_eq!(sub.on_page(holed, None), Err(Gap { expected: 4 }));
        sub.end();
        assert_eq!(sub.next_read(), NextRead::Done);
        hub.deliver(&msg(&ch, 10));
        assert_eq!(seqs(&out), vec![1, 2, 3], "nothing after the gap");
    }

    #[test]
    fn parks_until_live_then_dedupes() {
        let hub = Hub::new();
        let ch = ChannelName::parse("news").unwrap();
        let out = Outbox::new(1 << 20);
        let (sub, head) = hub.subscribe(&ch, out.clone());
        assert!(
            matches!(head, HeadLookup::Load),
            "first subscriber loads the head"
        );
        hub.deliver(&msg(&ch, 3));
        hub.deliver(&msg(&ch, 4));
        assert!(seqs(&out).is_empty(), "nothing before go_live");
        // history read covered up to 3
        sub.go_live(
            vec![
                OutFrame::Message(msg(&ch, 2)),
                OutFrame::Message(msg(&ch, 3)),
            ],
            3,
        );
        hub.deliver(&msg(&ch, 5));
        assert_eq!(seqs(&out), vec![2, 3, 4, 5]);
        let (_, head) = hub.subscribe(&ch, Outbox::new(1024));
        assert!(
            matches!(head, HeadLookup::Known(h) if h.last_seq == 5),
            "head tracked from deliveries"
        );
        hub.learn_head(
            &ch,
            Head {
                epoch: Epoch::new("e"),
                last_seq: 4,
            },
        );
        assert_eq!(hub.known_head(&ch).map(|h| h.last_seq), Some(5));
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
    fn message_read_from_the_log_but_delivered_after_going_live_is_not_repeated() {
        // The log read saw seq 7 (committed) before the commit sink handed it to the hub.
        let hub = Hub::new();
        let ch = ChannelName::parse("late").unwrap();
        let out = Outbox::new(1 << 20);
        let (sub, _) = hub.subscribe(&ch, out.clone());
        sub.go_live(vec![OutFrame::Message(msg(&ch, 7))], 7);
        hub.deliver(&msg(&ch, 7));
        hub.deliver(&msg(&ch, 8));
        assert_eq!(seqs(&out), vec![7, 8]);
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
