//! Which kinds of lifecycle event someone wants ([`Kinds`]): a small bit set over the event
//! kinds, one bit each, with the groups the emitting paths and the relay think in
//! ([`Kinds::CONNECTIONS`], [`Kinds::USERS`], [`Kinds::SUBSCRIPTIONS`], [`Kinds::CHANNELS`],
//! [`Kinds::MEMBERS`]) and the kinds whose events need the connections tracked
//! ([`Kinds::TRACKED`]). A [`super::Lifecycle`] keeps the union of its listeners' kinds in one
//! atomic word; how it is read and changed is its [module documentation](super)'s.

use std::ops::{BitOr, BitOrAssign};

use super::LifecycleEvent;

/// A set of lifecycle event kinds: which ones listeners want, and which are emitted (see
/// [`crate::lifecycle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Kinds(u16);

impl Kinds {
    /// No kind.
    pub const NONE: Kinds = Kinds(0);
    /// [`LifecycleEvent::Connected`].
    pub const CONNECTED: Kinds = Kinds(1 << 0);
    /// [`LifecycleEvent::Disconnected`].
    pub const DISCONNECTED: Kinds = Kinds(1 << 1);
    /// [`LifecycleEvent::Subscribed`].
    pub const SUBSCRIBED: Kinds = Kinds(1 << 2);
    /// [`LifecycleEvent::Unsubscribed`].
    pub const UNSUBSCRIBED: Kinds = Kinds(1 << 3);
    /// [`LifecycleEvent::UserOnline`].
    pub const USER_ONLINE: Kinds = Kinds(1 << 4);
    /// [`LifecycleEvent::UserOffline`].
    pub const USER_OFFLINE: Kinds = Kinds(1 << 5);
    /// [`LifecycleEvent::ChannelOccupied`].
    pub const CHANNEL_OCCUPIED: Kinds = Kinds(1 << 6);
    /// [`LifecycleEvent::ChannelVacated`].
    pub const CHANNEL_VACATED: Kinds = Kinds(1 << 7);
    /// [`LifecycleEvent::MemberAdded`].
    pub const MEMBER_ADDED: Kinds = Kinds(1 << 8);
    /// [`LifecycleEvent::MemberRemoved`].
    pub const MEMBER_REMOVED: Kinds = Kinds(1 << 9);
    /// Every kind.
    pub const ALL: Kinds = Kinds((1 << 10) - 1);

    /// A connection's coming and going.
    pub const CONNECTIONS: Kinds = Kinds::CONNECTED.union(Kinds::DISCONNECTED);
    /// A user's online and offline.
    pub const USERS: Kinds = Kinds::USER_ONLINE.union(Kinds::USER_OFFLINE);
    /// A subscription made and ended.
    pub const SUBSCRIPTIONS: Kinds = Kinds::SUBSCRIBED.union(Kinds::UNSUBSCRIBED);
    /// A channel occupied and vacated.
    pub const CHANNELS: Kinds = Kinds::CHANNEL_OCCUPIED.union(Kinds::CHANNEL_VACATED);
    /// A presence member added and removed.
    pub const MEMBERS: Kinds = Kinds::MEMBER_ADDED.union(Kinds::MEMBER_REMOVED);
    /// The kinds whose events need the connections tracked (`tracked`): who a connection is
    /// (connections, and the connection a subscription names) and each user's count of
    /// connections (online, offline).
    pub const TRACKED: Kinds = Kinds::CONNECTIONS
        .union(Kinds::USERS)
        .union(Kinds::SUBSCRIPTIONS);
    /// The groups a cluster's relay keeps records of in pairs (a channel's nodes, a user's
    /// nodes, a node's connections): with a relay set, wanting one kind of a group emits both,
    /// and a group once emitted stays emitted (see the [`super`] module documentation).
    pub const RELAYED: [Kinds; 3] = [Kinds::CONNECTIONS, Kinds::USERS, Kinds::CHANNELS];

    /// Both sets' kinds.
    pub const fn union(self, other: Kinds) -> Kinds {
        Kinds(self.0 | other.0)
    }

    /// Whether the sets share a kind.
    #[inline]
    pub const fn intersects(self, other: Kinds) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether every kind of `other` is in this set.
    pub const fn contains(self, other: Kinds) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set has no kind.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The kind of `event`.
    pub fn of(event: &LifecycleEvent) -> Kinds {
        match event {
            LifecycleEvent::Connected { .. } => Kinds::CONNECTED,
            LifecycleEvent::Disconnected { .. } => Kinds::DISCONNECTED,
            LifecycleEvent::Subscribed { .. } => Kinds::SUBSCRIBED,
            LifecycleEvent::Unsubscribed { .. } => Kinds::UNSUBSCRIBED,
            LifecycleEvent::UserOnline { .. } => Kinds::USER_ONLINE,
            LifecycleEvent::UserOffline { .. } => Kinds::USER_OFFLINE,
            LifecycleEvent::ChannelOccupied { .. } => Kinds::CHANNEL_OCCUPIED,
            LifecycleEvent::ChannelVacated { .. } => Kinds::CHANNEL_VACATED,
            LifecycleEvent::MemberAdded { .. } => Kinds::MEMBER_ADDED,
            LifecycleEvent::MemberRemoved { .. } => Kinds::MEMBER_REMOVED,
        }
    }

    /// The set's bits (for an atomic word).
    pub(super) const fn bits(self) -> u32 {
        self.0 as u32
    }

    /// The set of `bits` ([`Kinds::bits`]).
    pub(super) const fn from_bits(bits: u32) -> Kinds {
        Kinds(bits as u16 & Kinds::ALL.0)
    }
}

impl BitOr for Kinds {
    type Output = Kinds;

    fn bitor(self, other: Kinds) -> Kinds {
        self.union(other)
    }
}

impl BitOrAssign for Kinds {
    fn bitor_assign(&mut self, other: Kinds) {
        *self = self.union(other);
    }
}

#[cfg(test)]
mod tests;
