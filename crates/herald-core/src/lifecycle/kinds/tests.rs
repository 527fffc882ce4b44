//! The wanted kinds: what is built and told, what is tracked, as the kinds widen and narrow.

use std::sync::Arc;

use crate::auth::{Client, TokenStamp};
use crate::hub::Hub;
use crate::lifecycle::{Kinds, LifecycleEvent, Recorded, Relay, Relayed, Transport};
use crate::live::LiveClients;
use crate::name::ChannelName;
use crate::outbox::Outbox;
use crate::tenant::AppId;

/// Sees every event this node emits (what was built), delivering each.
#[derive(Default)]
struct SeesAll(Recorded);

impl Relay for SeesAll {
    fn relay(&self, event: &LifecycleEvent) -> Relayed {
        self.0.on_event_for_test(event);
        Relayed::Deliver
    }
}

impl Recorded {
    fn on_event_for_test(&self, event: &LifecycleEvent) {
        crate::lifecycle::LifecycleListener::on_event(self, event);
    }
}

fn node() -> (Arc<Hub>, Arc<LiveClients>) {
    let hub = Hub::new();
    let live = LiveClients::new();
    assert!(live.set_lifecycle(hub.lifecycle().clone()));
    (hub, live)
}

fn client(sub: &str) -> Client {
    Client {
        app: AppId::parse("shop").unwrap(),
        sub: sub.into(),
        token: TokenStamp::default(),
        ..Client::anonymous()
    }
}

fn channel(name: &str) -> ChannelName {
    AppId::parse("shop").unwrap().parse_channel(name).unwrap()
}

#[test]
fn a_kind_nobody_wants_is_not_built_and_a_listener_hears_only_its_kinds() {
    let (hub, live) = node();
    let lifecycle = hub.lifecycle();
    let occupied = Recorded::new();
    lifecycle.join_wanting(occupied.clone(), Kinds::CHANNEL_OCCUPIED);
    assert_eq!(lifecycle.emitted(), Kinds::CHANNEL_OCCUPIED);
    // A relay sees every event built (set after the join: this one emits what it is given).
    let built = Arc::new(SeesAll::default());
    let everything = Recorded::new();
    let id = lifecycle.join_wanting(everything.clone(), Kinds::NONE);
    let registration = live.register(&client("alice"), &Outbox::new(64), Transport::Sse);
    let outbox = Outbox::new(64);
    let (sub, _) = hub.subscribe(&channel("news"), outbox.clone());
    hub.unsubscribe(&channel("news"), sub.id());
    drop(registration);
    assert_eq!(occupied.summary(), ["+news"]);
    assert!(everything.summary().is_empty(), "it wants nothing");
    assert_eq!(
        lifecycle.tracked.len(),
        0,
        "no tracked kind: nothing tracked"
    );

    // Every event the hub and the live clients build, seen by a relay: the same, none other.
    lifecycle.set_wanted(id, Kinds::NONE);
    assert!(lifecycle.set_relay(built.clone()));
    let (sub, _) = hub.subscribe(&channel("sports"), outbox.clone());
    hub.unsubscribe(&channel("sports"), sub.id());
    assert_eq!(
        built.0.summary(),
        ["+sports", "-sports"],
        "a relay keeps channels in pairs: the vacancy is built too, no subscription is"
    );
    assert_eq!(
        occupied.summary(),
        ["+news", "+sports"],
        "told its kind only"
    );
}

#[test]
fn connections_are_tracked_only_while_a_kind_needs_them_and_widening_reports_new_ones() {
    let (hub, live) = node();
    let lifecycle = hub.lifecycle();
    let recorded = Recorded::new();
    let id = lifecycle.join_wanting(recorded.clone(), Kinds::CHANNELS | Kinds::MEMBERS);
    assert!(!lifecycle.emits(Kinds::TRACKED));
    let early_box = Outbox::new(64);
    let early = live.register(&client("alice"), &early_box, Transport::WebSocket);
    assert_eq!(lifecycle.tracked.len(), 0);
    assert!(lifecycle.connection_of(&early_box).is_none());

    // Widened at run time: new connections are tracked and told, the one from before is not.
    lifecycle.set_wanted(id, Kinds::ALL);
    let late_box = Outbox::new(64);
    let late = live.register(&client("bob"), &late_box, Transport::Sse);
    assert_eq!(lifecycle.tracked.len(), 1);
    let (sub, _) = hub.subscribe(&channel("news"), late_box.clone());
    let (early_sub, _) = hub.subscribe(&channel("news"), early_box.clone());
    hub.unsubscribe(&channel("news"), early_sub.id());
    hub.unsubscribe(&channel("news"), sub.id());
    drop(early);
    drop(late);
    let events = recorded.events();
    let named: Vec<Option<&str>> = events
        .iter()
        .filter_map(|e| match e {
            LifecycleEvent::Subscribed { connection, .. } => {
                Some(connection.as_ref().and_then(|c| c.sub.as_deref()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        named,
        [Some("bob"), None],
        "the early one names no connection"
    );
    assert_eq!(
        recorded.summary(),
        [
            "connect:bob",
            "online:bob",
            "sub:news",
            "+news",
            "sub:news",
            "unsub:news",
            "unsub:news",
            "-news",
            "disconnect:bob:closed",
            "offline:bob"
        ],
        "alice connected before: neither her departure nor her user is told"
    );

    // Narrowed to no tracked kind: the tracked connections are forgotten.
    let kept = live.register(&client("carol"), &Outbox::new(64), Transport::Sse);
    assert_eq!(lifecycle.tracked.len(), 1);
    lifecycle.set_wanted(id, Kinds::CHANNEL_VACATED);
    assert_eq!(lifecycle.tracked.len(), 0);
    assert!(!lifecycle.emits(Kinds::TRACKED));
    drop(kept);
    lifecycle.set_wanted(id, Kinds::NONE);
    assert!(!lifecycle.is_active());
    assert_eq!(
        recorded.summary()[10..],
        ["connect:carol", "online:carol"],
        "her departure is not told: forgotten"
    );
}

#[test]
fn with_a_relay_a_pair_is_emitted_whole_and_never_narrows() {
    let (hub, _) = node();
    let lifecycle = hub.lifecycle();
    assert!(lifecycle.set_relay(Arc::new(SeesAll::default())));
    let id = lifecycle.join_wanting(Recorded::new(), Kinds::USER_OFFLINE | Kinds::SUBSCRIBED);
    assert_eq!(
        lifecycle.emitted(),
        Kinds::USERS | Kinds::SUBSCRIBED,
        "the relay keeps a user's nodes: online and offline both"
    );
    lifecycle.set_wanted(id, Kinds::NONE);
    assert_eq!(
        lifecycle.emitted(),
        Kinds::USERS,
        "the cluster's records of this node's users stay true"
    );
    assert_eq!(lifecycle.wanted(), Kinds::NONE);
}

#[test]
fn every_event_has_one_kind_within_all() {
    let news = channel("news");
    let events = [
        LifecycleEvent::ChannelOccupied {
            channel: news.clone(),
        },
        LifecycleEvent::ChannelVacated {
            channel: news.clone(),
        },
        LifecycleEvent::MemberRemoved {
            channel: news,
            user: "u".into(),
        },
    ];
    for event in &events {
        let kind = Kinds::of(event);
        assert!(Kinds::ALL.contains(kind) && !kind.is_empty());
    }
    assert!(Kinds::TRACKED.contains(Kinds::SUBSCRIBED));
    assert!(!Kinds::TRACKED.intersects(Kinds::CHANNELS | Kinds::MEMBERS));
}

/// Users are counted only while their events are wanted, and a connection counted down only if
/// it was counted up: a connection made before users were wanted never holds its user online,
/// and one made while they were is counted down even after they stop being wanted.
#[test]
fn users_are_counted_only_while_wanted_and_each_connection_counts_down_what_it_counted() {
    let (hub, live) = node();
    let lifecycle = hub.lifecycle();
    let heard = Recorded::new();
    // Kept alive: a connection is known by its outbox's address.
    let outboxes: Vec<_> = (0..4).map(|_| Outbox::new(64)).collect();
    let id = lifecycle.join_wanting(heard.clone(), Kinds::SUBSCRIPTIONS);
    let before = live.register(&client("alice"), &outboxes[0], Transport::WebSocket);
    assert_eq!(lifecycle.tracked.len(), 1, "tracked for its subscriptions");
    lifecycle.set_wanted(id, Kinds::SUBSCRIPTIONS | Kinds::USERS);
    let after = live.register(&client("alice"), &outboxes[1], Transport::WebSocket);
    drop(before);
    assert_eq!(
        heard.summary(),
        ["online:alice"],
        "the uncounted connection leaving does not take alice offline"
    );
    drop(after);
    assert_eq!(heard.summary(), ["online:alice", "offline:alice"]);

    // Counted, then users no longer wanted: it still counts down when it leaves, so alice's
    // next connection, once users are wanted again, is her first.
    let counted = live.register(&client("alice"), &outboxes[2], Transport::WebSocket);
    lifecycle.set_wanted(id, Kinds::SUBSCRIPTIONS);
    drop(counted);
    lifecycle.set_wanted(id, Kinds::SUBSCRIPTIONS | Kinds::USERS);
    let again = live.register(&client("alice"), &outboxes[3], Transport::WebSocket);
    drop(again);
    assert_eq!(
        heard.summary(),
        [
            "online:alice",
            "offline:alice",
            "online:alice",
            "online:alice",
            "offline:alice"
        ]
    );
}
