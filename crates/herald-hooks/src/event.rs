//! The events an endpoint is told: their types ([`EventType`], and [`EventSet`], the types an
//! endpoint asked for), their ids ([`EventId`], sortable by time) and one event as it is queued
//! and sent ([`HookEvent`], built from a lifecycle event by [`HookEvent::from_lifecycle`]).
//!
//! An event's JSON, as a receiver reads it in a batch's `events` array:
//!
//! ```json
//! {"id":"evt_01JDX5S8Q6Z4R1W2M3N4P5Q6R7","type":"user.offline","app":"default",
//!  "timestamp":"2026-11-29T09:41:07.123Z","data":{"user":"alice"}}
//! ```

use std::fmt;

use herald_core::lifecycle::LifecycleEvent;
use herald_core::tenant::{scoped_local, AppId};
use rand::Rng;
use serde_json::{json, Value};

/// An event type an endpoint can ask for. The list grows as Herald emits more kinds; a name
/// not in it is refused when an endpoint is registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum EventType {
    /// A client connection was opened (after its token was accepted).
    ClientConnected,
    /// A client connection ended, with the reason.
    ClientDisconnected,
    /// A connection subscribed to a channel.
    ClientSubscribed,
    /// A connection's subscription to a channel ended.
    ClientUnsubscribed,
    /// A user's first connection anywhere in the cluster (not sent when it follows the user's
    /// `user.offline` within the endpoint's offline delay: that offline is withdrawn).
    UserOnline,
    /// A user's last connection anywhere in the cluster ended, and the user did not come back
    /// within the endpoint's offline delay.
    UserOffline,
    /// A channel's first subscriber anywhere in the cluster.
    ChannelOccupied,
    /// A channel's last subscriber anywhere in the cluster left.
    ChannelVacated,
    /// A user became a member of a presence channel (its first subscription to it).
    PresenceMemberAdded,
    /// A user's last subscription to a presence channel ended.
    PresenceMemberRemoved,
    /// A registration created a device (`crate::push`).
    DeviceRegistered,
    /// A provider said a device's token is gone; the device was deactivated.
    DeviceDeactivated,
    /// A device acknowledged a push.
    DeliveryAcked,
    /// A provider accepted a push for a device.
    DeliveryProviderAccepted,
    /// A provider send failed (retried, or for good).
    DeliveryFailed,
    /// A provider job became a dead letter.
    DeliveryDeadLettered,
    /// A channel's subscriber count changed: at most one per channel per
    /// `hooks.subscription_count_interval`, with the count at its end ([`crate::counts`]).
    /// Opt-in: `*` does not include it ([`EventType::OPT_IN`]).
    SubscriptionCount,
    /// A Pusher client sent a client event (`client-*`) on a private or presence channel
    /// (herald-pusher tells it, [`crate::Hooks::tell_pusher`]). Opt-in.
    PusherClientEvent,
    /// A Pusher subscription to a cache channel found no last event (`pusher:cache_miss`).
    /// Opt-in.
    PusherCacheMiss,
    /// A signed test event, sent only by `POST .../hooks/{id}/test` (never queued).
    HookTest,
}

impl EventType {
    /// Every type an endpoint may ask for, in a fixed order (the test event is not one).
    pub const SUBSCRIBABLE: [EventType; 19] = [
        EventType::ClientConnected,
        EventType::ClientDisconnected,
        EventType::ClientSubscribed,
        EventType::ClientUnsubscribed,
        EventType::UserOnline,
        EventType::UserOffline,
        EventType::ChannelOccupied,
        EventType::ChannelVacated,
        EventType::PresenceMemberAdded,
        EventType::PresenceMemberRemoved,
        EventType::DeviceRegistered,
        EventType::DeviceDeactivated,
        EventType::DeliveryAcked,
        EventType::DeliveryProviderAccepted,
        EventType::DeliveryFailed,
        EventType::DeliveryDeadLettered,
        EventType::SubscriptionCount,
        EventType::PusherClientEvent,
        EventType::PusherCacheMiss,
    ];

    /// The types an endpoint gets only by naming them: `*` stands for every other subscribable
    /// type (as Pusher's `subscription_count` is opt-in: it is the chattiest; the Pusher
    /// protocol's own events, which Pusher's dashboard enables one by one, too).
    pub const OPT_IN: [EventType; 3] = [
        EventType::SubscriptionCount,
        EventType::PusherClientEvent,
        EventType::PusherCacheMiss,
    ];

    /// The type's name on the wire (`user.offline`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::ClientConnected => "client.connected",
            EventType::ClientDisconnected => "client.disconnected",
            EventType::ClientSubscribed => "client.subscribed",
            EventType::ClientUnsubscribed => "client.unsubscribed",
            EventType::UserOnline => "user.online",
            EventType::UserOffline => "user.offline",
            EventType::ChannelOccupied => "channel.occupied",
            EventType::ChannelVacated => "channel.vacated",
            EventType::PresenceMemberAdded => "presence.member_added",
            EventType::PresenceMemberRemoved => "presence.member_removed",
            EventType::DeviceRegistered => "device.registered",
            EventType::DeviceDeactivated => "device.deactivated",
            EventType::DeliveryAcked => "delivery.acked",
            EventType::DeliveryProviderAccepted => "delivery.provider_accepted",
            EventType::DeliveryFailed => "delivery.failed",
            EventType::DeliveryDeadLettered => "delivery.dead_lettered",
            EventType::SubscriptionCount => "subscription_count",
            EventType::PusherClientEvent => "pusher.client_event",
            EventType::PusherCacheMiss => "pusher.cache_miss",
            EventType::HookTest => "hook.test",
        }
    }

    /// The subscribable type named `name`.
    pub fn parse(name: &str) -> Option<EventType> {
        EventType::SUBSCRIBABLE
            .into_iter()
            .find(|t| t.as_str() == name)
    }

    /// Whether events of this type name a channel (and so are filtered by an endpoint's
    /// channel patterns).
    pub fn has_channel(self) -> bool {
        matches!(
            self,
            EventType::ClientSubscribed
                | EventType::ClientUnsubscribed
                | EventType::ChannelOccupied
                | EventType::ChannelVacated
                | EventType::PresenceMemberAdded
                | EventType::PresenceMemberRemoved
                | EventType::SubscriptionCount
                | EventType::PusherClientEvent
                | EventType::PusherCacheMiss
        )
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The event types an endpoint asked for. Stored as their names (a JSON array) and held as a
/// bit set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct EventSet(u32);

impl EventSet {
    /// No type.
    pub const fn empty() -> Self {
        EventSet(0)
    }

    /// Every subscribable type but the opt-in ones ([`EventType::OPT_IN`]): what `*` stands
    /// for.
    pub fn all() -> Self {
        EventType::SUBSCRIBABLE
            .into_iter()
            .filter(|t| !EventType::OPT_IN.contains(t))
            .collect()
    }

    /// Whether `kind` is in the set.
    pub fn contains(self, kind: EventType) -> bool {
        self.0 & kind.bit() != 0
    }

    /// Adds `kind`.
    pub fn insert(&mut self, kind: EventType) {
        self.0 |= kind.bit();
    }

    /// Whether the set has no type.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The types in the set, in [`EventType::SUBSCRIBABLE`] order.
    pub fn iter(self) -> impl Iterator<Item = EventType> {
        EventType::SUBSCRIBABLE
            .into_iter()
            .filter(move |t| self.contains(*t))
    }

    /// Parses names; the first unknown name is the error. `*` is every type but the opt-in
    /// ones ([`EventSet::all`]), which are added when named too (`["*",
    /// "subscription_count"]` is every type).
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        let mut set = EventSet::empty();
        for name in names {
            let name = name.as_ref();
            if name == "*" {
                set.0 |= EventSet::all().0;
                continue;
            }
            match EventType::parse(name) {
                Some(kind) => set.insert(kind),
                None => return Err(name.to_owned()),
            }
        }
        Ok(set)
    }

    /// The names, in [`EventType::SUBSCRIBABLE`] order.
    pub fn names(self) -> Vec<&'static str> {
        self.iter().map(EventType::as_str).collect()
    }
}

impl FromIterator<EventType> for EventSet {
    fn from_iter<I: IntoIterator<Item = EventType>>(iter: I) -> Self {
        let mut set = EventSet::empty();
        for kind in iter {
            set.insert(kind);
        }
        set
    }
}

/// An event's id: `evt_` and 26 Crockford base32 digits of 48 bits of milliseconds since the
/// Unix epoch and 80 random bits (a ULID), so ids sort by time and never repeat. A receiver
/// de-duplicates on it (delivery is at least once).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(Box<str>);

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

impl EventId {
    /// A new id for an event at `at_ms`.
    pub fn new(at_ms: i64) -> Self {
        let random: u128 = rand::thread_rng().gen::<u128>() & ((1u128 << 80) - 1);
        let value = ((at_ms.max(0) as u128 & ((1u128 << 48) - 1)) << 80) | random;
        let mut text = String::with_capacity(30);
        text.push_str("evt_");
        for i in (0..26).rev() {
            text.push(CROCKFORD[((value >> (i * 5)) & 31) as usize] as char);
        }
        EventId(text.into())
    }

    /// An id as stored.
    pub fn from_stored(text: &str) -> Self {
        EventId(text.into())
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One event as it is matched, queued and sent.
#[derive(Debug, Clone, PartialEq)]
pub struct HookEvent {
    /// Its id.
    pub id: EventId,
    /// The app it is about.
    pub app: AppId,
    /// Its type.
    pub kind: EventType,
    /// When it happened on the node that saw it, milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The user it is about, when it is about one (the token's `sub`): the key that withdraws
    /// a pending `user.offline` when the user comes back.
    pub user: Option<Box<str>>,
    /// The channel it is about, as the app names it (without the app's scope), when it is
    /// about one: what an endpoint's channel patterns are matched against.
    pub channel: Option<Box<str>>,
    /// The type's own fields.
    pub data: Value,
}

impl HookEvent {
    /// The webhook event for a lifecycle event at `at_ms`.
    pub fn from_lifecycle(event: &LifecycleEvent, at_ms: i64) -> HookEvent {
        let app = event.app();
        let channel: Option<Box<str>> = event.channel().map(|c| {
            scoped_local(c.as_str())
                .unwrap_or_else(|| c.as_str())
                .into()
        });
        let (kind, user, data) = match event {
            LifecycleEvent::Connected { connection } => (
                EventType::ClientConnected,
                connection.sub.clone(),
                json!({
                    "connection": connection.id.to_string(),
                    "transport": connection.transport.as_str(),
                    "user": connection.sub.as_deref(),
                    "device": connection.device.as_deref(),
                }),
            ),
            LifecycleEvent::Disconnected { connection, reason } => (
                EventType::ClientDisconnected,
                connection.sub.clone(),
                json!({
                    "connection": connection.id.to_string(),
                    "transport": connection.transport.as_str(),
                    "user": connection.sub.as_deref(),
                    "device": connection.device.as_deref(),
                    "reason": reason.code(),
                }),
            ),
            LifecycleEvent::Subscribed {
                connection,
                channel: _,
            }
            | LifecycleEvent::Unsubscribed {
                connection,
                channel: _,
            } => {
                let kind = if matches!(event, LifecycleEvent::Subscribed { .. }) {
                    EventType::ClientSubscribed
                } else {
                    EventType::ClientUnsubscribed
                };
                let user = connection.as_ref().and_then(|c| c.sub.clone());
                (
                    kind,
                    user,
                    json!({
                        "channel": channel.as_deref(),
                        "connection": connection.as_ref().map(|c| c.id.to_string()),
                        "user": connection.as_ref().and_then(|c| c.sub.as_deref()),
                    }),
                )
            }
            LifecycleEvent::UserOnline { sub, .. } => (
                EventType::UserOnline,
                Some(sub.clone()),
                json!({ "user": &**sub }),
            ),
            LifecycleEvent::UserOffline { sub, .. } => (
                EventType::UserOffline,
                Some(sub.clone()),
                json!({ "user": &**sub }),
            ),
            LifecycleEvent::ChannelOccupied { .. } => (
                EventType::ChannelOccupied,
                None,
                json!({ "channel": channel.as_deref() }),
            ),
            LifecycleEvent::ChannelVacated { .. } => (
                EventType::ChannelVacated,
                None,
                json!({ "channel": channel.as_deref() }),
            ),
            LifecycleEvent::MemberAdded { user, data, .. } => (
                EventType::PresenceMemberAdded,
                Some(user.clone()),
                json!({
                    "channel": channel.as_deref(),
                    "user": &**user,
                    // Checked JSON object text (herald_core::presence::member_data).
                    "data": serde_json::from_str::<Value>(data).unwrap_or(Value::Null),
                }),
            ),
            LifecycleEvent::MemberRemoved { user, .. } => (
                EventType::PresenceMemberRemoved,
                Some(user.clone()),
                json!({ "channel": channel.as_deref(), "user": &**user }),
            ),
        };
        HookEvent {
            id: EventId::new(at_ms),
            app,
            kind,
            at_ms,
            user,
            channel,
            data,
        }
    }

    /// The event as a receiver reads it (one element of a batch's `events`).
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id.as_str(),
            "type": self.kind.as_str(),
            "app": self.app.as_str(),
            "timestamp": rfc3339_millis(self.at_ms),
            "data": self.data,
        })
    }
}

/// `at_ms` as RFC 3339 UTC with milliseconds.
pub fn rfc3339_millis(at_ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms.max(0) as u64);
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::lifecycle::{Connection, ConnectionId, DisconnectReason, Transport};
    use std::sync::Arc;

    #[test]
    fn types_parse_back_and_sets_hold_what_was_asked() {
        for kind in EventType::SUBSCRIBABLE {
            assert_eq!(EventType::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(EventType::parse("hook.test"), None);
        let set = EventSet::parse(&["user.offline", "channel.vacated"]).unwrap();
        assert!(set.contains(EventType::UserOffline));
        assert!(!set.contains(EventType::UserOnline));
        assert_eq!(set.names(), ["user.offline", "channel.vacated"]);
        assert_eq!(EventSet::parse(&["*"]).unwrap(), EventSet::all());
        assert_eq!(
            EventSet::parse(&["user.offline", "user.gone"]),
            Err("user.gone".to_owned())
        );
    }

    #[test]
    fn ids_sort_by_time_and_differ() {
        let a = EventId::new(1_000);
        let b = EventId::new(1_001);
        let c = EventId::new(1_001);
        assert!(a < b && a < c);
        assert_ne!(b, c);
        assert_eq!(a.as_str().len(), 30);
        assert!(a.as_str().starts_with("evt_000000"));
    }

    #[test]
    fn a_disconnect_names_its_user_transport_and_reason() {
        let shop = AppId::parse("shop").unwrap();
        let connection = Arc::new(Connection {
            id: ConnectionId { node: 1, seq: 7 },
            app: shop.clone(),
            sub: Some("alice".into()),
            device: None,
            transport: Transport::Sse,
        });
        let event = HookEvent::from_lifecycle(
            &LifecycleEvent::Disconnected {
                connection,
                reason: DisconnectReason::TimedOut,
            },
            1_796_000_000_123,
        );
        assert_eq!(event.kind, EventType::ClientDisconnected);
        assert_eq!(event.user.as_deref(), Some("alice"));
        let json = event.to_json();
        assert_eq!(json["type"], "client.disconnected");
        assert_eq!(json["app"], "shop");
        assert_eq!(json["data"]["transport"], "sse");
        assert_eq!(json["data"]["reason"], "timed_out");
        assert_eq!(json["timestamp"], "2026-11-30T00:53:20.123Z");

        let vacated = HookEvent::from_lifecycle(
            &LifecycleEvent::ChannelVacated {
                channel: shop.parse_channel("rooms/1").unwrap(),
            },
            0,
        );
        assert_eq!(vacated.channel.as_deref(), Some("rooms/1"));
        assert_eq!(vacated.to_json()["data"]["channel"], "rooms/1");
    }

    #[test]
    fn presence_members_added_and_removed_carry_channel_user_and_data() {
        let shop = AppId::parse("shop").unwrap();
        let channel = shop.parse_channel("rooms/1").unwrap();
        let added = HookEvent::from_lifecycle(
            &LifecycleEvent::MemberAdded {
                channel: channel.clone(),
                user: "alice".into(),
                data: Arc::from(r#"{"name":"Alice"}"#),
            },
            0,
        );
        assert_eq!(added.kind, EventType::PresenceMemberAdded);
        assert_eq!(
            (added.user.as_deref(), added.channel.as_deref()),
            (Some("alice"), Some("rooms/1"))
        );
        let json = added.to_json();
        assert_eq!(json["type"], "presence.member_added");
        assert_eq!(
            json["data"],
            json!({"channel": "rooms/1", "user": "alice", "data": {"name": "Alice"}})
        );
        let removed = HookEvent::from_lifecycle(
            &LifecycleEvent::MemberRemoved {
                channel,
                user: "alice".into(),
            },
            0,
        );
        assert_eq!(removed.to_json()["type"], "presence.member_removed");
        assert_eq!(
            removed.to_json()["data"],
            json!({"channel": "rooms/1", "user": "alice"})
        );
        assert!(EventType::PresenceMemberAdded.has_channel());
        assert_eq!(
            EventType::parse("presence.member_removed"),
            Some(EventType::PresenceMemberRemoved)
        );
    }

    #[test]
    fn subscription_count_is_opt_in_star_leaves_it_out_and_naming_it_adds_it() {
        let count = EventType::parse("subscription_count").unwrap();
        assert_eq!(count, EventType::SubscriptionCount);
        assert!(count.has_channel());
        let star = EventSet::parse(&["*"]).unwrap();
        assert!(!star.contains(count));
        assert!(star.contains(EventType::ChannelVacated));
        assert_eq!(
            star.iter().count(),
            EventType::SUBSCRIBABLE.len() - EventType::OPT_IN.len()
        );
        for opt_in in EventType::OPT_IN {
            assert!(!star.contains(opt_in), "{opt_in}");
        }
        let named = EventSet::parse(&["subscription_count"]).unwrap();
        assert_eq!(named.names(), ["subscription_count"]);
        let both = EventSet::parse(&["subscription_count", "*"]).unwrap();
        assert!(both.contains(count) && both.contains(EventType::UserOnline));
        assert_eq!(
            both.iter().count(),
            EventType::SUBSCRIBABLE.len() - EventType::OPT_IN.len() + 1
        );
        // "*" no longer hides an unknown name after it.
        assert_eq!(
            EventSet::parse(&["*", "user.gone"]),
            Err("user.gone".to_owned())
        );
    }
}
