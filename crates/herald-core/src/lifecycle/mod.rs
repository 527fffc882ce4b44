//! Lifecycle events: connections coming and going, subscriptions made and ended, channels
//! occupied and vacated, told to the listeners that joined this node's [`Lifecycle`] as they
//! happen. This module owns the registry of listeners, the relay a networked bus sets between
//! this node's facts and the cluster's ([`Relay`]), and the connections it reports on
//! ([`tracked`]). What is emitted where:
//!
//! - [`LifecycleEvent::Connected`] and [`LifecycleEvent::Disconnected`] by the live-client
//!   registry ([`crate::live`]) when a connection registers and when it leaves; the reason is
//!   the first cause known: the one its outbox was closed with (slow consumer, revocation,
//!   expiry, shutdown), else the one its transport stated
//!   ([`crate::live::Registration::set_disconnect_reason`]), else
//!   [`DisconnectReason::Closed`].
//! - [`LifecycleEvent::Subscribed`], [`LifecycleEvent::Unsubscribed`],
//!   [`LifecycleEvent::ChannelOccupied`] (the channel's first subscriber on this node) and
//!   [`LifecycleEvent::ChannelVacated`] (its last one left) by the hub ([`crate::hub`]), at
//!   once: not after the hub's entry lingered. Subscriptions to an app's reserved logs (the
//!   device inbox) raise none.
//! - [`LifecycleEvent::MemberAdded`] and [`LifecycleEvent::MemberRemoved`] by the presence
//!   registry ([`crate::presence`]) under the channel's presence lock, as a user's first
//!   subscription to a presence channel comes and its last one goes.
//!
//! **Cheap when nobody listens**: until a listener joins, emitting is one relaxed atomic load
//! (the hub's subscribe path checks [`Lifecycle::is_active`] and does nothing more), and the
//! connections are not tracked. Listeners join at start, before clients connect: what
//! happened before a listener joined is not reported.
//!
//! **Listeners are called where the event happens**, some under a hub shard's lock (a
//! channel's) or the lock of the users' connection counts (a user's online and offline), so
//! that a channel's and a user's events reach them in the order they happened: a listener
//! must only note or queue the event (no blocking, no call back into the hub or the
//! live-client registry).
//!
//! **In a cluster** a networked bus sets a [`Relay`] (see [`crate::bus`] for the contract):
//! this node's occupied and vacated (and users online and offline) are then this node's share,
//! and the relay delivers the cluster's transitions ([`Lifecycle::deliver`]) to this node's listeners when this node's
//! change made one, so each is delivered once in the cluster, on one node.

mod events;
pub mod tracked;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::RwLock;

pub use events::{
    app_of, is_reserved, Connection, ConnectionId, DisconnectReason, LifecycleEvent, Transport,
};
use tracked::Tracked;

use crate::auth::Client;
use crate::name::ChannelName;
use crate::outbox::Outbox;

/// Told of lifecycle events as they happen (see the [module documentation](self) for where and
/// under which locks: only note or queue the event).
pub trait LifecycleListener: Send + Sync {
    /// `event` happened (in a cluster: once, on one node, see [`crate::bus`]).
    fn on_event(&self, event: &LifecycleEvent);
}

/// What a [`Relay`] does with an event this node emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relayed {
    /// Deliver it to this node's listeners now.
    Deliver,
    /// The relay took it; it delivers what follows from it itself ([`Lifecycle::deliver`]).
    Held,
}

/// Stands between this node's events and its listeners in a cluster (a networked bus sets
/// it, [`Lifecycle::set_relay`]). Called as listeners are, where the event happens: it must
/// only note or queue.
pub trait Relay: Send + Sync {
    /// This node emitted `event`.
    fn relay(&self, event: &LifecycleEvent) -> Relayed;
}

/// One node's lifecycle registry: its listeners, its relay and the connections it reports on.
pub struct Lifecycle {
    /// Whether a listener joined: the one thing an emitting path reads while nobody listens.
    active: AtomicBool,
    listeners: RwLock<Vec<Arc<dyn LifecycleListener>>>,
    relay: OnceLock<Arc<dyn Relay>>,
    tracked: Tracked,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            active: AtomicBool::new(false),
            listeners: RwLock::new(Vec::new()),
            relay: OnceLock::new(),
            tracked: Tracked::new(rand::random::<u64>() | 1),
        }
    }
}

impl Lifecycle {
    /// A registry nobody listens to yet.
    pub fn new() -> Arc<Lifecycle> {
        Arc::new(Lifecycle::default())
    }

    /// Whether a listener joined (one relaxed atomic load: what emitting costs while nobody
    /// listens).
    #[inline]
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Adds a listener; from now on events are emitted. Join at start, before clients connect.
    pub fn join(&self, listener: Arc<dyn LifecycleListener>) {
        self.listeners.write().push(listener);
        self.active.store(true, Ordering::Release);
    }

    /// Sets the relay between this node's events and its listeners (a networked bus); `false`
    /// if one was already set.
    pub fn set_relay(&self, relay: Arc<dyn Relay>) -> bool {
        self.relay.set(relay).is_ok()
    }

    /// This node's number in connection ids ([`ConnectionId::node`]).
    pub fn node(&self) -> u64 {
        self.tracked.node()
    }

    /// Tells every listener of `event`, bypassing the relay: for the relay's own deliveries
    /// (a cluster's transitions, a lost node's departures).
    pub fn deliver(&self, event: &LifecycleEvent) {
        for listener in self.listeners.read().iter() {
            listener.on_event(event);
        }
    }

    /// Emits an event this node saw: through the relay if one is set.
    pub(crate) fn emit(&self, event: LifecycleEvent) {
        let relayed = match self.relay.get() {
            Some(relay) => relay.relay(&event),
            None => Relayed::Deliver,
        };
        if relayed == Relayed::Deliver {
            self.deliver(&event);
        }
    }

    /// The connection writing to `outbox`, if it registered while someone listened.
    pub fn connection_of(&self, outbox: &Arc<Outbox>) -> Option<Arc<Connection>> {
        self.tracked.get(Arc::as_ptr(outbox) as usize)
    }

    /// A connection of `client` writing to `outbox` registered at `place` (call only while
    /// active).
    pub(crate) fn connected(
        &self,
        client: &Client,
        outbox: &Arc<Outbox>,
        transport: Transport,
        place: (u32, u32),
    ) {
        let connection =
            self.tracked
                .insert(Arc::as_ptr(outbox) as usize, place, client, transport);
        self.emit(LifecycleEvent::Connected {
            connection: connection.clone(),
        });
        self.tracked.count_user(&connection, true, |app, sub| {
            self.emit(LifecycleEvent::UserOnline { app, sub })
        });
    }

    /// The connection writing to `outbox`, registered at `place`, left. Emits its departure if
    /// it was tracked, with the first cause known (see the [module documentation](self)).
    pub(crate) fn disconnected(&self, outbox: &Weak<Outbox>, place: (u32, u32)) {
        let Some((connection, stated)) = self.tracked.remove(outbox.as_ptr() as usize, place)
        else {
            return;
        };
        let closed = outbox.upgrade().and_then(|o| o.closed());
        let reason = closed
            .map(DisconnectReason::from)
            .or(stated)
            .unwrap_or(DisconnectReason::Closed);
        self.left(connection, reason);
    }

    /// Tells of `connection`'s departure, then of its user going offline if it was the user's
    /// last connection.
    fn left(&self, connection: Arc<Connection>, reason: DisconnectReason) {
        self.emit(LifecycleEvent::Disconnected {
            connection: connection.clone(),
            reason,
        });
        self.tracked.count_user(&connection, false, |app, sub| {
            self.emit(LifecycleEvent::UserOffline { app, sub })
        });
    }

    /// Notes why the connection writing to `outbox` (registered at `place`) is about to end.
    pub(crate) fn state_reason(
        &self,
        outbox: &Weak<Outbox>,
        place: (u32, u32),
        reason: DisconnectReason,
    ) {
        self.tracked
            .state_reason(outbox.as_ptr() as usize, place, reason);
    }

    /// The connection writing to `outbox` (registered at `place`) authorised again as `client`:
    /// nothing to say if it is still the same client; otherwise it leaves
    /// ([`DisconnectReason::Reauthenticated`]) and comes again as the new one.
    pub(crate) fn reauthorised(
        &self,
        outbox: &Arc<Outbox>,
        place: (u32, u32),
        client: &Client,
        transport: Transport,
    ) {
        let key = Arc::as_ptr(outbox) as usize;
        let Some(current) = self.tracked.get(key) else {
            return self.connected(client, outbox, transport, place);
        };
        if tracked::same_client(&current, client) {
            return;
        }
        if let Some((connection, _)) = self.tracked.remove(key, place) {
            self.left(connection, DisconnectReason::Reauthenticated);
        }
        self.connected(client, outbox, current.transport, place);
    }

    /// `outbox` subscribed to `channel`, its first subscriber on this node if `first` (call
    /// only while active).
    pub(crate) fn subscribed(&self, channel: &ChannelName, outbox: &Arc<Outbox>, first: bool) {
        if is_reserved(channel) {
            return;
        }
        self.emit(LifecycleEvent::Subscribed {
            connection: self.connection_of(outbox),
            channel: channel.clone(),
        });
        if first {
            self.emit(LifecycleEvent::ChannelOccupied {
                channel: channel.clone(),
            });
        }
    }

    /// `outbox`'s subscription to `channel` ended, the channel's last on this node if `last`
    /// (call only while active).
    pub(crate) fn unsubscribed(&self, channel: &ChannelName, outbox: &Arc<Outbox>, last: bool) {
        if is_reserved(channel) {
            return;
        }
        self.emit(LifecycleEvent::Unsubscribed {
            connection: self.connection_of(outbox),
            channel: channel.clone(),
        });
        if last {
            self.emit(LifecycleEvent::ChannelVacated {
                channel: channel.clone(),
            });
        }
    }
}

/// A listener that keeps every event, for tests (here and in the crates that relay them).
#[derive(Default)]
pub struct Recorded(parking_lot::Mutex<Vec<LifecycleEvent>>);

impl Recorded {
    /// A new, empty record.
    pub fn new() -> Arc<Recorded> {
        Arc::new(Recorded::default())
    }

    /// The events recorded so far.
    pub fn events(&self) -> Vec<LifecycleEvent> {
        self.0.lock().clone()
    }

    /// The recorded events as short strings: `+chan` occupied, `-chan` vacated, `sub:chan`,
    /// `unsub:chan`, `connect:SUB`, `disconnect:SUB:REASON`, `online:SUB`, `offline:SUB`,
    /// `member+chan:USER`, `member-chan:USER` (public channel names; `-` for no `sub`).
    pub fn summary(&self) -> Vec<String> {
        let sub = |c: &Connection| c.sub.as_deref().unwrap_or("-").to_string();
        self.events()
            .iter()
            .map(|e| match e {
                LifecycleEvent::Connected { connection } => format!("connect:{}", sub(connection)),
                LifecycleEvent::Disconnected { connection, reason } => {
                    format!("disconnect:{}:{}", sub(connection), reason.code())
                }
                LifecycleEvent::Subscribed { channel, .. } => format!("sub:{}", channel.public()),
                LifecycleEvent::Unsubscribed { channel, .. } => {
                    format!("unsub:{}", channel.public())
                }
                LifecycleEvent::UserOnline { sub, .. } => format!("online:{sub}"),
                LifecycleEvent::UserOffline { sub, .. } => format!("offline:{sub}"),
                LifecycleEvent::ChannelOccupied { channel } => format!("+{}", channel.public()),
                LifecycleEvent::ChannelVacated { channel } => format!("-{}", channel.public()),
                LifecycleEvent::MemberAdded { channel, user, .. } => {
                    format!("member+{}:{user}", channel.public())
                }
                LifecycleEvent::MemberRemoved { channel, user } => {
                    format!("member-{}:{user}", channel.public())
                }
            })
            .collect()
    }
}

impl LifecycleListener for Recorded {
    fn on_event(&self, event: &LifecycleEvent) {
        self.0.lock().push(event.clone());
    }
}

#[cfg(test)]
mod tests;
