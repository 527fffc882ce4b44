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
//! **Wanted kinds, and cheap when nobody wants them**: each listener joins wanting some kinds
//! of event ([`Kinds`]; [`Lifecycle::join`] wants them all, [`Lifecycle::join_wanting`] some,
//! changed at run time with [`Lifecycle::set_wanted`]). The registry keeps the union in one
//! atomic word, and every emitting path reads it (one relaxed load) before it builds anything:
//! an event of a kind nobody wants costs that load and nothing more, on the hub's subscribe
//! and unsubscribe paths, in the live-client registry as connections register and leave, and
//! in the presence registry. The connections are tracked ([`tracked`]: who each one is, each
//! user's count) only while a kind that needs it is wanted ([`Kinds::TRACKED`]: connections,
//! users online and offline, subscriptions, which name their connection); while none is, a
//! connection registering or leaving costs the load alone. A listener is told only the kinds
//! it wants (another listener's may be emitted too).
//!
//! **The wanted kinds may widen at run time** (a listener joins, or wants more): what happened
//! before is not reported, as for a listener joining late. A connection made while no tracked
//! kind was wanted is not tracked: its departure is not told, its subscriptions name no
//! connection, and a user it held may be told online (and later offline) as if that
//! connection had not been there; a channel occupied before its kinds were wanted is not told
//! occupied, and its vacancy is told when its last subscriber leaves. When they **narrow** to
//! no tracked kind, the tracked connections are forgotten (a later widening starts afresh).
//! In a cluster (a [`Relay`] set), the relay keeps records in pairs (a channel's nodes, a
//! user's nodes, this node's connections: [`Kinds::RELAYED`]): wanting one kind of such a
//! group emits both, and a group once emitted stays emitted until the node stops, so the
//! cluster's records never go stale. Listeners usually join at start, before clients
//! connect.
//!
//! **Channels, too, only where wanted**: a listener may say which channels it wants events
//! about (subscribed, unsubscribed, occupied, vacated: [`ChannelInterest`], literal prefixes of
//! full names, [`Lifecycle::set_channel_interest`]); the hub builds such an event only for a
//! channel some listener wanting those kinds may want ([`channels`]). With a relay set every
//! channel is told. A change of interest applies as a change of kinds does: a channel occupied
//! while it was not of interest is told vacated when it becomes so.
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

pub mod channels;
mod events;
mod kinds;
pub mod tracked;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::{Mutex, RwLock};

use channels::ChannelFilter;
pub use channels::ChannelInterest;
pub use events::{
    app_of, is_reserved, Connection, ConnectionId, DisconnectReason, LifecycleEvent, Transport,
};
pub use kinds::Kinds;
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

/// A listener's place in its registry, to change the kinds it wants
/// ([`Lifecycle::set_wanted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerId(usize);

/// A listener and the kinds it wants now ([`Kinds`]' bits).
struct Joined {
    listener: Arc<dyn LifecycleListener>,
    wants: AtomicU32,
    /// The channels it wants channel events about.
    channels: Mutex<ChannelInterest>,
}

impl Joined {
    fn wants(&self) -> Kinds {
        Kinds::from_bits(self.wants.load(Ordering::Relaxed))
    }
}

/// One node's lifecycle registry: its listeners, its relay and the connections it reports on.
pub struct Lifecycle {
    /// The kinds emitted now ([`Kinds`]' bits: what the listeners want, and with a relay set
    /// its pairs): the one thing an emitting path reads before it builds anything.
    emitted: AtomicU32,
    listeners: RwLock<Vec<Joined>>,
    /// The channels some listener wanting channel kinds may want told occupied or vacated:
    /// read by the hub (a short read lock) only while a channel kind is emitted.
    channel_filter: RwLock<ChannelFilter>,
    /// Held while the emitted kinds are worked out again, so that changes apply in order.
    changing: Mutex<()>,
    relay: OnceLock<Arc<dyn Relay>>,
    tracked: Tracked,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            emitted: AtomicU32::new(0),
            listeners: RwLock::new(Vec::new()),
            channel_filter: RwLock::new(ChannelFilter::All),
            changing: Mutex::new(()),
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

    /// Whether any kind of event is emitted (one relaxed atomic load).
    #[inline]
    pub fn is_active(&self) -> bool {
        self.emitted.load(Ordering::Relaxed) != 0
    }

    /// The kinds emitted now (one relaxed atomic load): what the listeners want, and with a
    /// relay set the rest of each pair it keeps (see the [module documentation](self)).
    #[inline]
    pub fn emitted(&self) -> Kinds {
        Kinds::from_bits(self.emitted.load(Ordering::Relaxed))
    }

    /// Whether any of `kinds` is emitted now (one relaxed atomic load).
    #[inline]
    pub fn emits(&self, kinds: Kinds) -> bool {
        self.emitted().intersects(kinds)
    }

    /// The kinds the listeners want now (their union).
    pub fn wanted(&self) -> Kinds {
        self.listeners
            .read()
            .iter()
            .fold(Kinds::NONE, |all, joined| all | joined.wants())
    }

    /// Adds a listener wanting every kind; from now on events are emitted. Join at start,
    /// before clients connect (see the [module documentation](self) for joining later).
    pub fn join(&self, listener: Arc<dyn LifecycleListener>) -> ListenerId {
        self.join_wanting(listener, Kinds::ALL)
    }

    /// Adds a listener wanting `kinds` (none is fine: it costs nothing until it wants some,
    /// [`Lifecycle::set_wanted`]).
    pub fn join_wanting(&self, listener: Arc<dyn LifecycleListener>, kinds: Kinds) -> ListenerId {
        let changing = self.changing.lock();
        let id = {
            let mut listeners = self.listeners.write();
            listeners.push(Joined {
                listener,
                wants: AtomicU32::new(kinds.bits()),
                channels: Mutex::new(ChannelInterest::All),
            });
            ListenerId(listeners.len() - 1)
        };
        self.work_out(&changing);
        id
    }

    /// The listener `id` wants `kinds` from now on (see the [module documentation](self) for
    /// what a widening misses and what a narrowing forgets).
    pub fn set_wanted(&self, id: ListenerId, kinds: Kinds) {
        let changing = self.changing.lock();
        if let Some(joined) = self.listeners.read().get(id.0) {
            joined.wants.store(kinds.bits(), Ordering::Relaxed);
        }
        self.work_out(&changing);
    }

    /// The listener `id` wants events about a channel (subscribed, unsubscribed, occupied,
    /// vacated) about the channels of `interest` only, from now on (see the [module documentation](self)).
    pub fn set_channel_interest(&self, id: ListenerId, interest: ChannelInterest) {
        let changing = self.changing.lock();
        if let Some(joined) = self.listeners.read().get(id.0) {
            *joined.channels.lock() = interest;
        }
        self.work_out(&changing);
    }

    /// Sets the relay between this node's events and its listeners (a networked bus); `false`
    /// if one was already set.
    pub fn set_relay(&self, relay: Arc<dyn Relay>) -> bool {
        let changing = self.changing.lock();
        let set = self.relay.set(relay).is_ok();
        self.work_out(&changing);
        set
    }

    /// Works the emitted kinds out again from the listeners' (with the relay's pairs, which
    /// never narrow), and forgets the tracked connections when no tracked kind is emitted any
    /// more. Called with `changing` held.
    fn work_out(&self, _changing: &parking_lot::MutexGuard<'_, ()>) {
        let before = self.emitted();
        let mut emitted = self.wanted();
        if self.relay.get().is_some() {
            for pair in Kinds::RELAYED {
                if emitted.intersects(pair) || before.intersects(pair) {
                    emitted |= pair;
                }
            }
        }
        let filter = if self.relay.get().is_some() {
            ChannelFilter::All
        } else {
            let listeners = self.listeners.read();
            let interests: Vec<ChannelInterest> = listeners
                .iter()
                .filter(|joined| joined.wants().intersects(channels::ABOUT_A_CHANNEL))
                .map(|joined| joined.channels.lock().clone())
                .collect();
            ChannelFilter::union(&interests)
        };
        *self.channel_filter.write() = filter;
        self.emitted.store(emitted.bits(), Ordering::Release);
        if before.intersects(Kinds::TRACKED) && !emitted.intersects(Kinds::TRACKED) {
            // After the store: a connection registering now either finished before this
            // (forgotten here) or sees that nothing is tracked (`Tracked::gate`).
            self.tracked.clear();
        }
    }

    /// This node's number in connection ids ([`ConnectionId::node`]).
    pub fn node(&self) -> u64 {
        self.tracked.node()
    }

    /// Tells every listener that wants its kind of `event`, bypassing the relay: for the
    /// relay's own deliveries (a cluster's transitions, a lost node's departures).
    pub fn deliver(&self, event: &LifecycleEvent) {
        let kind = Kinds::of(event);
        for joined in self.listeners.read().iter() {
            if joined.wants().intersects(kind) {
                joined.listener.on_event(event);
            }
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

    /// The connection writing to `outbox`, if it registered while its kinds were tracked.
    pub fn connection_of(&self, outbox: &Arc<Outbox>) -> Option<Arc<Connection>> {
        self.tracked.get(Arc::as_ptr(outbox) as usize)
    }

    /// A connection of `client` writing to `outbox` registered at `place`: tracked, and told,
    /// if a tracked kind is emitted.
    pub(crate) fn connected(
        &self,
        client: &Client,
        outbox: &Arc<Outbox>,
        transport: Transport,
        place: (u32, u32),
    ) {
        let _gate = self.tracked.gate();
        // Read under the gate: a narrowing that forgets the tracked connections waits for
        // this one, or this one sees it.
        let emitted = self.emitted();
        if !emitted.intersects(Kinds::TRACKED) {
            return;
        }
        // Users are counted only while their events are emitted.
        let counted = emitted.intersects(Kinds::USERS);
        let connection = self.tracked.insert(
            Arc::as_ptr(outbox) as usize,
            place,
            client,
            transport,
            counted,
        );
        if emitted.intersects(Kinds::CONNECTED) {
            self.emit(LifecycleEvent::Connected {
                connection: connection.clone(),
            });
        }
        if counted {
            self.tracked.count_user(&connection, true, |app, sub| {
                if emitted.intersects(Kinds::USER_ONLINE) {
                    self.emit(LifecycleEvent::UserOnline { app, sub })
                }
            });
        }
    }

    /// The connection writing to `outbox`, registered at `place`, left. Emits its departure if
    /// it was tracked, with the first cause known (see the [module documentation](self)).
    pub(crate) fn disconnected(&self, outbox: &Weak<Outbox>, place: (u32, u32)) {
        let _gate = self.tracked.gate();
        let Some(gone) = self.tracked.remove(outbox.as_ptr() as usize, place) else {
            return;
        };
        let closed = outbox.upgrade().and_then(|o| o.closed());
        let reason = closed
            .map(DisconnectReason::from)
            .or(gone.stated)
            .unwrap_or(DisconnectReason::Closed);
        self.left(gone, reason);
    }

    /// Tells of `connection`'s departure, then of its user going offline if it was the user's
    /// last connection (the kinds emitted allowing).
    fn left(&self, gone: tracked::Gone, reason: DisconnectReason) {
        let connection = gone.connection;
        let emitted = self.emitted();
        if emitted.intersects(Kinds::DISCONNECTED) {
            self.emit(LifecycleEvent::Disconnected {
                connection: connection.clone(),
                reason,
            });
        }
        if gone.counted {
            self.tracked.count_user(&connection, false, |app, sub| {
                if emitted.intersects(Kinds::USER_OFFLINE) {
                    self.emit(LifecycleEvent::UserOffline { app, sub })
                }
            });
        }
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
        let _gate = self.tracked.gate();
        let key = Arc::as_ptr(outbox) as usize;
        let Some(current) = self.tracked.get(key) else {
            return self.connected(client, outbox, transport, place);
        };
        if tracked::same_client(&current, client) {
            return;
        }
        if let Some(gone) = self.tracked.remove(key, place) {
            self.left(gone, DisconnectReason::Reauthenticated);
        }
        self.connected(client, outbox, current.transport, place);
    }

    /// `outbox` subscribed to `channel`, its first subscriber on this node if `first`; told as
    /// `emitted` (the caller's read of [`Lifecycle::emitted`]) allows.
    pub(crate) fn subscribed(
        &self,
        emitted: Kinds,
        channel: &ChannelName,
        outbox: &Arc<Outbox>,
        first: bool,
    ) {
        if is_reserved(channel) {
            return;
        }
        let told = Kinds::SUBSCRIBED.union(if first {
            Kinds::CHANNEL_OCCUPIED
        } else {
            Kinds::NONE
        });
        if !emitted.intersects(told) || !self.channel_filter.read().admits(channel.as_str()) {
            return;
        }
        if emitted.intersects(Kinds::SUBSCRIBED) {
            self.emit(LifecycleEvent::Subscribed {
                connection: self.connection_of(outbox),
                channel: channel.clone(),
            });
        }
        if first && emitted.intersects(Kinds::CHANNEL_OCCUPIED) {
            self.emit(LifecycleEvent::ChannelOccupied {
                channel: channel.clone(),
            });
        }
    }

    /// `outbox`'s subscription to `channel` ended, the channel's last on this node if `last`;
    /// told as `emitted` allows.
    pub(crate) fn unsubscribed(
        &self,
        emitted: Kinds,
        channel: &ChannelName,
        outbox: &Arc<Outbox>,
        last: bool,
    ) {
        if is_reserved(channel) {
            return;
        }
        let told = Kinds::UNSUBSCRIBED.union(if last {
            Kinds::CHANNEL_VACATED
        } else {
            Kinds::NONE
        });
        if !emitted.intersects(told) || !self.channel_filter.read().admits(channel.as_str()) {
            return;
        }
        if emitted.intersects(Kinds::UNSUBSCRIBED) {
            self.emit(LifecycleEvent::Unsubscribed {
                connection: self.connection_of(outbox),
                channel: channel.clone(),
            });
        }
        if last && emitted.intersects(Kinds::CHANNEL_VACATED) {
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
