//! `subscription_count` events: a channel's subscriber count, told at most once per channel per
//! `hooks.subscription_count_interval` (5 s by default), with the count at the end of the
//! interval.
//!
//! **Windows, trailing edge.** The lifecycle listener notes a channel ([`SubscriptionCounts::
//! note`]) when this node sees a subscription to it made or ended (or the cluster's occupied or
//! vacated delivered here, a lost node's channels included) and an enabled endpoint of its app
//! asked for `subscription_count` about it. The first change in a quiet channel opens its
//! window, which ends one interval later; changes within it only note what the window already
//! holds ([`Windows`]). When the window ends the count is read once, and told if it differs
//! from the count last told about the channel (the last value wins; a channel back where the
//! last event left it is told nothing). A change after that opens the next window: events about
//! one channel are at least an interval apart, and the first change in a quiet channel is told
//! within an interval.
//!
//! **Settling in a cluster.** Another node's share of a count is as that node last reported
//! it ([`ChannelCounts::settle`]: up to about a presence period old), so a read just after a
//! change here can miss a change another node made just before it: its subscriber arrived
//! first, its window read the count before this node's change, and this node's read before
//! its report. The node whose change is newest settles it: a window read sooner than `settle`
//! after its last change is read once more then (an interval after the read at the soonest),
//! and told if the count moved. Changes stopped, the last of these reads is at least `settle`
//! after every change in the cluster, so the last count told is the cluster's.
//!
//! **Who counts.** A [`ChannelCounts`] reads the count and remembers the last one told: on one
//! node the hub's subscriber count ([`LocalCounts`]); in a cluster the cluster's, and the claim
//! that makes one node tell a channel's count per interval (herald-server's, over the Redis
//! bus: the node whose window ended first sets a short Redis key, `SET NX PX interval`; another
//! node whose window ends meanwhile tries again when that key expires, and tells the count then
//! only if it differs from the one just told, which Redis keeps too).
//!
//! **Cheap when nobody asked.** The listener asks its endpoint snapshot first (one bit while no
//! endpoint anywhere wants `subscription_count`); noting is a short lock around a map insert,
//! and the task sleeps until the soonest window ends.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use herald_core::lifecycle::app_of;
use herald_core::tenant::scoped_local;
use herald_core::ChannelName;
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::event::{EventId, EventType, HookEvent};
use crate::listener::DROPPED_METRIC;
use crate::service::{now_ms, Hooks};

/// What a [`ChannelCounts`] answers when a channel's window ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// This node tells the channel's count for this interval: the count now, and the count last
    /// told (0 when none was, or the last was 0).
    Report {
        /// Subscribers now (the cluster's in a cluster).
        count: u64,
        /// The count last told.
        last: u64,
    },
    /// Another node told (or is telling) the channel's count within the interval: look again
    /// after `retry_in`.
    Taken {
        /// When the other node's claim ends.
        retry_in: Duration,
    },
    /// The count cannot be read now (Redis does not answer): look again an interval later.
    Unavailable,
}

/// Reads channels' subscriber counts and remembers the last one told (see the [module
/// documentation](self)).
#[async_trait]
pub trait ChannelCounts: Send + Sync {
    /// Claims the telling of `channel`'s count for the next `interval`, and reads it.
    async fn claim(&self, channel: &ChannelName, interval: Duration) -> Claim;
    /// `count` was told about `channel`: the next claim's `last`.
    async fn told(&self, channel: &ChannelName, count: u64);
    /// How long after a change a count read here may still miss changes other nodes made
    /// before it (see the [module documentation](self)); `None` where a read is exact (one
    /// node).
    fn settle(&self) -> Option<Duration> {
        None
    }
}

/// One node's counts: `count` reads the hub's, the last ones told are held here (channels told
/// 0 are forgotten: 0 is what a channel nobody told about has).
pub struct LocalCounts<F> {
    count: F,
    last: Mutex<HashMap<ChannelName, u64>>,
}

impl<F: Fn(&ChannelName) -> u64 + Send + Sync> LocalCounts<F> {
    /// Counts read with `count` (the hub's `subscriber_count`).
    pub fn new(count: F) -> Self {
        LocalCounts {
            count,
            last: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl<F: Fn(&ChannelName) -> u64 + Send + Sync> ChannelCounts for LocalCounts<F> {
    async fn claim(&self, channel: &ChannelName, _interval: Duration) -> Claim {
        let last = self.last.lock().get(channel).copied().unwrap_or(0);
        Claim::Report {
            count: (self.count)(channel),
            last,
        }
    }

    async fn told(&self, channel: &ChannelName, count: u64) {
        let mut last = self.last.lock();
        if count == 0 {
            last.remove(channel);
        } else {
            last.insert(channel.clone(), count);
        }
    }
}

/// The open windows: each noted channel, when its window ends and its last change noted, in
/// milliseconds of a monotonic clock the caller keeps (see the [module documentation](self)).
#[derive(Debug, Default)]
pub struct Windows {
    /// Each channel with an open window: its end and its last change.
    ends: HashMap<ChannelName, Open>,
    /// The same ends, soonest first; an entry whose channel's end moved is skipped.
    order: BinaryHeap<Reverse<(u64, ChannelName)>>,
}

/// An open window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Open {
    end: u64,
    last_change: u64,
}

/// A window that ended: its channel and the last change noted in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The channel.
    pub channel: ChannelName,
    /// When its last change was noted.
    pub last_change_ms: u64,
}

impl Windows {
    /// A change in `channel` at `now_ms`: opens its window, ending `interval_ms` later, unless
    /// one is open (which notes it as its last change). Whether it opened one.
    pub fn note(&mut self, channel: &ChannelName, now_ms: u64, interval_ms: u64) -> bool {
        if let Some(open) = self.ends.get_mut(channel) {
            open.last_change = open.last_change.max(now_ms);
            return false;
        }
        self.open(channel.clone(), now_ms.saturating_add(interval_ms), now_ms);
        true
    }

    /// Opens `channel`'s window again, ending at `end_ms`, its last change at
    /// `last_change_ms` (its count was claimed by another node, could not be read, or must
    /// settle); a window it has meanwhile keeps the later end and the later change.
    pub fn defer(&mut self, channel: ChannelName, end_ms: u64, last_change_ms: u64) {
        let (end, last_change) = match self.ends.get(&channel) {
            Some(open) => (open.end.max(end_ms), open.last_change.max(last_change_ms)),
            None => (end_ms, last_change_ms),
        };
        self.open(channel, end, last_change);
    }

    fn open(&mut self, channel: ChannelName, end_ms: u64, last_change_ms: u64) {
        let open = Open {
            end: end_ms,
            last_change: last_change_ms,
        };
        self.ends.insert(channel.clone(), open);
        self.order.push(Reverse((end_ms, channel)));
    }

    /// The windows that ended by `now_ms`, soonest first, closed.
    pub fn take_ended(&mut self, now_ms: u64) -> Vec<Ended> {
        let mut ended = Vec::new();
        while let Some(Reverse((end, _))) = self.order.peek() {
            if *end > now_ms {
                break;
            }
            let Some(Reverse((end, channel))) = self.order.pop() else {
                break;
            };
            if let Some(open) = self.ends.get(&channel).filter(|o| o.end == end) {
                let last_change_ms = open.last_change;
                self.ends.remove(&channel);
                ended.push(Ended {
                    channel,
                    last_change_ms,
                });
            }
        }
        ended
    }

    /// When the soonest open window ends.
    pub fn next_end(&mut self) -> Option<u64> {
        while let Some(Reverse((end, channel))) = self.order.peek() {
            if self.ends.get(channel).is_some_and(|o| o.end == *end) {
                return Some(*end);
            }
            self.order.pop();
        }
        None
    }

    /// Whether no window is open.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// This node's `subscription_count` windows and the source of its counts (see the [module
/// documentation](self)).
pub struct SubscriptionCounts {
    interval: Duration,
    windows: Mutex<Windows>,
    /// Poked when the first window opens, waking the task.
    wake: Notify,
    source: OnceLock<Arc<dyn ChannelCounts>>,
    origin: tokio::time::Instant,
}

impl SubscriptionCounts {
    /// No window open, counts told at most once per `interval` per channel, no source yet.
    pub(crate) fn new(interval: Duration) -> Self {
        SubscriptionCounts {
            interval: interval.max(Duration::from_millis(1)),
            windows: Mutex::new(Windows::default()),
            wake: Notify::new(),
            source: OnceLock::new(),
            origin: tokio::time::Instant::now(),
        }
    }

    /// Sets where counts come from (once, before the server serves); `false` if set already.
    /// Without one, nothing is told.
    pub fn set_source(&self, source: Arc<dyn ChannelCounts>) -> bool {
        self.source.set(source).is_ok()
    }

    /// Whether a source is set.
    pub(crate) fn has_source(&self) -> bool {
        self.source.get().is_some()
    }

    fn interval_ms(&self) -> u64 {
        self.interval.as_millis() as u64
    }

    /// Now on the windows' clock.
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// This node saw `channel`'s subscriptions change (the listener: only notes).
    pub(crate) fn note(&self, channel: &ChannelName) {
        self.note_at(channel, self.now_ms());
    }

    pub(crate) fn note_at(&self, channel: &ChannelName, now_ms: u64) {
        let first = {
            let mut windows = self.windows.lock();
            let was_empty = windows.is_empty();
            windows.note(channel, now_ms, self.interval_ms()) && was_empty
        };
        if first {
            self.wake.notify_one();
        }
    }

    /// The windows ended by `now_ms`: each channel's count claimed and read, answered as the
    /// events to tell (`at_ms` their time); claims another node holds, and counts not read,
    /// wait in their windows again, and so does a count read before it settled.
    pub(crate) async fn tick(&self, now_ms: u64, at_ms: i64) -> Vec<HookEvent> {
        let ended = self.windows.lock().take_ended(now_ms);
        let Some(source) = self.source.get() else {
            return Vec::new();
        };
        let mut events = Vec::new();
        for Ended {
            channel,
            last_change_ms,
        } in ended
        {
            match source.claim(&channel, self.interval).await {
                Claim::Report { count, last } => {
                    if count != last {
                        source.told(&channel, count).await;
                        events.push(count_event(&channel, count, at_ms));
                    }
                    let settled_ms = source
                        .settle()
                        .map(|settle| last_change_ms.saturating_add(settle.as_millis() as u64));
                    if let Some(settled_ms) = settled_ms.filter(|s| *s > now_ms) {
                        let end = settled_ms.max(now_ms.saturating_add(self.interval_ms()));
                        self.windows.lock().defer(channel, end, last_change_ms);
                    }
                }
                Claim::Taken { retry_in } => {
                    let end = now_ms.saturating_add(retry_in.as_millis() as u64);
                    self.windows.lock().defer(channel, end, last_change_ms);
                }
                Claim::Unavailable => {
                    let end = now_ms.saturating_add(self.interval_ms());
                    self.windows.lock().defer(channel, end, last_change_ms);
                }
            }
        }
        events
    }
}

/// The `subscription_count` event about `channel` (a full name) at `at_ms`.
pub fn count_event(channel: &ChannelName, count: u64, at_ms: i64) -> HookEvent {
    let local: Box<str> = scoped_local(channel.as_str())
        .unwrap_or(channel.as_str())
        .into();
    HookEvent {
        id: EventId::new(at_ms),
        app: app_of(channel),
        kind: EventType::SubscriptionCount,
        at_ms,
        user: None,
        data: json!({ "channel": &*local, "subscription_count": count }),
        channel: Some(local),
    }
}

/// Tells the counts of the windows as they end, on the node queue, until `shutdown`.
pub(crate) async fn run_counts(hooks: Arc<Hooks>, shutdown: CancellationToken) {
    let counts = hooks.subscription_counts();
    loop {
        let events = counts.tick(counts.now_ms(), now_ms()).await;
        for event in events {
            match hooks.queue().try_send(event) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    metrics::counter!(DROPPED_METRIC, "reason" => "node_queue_full").increment(1);
                }
                Err(TrySendError::Closed(_)) => return,
            }
        }
        let next = counts.windows.lock().next_end();
        let sleep = async {
            match next {
                Some(end) => {
                    let at = counts.origin + Duration::from_millis(end);
                    tokio::time::sleep_until(at).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = counts.wake.notified() => {}
            _ = sleep => {}
        }
    }
}

#[cfg(test)]
mod tests;
