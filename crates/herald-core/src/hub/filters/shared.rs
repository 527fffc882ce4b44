//! Shared subscription groups (MQTT 5.0 4.8.2, `$share/{ShareName}/{filter}`; docs/mqtt.md,
//! "Shared subscriptions"): subscribers that take turns receiving the messages matching one
//! filter, so each message goes to **one** member of the group (in the cluster, with a
//! networked bus: see below).
//!
//! A group is registered in the filter registry's index as one entry (its filter, a filter
//! without wildcards naming one topic allowed: [`TopicFilter::parse_any`]), so the fan-out
//! finds it as it finds a filter subscriber, and the only cost it adds to a run without shared
//! subscribers is one branch per matching filter entry. A group is per app, share name and
//! filter (`$share/g/a/+` and `$share/g/a/#` are two groups; so are `$share/g/x` and
//! `$share/h/x`, each receiving every message).
//!
//! **Balance.** Round-robin, per message: a run of messages of one channel is spread over the
//! members in turn. A member whose outbox is closed (its connection ending) or refuses the
//! message (full: it closes as a slow consumer) is passed over for the next one; a member whose
//! [`Admit`] refuses a message is passed over too. A message no member takes is dropped.
//!
//! **Leaving.** [`GroupMembership::leave`] takes the member out of the group (the group out of
//! the index with its last member) and returns the group, to which the protocol hands what its
//! member had not acknowledged ([`LeftGroup::hand_over`]): another member, if one is left, gets
//! it. Dropping a membership leaves too, handing nothing over.
//!
//! **In a cluster** ([`holders`]): a group with a networked bus's [`ShareCluster`] takes its
//! messages from the apps' feeds only (every node with members hears each message there, its
//! own commits too), and delivers only those this node owns ([`GroupHolders::owns`]), so each
//! message goes to one member in the whole cluster. A member that leaves hands what it had
//! not acknowledged to a member on another holder when none here takes it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::hub::Admit;
use crate::message::SharedMessage;
use crate::name::topic::filter::TopicFilter;
use crate::outbox::{OutFrame, Outbox};

pub mod holders;

pub use holders::{GroupHolders, ShareCluster};

/// One member of a group: a connection's outbox.
struct Member {
    id: u64,
    outbox: Arc<Outbox>,
    admit: Option<Admit>,
}

/// One shared subscription group on this node (see the module doc).
pub struct ShareGroup {
    /// The group's index entry id (the registry's subscriber ids and group ids are one count).
    pub(super) id: u64,
    pub(super) share_name: Box<str>,
    pub(super) filter: Arc<TopicFilter>,
    members: Mutex<Vec<Member>>,
    /// The turn: the member the next message tries first (modulo the members).
    next: AtomicUsize,
    /// In a cluster: the group's holders, which decide the messages this node delivers.
    pub(super) holders: Option<Arc<GroupHolders>>,
}

impl ShareGroup {
    pub(super) fn new(
        id: u64,
        share_name: &str,
        filter: Arc<TopicFilter>,
        holders: Option<Arc<GroupHolders>>,
    ) -> Self {
        ShareGroup {
            id,
            share_name: share_name.into(),
            filter,
            members: Mutex::new(Vec::new()),
            next: AtomicUsize::new(0),
            holders,
        }
    }

    pub(super) fn join(&self, id: u64, outbox: Arc<Outbox>, admit: Option<Admit>) {
        self.members.lock().push(Member { id, outbox, admit });
    }

    /// Takes member `id` out; returns whether the group is empty now.
    pub(super) fn remove(&self, id: u64) -> bool {
        let mut members = self.members.lock();
        members.retain(|m| m.id != id);
        members.is_empty()
    }

    /// How many members the group has.
    pub fn members(&self) -> usize {
        self.members.lock().len()
    }

    /// Queues each message of `run` to one member, in turn; returns how many were queued. In
    /// a cluster only a run from an app's feed (`from_feed`) is taken, and of it only the
    /// messages this node owns (see the module doc).
    pub(super) fn deliver_run(&self, run: &[SharedMessage], from_feed: bool) -> usize {
        let members = self.members.lock();
        match &self.holders {
            None => run
                .iter()
                .filter(|m| Self::give(&members, &self.next, m))
                .count(),
            Some(_) if !from_feed => 0,
            Some(holders) => run
                .iter()
                .filter(|m| holders.owns(m) && Self::give(&members, &self.next, m))
                .count(),
        }
    }

    /// Queues `message` to a member, in turn, whoever owns it (one another node handed
    /// here); whether one took it.
    pub(super) fn take_handed(&self, message: &SharedMessage) -> bool {
        Self::give(&self.members.lock(), &self.next, message)
    }

    /// The group's holders in the cluster, if it is in one.
    pub fn holders(&self) -> Option<&Arc<GroupHolders>> {
        self.holders.as_ref()
    }

    /// Queues `message` to the member whose turn it is, passing over members that cannot take
    /// it; whether one took it.
    fn give(members: &[Member], next: &AtomicUsize, message: &SharedMessage) -> bool {
        let n = members.len();
        if n == 0 {
            return false;
        }
        let start = next.fetch_add(1, Ordering::Relaxed);
        for k in 0..n {
            let member = &members[(start + k) % n];
            if member.outbox.closed().is_some()
                || member.admit.as_ref().is_some_and(|admit| !admit(message))
            {
                continue;
            }
            if member.outbox.push(OutFrame::Message(message.clone())) {
                return true;
            }
        }
        false
    }
}

/// A subscriber's membership of one group (made by
/// [`super::FilterRegistry::join_group`]). Dropping it leaves the group.
pub struct GroupMembership {
    pub(super) registry: Arc<super::FilterRegistry>,
    pub(super) app: Box<str>,
    pub(super) member: u64,
    pub(super) group: Option<Arc<ShareGroup>>,
}

impl GroupMembership {
    /// The group's share name.
    pub fn share_name(&self) -> &str {
        self.group.as_ref().map_or("", |g| &g.share_name)
    }

    /// The group's filter.
    pub fn filter(&self) -> Option<&TopicFilter> {
        self.group.as_ref().map(|g| &*g.filter)
    }

    /// The group's holders in the cluster, if it is in one: a subscribe answers once this
    /// node counts itself ([`GroupHolders::until_counted`]).
    pub fn holders(&self) -> Option<Arc<GroupHolders>> {
        self.group.as_ref().and_then(|g| g.holders.clone())
    }

    /// Leaves the group (see the module doc); the group, for what the member leaves behind.
    pub fn leave(mut self) -> LeftGroup {
        let group = self.group.take();
        if let Some(group) = &group {
            self.registry.leave_group(&self.app, group, self.member);
        }
        LeftGroup {
            group,
            registry: self.registry.clone(),
            app: std::mem::take(&mut self.app),
        }
    }
}

impl Drop for GroupMembership {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            self.registry.leave_group(&self.app, &group, self.member);
        }
    }
}

/// A group a member left ([`GroupMembership::leave`]).
pub struct LeftGroup {
    group: Option<Arc<ShareGroup>>,
    registry: Arc<super::FilterRegistry>,
    app: Box<str>,
}

impl LeftGroup {
    /// The group's filter.
    pub fn filter(&self) -> Option<&TopicFilter> {
        self.group.as_ref().map(|g| &*g.filter)
    }

    /// Queues `message` (one the member that left had not acknowledged) to a member still in
    /// the group, in turn, or, in a cluster, when none here takes it, sends it to a member on
    /// another holder; whether one took it (none does once the group has no member anywhere).
    pub fn hand_over(&self, message: &SharedMessage) -> bool {
        let Some(group) = &self.group else {
            return false;
        };
        if group.take_handed(message) {
            return true;
        }
        match (&group.holders, self.registry.share_cluster()) {
            (Some(_), Some(cluster)) => {
                cluster.hand_over(&self.app, &group.share_name, &group.filter, message)
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;
