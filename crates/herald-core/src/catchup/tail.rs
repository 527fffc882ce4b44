//! The shared recent tail of hot channels: per channel with subscribers on this node, the
//! newest committed messages that catch-up reads asked for, kept once and handed to every
//! subscriber resuming inside them, so a reconnect storm reads each row from the store and
//! encodes each frame once per node instead of once per device
//! (docs/design/bounded-catchup.md, "Shared recent-tail cache").
//!
//! A channel's tail (`TailSlot`) lives in its hub entry, under the same lock as its head, and
//! holds one contiguous run of messages `lo..=hi` of one epoch. It is exact because:
//! - it is started by a store read made by a subscriber that is already registered in the entry,
//!   and extended by the hub's deliveries, which (while the entry exists) are every committed
//!   message of the channel, in seq order, after it is committed; a delivered seq that does not
//!   follow `hi` starts a new run at that seq (never a run with a hole);
//! - a page that stops short of what was asked (so the pager takes it to be the log's head) is
//!   served only while `hi` is the hub's head, which a publish moves before its publisher is
//!   answered: a subscriber never learns of a head older than a publish answered before it;
//! - the answer is what the store held when its head was `hi` (or the hub's head, for a full
//!   page): the serving subscriber is registered, so everything committed later reaches it live;
//! - retention: it serves a cursor only while the store is sure to still hold the message after
//!   it: at most half the channel's `max_messages` behind the head (a count trim keeps
//!   `max_messages`), and a message younger than half the channel's `max_age_ms` (an age
//!   sweep removes what is older than `max_age_ms`; the half is a margin for clocks). Anything
//!   older goes to the store, whose answer decides `recovered` as before.
//!
//! A miss reads the store once per channel at a time (single flight, as the head does): the
//! first reader loads, others wait for it and look again, then read the store themselves. The
//! node-wide [`TailBudget`] bounds the bytes held; a channel holds at most a quarter of it, and
//! a tail nobody read for [`IDLE`] is dropped at its next delivery.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::head::{Head, HeadSlot};
use crate::hub::Hub;
use crate::log::{ChannelLog, ChannelState, LogSlice, ReadFrom, Retention, StoreError};
use crate::message::{now_millis, Epoch, SharedMessage, StoredMessage};
use crate::name::ChannelName;
use crate::telemetry::telemetry;

/// Default node-wide bytes of the tail cache (the `tail_cache_bytes` setting).
pub const DEFAULT_TAIL_CACHE_BYTES: usize = 64 << 20;

/// A tail nobody read for this long is dropped at the channel's next delivery.
pub const IDLE: Duration = Duration::from_secs(60);

/// What a cached message is counted as: the message, its payload, and room for the frames
/// encoded from it (each about the payload's size plus a JSON envelope).
pub fn cached_cost(message: &StoredMessage) -> usize {
    256 + 3 * message.data.len()
}

/// The node-wide bound on bytes held by every channel's tail.
#[derive(Debug)]
pub struct TailBudget {
    limit: AtomicUsize,
    used: AtomicUsize,
}

impl TailBudget {
    /// A budget of `limit` bytes (0 turns the cache off).
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(TailBudget {
            limit: AtomicUsize::new(limit),
            used: AtomicUsize::new(0),
        })
    }

    /// Changes the limit; tails over it shrink as they next grow.
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Bytes held now by every tail.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn enabled(&self) -> bool {
        self.limit() > 0
    }

    fn take(&self, bytes: usize) {
        self.used.fetch_add(bytes, Ordering::Relaxed);
        telemetry().tail_bytes.increment(bytes as f64);
    }

    fn give_back(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
        telemetry().tail_bytes.decrement(bytes as f64);
    }
}

/// One channel's cached tail and its load in flight (in the channel's [`HeadSlot`]).
pub(crate) struct TailSlot {
    /// Contiguous seqs `lo..=hi`, one epoch.
    run: VecDeque<SharedMessage>,
    bytes: usize,
    /// The store read filling this tail now, if one is (waiters are woken when it ends).
    loading: Option<Arc<Notify>>,
    last_read: Instant,
    budget: Arc<TailBudget>,
}

impl Drop for TailSlot {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

/// A catch-up read: messages after `after`, at most `limit`.
#[derive(Debug, Clone)]
pub(crate) struct TailQuery<'a> {
    pub after: u64,
    pub limit: usize,
    /// The cursor's epoch when the caller has one to check (an empty one matches any).
    pub epoch: Option<&'a Epoch>,
    pub retention: Retention,
    pub now_ms: i64,
}

/// A page served from a tail.
#[derive(Debug)]
pub(crate) struct TailHit {
    messages: Vec<SharedMessage>,
    epoch: Epoch,
    last_seq: u64,
    first_seq: u64,
}

impl TailHit {
    fn into_slice(self, channel: &ChannelName) -> LogSlice {
        LogSlice {
            state: ChannelState {
                name: channel.clone(),
                epoch: self.epoch,
                last_seq: self.last_seq,
                // The oldest seq the tail holds: the log holds it and everything after it.
                first_seq: self.first_seq,
            },
            messages: self.messages,
        }
    }
}

/// What a catch-up read found in its channel's tail.
pub(crate) enum TailLookup {
    /// Served from the tail.
    Hit(TailHit),
    /// Not there, and nobody is reading it: read the store, fill, then finish the load.
    Load,
    /// Not there, and another reader is filling the tail: wait for it, then look again.
    Wait(Arc<Notify>),
    /// Not there: read the store without filling (the cache is off, or a look after a wait).
    Bypass,
}

impl TailSlot {
    fn new(budget: Arc<TailBudget>) -> Self {
        TailSlot {
            run: VecDeque::new(),
            bytes: 0,
            loading: None,
            last_read: Instant::now(),
            budget,
        }
    }

    fn lo(&self) -> Option<u64> {
        self.run.front().map(|m| m.seq)
    }

    fn hi(&self) -> Option<u64> {
        self.run.back().map(|m| m.seq)
    }

    fn clear(&mut self) {
        self.run.clear();
        self.budget.give_back(std::mem::take(&mut self.bytes));
    }

    fn push_back(&mut self, message: SharedMessage) {
        let cost = cached_cost(&message);
        self.bytes += cost;
        self.budget.take(cost);
        self.run.push_back(message);
    }

    /// Drops the oldest messages while this tail or the node is over its bytes (the node's
    /// count is given back once, at the end).
    fn shrink(&mut self) {
        let (limit, used) = (self.budget.limit(), self.budget.used());
        let mut freed = 0;
        while self.bytes > limit / 4 || used.saturating_sub(freed) > limit {
            let Some(old) = self.run.pop_front() else {
                break;
            };
            let cost = cached_cost(&old);
            self.bytes -= cost;
            freed += cost;
        }
        if freed > 0 {
            self.budget.give_back(freed);
        }
    }

    /// Messages the hub delivered (committed, in seq order), a run at a time: the idle check,
    /// the node's count and the bounds are applied once per run, so the fan-out, which calls
    /// this under the channel's lock, pays little more than a push per message.
    fn delivered(&mut self, run: &[SharedMessage]) {
        if self.loading.is_none() && self.last_read.elapsed() > IDLE {
            self.clear();
            return;
        }
        let mut taken = 0;
        for message in run {
            let follows = match (self.hi(), self.run.front()) {
                (Some(hi), Some(first)) if first.epoch == message.epoch => {
                    if message.seq <= hi {
                        continue;
                    }
                    message.seq == hi + 1
                }
                (Some(_), _) => false,
                (None, _) => true,
            };
            if !follows {
                self.budget.take(std::mem::take(&mut taken));
                self.clear();
            }
            let cost = cached_cost(message);
            self.bytes += cost;
            taken += cost;
            self.run.push_back(message.clone());
        }
        if taken > 0 {
            self.budget.take(taken);
            self.shrink();
        }
    }

    /// Merges a store read of the messages after `after` (contiguous from `after + 1`; checked
    /// by the caller) into the run: kept where it joins or overlaps the run, or replaces a run
    /// it is newer than; an older disjoint page is not kept.
    fn fill(&mut self, after: u64, messages: &[SharedMessage]) {
        let (Some(first), Some(last)) = (messages.first(), messages.last()) else {
            return;
        };
        let same_epoch = self.run.front().is_none_or(|m| m.epoch == first.epoch);
        match (self.lo(), self.hi()) {
            (Some(lo), Some(hi)) if same_epoch && after < hi && last.seq + 1 >= lo => {
                // Overlaps or joins: prepend what is older than `lo`, append what is newer.
                for m in messages.iter().rev().filter(|m| m.seq < lo) {
                    let cost = cached_cost(m);
                    self.bytes += cost;
                    self.budget.take(cost);
                    self.run.push_front(m.clone());
                }
                for m in messages.iter().filter(|m| m.seq > hi) {
                    self.push_back(m.clone());
                }
            }
            (Some(_), Some(hi)) if same_epoch && after >= hi => {
                // Starts at or after the run's end: joins it only right at the end.
                if after == hi {
                    messages.iter().for_each(|m| self.push_back(m.clone()));
                } else {
                    self.clear();
                    messages.iter().for_each(|m| self.push_back(m.clone()));
                }
            }
            (Some(_), Some(_)) if same_epoch => {} // older than the run and disjoint
            _ => {
                self.clear();
                messages.iter().for_each(|m| self.push_back(m.clone()));
            }
        }
        self.shrink();
    }

    /// The page `query` asks for, if this tail can answer it exactly, with `head` the hub's.
    fn serve(&self, query: &TailQuery<'_>, head: Option<&Head>) -> Option<TailHit> {
        // Only once the hub knows the head: a hit's state teaches the head
        // (`Engine::catch_up`), which must never learn one older than the store's.
        let head = head?;
        let (lo, hi, front) = (self.lo()?, self.hi()?, self.run.front()?);
        let after = query.after;
        if after + 1 < lo || after > hi {
            return None;
        }
        if let Some(epoch) = query.epoch {
            if !epoch.as_str().is_empty() && *epoch != front.epoch {
                return None;
            }
        }
        let head_seq = head.last_seq.max(hi);
        if head_seq - after > query.retention.max_messages.max(1) / 2 {
            return None;
        }
        let available = (hi - after) as usize;
        let n = available.min(query.limit);
        let start = (after + 1 - lo) as usize;
        if n > 0 && query.retention.max_age_ms > 0 {
            let oldest = &self.run[start];
            let half_age = (query.retention.max_age_ms / 2).min(i64::MAX as u64) as i64;
            if oldest.time < query.now_ms.saturating_sub(half_age) {
                return None;
            }
        }
        let short = n < query.limit;
        if short && head.last_seq != hi {
            // Would say "this is the head": only while it is.
            return None;
        }
        Some(TailHit {
            messages: self.run.range(start..start + n).cloned().collect(),
            epoch: front.epoch.clone(),
            last_seq: if short { hi } else { head_seq },
            first_seq: lo,
        })
    }
}

impl HeadSlot {
    /// Looks `query` up in the channel's tail. With `may_load`, a miss with no load in flight
    /// makes the caller the loader ([`TailLookup::Load`]).
    pub(crate) fn tail_lookup(
        &mut self,
        query: &TailQuery<'_>,
        budget: &Arc<TailBudget>,
        may_load: bool,
    ) -> TailLookup {
        if !budget.enabled() {
            return TailLookup::Bypass;
        }
        let head = self.known();
        if let Some(slot) = self.tail.as_deref_mut() {
            if let Some(hit) = slot.serve(query, head.as_ref()) {
                slot.last_read = Instant::now();
                return TailLookup::Hit(hit);
            }
            if let Some(loading) = &slot.loading {
                return if may_load {
                    TailLookup::Wait(loading.clone())
                } else {
                    TailLookup::Bypass
                };
            }
        }
        if !may_load {
            return TailLookup::Bypass;
        }
        let slot = self
            .tail
            .get_or_insert_with(|| Box::new(TailSlot::new(budget.clone())));
        slot.loading = Some(Arc::new(Notify::new()));
        slot.last_read = Instant::now();
        TailLookup::Load
    }

    /// A store read of the messages after `after`, made for the tail (by its loader, or by a
    /// reader after a wait): kept if it fits. It does not teach the head: the read may predate
    /// this entry (a reader whose subscription ended meanwhile), so only the subscribe path's
    /// head load, made after registering, does.
    pub(crate) fn tail_fill(&mut self, after: u64, slice: &LogSlice) {
        let contiguous = slice
            .messages
            .iter()
            .zip(after + 1..)
            .all(|(m, seq)| m.seq == seq);
        if let Some(slot) = self.tail.as_deref_mut().filter(|_| contiguous) {
            slot.fill(after, &slice.messages);
        }
    }

    /// Ends a load: returns whom to wake (after the lock is released); an empty tail with no
    /// load is dropped.
    pub(crate) fn tail_finish_load(&mut self) -> Option<Arc<Notify>> {
        let slot = self.tail.as_deref_mut()?;
        let waiters = slot.loading.take();
        if slot.run.is_empty() {
            self.tail = None;
        }
        waiters
    }

    /// A message the hub delivered: extends the tail, if the channel has one.
    pub(crate) fn tail_delivered(&mut self, message: &SharedMessage) {
        self.tail_delivered_run(std::slice::from_ref(message));
    }

    /// A run of consecutive messages of the channel the hub delivered, in seq order: extends
    /// the tail, if the channel has one (a channel nobody caught up on pays one branch).
    pub(crate) fn tail_delivered_run(&mut self, run: &[SharedMessage]) {
        if let Some(slot) = self.tail.as_deref_mut() {
            slot.delivered(run);
            if slot.run.is_empty() && slot.loading.is_none() {
                self.tail = None;
            }
        }
    }
}

/// A load this reader owes its channel's tail: ended when dropped (also if the read failed or
/// the reader was cancelled), waking the readers waiting for it.
struct LoadGuard<'a> {
    hub: &'a Hub,
    channel: &'a ChannelName,
}

impl Drop for LoadGuard<'_> {
    fn drop(&mut self) {
        let waiters = self
            .hub
            .with_head_slot(self.channel, |slot, _| slot.tail_finish_load())
            .flatten();
        if let Some(waiters) = waiters {
            waiters.notify_waiters();
        }
    }
}

/// Catch-up reads through the shared tail: what the engine's first read and every pager's
/// pages use instead of reading the log directly.
#[derive(Clone)]
pub(crate) struct TailReads {
    pub log: Arc<dyn ChannelLog>,
    pub hub: Arc<Hub>,
}

impl TailReads {
    /// Up to `limit` messages after `after` (each after `epoch`'s cursor when given), with the
    /// channel's state: from the tail when it holds them, else from the store.
    pub async fn read_after(
        &self,
        channel: &ChannelName,
        after: u64,
        limit: usize,
        epoch: Option<&Epoch>,
        retention: Retention,
    ) -> Result<LogSlice, StoreError> {
        let query = TailQuery {
            after,
            limit,
            epoch,
            retention,
            now_ms: now_millis(),
        };
        let lookup = |may_load: bool| {
            self.hub
                .with_head_slot(channel, |slot, budget| {
                    slot.tail_lookup(&query, budget, may_load)
                })
                .unwrap_or(TailLookup::Bypass)
        };
        let mut guard = None;
        let mut fill = false;
        match lookup(true) {
            TailLookup::Hit(hit) => return Ok(self.hit(channel, hit)),
            TailLookup::Load => {
                guard = Some(LoadGuard {
                    hub: &self.hub,
                    channel,
                });
                fill = true;
            }
            TailLookup::Wait(loading) => {
                let notified = loading.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if let TailLookup::Hit(hit) = lookup(false) {
                    return Ok(self.hit(channel, hit));
                }
                notified.await;
                if let TailLookup::Hit(hit) = lookup(false) {
                    return Ok(self.hit(channel, hit));
                }
                fill = true;
            }
            TailLookup::Bypass => {}
        }
        let read = self.log.read(channel, ReadFrom::After(after), limit).await;
        if self.hub.tail_budget().enabled() {
            telemetry().tail_misses.increment(1);
        }
        if let (Ok(slice), true) = (&read, fill) {
            self.hub
                .with_head_slot(channel, |slot, _| slot.tail_fill(after, slice));
        }
        drop(guard);
        read
    }

    fn hit(&self, channel: &ChannelName, hit: TailHit) -> LogSlice {
        telemetry().tail_hits.increment(1);
        hit.into_slice(channel)
    }
}

#[cfg(test)]
#[path = "tail_tests.rs"]
mod tests;
