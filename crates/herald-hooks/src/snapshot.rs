//! The endpoints this node matches events against, held in memory ([`Snapshot`]): each app's
//! enabled endpoints with their channel patterns compiled, and the event types any of them
//! wants, so the lifecycle listener answers "does anyone want this?" without allocating or
//! locking ([`Snapshot::wants`]), and the writer finds an event's endpoints
//! ([`Snapshot::endpoints`]).
//!
//! An endpoint that asked for `user.offline` is counted as wanting `user.online` here too
//! ([`delivered`]): the writer needs the user's return to withdraw a held offline, whether or
//! not the endpoint is told of it (see [`crate::writer`]).
//!
//! It also says which kinds of lifecycle event the node must build for them at all
//! ([`Snapshot::lifecycle_kinds`]): the service sets them on the node's lifecycle registry
//! whenever the snapshot is replaced, so a kind no enabled endpoint wants costs the hub and
//! the live-client registry one atomic load ([`herald_core::lifecycle`]).
//!
//! A snapshot is built from the store's endpoints ([`Snapshot::build`]) and replaced whole:
//! after every change made through this node's [`crate::service::Hooks`], and every couple of
//! seconds (other nodes' changes).

use std::collections::HashMap;

use herald_core::lifecycle::{ChannelInterest, Kinds};
use herald_core::pattern::PatternSet;
use herald_core::tenant::AppId;

use crate::endpoint::{Endpoint, StoredEndpoint};
use crate::event::{EventSet, EventType};

/// An enabled endpoint and its channel patterns, compiled.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Its channel patterns ([`Endpoint::patterns`]).
    pub patterns: PatternSet,
}

/// The event types told from the hub's events about a channel (subscriptions, occupied,
/// vacated), which the lifecycle registry builds only for channels some endpoint's patterns
/// may match ([`Snapshot::channel_interest`]).
const CHANNEL_TYPES: [EventType; 5] = [
    EventType::ClientSubscribed,
    EventType::ClientUnsubscribed,
    EventType::ChannelOccupied,
    EventType::ChannelVacated,
    EventType::SubscriptionCount,
];

/// One app's enabled endpoints.
#[derive(Debug, Clone, Default)]
struct AppHooks {
    /// Every type any of them wants.
    wanted: EventSet,
    /// The endpoints, in id order.
    endpoints: Vec<Compiled>,
}

/// The event types the writer must be given for an endpoint that asked for `events`: those,
/// and `user.online` when `user.offline` is one of them (its return withdraws a held offline).
pub fn delivered(events: EventSet) -> EventSet {
    let mut delivered = events;
    if events.contains(EventType::UserOffline) {
        delivered.insert(EventType::UserOnline);
    }
    delivered
}

/// The kinds of lifecycle event the listener needs for endpoints wanting `events`: each
/// lifecycle type's own kind, and for `subscription_count` the subscriptions made and ended
/// and the channels occupied and vacated it notes ([`crate::counts`]). Device and delivery
/// events are no lifecycle events.
pub fn lifecycle_kinds(events: EventSet) -> Kinds {
    events
        .iter()
        .map(|kind| match kind {
            EventType::ClientConnected => Kinds::CONNECTED,
            EventType::ClientDisconnected => Kinds::DISCONNECTED,
            EventType::ClientSubscribed => Kinds::SUBSCRIBED,
            EventType::ClientUnsubscribed => Kinds::UNSUBSCRIBED,
            EventType::UserOnline => Kinds::USER_ONLINE,
            EventType::UserOffline => Kinds::USER_OFFLINE,
            EventType::ChannelOccupied => Kinds::CHANNEL_OCCUPIED,
            EventType::ChannelVacated => Kinds::CHANNEL_VACATED,
            EventType::PresenceMemberAdded => Kinds::MEMBER_ADDED,
            EventType::PresenceMemberRemoved => Kinds::MEMBER_REMOVED,
            EventType::SubscriptionCount => Kinds::SUBSCRIPTIONS | Kinds::CHANNELS,
            EventType::DeviceRegistered
            | EventType::DeviceDeactivated
            | EventType::DeliveryAcked
            | EventType::DeliveryProviderAccepted
            | EventType::DeliveryFailed
            | EventType::DeliveryDeadLettered
            | EventType::PusherClientEvent
            | EventType::PusherCacheMiss
            | EventType::HookTest => Kinds::NONE,
        })
        .fold(Kinds::NONE, |all, kinds| all | kinds)
}

/// Every app's enabled endpoints (see the [module documentation](self)).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Every type any endpoint of any app wants: most events are let go on this alone.
    wanted: EventSet,
    /// Each app's endpoints, sorted by app id: found by a binary search of string compares,
    /// cheaper than hashing the id on every lifecycle event of the node.
    apps: Vec<(AppId, AppHooks)>,
}

impl Snapshot {
    /// The snapshot of `endpoints` (disabled ones are left out: they are told nothing).
    pub fn build(endpoints: Vec<StoredEndpoint>) -> Snapshot {
        let mut wanted = EventSet::default();
        let mut apps: HashMap<AppId, AppHooks> = HashMap::new();
        for stored in endpoints {
            let endpoint = stored.endpoint;
            if !endpoint.enabled || endpoint.events.is_empty() {
                continue;
            }
            for kind in delivered(endpoint.events).iter() {
                wanted.insert(kind);
            }
            let app = apps.entry(endpoint.app.clone()).or_default();
            for kind in delivered(endpoint.events).iter() {
                app.wanted.insert(kind);
            }
            app.endpoints.push(Compiled {
                patterns: endpoint.patterns(),
                endpoint,
            });
        }
        let mut apps: Vec<(AppId, AppHooks)> = apps.into_iter().collect();
        for (_, app) in &mut apps {
            app.endpoints.sort_by_key(|c| c.endpoint.id);
        }
        apps.sort_by(|(a, _), (b, _)| a.as_str().cmp(b.as_str()));
        Snapshot { wanted, apps }
    }

    /// `app`'s endpoints, if it has any enabled.
    fn app(&self, app: &str) -> Option<&AppHooks> {
        self.apps
            .binary_search_by(|(id, _)| id.as_str().cmp(app))
            .ok()
            .map(|at| &self.apps[at].1)
    }

    /// The kinds of lifecycle event some enabled endpoint needs built ([`lifecycle_kinds`] of
    /// every type any of them is given, [`delivered`]).
    pub fn lifecycle_kinds(&self) -> Kinds {
        lifecycle_kinds(self.wanted)
    }

    /// The channels some enabled endpoint may want events about from the hub (subscriptions,
    /// occupied, vacated, `subscription_count`): for each such endpoint, its app's scope followed by the literal
    /// prefix of each of its patterns ([`PatternSet::literal_prefixes`]). The lifecycle
    /// registry builds no channel event for a channel none of them starts
    /// ([`herald_core::lifecycle::channels`]).
    pub fn channel_interest(&self) -> ChannelInterest {
        let mut prefixes = Vec::new();
        for (app, hooks) in &self.apps {
            let scope = app.scope_prefix();
            for compiled in &hooks.endpoints {
                let events = delivered(compiled.endpoint.events);
                if !CHANNEL_TYPES.iter().any(|&kind| events.contains(kind)) {
                    continue;
                }
                for literal in compiled.patterns.literal_prefixes() {
                    if scope.is_empty() && literal.is_empty() {
                        return ChannelInterest::All;
                    }
                    prefixes.push(format!("{scope}{literal}"));
                }
            }
        }
        ChannelInterest::Prefixes(prefixes)
    }

    /// The types some enabled endpoint is given ([`delivered`]), in
    /// [`EventType::SUBSCRIBABLE`] order.
    pub fn wanted_names(&self) -> Vec<&'static str> {
        self.wanted.names()
    }

    /// Whether an enabled endpoint of `app` wants events of type `kind` about `channel` (the
    /// app's name for it, `None` for an event about no channel) delivered to the writer: asked
    /// for them, or `user.online` when it asked for `user.offline` ([`delivered`]). Allocates
    /// nothing.
    pub fn wants(&self, app: &str, kind: EventType, channel: Option<&str>) -> bool {
        if !self.wanted.contains(kind) {
            return false;
        }
        let Some(hooks) = self.app(app) else {
            return false;
        };
        if !hooks.wanted.contains(kind) {
            return false;
        }
        hooks.endpoints.iter().any(|c| {
            delivered(c.endpoint.events).contains(kind)
                && channel.is_none_or(|ch| c.patterns.allows(ch))
        })
    }

    /// The enabled endpoints of `app`, in id order.
    pub fn endpoints(&self, app: &AppId) -> &[Compiled] {
        self.app(app.as_str()).map_or(&[], |hooks| &hooks.endpoints)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(
        id: i64,
        app: &str,
        events: &[&str],
        channels: &[&str],
        enabled: bool,
    ) -> StoredEndpoint {
        StoredEndpoint {
            endpoint: Endpoint {
                id,
                app: AppId::parse(app).unwrap(),
                url: "https://example.com/".into(),
                description: String::new(),
                events: EventSet::parse(events).unwrap(),
                channels: channels.iter().map(|c| c.to_string()).collect(),
                enabled,
                offline_delay_ms: 3_000,
                created_ms: 0,
                format: crate::endpoint::Format::Standard,
            },
            secret: Vec::new(),
            previous_secret: None,
        }
    }

    #[test]
    fn matches_type_channel_pattern_enabled_and_app() {
        let snapshot = Snapshot::build(vec![
            stored(
                2,
                "shop",
                &["channel.vacated", "user.offline"],
                &["rooms/*"],
                true,
            ),
            stored(1, "shop", &["client.connected"], &[], false),
            stored(3, "blog", &["*"], &[], true),
        ]);
        use EventType::*;
        assert!(snapshot.wants("shop", ChannelVacated, Some("rooms/1")));
        assert!(!snapshot.wants("shop", ChannelVacated, Some("lobby")));
        assert!(!snapshot.wants("shop", ChannelVacated, Some("rooms/1/x")));
        assert!(snapshot.wants("shop", UserOffline, None));
        // Its return withdraws a held offline: the writer is given it.
        assert!(snapshot.wants("shop", UserOnline, None));
        // Disabled: wants nothing.
        assert!(!snapshot.wants("shop", ClientConnected, None));
        // Another app's endpoint is not this app's.
        assert!(snapshot.wants("blog", ClientConnected, None));
        assert!(!snapshot.wants("news", ClientConnected, None));
        let shop = AppId::parse("shop").unwrap();
        let ids: Vec<i64> = snapshot
            .endpoints(&shop)
            .iter()
            .map(|c| c.endpoint.id)
            .collect();
        assert_eq!(ids, [2]);
        assert!(!Snapshot::build(vec![]).wants("shop", UserOffline, None));
        // Asked for the return alone: nothing more.
        let online = Snapshot::build(vec![stored(4, "shop", &["user.online"], &[], true)]);
        assert!(online.wants("shop", UserOnline, None));
        assert!(!online.wants("shop", UserOffline, None));
    }

    #[test]
    fn the_channel_interest_is_the_prefixes_of_endpoints_told_of_channels() {
        let prefixes = |snapshot: &Snapshot| match snapshot.channel_interest() {
            ChannelInterest::Prefixes(mut list) => {
                list.sort();
                Some(list)
            }
            ChannelInterest::All => None,
        };
        let snapshot = Snapshot::build(vec![
            stored(
                1,
                "shop",
                &["channel.occupied"],
                &["rooms/**", "lobby"],
                true,
            ),
            stored(2, "shop", &["subscription_count"], &["ticks/*"], true),
            // Not told of channels, or disabled: no prefix.
            stored(3, "shop", &["client.connected"], &["other/**"], true),
            stored(8, "shop", &["client.unsubscribed"], &["subs/*"], true),
            stored(4, "blog", &["channel.vacated"], &["x/**"], false),
            stored(5, "default", &["channel.vacated"], &["news/*/eu"], true),
        ]);
        assert_eq!(
            prefixes(&snapshot).unwrap(),
            [
                "news/",
                "shop~lobby",
                "shop~rooms/",
                "shop~subs/",
                "shop~ticks/"
            ]
        );
        // An app's endpoint with no pattern (every channel of the app): its scope.
        let whole = Snapshot::build(vec![stored(6, "shop", &["*"], &[], true)]);
        assert_eq!(prefixes(&whole).unwrap(), ["shop~"]);
        // The default app's every channel: no prefix narrows it.
        let default = Snapshot::build(vec![stored(7, "default", &["channel.occupied"], &[], true)]);
        assert_eq!(prefixes(&default), None);
        assert_eq!(
            prefixes(&Snapshot::build(vec![])).unwrap(),
            [] as [String; 0]
        );
    }

    #[test]
    fn the_lifecycle_kinds_are_those_enabled_endpoints_are_given() {
        assert_eq!(Snapshot::build(vec![]).lifecycle_kinds(), Kinds::NONE);
        let nomatch = Snapshot::build(vec![
            stored(1, "shop", &["channel.occupied"], &["nomatch/**"], true),
            stored(2, "shop", &["*"], &[], false),
            stored(
                3,
                "blog",
                &["device.registered", "delivery.failed"],
                &[],
                true,
            ),
        ]);
        assert_eq!(
            nomatch.lifecycle_kinds(),
            Kinds::CHANNEL_OCCUPIED,
            "a disabled endpoint wants nothing; device and delivery events are no lifecycle's"
        );
        let offline = Snapshot::build(vec![stored(4, "shop", &["user.offline"], &[], true)]);
        assert_eq!(
            offline.lifecycle_kinds(),
            Kinds::USERS,
            "its return withdraws it"
        );
        let all = Snapshot::build(vec![stored(5, "shop", &["*"], &[], true)]);
        assert_eq!(all.lifecycle_kinds(), Kinds::ALL);
        let counts = Snapshot::build(vec![stored(6, "shop", &["subscription_count"], &[], true)]);
        assert_eq!(
            counts.lifecycle_kinds(),
            Kinds::SUBSCRIPTIONS | Kinds::CHANNELS,
            "what the counts' windows are noted from"
        );
    }
}
