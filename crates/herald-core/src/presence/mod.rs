//! Presence channels: who is on a channel of a presence namespace
//! ([`crate::namespace::NamespaceOptions::presence`]). A member is a user id (the client
//! token's `sub`) with its data (a JSON object); a user is one member however many
//! subscriptions (and connections) it holds on the channel: added at its first, removed at its
//! last, its data the first one's. This module owns the registry of this node's members per
//! channel ([`Presence`], kept by the hub, [`crate::hub::Hub::presence`]), each subscription's
//! share of it ([`Membership`], which the subscription holds and gives back when it ends), the
//! limits ([`PresenceLimits`]) and the member data's checks ([`member_data`]), and the
//! `presence` frames (`frames.rs`).
//!
//! **Ordered by one lock per channel** (a shard of the registry's): a member added or removed,
//! its `join`/`leave` frame handed to the channel's watchers (the subscriptions that asked for
//! presence frames) and its lifecycle event
//! ([`crate::lifecycle::LifecycleEvent::MemberAdded`], `MemberRemoved`) all happen under it, so
//! a watcher's `members` list and the joins and leaves after it never disagree, and listeners
//! hear a channel's changes in order. The lock is taken after the hub's shard lock when both
//! are (an unsubscribe), never before.
//!
//! **Live state**: frames go straight to the watchers' outboxes, encoded once per change; they
//! are never stored in the channel's log nor resumed. A client resyncs by subscribing again: the
//! `members` list comes first on every subscribe that asks.
//!
//! **The cluster seam**: every change this node makes passes through a [`PresenceRelay`] when a
//! networked bus set one ([`Presence::set_relay`]), as lifecycle events pass through
//! [`crate::lifecycle::Relay`]: it may deliver it at once ([`Relayed::Deliver`]) or hold it and
//! deliver the cluster's changes itself ([`Presence::deliver`], or [`Presence::deliver_frame`]
//! for the frames alone, each change's frame on every node, its event on one). A relay that
//! holds may also judge a join against the cluster's members ([`PresenceRelay::admission`],
//! awaited by [`Membership::admitted`]) and answer the cluster's members list
//! ([`PresenceRelay::members`]: a watcher's `members` frame, [`Presence::listed`]). Without a
//! relay (one node) every change is this node's and delivered at once, and the lists are this
//! node's.
//!
//! **Cheap elsewhere**: a channel outside presence namespaces costs the subscribe path one
//! branch on its namespace option, and the unsubscribe path one relaxed load.

mod frames;

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::error::{ErrorCode, HeraldError};
use crate::lifecycle::{Kinds, Lifecycle, LifecycleEvent, Relayed};
use crate::name::ChannelName;
use crate::outbox::{OutFrame, Outbox};

pub use frames::{frame_body, is_members_frame, members_frame};

/// Default of `presence_max_members`: members one presence channel holds at most.
pub const DEFAULT_MAX_MEMBERS: u32 = 1_000;
/// Default of `presence_max_data_bytes`: the largest member data, as JSON text.
pub const DEFAULT_MAX_DATA_BYTES: u32 = 1_024;

/// The limits of a presence namespace's channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PresenceLimits {
    /// Members one channel holds at most; a subscribe that would add one more is refused
    /// (`limit_exceeded`).
    pub max_members: u32,
    /// The largest member data, in bytes of JSON text (`too_large` past it).
    pub max_data_bytes: u32,
}

impl Default for PresenceLimits {
    fn default() -> Self {
        PresenceLimits {
            max_members: DEFAULT_MAX_MEMBERS,
            max_data_bytes: DEFAULT_MAX_DATA_BYTES,
        }
    }
}

/// One member: its user id and data (a JSON object's text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The user id (the token's `sub`).
    pub user: Box<str>,
    /// The member's data, a JSON object's text.
    pub data: Arc<str>,
}

/// A change of a channel's members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberChange {
    /// `user` became a member, with `data`.
    Added {
        /// The user id.
        user: Box<str>,
        /// Its data, a JSON object's text.
        data: Arc<str>,
    },
    /// `user` is no member any more.
    Removed {
        /// The user id.
        user: Box<str>,
    },
}

/// An answer a relay gives later (a round trip to the cluster's records).
pub type Pending<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A channel's members across the cluster, in the order they joined, and the version of the
/// last change they include: the frames [`Presence::deliver_frame`] delivers with a later
/// version follow them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listed {
    /// The members, in the order they joined.
    pub members: Vec<Member>,
    /// The version of the last change the list includes.
    pub version: u64,
}

/// Stands between this node's member changes and their delivery (frames to watchers, lifecycle
/// events) in a cluster; set by a networked bus ([`Presence::set_relay`]). Called under the
/// channel's presence lock: it must only note or queue.
pub trait PresenceRelay: Send + Sync {
    /// This node changed `channel`'s members: deliver now, or hold (the relay then delivers
    /// the cluster's changes with [`Presence::deliver`] or [`Presence::deliver_frame`]).
    fn relay(&self, channel: &ChannelName, change: &MemberChange) -> Relayed;

    /// `user` joined `channel` with `data` on this node, new here (its change just relayed) or
    /// while the cluster's verdict on its first subscription here is still awaited: the
    /// cluster's verdict within `limits` (`limit_exceeded` when the channel is full across
    /// nodes), awaited by [`Membership::admitted`]. `None` (the default): admitted. Called
    /// under the channel's presence lock (after [`PresenceRelay::relay`] for a new user), in
    /// the order of the changes: it must only note or queue.
    fn admission(
        &self,
        _channel: &ChannelName,
        _user: &str,
        _data: &Arc<str>,
        _limits: &PresenceLimits,
    ) -> Option<Pending<Result<(), HeraldError>>> {
        None
    }

    /// `channel`'s members across the cluster; `None` (the default): this node's are the
    /// channel's.
    fn members(&self, _channel: &ChannelName) -> Option<Pending<Result<Listed, HeraldError>>> {
        None
    }
}

/// The member data for a subscribe: the token's `user_info` claim if it has one, else the
/// subscribe's `member` (supplied by the client), else `{}`; either must be a JSON object of at
/// most `limits.max_data_bytes` bytes (`bad_request`, `too_large` naming the limit).
pub fn member_data(
    user_info: Option<&str>,
    member: Option<&str>,
    limits: &PresenceLimits,
) -> Result<Arc<str>, HeraldError> {
    let (text, source) = match (user_info, member) {
        (Some(claim), _) => (claim.trim(), "the token's user_info claim"),
        (None, Some(given)) => (given.trim(), "the subscribe's member"),
        (None, None) => return Ok(Arc::from("{}")),
    };
    let object =
        text.starts_with('{') && serde_json::from_str::<&serde_json::value::RawValue>(text).is_ok();
    if !object {
        return Err(HeraldError::bad_request(format!(
            "{source} must be a JSON object"
        )));
    }
    let text = herald_proto::token::compact_json(text);
    if text.len() > limits.max_data_bytes as usize {
        return Err(HeraldError::new(
            ErrorCode::TooLarge,
            format!(
                "{source} is {} bytes of JSON; this channel's member data may be at most {} \
                 bytes (presence_max_data_bytes)",
                text.len(),
                limits.max_data_bytes
            ),
        ));
    }
    Ok(Arc::from(text))
}

/// One member on one channel of this node.
struct Entry {
    /// Subscriptions (and holds) of the user on the channel.
    holds: u32,
    data: Arc<str>,
    /// When it joined, in the channel's order.
    order: u64,
    /// Whether the relay admitted it (always, without one): until then each further
    /// subscription of the user asks the relay too.
    admitted: Arc<AtomicBool>,
}

/// A subscription that asked for presence frames.
struct Watcher {
    id: u64,
    outbox: Arc<Outbox>,
    /// The version of the last change its `members` list included (0 on one node): older
    /// frames are not sent to it.
    since: u64,
}

/// Frames of a relay's changes a roster keeps, for a watcher whose list is older.
const RECENT: usize = 64;

/// One channel's members and watchers.
#[derive(Default)]
struct Roster {
    members: HashMap<Box<str>, Entry>,
    next_order: u64,
    /// The subscriptions that asked for presence frames.
    watchers: Vec<Watcher>,
    /// The version of the last change delivered by [`Presence::deliver_frame`].
    version: u64,
    /// Its last frames, by version.
    recent: VecDeque<(u64, Bytes)>,
}

impl Roster {
    fn listed(&self) -> Vec<Member> {
        let mut members: Vec<(&Box<str>, &Entry)> = self.members.iter().collect();
        members.sort_unstable_by_key(|(_, e)| e.order);
        members
            .into_iter()
            .map(|(user, e)| Member {
                user: user.clone(),
                data: e.data.clone(),
            })
            .collect()
    }

    fn send(&self, frame: &Bytes) {
        for watcher in &self.watchers {
            watcher.outbox.push(OutFrame::Presence(frame.clone()));
        }
    }
}

const SHARDS: usize = 16;

/// This node's presence registry: each presence channel's members and watchers.
pub struct Presence {
    shards: Box<[Mutex<HashMap<ChannelName, Roster>>]>,
    hasher: RandomState,
    next_watch: AtomicU64,
    lifecycle: Arc<Lifecycle>,
    relay: OnceLock<Arc<dyn PresenceRelay>>,
}

impl Presence {
    /// An empty registry whose changes are told to `lifecycle`'s listeners.
    pub fn new(lifecycle: Arc<Lifecycle>) -> Arc<Presence> {
        Arc::new(Presence {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            next_watch: AtomicU64::new(1),
            lifecycle,
            relay: OnceLock::new(),
        })
    }

    /// Sets the relay this node's changes pass through (a networked bus); `false` if one was
    /// already set.
    pub fn set_relay(&self, relay: Arc<dyn PresenceRelay>) -> bool {
        self.relay.set(relay).is_ok()
    }

    fn shard(&self, channel: &ChannelName) -> &Mutex<HashMap<ChannelName, Roster>> {
        &self.shards[self.hasher.hash_one(channel.as_str()) as usize % SHARDS]
    }

    /// Adds a subscription of `user` to `channel`'s members: the user joins with `data` if it
    /// was no member, within `limits` (`limit_exceeded` when the channel is full); otherwise
    /// only its count grows (its data stays the first subscription's). The [`Membership`] gives
    /// the subscription back when dropped.
    pub fn join(
        self: &Arc<Self>,
        channel: &ChannelName,
        limits: &PresenceLimits,
        user: &str,
        data: Arc<str>,
    ) -> Result<Membership, HeraldError> {
        let mut shard = self.shard(channel).lock();
        let roster = shard.entry(channel.clone()).or_default();
        let full = roster.members.len() >= limits.max_members as usize;
        let relay = self.relay.get();
        let mut admission = None;
        match roster.members.get_mut(user) {
            Some(entry) => {
                entry.holds += 1;
                if !entry.admitted.load(Ordering::Acquire) {
                    admission = relay
                        .and_then(|r| r.admission(channel, user, &entry.data, limits))
                        .map(|verdict| Judged {
                            verdict,
                            admitted: entry.admitted.clone(),
                        });
                }
            }
            None if full => {
                if roster.members.is_empty() && roster.watchers.is_empty() {
                    shard.remove(channel);
                }
                return Err(HeraldError::new(
                    ErrorCode::LimitExceeded,
                    format!(
                        "the presence channel {:?} is full: it has its {} members \
                         (presence_max_members)",
                        channel.public(),
                        limits.max_members
                    ),
                ));
            }
            None => {
                let order = roster.next_order;
                roster.next_order += 1;
                let admitted = Arc::new(AtomicBool::new(relay.is_none()));
                roster.members.insert(
                    user.into(),
                    Entry {
                        holds: 1,
                        data: data.clone(),
                        order,
                        admitted: admitted.clone(),
                    },
                );
                let change = MemberChange::Added {
                    user: user.into(),
                    data: data.clone(),
                };
                self.changed(channel, roster, change);
                admission = relay
                    .and_then(|r| r.admission(channel, user, &data, limits))
                    .map(|verdict| Judged { verdict, admitted });
                if admission.is_none() {
                    // No verdict to await: admitted.
                    if let Some(entry) = roster.members.get(user) {
                        entry.admitted.store(true, Ordering::Release);
                    }
                }
            }
        }
        Ok(Membership {
            presence: self.clone(),
            channel: channel.clone(),
            user: user.into(),
            watch: None,
            admission,
        })
    }

    /// A share of `channel` that is no member: for a subscription that only watches its
    /// members ([`Membership::watch`]; Pusher's watchlists). It adds no one, and dropping it
    /// stops the watch. (No user id is empty, so its empty user is nobody's.)
    pub fn observe(self: &Arc<Self>, channel: &ChannelName) -> Membership {
        Membership {
            presence: self.clone(),
            channel: channel.clone(),
            user: "".into(),
            watch: None,
            admission: None,
        }
    }

    /// A change this node made, under the channel's lock: through the relay, if any, then to
    /// the watchers and the lifecycle listeners.
    fn changed(&self, channel: &ChannelName, roster: &Roster, change: MemberChange) {
        if let Some(relay) = self.relay.get() {
            if relay.relay(channel, &change) == Relayed::Held {
                return;
            }
        }
        roster.send(&frames::change_frame(channel, &change));
        let kind = match change {
            MemberChange::Added { .. } => Kinds::MEMBER_ADDED,
            MemberChange::Removed { .. } => Kinds::MEMBER_REMOVED,
        };
        if self.lifecycle.emits(kind) {
            self.lifecycle.emit(event(channel, change));
        }
    }

    /// Delivers a change the relay decided on (a cluster's): the frame to this node's watchers
    /// of `channel` and the event to this node's lifecycle listeners, bypassing the relay.
    pub fn deliver(&self, channel: &ChannelName, change: MemberChange) {
        let shard = self.shard(channel).lock();
        if let Some(roster) = shard.get(channel) {
            roster.send(&frames::change_frame(channel, &change));
        }
        self.lifecycle.deliver(&event(channel, change));
    }

    /// Delivers the frame of a cluster's change, the `version`th of `channel`'s (increasing in
    /// the order the changes happened), to this node's watchers whose `members` list did not
    /// include it; a version already delivered is dropped. Its lifecycle event is the relay's
    /// to deliver, on one node.
    pub fn deliver_frame(&self, channel: &ChannelName, change: &MemberChange, version: u64) {
        let mut shard = self.shard(channel).lock();
        let Some(roster) = shard.get_mut(channel) else {
            return;
        };
        if version <= roster.version {
            return;
        }
        roster.version = version;
        let frame = frames::change_frame(channel, change);
        for watcher in roster.watchers.iter().filter(|w| w.since < version) {
            watcher.outbox.push(OutFrame::Presence(frame.clone()));
        }
        if roster.recent.len() == RECENT {
            roster.recent.pop_front();
        }
        roster.recent.push_back((version, frame));
    }

    /// `channel`'s members across the cluster (the relay's list, or this node's without one or
    /// when the relay cannot answer), in the order they joined.
    pub async fn listed(&self, channel: &ChannelName) -> Vec<Member> {
        match self.cluster_list(channel).await {
            Some(listed) => listed.members,
            None => self.members(channel).unwrap_or_default(),
        }
    }

    /// The relay's list, if it has one and answers.
    async fn cluster_list(&self, channel: &ChannelName) -> Option<Listed> {
        let pending = self.relay.get()?.members(channel)?;
        match pending.await {
            Ok(listed) => Some(listed),
            Err(error) => {
                tracing::debug!(%error, "the cluster's presence list did not answer; this node's");
                None
            }
        }
    }

    /// `channel`'s members on this node, in the order they joined; `None` if it has none.
    pub fn members(&self, channel: &ChannelName) -> Option<Vec<Member>> {
        let shard = self.shard(channel).lock();
        shard
            .get(channel)
            .filter(|r| !r.members.is_empty())
            .map(Roster::listed)
    }

    /// Gives back one subscription of `user` (see [`Membership`]'s drop).
    fn leave(&self, channel: &ChannelName, user: &str, watch: Option<u64>) {
        let mut shard = self.shard(channel).lock();
        let Some(roster) = shard.get_mut(channel) else {
            return;
        };
        if let Some(id) = watch {
            roster.watchers.retain(|w| w.id != id);
        }
        if let Some(entry) = roster.members.get_mut(user) {
            entry.holds -= 1;
            if entry.holds == 0 {
                roster.members.remove(user);
                let change = MemberChange::Removed { user: user.into() };
                self.changed(channel, roster, change);
            }
        }
        if roster.members.is_empty() && roster.watchers.is_empty() {
            shard.remove(channel);
        }
    }

    /// Queues `channel`'s `members` frame to `outbox` (the cluster's list when a relay has
    /// one), then each change to it as it happens; returns the watch's id.
    async fn watch(&self, channel: &ChannelName, outbox: &Arc<Outbox>) -> u64 {
        let id = self.next_watch.fetch_add(1, Ordering::Relaxed);
        let cluster = self.cluster_list(channel).await;
        let mut shard = self.shard(channel).lock();
        let roster = shard.entry(channel.clone()).or_default();
        let (members, since) = match cluster {
            Some(listed) => (listed.members, listed.version),
            None => (roster.listed(), roster.version),
        };
        // Outside the slow-consumer limit, as a catch-up is: the limits bound it. Then the
        // changes delivered here since the list was read.
        let later = roster.recent.iter().filter(|(v, _)| *v > since);
        let frames = std::iter::once(members_frame(channel, &members))
            .chain(later.map(|(_, frame)| frame.clone()))
            .map(OutFrame::Presence);
        outbox.push_all_unbounded(frames);
        roster.watchers.push(Watcher {
            id,
            outbox: outbox.clone(),
            since: since.max(roster.version),
        });
        id
    }

    fn unwatch(&self, channel: &ChannelName, id: u64) {
        let mut shard = self.shard(channel).lock();
        if let Some(roster) = shard.get_mut(channel) {
            roster.watchers.retain(|w| w.id != id);
        }
    }
}

fn event(channel: &ChannelName, change: MemberChange) -> LifecycleEvent {
    match change {
        MemberChange::Added { user, data } => LifecycleEvent::MemberAdded {
            channel: channel.clone(),
            user,
            data,
        },
        MemberChange::Removed { user } => LifecycleEvent::MemberRemoved {
            channel: channel.clone(),
            user,
        },
    }
}

/// One subscription's share of a channel's members (its user's count), and its watch if it
/// asked for presence frames. Dropping it gives the share back: the user leaves with its last.
pub struct Membership {
    presence: Arc<Presence>,
    channel: ChannelName,
    user: Box<str>,
    watch: Option<u64>,
    /// The cluster's verdict on the join, until [`Membership::admitted`] took it.
    admission: Option<Judged>,
}

/// A verdict a relay gives on a join, and the member's flag it sets.
struct Judged {
    verdict: Pending<Result<(), HeraldError>>,
    admitted: Arc<AtomicBool>,
}

impl Membership {
    /// The user id (empty for [`Presence::observe`]'s share, which is no member).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The membership once the cluster admitted its join (at once on one node, or when the
    /// user was a member here already); the relay's refusal (`limit_exceeded` when the
    /// channel is full across nodes) gives the share back.
    pub async fn admitted(mut self) -> Result<Membership, HeraldError> {
        if let Some(judged) = self.admission.take() {
            judged.verdict.await?;
            judged.admitted.store(true, Ordering::Release);
        }
        Ok(self)
    }

    /// Sends the channel's `members` frame to `outbox` now (the cluster's in a cluster), then
    /// its joins and leaves (once).
    pub async fn watch(&mut self, outbox: &Arc<Outbox>) {
        if self.watch.is_none() {
            self.watch = Some(self.presence.watch(&self.channel, outbox).await);
        }
    }

    /// Stops the frames [`Membership::watch`] asked for (the share stays).
    pub fn unwatch(&mut self) {
        if let Some(id) = self.watch.take() {
            self.presence.unwatch(&self.channel, id);
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.presence
            .leave(&self.channel, &self.user, self.watch.take());
    }
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("channel", &self.channel)
            .field("user", &self.user)
            .field("watch", &self.watch)
            .finish()
    }
}

#[cfg(test)]
mod tests;
