//! The listener joined to a hub's lifecycle registry wants what the enabled endpoints want, as
//! they are created, changed and deleted: an endpoint matching nothing makes the hub build
//! only the kind it asked for.

use herald_core::auth::Client;
use herald_core::hub::Hub;
use herald_core::lifecycle::{Kinds, Recorded, Relay, Relayed};
use herald_core::live::LiveClients;
use herald_core::outbox::Outbox;

use super::*;

/// Sees every event the node builds (a relay is handed each one), delivering it.
#[derive(Default)]
struct Built(Arc<Recorded>);

impl Relay for Built {
    fn relay(&self, event: &LifecycleEvent) -> Relayed {
        self.0.on_event(event);
        Relayed::Deliver
    }
}

fn alice() -> Client {
    Client {
        app: shop(),
        sub: "alice".into(),
        ..Client::anonymous()
    }
}

#[tokio::test]
async fn the_kinds_wanted_follow_the_endpoints_and_one_matching_nothing_builds_no_subscription() {
    let hooks = hooks().await;
    let hub = Hub::new();
    let live = LiveClients::new();
    assert!(live.set_lifecycle(hub.lifecycle().clone()));
    let lifecycle = hub.lifecycle().clone();
    hooks.listen_to(lifecycle.clone());
    assert!(!lifecycle.is_active(), "no endpoint: nothing is built");

    let occupied = json!({
        "url": "http://127.0.0.1:9/hooks",
        "events": ["channel.occupied"],
        "channels": ["nomatch/**"],
    });
    let (endpoint, _) = hooks.create(&shop(), &occupied).await.unwrap();
    assert_eq!(lifecycle.emitted(), Kinds::CHANNEL_OCCUPIED);
    hooks
        .update(&shop(), endpoint.id, &json!({"events": ["*"]}))
        .await
        .unwrap();
    assert_eq!(lifecycle.emitted(), Kinds::ALL, "widened at once");
    hooks
        .update(&shop(), endpoint.id, &json!({"enabled": false}))
        .await
        .unwrap();
    assert!(!lifecycle.is_active(), "a disabled endpoint wants nothing");
    hooks.delete(&shop(), endpoint.id).await.unwrap();
    assert!(!lifecycle.is_active());

    // An endpoint that wants channel.occupied on channels none of these is: a storm of
    // subscriptions to distinct channels builds no subscription event, tracks no connection,
    // and queues nothing.
    hooks.create(&shop(), &occupied).await.unwrap();
    let built = Arc::new(Built::default());
    assert!(lifecycle.set_relay(built.clone()));
    let outbox = Outbox::new(64);
    let registration = live.register(&alice(), &outbox, Transport::WebSocket);
    assert!(lifecycle.connection_of(&outbox).is_none(), "not tracked");
    for i in 0..100 {
        let room = shop().parse_channel(&format!("room/{i}")).unwrap();
        let (sub, _) = hub.subscribe(&room, outbox.clone());
        hub.unsubscribe(&room, sub.id());
    }
    drop(registration);
    let summary = built.0.summary();
    assert_eq!(summary.len(), 200, "{summary:?}");
    assert!(
        summary
            .iter()
            .all(|e| e.starts_with("+room/") || e.starts_with("-room/")),
        "only the channels' transitions (a relay keeps them in pairs): {summary:?}"
    );
    assert!(
        taken(&hooks).is_empty(),
        "none matches the endpoint's pattern"
    );

    // A new endpoint for everything: connections from now on are tracked and told.
    hooks.create(&shop(), &body(&["*"])).await.unwrap();
    let outbox = Outbox::new(64);
    let registration = live.register(&alice(), &outbox, Transport::Sse);
    assert!(lifecycle.connection_of(&outbox).is_some());
    drop(registration);
    let kinds: Vec<EventType> = taken(&hooks).iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventType::ClientConnected,
            EventType::UserOnline,
            EventType::ClientDisconnected,
            EventType::UserOffline
        ]
    );
}
