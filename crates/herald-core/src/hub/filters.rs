//! The filter registry: subscriptions to topic filters (`+`, `#`: [`TopicFilter`]) rather than
//! to one channel, per app, which the fan-out consults after a run's exact subscribers
//! ([`super::Hub::deliver_all`]). Protocol-neutral: MQTT's wildcard subscriptions are its first
//! user (docs/design/mqtt.md, "Wildcards").
//!
//! **Cost when unused.** The registry counts its filters in one atomic word; while it is zero
//! (no app has a filter subscriber) the fan-out pays one load per delivery call and nothing
//! else. Once some app has one, each run also splits its channel's app off and looks the app
//! up; an app without filters stops there.
//!
//! **Indexing.** An app's filters are kept under the first level of their literal prefixes
//! ([`TopicFilter::index_keys`]), and those starting with a wildcard in a list of their own, so
//! a run looks only at the filters that can match its channel. Matching is on the topic the
//! channel maps back to ([`crate::name::topic`]), decoded at most once per run.
//!
//! **Delivery.** A subscriber is one connection's filters in one app, with its outbox: the
//! same outbox its exact subscriptions queue to, so its writer sees one ordered stream and
//! acknowledgements work alike. A run matching several of one subscriber's filters is queued
//! once, and not at all to a subscriber that holds the channel's exact subscription too (that
//! one queues it): the protocol decides what a delivery through several subscriptions means
//! (MQTT sends it once with the highest QoS granted). Filter subscriptions are live at once: they have no
//! cursor and no catch-up. A full outbox closes as a slow consumer, as for exact subscriptions.
//!
//! **Commits before a filter** (`CommitOrder`): a publish is answered once its message is
//! committed, and the fan-out thread delivers it after that. A filter is handed only the
//! commits made after it was registered: it records the fan-out's count of commits then
//! (`Entry::after`), the fan-out never gathers the commit at such a mark together with the
//! next, and a run of a gather whose last commit is at or below an entry's mark is not queued
//! to it (one compare per matching entry and run). So a message published (and answered)
//! before a SUBSCRIBE reaches the subscriber only as what the protocol reads from the store
//! at SUBSCRIBE (MQTT's retained message, with RETAIN 1 [MQTT-3.3.1-8]; a RETAIN 0 publish
//! not at all), never live, however far behind the fan-out is. Exact subscriptions have their
//! own rule (they skip what is at or below the channel's head they start at). A share group
//! counts from when it was made: a member joining it later takes its turns in what the group
//! takes, and a repeated subscribe of a filter keeps its first mark. Without a fan-out (a
//! hub alone, in tests) and for messages from a networked bus's app feed (counted by no
//! commit here: [`Hub::deliver_filters_only`](super::Hub::deliver_filters_only)), every
//! filter registered when they are handed over takes them.
//!
//! **Shared subscriptions** ([`shared`]): a group of subscribers taking turns is one entry of
//! the index, so a run matching it is queued to one member per message; a group is not
//! skipped for a member that holds the channel's exact subscription (MQTT 5.0 4.8.2: that
//! client may receive a second copy through the group). The fan-out pays one branch per
//! matching entry for it.
//!
//! **Locking.** One read-write lock over the apps: the fan-out thread reads, filter subscribes
//! and unsubscribes write (rare next to deliveries); exact subscriptions never take it.
//!
//! **In a cluster** ([`FilterFeed`], set by a networked bus): the bus is told when an app gains
//! its first filter on this node and loses its last, so that it follows the app's feed (every
//! message of the app published on any node, [`super::Hub::deliver_filters_only`]), and a
//! subscribe waits ([`FilterRegistry::feed_ready`]) until messages published anywhere from then
//! on reach this node. A message may then arrive along its channel's stream and the app's feed
//! both: each goes to the filters once (`once`). Shared subscription groups in a cluster
//! ([`shared::holders`]) take the feed's messages only, and of them those this node owns.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;

use crate::hub::{Admit, Subscription};
use crate::message::SharedMessage;
use crate::name::topic::filter::{index_key, TopicFilter};
use crate::name::topic::{decode, ENCODED_PREFIX};
use crate::outbox::{OutFrame, Outbox};
use crate::tenant::{split_app, AppId, RESERVED};

mod once;
pub mod shared;

use shared::{GroupMembership, ShareCluster, ShareGroup};

/// One filter of one subscriber (or of one shared subscription group), as the index holds it.
#[derive(Clone)]
struct Entry {
    /// The subscriber's id, or the group's.
    subscriber: u64,
    filter: Arc<TopicFilter>,
    target: Target,
    /// The fan-out's count of commits when the filter was registered: it takes only later
    /// ones (see the module doc, "Commits before a filter").
    after: u64,
}

/// Where a matching run goes.
#[derive(Clone)]
enum Target {
    /// One subscriber's outbox (what `admit` admits, if given).
    Subscriber {
        outbox: Arc<Outbox>,
        admit: Option<Admit>,
    },
    /// One member of a shared subscription group per message.
    Group(Arc<ShareGroup>),
}

/// One app's filters, indexed.
#[derive(Default)]
struct AppFilters {
    /// Filters by the first level of their literal prefix.
    by_key: HashMap<Box<str>, Vec<Entry>>,
    /// Filters whose first level is a wildcard: looked at for every channel of the app.
    rooted: Vec<Entry>,
    /// The app's shared subscription groups (each also in the index above).
    groups: Vec<Arc<ShareGroup>>,
}

impl AppFilters {
    fn is_empty(&self) -> bool {
        self.rooted.is_empty() && self.by_key.is_empty() && self.groups.is_empty()
    }

    fn insert(&mut self, entry: &Entry) -> usize {
        let mut n = 0;
        for key in entry.filter.index_keys() {
            n += 1;
            match key {
                None => self.rooted.push(entry.clone()),
                Some(key) => self
                    .by_key
                    .entry(key.into())
                    .or_default()
                    .push(entry.clone()),
            }
        }
        n
    }

    fn remove(&mut self, subscriber: u64, filter: &TopicFilter) -> usize {
        let is_it = |e: &Entry| e.subscriber == subscriber && *e.filter == *filter;
        let mut n = 0;
        for key in filter.index_keys() {
            let list = match key {
                None => &mut self.rooted,
                Some(key) => match self.by_key.get_mut(key) {
                    Some(list) => list,
                    None => continue,
                },
            };
            if let Some(at) = list.iter().position(is_it) {
                list.swap_remove(at);
                n += 1;
            }
            if let Some(key) = key.filter(|_| list.is_empty()) {
                self.by_key.remove(key);
            }
        }
        n
    }
}

/// A networked bus's side of the filters (see the module doc): told which apps have filters
/// on this node, and asked to wait until an app's messages published on any node reach it.
#[async_trait::async_trait]
pub trait FilterFeed: Send + Sync {
    /// `app` has its first filter (or shared subscription group) on this node. Called under
    /// the registry's lock: it must only note the change.
    fn gained(&self, app: &str);
    /// `app`'s last filter on this node is gone. Called under the registry's lock likewise.
    fn lost(&self, app: &str);
    /// Returns once every message of `app` published on any node from now on reaches this
    /// node's filters (bounded by the bus: a node that does not answer is not waited for).
    async fn ready(&self, app: &str);
}

/// The fan-out's order of commits, which a filter is registered at (see the module doc,
/// "Commits before a filter").
pub(crate) trait CommitOrder: Send + Sync {
    /// The count of commits handed to the fan-out so far; from now on the fan-out delivers
    /// no gather holding both the commit at this count and the next.
    fn mark(&self) -> u64;
}

/// What [`FilterRegistry::deliver_run`] passes for a run counted by no commit: every filter
/// registered now takes it.
pub(crate) const UNCOUNTED: u64 = u64::MAX;

/// The filter subscriptions of every app on this node (see the module doc).
#[derive(Default)]
pub struct FilterRegistry {
    /// Index entries over every app: zero lets the fan-out skip with one load.
    entries: AtomicUsize,
    next_id: AtomicU64,
    apps: RwLock<HashMap<Box<str>, AppFilters>>,
    /// The networked bus feeding the filters, if any.
    feed: OnceLock<Arc<dyn FilterFeed>>,
    /// Set with `feed`: what was handed to the filters, so a message reaching them along two
    /// paths goes once.
    once: OnceLock<once::DeliveredOnce>,
    /// The networked bus balancing share groups across the cluster, if any.
    shares: OnceLock<Arc<dyn ShareCluster>>,
    /// The fan-out feeding the hub, whose count of commits filters are registered at.
    order: OnceLock<Arc<dyn CommitOrder>>,
}

impl FilterRegistry {
    /// An empty registry.
    pub fn new() -> Arc<FilterRegistry> {
        Arc::new(FilterRegistry::default())
    }

    /// A subscriber with no filter yet: one connection's filter subscriptions in `app`,
    /// queued to `outbox`. Dropping it removes its filters.
    /// `admit`, if given, is asked about each message before it is queued (an anonymous MQTT
    /// client's deny rules, checked per delivery).
    pub fn subscriber(
        self: &Arc<Self>,
        app: &AppId,
        outbox: Arc<Outbox>,
        admit: Option<Admit>,
    ) -> FilterSubscriber {
        FilterSubscriber {
            registry: self.clone(),
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            app: app.as_str().into(),
            outbox,
            admit,
            filters: Vec::new(),
        }
    }

    /// Makes `feed` the bus told of the apps with filters here (see the module doc), and hands
    /// each message to the filters once from now on, whatever number of paths bring it. Set
    /// before any filter is registered; `false` if a feed was set already.
    pub fn set_feed(&self, feed: Arc<dyn FilterFeed>) -> bool {
        let _ = self.once.set(once::DeliveredOnce::new());
        self.feed.set(feed).is_ok()
    }

    /// Makes `cluster` the bus that balances share groups across the cluster
    /// ([`shared::holders`]); set with the feed, before any group is made. `false` if one was
    /// set already.
    pub fn set_share_cluster(&self, cluster: Arc<dyn ShareCluster>) -> bool {
        self.shares.set(cluster).is_ok()
    }

    /// Makes `order` the count of commits filters are registered at (the fan-out's, set when
    /// it starts, before any filter is registered).
    pub(crate) fn set_commit_order(&self, order: Arc<dyn CommitOrder>) {
        let _ = self.order.set(order);
    }

    /// The fan-out's count of commits now (0 without one); called under the registry's write
    /// lock, so that no gather is delivered between the mark and the entry's insert.
    fn mark(&self) -> u64 {
        self.order.get().map_or(0, |order| order.mark())
    }

    /// The bus balancing share groups across the cluster, if any.
    pub(crate) fn share_cluster(&self) -> Option<&Arc<dyn ShareCluster>> {
        self.shares.get()
    }

    /// Queues `message`, which another node handed here, to a member of `app`'s group
    /// `share_name` on `filter` (its text) on this node, whoever owns it; whether one took it.
    pub fn give_to_group(
        &self,
        app: &str,
        share_name: &str,
        filter: &str,
        message: &SharedMessage,
    ) -> bool {
        let apps = self.apps.read();
        apps.get(app)
            .and_then(|f| {
                f.groups
                    .iter()
                    .find(|g| &*g.share_name == share_name && g.filter.as_str() == filter)
            })
            .is_some_and(|group| group.take_handed(message))
    }

    /// Waits until `app`'s messages published on any node reach this node's filters (at once
    /// without a networked bus): a subscribe to a filter answers after it.
    pub async fn feed_ready(&self, app: &AppId) {
        if let Some(feed) = self.feed.get() {
            feed.ready(app.as_str()).await;
        }
    }

    /// Whether any app has a filter: the one load the fan-out pays while none has.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.entries.load(Ordering::Acquire) != 0
    }

    /// Queues `run` (consecutive messages of one channel, in order) once to every subscriber
    /// of the channel's app with a filter matching the channel; returns the deliveries queued
    /// (messages times subscribers).
    ///
    /// A subscriber that also holds one of `exact` (the channel's own subscriptions on this
    /// node: its outbox is theirs) gets the run through that subscription only, so a
    /// connection subscribed to a channel and to a filter matching it receives each message
    /// once; and a run its [`Admit`] refuses a message of is queued without it.
    ///
    /// `from_feed`: the run came from the app's feed ([`super::Hub::deliver_filters_only`]),
    /// the only path a share group in a cluster takes (see the module doc). `commit`: the
    /// fan-out's count of the last commit of the gather holding the run ([`UNCOUNTED`] if
    /// none): an entry registered at or after it does not take the run.
    pub(crate) fn deliver_run(
        &self,
        run: &[SharedMessage],
        exact: &[Arc<Subscription>],
        from_feed: bool,
        commit: u64,
    ) -> u64 {
        let Some(last) = run.last() else {
            return 0;
        };
        let (app, local) = split_app(last.channel.as_str());
        if local.starts_with(RESERVED) {
            return 0; // a push log: no topic
        }
        let apps = self.apps.read();
        let Some(filters) = apps.get(app) else {
            return 0;
        };
        let keyed = filters.by_key.get(index_key(local));
        let mut topic: Option<Cow<'_, str>> = None;
        let mut matched: Vec<&Entry> = Vec::new();
        for entry in filters.rooted.iter().chain(keyed.into_iter().flatten()) {
            if entry.after >= commit {
                continue; // committed before the filter was registered
            }
            if !entry.filter.prefixes().any(|p| local.starts_with(p)) {
                continue;
            }
            let topic = topic.get_or_insert_with(|| {
                if local.starts_with(ENCODED_PREFIX) {
                    decode(local).unwrap_or(Cow::Borrowed(""))
                } else {
                    Cow::Borrowed(local)
                }
            });
            if !topic.is_empty() && entry.filter.matches_topic(topic) {
                matched.push(entry);
            }
        }
        if matched.is_empty() {
            return 0;
        }
        matched.sort_unstable_by_key(|e| e.subscriber);
        matched.dedup_by_key(|e| e.subscriber);
        let mut queued = 0;
        // A group in a cluster takes the feed's run as it is (the feed brings each message
        // once); the others what no other path brought before.
        let (clustered, others): (Vec<&Entry>, Vec<&Entry>) = matched
            .into_iter()
            .partition(|e| matches!(&e.target, Target::Group(g) if g.holders.is_some()));
        for entry in clustered {
            if let Target::Group(group) = &entry.target {
                queued += group.deliver_run(run, from_feed);
            }
        }
        if others.is_empty() {
            return queued as u64;
        }
        let fresh;
        let run = match self.once.get() {
            Some(once) => {
                fresh = once.take_new(run);
                if fresh.is_empty() {
                    return queued as u64;
                }
                &fresh[..]
            }
            None => run,
        };
        for entry in others {
            let (outbox, admit) = match &entry.target {
                Target::Subscriber { outbox, admit } => (outbox, admit),
                Target::Group(group) => {
                    queued += group.deliver_run(run, from_feed);
                    continue;
                }
            };
            if exact.iter().any(|sub| Arc::ptr_eq(sub.outbox(), outbox)) {
                continue;
            }
            let admit = |m: &&SharedMessage| admit.as_ref().is_none_or(|admit| admit(m));
            queued += outbox.push_many(
                run.iter()
                    .filter(admit)
                    .map(|m| OutFrame::Message(m.clone())),
            );
        }
        queued as u64
    }

    /// Filters registered in `app` (all subscribers).
    pub fn count(&self, app: &AppId) -> usize {
        self.apps.read().get(app.as_str()).map_or(0, |f| {
            f.rooted.len() + f.by_key.values().map(Vec::len).sum::<usize>()
        })
    }

    /// Makes `outbox` a member of `app`'s shared subscription group `share_name` on `filter`
    /// (the group made with its first member); `admit`, if given, is asked about each message
    /// before it is queued to this member. Dropping the membership (or
    /// [`GroupMembership::leave`]) takes it out.
    pub fn join_group(
        self: &Arc<Self>,
        app: &AppId,
        share_name: &str,
        filter: TopicFilter,
        outbox: Arc<Outbox>,
        admit: Option<Admit>,
    ) -> GroupMembership {
        let member = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut apps = self.apps.write();
        self.tell_gained(&apps, app.as_str());
        let filters = apps.entry(app.as_str().into()).or_default();
        let found = filters
            .groups
            .iter()
            .find(|g| &*g.share_name == share_name && g.filter.as_str() == filter.as_str())
            .cloned();
        let group = match found {
            Some(group) => group,
            None => {
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                let filter = Arc::new(filter);
                let holders = self
                    .shares
                    .get()
                    .map(|cluster| cluster.joined(app.as_str(), share_name, &filter));
                let group = Arc::new(ShareGroup::new(id, share_name, filter, holders));
                let n = filters.insert(&Entry {
                    subscriber: id,
                    filter: group.filter.clone(),
                    target: Target::Group(group.clone()),
                    after: self.mark(),
                });
                filters.groups.push(group.clone());
                self.entries.fetch_add(n, Ordering::Release);
                group
            }
        };
        group.join(member, outbox, admit);
        GroupMembership {
            registry: self.clone(),
            app: app.as_str().into(),
            member,
            group: Some(group),
        }
    }

    /// Takes `member` out of `group`, and the group out of the index with its last member.
    fn leave_group(&self, app: &str, group: &Arc<ShareGroup>, member: u64) {
        let mut apps = self.apps.write();
        if !group.remove(member) {
            return;
        }
        let Some(filters) = apps.get_mut(app) else {
            return;
        };
        filters.groups.retain(|g| !Arc::ptr_eq(g, group));
        if let (Some(cluster), Some(_)) = (self.shares.get(), &group.holders) {
            cluster.left(app, &group.share_name, &group.filter);
        }
        let n = filters.remove(group.id, &group.filter);
        if filters.is_empty() {
            apps.remove(app);
            self.tell_lost(app);
        }
        self.entries.fetch_sub(n, Ordering::Release);
    }

    /// Tells the feed (if any) that `app` gains its first filter, if `apps` holds none of it.
    fn tell_gained(&self, apps: &HashMap<Box<str>, AppFilters>, app: &str) {
        if let Some(feed) = self.feed.get().filter(|_| !apps.contains_key(app)) {
            feed.gained(app);
        }
    }

    fn tell_lost(&self, app: &str) {
        if let Some(feed) = self.feed.get() {
            feed.lost(app);
        }
    }

    /// Inserts `entry` (its [`Entry::after`] set here, under the lock).
    fn insert(&self, app: &str, mut entry: Entry) {
        let mut apps = self.apps.write();
        entry.after = self.mark();
        self.tell_gained(&apps, app);
        let n = apps.entry(app.into()).or_default().insert(&entry);
        self.entries.fetch_add(n, Ordering::Release);
    }

    fn remove(&self, app: &str, subscriber: u64, filter: &TopicFilter) {
        let mut apps = self.apps.write();
        let Some(filters) = apps.get_mut(app) else {
            return;
        };
        let n = filters.remove(subscriber, filter);
        if filters.is_empty() {
            apps.remove(app);
            self.tell_lost(app);
        }
        self.entries.fetch_sub(n, Ordering::Release);
    }
}

/// One connection's filter subscriptions in one app (made by [`FilterRegistry::subscriber`]).
/// Dropping it removes them all.
pub struct FilterSubscriber {
    registry: Arc<FilterRegistry>,
    id: u64,
    app: Box<str>,
    outbox: Arc<Outbox>,
    admit: Option<Admit>,
    filters: Vec<Arc<TopicFilter>>,
}

impl FilterSubscriber {
    /// Subscribes `filter`, for the commits made from now on (see the module doc, "Commits
    /// before a filter"); `false` (and nothing changes) if this subscriber holds it already.
    pub fn add(&mut self, filter: TopicFilter) -> bool {
        if self.holds(filter.as_str()) {
            return false;
        }
        let filter = Arc::new(filter);
        self.registry.insert(
            &self.app,
            Entry {
                subscriber: self.id,
                filter: filter.clone(),
                target: Target::Subscriber {
                    outbox: self.outbox.clone(),
                    admit: self.admit.clone(),
                },
                after: 0,
            },
        );
        self.filters.push(filter);
        true
    }

    /// Ends the subscription to `filter` (its text); `false` if there was none.
    pub fn remove(&mut self, filter: &str) -> bool {
        let Some(at) = self.filters.iter().position(|f| f.as_str() == filter) else {
            return false;
        };
        let gone = self.filters.swap_remove(at);
        self.registry.remove(&self.app, self.id, &gone);
        true
    }

    /// Whether this subscriber holds `filter` (its text).
    pub fn holds(&self, filter: &str) -> bool {
        self.filters.iter().any(|f| f.as_str() == filter)
    }

    /// The filters held, in no particular order.
    pub fn filters(&self) -> impl Iterator<Item = &TopicFilter> {
        self.filters.iter().map(|f| &**f)
    }

    /// How many filters are held.
    pub fn len(&self) -> usize {
        self.filters.len()
    }

    /// Whether no filter is held.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }
}

impl Drop for FilterSubscriber {
    fn drop(&mut self) {
        for filter in std::mem::take(&mut self.filters) {
            self.registry.remove(&self.app, self.id, &filter);
        }
    }
}

#[cfg(test)]
mod tests;
