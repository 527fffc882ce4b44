//! The emission rules, through the hub and the live-client registry as transports use them.

use std::sync::Arc;

use super::*;
use crate::auth::TokenStamp;
use crate::head::Head;
use crate::hub::Hub;
use crate::live::LiveClients;
use crate::message::Epoch;
use crate::outbox::{CloseReason, Outbox};
use crate::tenant::AppId;

/// A hub and a live-client registry sharing one lifecycle registry, as a node wires them.
fn node() -> (Arc<Hub>, Arc<LiveClients>, Arc<Recorded>) {
    let hub = Hub::new();
    let live = LiveClients::new();
    assert!(live.set_lifecycle(hub.lifecycle().clone()));
    let recorded = Recorded::new();
    hub.lifecycle().join(recorded.clone());
    (hub, live, recorded)
}

fn client(app: &str, sub: &str, device: Option<&str>) -> Client {
    Client {
        app: AppId::parse(app).unwrap(),
        sub: sub.into(),
        device: device.map(str::to_owned),
        token: TokenStamp::default(),
        ..Client::anonymous()
    }
}

fn channel(app: &str, name: &str) -> ChannelName {
    AppId::parse(app).unwrap().parse_channel(name).unwrap()
}

#[test]
fn a_channel_is_occupied_by_its_first_subscriber_and_vacated_by_its_last_at_once() {
    let (hub, _, recorded) = node();
    let news = channel("shop", "news");
    let (a, _) = hub.subscribe(&news, Outbox::new(1024));
    let (b, _) = hub.subscribe(&news, Outbox::new(1024));
    // The head is known: the hub's entry lingers after the last subscriber, the vacancy is
    // told anyway.
    hub.learn_head(
        &news,
        Head {
            epoch: Epoch::new("e"),
            last_seq: 3,
        },
    );
    assert!(hub.unsubscribe(&news, a.id()));
    assert!(!hub.unsubscribe(&news, a.id()), "already gone: no event");
    assert!(hub.unsubscribe(&news, b.id()));
    assert!(hub.known_head(&news).is_some(), "the entry lingers");
    let (c, _) = hub.subscribe(&news, Outbox::new(1024));
    hub.unsubscribe(&news, c.id());
    assert_eq!(
        recorded.summary(),
        [
            "sub:news",
            "+news",
            "sub:news",
            "unsub:news",
            "unsub:news",
            "-news",
            "sub:news",
            "+news",
            "unsub:news",
            "-news"
        ],
        "one occupied and one vacated per transition, each right after the subscription"
    );
}

#[test]
fn a_devices_inbox_logs_raise_no_event_and_nothing_is_told_before_a_listener_joins() {
    let hub = Hub::new();
    let news = channel("shop", "news");
    let (early, _) = hub.subscribe(&news, Outbox::new(1024));
    let recorded = Recorded::new();
    hub.lifecycle().join(recorded.clone());
    let inbox = AppId::parse("shop").unwrap().reserved_log("$app");
    let (sub, _) = hub.subscribe(&inbox, Outbox::new(1024));
    hub.unsubscribe(&inbox, sub.id());
    assert!(recorded.summary().is_empty());
    // The subscriber from before is still counted: its channel is not occupied again.
    let (late, _) = hub.subscribe(&news, Outbox::new(1024));
    hub.unsubscribe(&news, early.id());
    hub.unsubscribe(&news, late.id());
    assert_eq!(
        recorded.summary(),
        ["sub:news", "unsub:news", "unsub:news", "-news"]
    );
}

#[test]
fn connections_are_told_with_who_they_are_and_why_they_left() {
    let (hub, live, recorded) = node();
    let alice = client("shop", "alice", Some("phone"));
    let outbox = Outbox::new(1024);
    let registration = live.register(&alice, &outbox, Transport::Sse);
    let (sub, _) = hub.subscribe(&channel("shop", "news"), outbox.clone());
    hub.unsubscribe(&channel("shop", "news"), sub.id());
    drop(registration);
    let events = recorded.events();
    let LifecycleEvent::Connected { connection } = &events[0] else {
        panic!("connected first: {events:?}");
    };
    assert_eq!(connection.app, AppId::parse("shop").unwrap());
    assert_eq!(connection.sub.as_deref(), Some("alice"));
    assert_eq!(connection.device.as_deref(), Some("phone"));
    assert_eq!(connection.transport, Transport::Sse);
    assert_eq!(connection.id.node, hub.lifecycle().node());
    for event in &events {
        match event {
            LifecycleEvent::Subscribed {
                connection: who, ..
            }
            | LifecycleEvent::Unsubscribed {
                connection: who, ..
            } => {
                assert_eq!(who.as_ref(), Some(connection), "the subscriber is named");
            }
            _ => {}
        }
    }
    assert_eq!(
        events.iter().rev().nth(1),
        Some(&LifecycleEvent::Disconnected {
            connection: connection.clone(),
            reason: DisconnectReason::Closed
        }),
        "closed unless something else is known"
    );
    assert_eq!(
        recorded.summary(),
        [
            "connect:alice",
            "online:alice",
            "sub:news",
            "+news",
            "unsub:news",
            "-news",
            "disconnect:alice:closed",
            "offline:alice"
        ]
    );
}

#[test]
fn the_outboxs_close_reason_comes_first_then_the_one_the_transport_stated() {
    let (_, live, recorded) = node();
    let bob = client("shop", "bob", None);
    // Stated by the transport.
    let outbox = Outbox::new(1024);
    let registration = live.register(&bob, &outbox, Transport::WebSocket);
    registration.set_disconnect_reason(DisconnectReason::TimedOut);
    registration.set_disconnect_reason(DisconnectReason::Shutdown);
    drop(registration);
    // Closed by the server, whatever the transport says after.
    let outbox = Outbox::new(1024);
    let registration = live.register(&bob, &outbox, Transport::WebSocket);
    outbox.close(CloseReason::SlowConsumer);
    registration.set_disconnect_reason(DisconnectReason::TimedOut);
    drop(registration);
    // A revocation, reaching a parked connection, which leaves through the registry.
    let outbox = Outbox::new(1024);
    let parked = live.register(&bob, &outbox, Transport::WebSocket).park();
    let shop = AppId::parse("shop").unwrap();
    live.disconnect(&shop, &crate::live::Target::All, CloseReason::DeviceRevoked);
    live.leave(&shop, parked);
    // An outbox already gone, with a reason stated while parked.
    let outbox = Outbox::new(1024);
    let parked = live.register(&bob, &outbox, Transport::WebSocket).park();
    live.set_disconnect_reason(&shop, &parked, DisconnectReason::TokenExpired);
    drop(outbox);
    live.leave(&shop, parked);
    let departures: Vec<String> = recorded
        .summary()
        .into_iter()
        .filter(|s| s.starts_with("disconnect"))
        .collect();
    assert_eq!(
        departures,
        [
            "disconnect:bob:timed_out",
            "disconnect:bob:slow_consumer",
            "disconnect:bob:revoked",
            "disconnect:bob:token_expired"
        ]
    );
}

#[test]
fn a_token_refresh_is_no_new_connection_unless_it_names_another_client() {
    let (_, live, recorded) = node();
    let outbox = Outbox::new(1024);
    let mut registration = live.register(&client("shop", "", None), &outbox, Transport::WebSocket);
    registration.refresh(&client("shop", "", None), Transport::WebSocket);
    registration.refresh(&client("shop", "carol", None), Transport::WebSocket);
    registration.refresh(&client("shop", "carol", None), Transport::WebSocket);
    drop(registration);
    assert_eq!(
        recorded.summary(),
        [
            "connect:-",
            "disconnect:-:reauthenticated",
            "connect:carol",
            "online:carol",
            "disconnect:carol:closed",
            "offline:carol"
        ]
    );
    // The refreshed entry is what revocations match now.
    let outbox = Outbox::new(1024);
    let mut registration = live.register(&client("shop", "", None), &outbox, Transport::WebSocket);
    registration.refresh(&client("shop", "dave", None), Transport::WebSocket);
    let shop = AppId::parse("shop").unwrap();
    let target = crate::live::Target::Sub("dave".into());
    assert_eq!(live.disconnect(&shop, &target, CloseReason::Revoked), 1);
}

#[test]
fn a_user_is_online_from_its_first_connection_to_the_end_of_its_last() {
    let (_, live, recorded) = node();
    let (phone, laptop, other_app) = (Outbox::new(1024), Outbox::new(1024), Outbox::new(1024));
    let on_phone = live.register(
        &client("shop", "erin", Some("p")),
        &phone,
        Transport::WebSocket,
    );
    let on_laptop = live.register(&client("shop", "erin", None), &laptop, Transport::Sse);
    let elsewhere = live.register(&client("blog", "erin", None), &other_app, Transport::Sse);
    let anonymous = live.register(
        &client("shop", "", None),
        &Outbox::new(1024),
        Transport::Sse,
    );
    drop(on_phone);
    drop(anonymous);
    let users = |recorded: &Recorded| -> Vec<String> {
        let events = recorded.events();
        events
            .iter()
            .filter_map(|e| match e {
                LifecycleEvent::UserOnline { app, sub } => Some(format!("+{app:?}/{sub}")),
                LifecycleEvent::UserOffline { app, sub } => Some(format!("-{app:?}/{sub}")),
                _ => None,
            })
            .collect()
    };
    let shop = format!("{:?}", AppId::parse("shop").unwrap());
    let blog = format!("{:?}", AppId::parse("blog").unwrap());
    assert_eq!(
        users(&recorded),
        [format!("+{shop}/erin"), format!("+{blog}/erin")],
        "one user per app and sub, however many connections; anonymous is no user"
    );
    drop(on_laptop);
    drop(elsewhere);
    assert_eq!(
        users(&recorded)[2..],
        [format!("-{shop}/erin"), format!("-{blog}/erin")],
        "offline with the last connection"
    );
}

/// Holds channel transitions, as a cluster's relay does, and lets the rest through.
struct HoldChannels(Recorded);

impl Relay for HoldChannels {
    fn relay(&self, event: &LifecycleEvent) -> Relayed {
        match event {
            LifecycleEvent::ChannelOccupied { .. } | LifecycleEvent::ChannelVacated { .. } => {
                self.0.on_event(event);
                Relayed::Held
            }
            _ => Relayed::Deliver,
        }
    }
}

#[test]
fn a_relay_decides_what_listeners_hear_of_this_nodes_channel_transitions() {
    let (hub, _, recorded) = node();
    let relay = Arc::new(HoldChannels(Recorded::default()));
    assert!(hub.lifecycle().set_relay(relay.clone()));
    let news = channel("shop", "news");
    let (sub, _) = hub.subscribe(&news, Outbox::new(1024));
    hub.unsubscribe(&news, sub.id());
    assert_eq!(recorded.summary(), ["sub:news", "unsub:news"]);
    assert_eq!(relay.0.summary(), ["+news", "-news"]);
    hub.lifecycle()
        .deliver(&LifecycleEvent::ChannelVacated { channel: news });
    assert_eq!(recorded.summary(), ["sub:news", "unsub:news", "-news"]);
}

/// A listener that wants events about channels of some prefixes only: for channels outside
/// them no subscription, occupied or vacated event is built; another listener wanting every
/// channel, or a relay, brings them all back.
#[test]
fn channel_events_are_built_only_for_channels_some_listener_may_want() {
    let hub = Hub::new();
    let recorded = Recorded::new();
    let id = hub
        .lifecycle()
        .join_wanting(recorded.clone(), Kinds::CHANNELS | Kinds::SUBSCRIPTIONS);
    hub.lifecycle()
        .set_channel_interest(id, ChannelInterest::Prefixes(vec!["shop~rooms/".into()]));
    let room = channel("shop", "rooms/1");
    let lobby = channel("shop", "lobby");
    let plain = channel("default", "rooms/2");
    for name in [&room, &lobby, &plain] {
        let (sub, _) = hub.subscribe(name, Outbox::new(1024));
        hub.unsubscribe(name, sub.id());
    }
    assert_eq!(
        recorded.summary(),
        ["sub:rooms/1", "+rooms/1", "unsub:rooms/1", "-rooms/1"]
    );

    // A second listener wanting every channel's events: the first is told them too (a
    // listener matches its own patterns on what it is told).
    let everything = Recorded::new();
    let other = hub
        .lifecycle()
        .join_wanting(everything.clone(), Kinds::CHANNELS);
    let (sub, _) = hub.subscribe(&lobby, Outbox::new(1024));
    hub.unsubscribe(&lobby, sub.id());
    assert_eq!(everything.summary(), ["+lobby", "-lobby"]);
    // It stops wanting channel kinds: the filter is the first listener's again.
    hub.lifecycle().set_wanted(other, Kinds::NONE);
    let (sub, _) = hub.subscribe(&lobby, Outbox::new(1024));
    hub.unsubscribe(&lobby, sub.id());
    assert_eq!(everything.summary(), ["+lobby", "-lobby"]);
    assert_eq!(
        recorded.summary(),
        [
            "sub:rooms/1",
            "+rooms/1",
            "unsub:rooms/1",
            "-rooms/1",
            "sub:lobby",
            "+lobby",
            "unsub:lobby",
            "-lobby"
        ]
    );

    // With a relay set, every channel is told (its records come in pairs).
    let relay = Arc::new(HoldChannels(Recorded::default()));
    assert!(hub.lifecycle().set_relay(relay.clone()));
    let (sub, _) = hub.subscribe(&plain, Outbox::new(1024));
    hub.unsubscribe(&plain, sub.id());
    assert_eq!(relay.0.summary(), ["+rooms/2", "-rooms/2"]);
}

/// Holds the first `disconnected` it is told of until released, so another thread can act
/// while that departure is half told.
struct HoldFirstDeparture {
    entered: std::sync::mpsc::SyncSender<()>,
    release: parking_lot::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

impl LifecycleListener for HoldFirstDeparture {
    fn on_event(&self, event: &LifecycleEvent) {
        if let LifecycleEvent::Disconnected { .. } = event {
            if let Some(release) = self.release.lock().take() {
                self.entered.send(()).unwrap();
                release.recv().unwrap();
            }
        }
    }
}

/// A user's connection leaving on one thread while its next one arrives on another: the user
/// never had no connection (the second registered before the first had left), so it is told
/// online once, and never offline while it is connected, whichever thread is told first.
#[test]
fn a_users_online_and_offline_follow_its_count_across_threads() {
    let (hub, live, recorded) = node();
    let (entered_tx, entered) = std::sync::mpsc::sync_channel(1);
    let (release, release_rx) = std::sync::mpsc::sync_channel(1);
    hub.lifecycle().join(Arc::new(HoldFirstDeparture {
        entered: entered_tx,
        release: parking_lot::Mutex::new(Some(release_rx)),
    }));
    let alice = client("shop", "alice", None);
    let (old, new) = (Outbox::new(1024), Outbox::new(1024));
    let leaving = live.register(&alice, &old, Transport::WebSocket);
    let left = std::thread::spawn(move || drop(leaving));
    entered.recv().unwrap();
    let arrived = live.register(&alice, &new, Transport::WebSocket);
    release.send(()).unwrap();
    left.join().unwrap();
    let users: Vec<String> = recorded
        .summary()
        .into_iter()
        .filter(|s| s.starts_with("online") || s.starts_with("offline"))
        .collect();
    assert_eq!(users, ["online:alice"], "{:?}", recorded.summary());
    drop(arrived);
    assert_eq!(recorded.summary().last().unwrap(), "offline:alice");
}
