//! Pusher cache channels against the real binary: pusher-js 8.6.0 (`client.mjs`) on `cache-`
//! and `private-cache-` channels gets `pusher:cache_miss` right after subscribing to a channel
//! without events, and a later subscriber gets the channel's last event (a trigger of the Node
//! SDK, or Herald's own publish) right after its `subscription_succeeded`, then live events;
//! a raw WebSocket checks `presence-cache-`, whose confirmation is its members list.

use serde_json::{json, Value};

use crate::pusher_api::{run, trigger, Sdk};
use crate::pusher_client::{established, event, event_of, server_with_credentials, PusherJs};
use crate::pusher_presence::subscribe_presence;

#[tokio::test]
async fn cache_channels_send_a_miss_then_the_last_event_to_pusher_js() {
    let (s, creds) = server_with_credentials(None).await;
    let channels = ["cache-prices", "private-cache-orders"];
    let mut first = PusherJs::start(&s, &creds, &channels, false).await;
    // Each channel: subscribed, then its miss (the two channels' lines may interleave).
    let mut lines = Vec::new();
    for _ in 0..4 {
        lines.push(event_of(&first.next_event().await));
    }
    for channel in channels {
        let on: Vec<_> = lines.iter().filter(|l| l.0 == channel).cloned().collect();
        assert_eq!(on.len(), 2, "{lines:?}");
        assert_eq!(on[0].1, "pusher:subscription_succeeded", "{lines:?}");
        assert_eq!(on[1].1, "pusher:cache_miss", "{lines:?}");
    }

    let (status, body) = run(
        Sdk::Node,
        &s,
        &creds,
        trigger(&["cache-prices"], "tick", r#"{"p":1}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    s.publish("private-cache-orders", json!({ "order": 7 }))
        .await;
    let mut live = vec![
        event_of(&first.next_event().await),
        event_of(&first.next_event().await),
    ];
    live.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        live,
        vec![
            event("cache-prices", "tick", json!({ "p": 1 })),
            event("private-cache-orders", "message", json!({ "order": 7 })),
        ]
    );

    // A later subscriber gets each channel's last event right after subscribing.
    let mut later = PusherJs::start(&s, &creds, &channels, false).await;
    let mut lines = Vec::new();
    for _ in 0..4 {
        lines.push(event_of(&later.next_event().await));
    }
    let on = |channel: &str| -> Vec<(String, String, Value)> {
        lines.iter().filter(|l| l.0 == channel).cloned().collect()
    };
    assert_eq!(
        on("cache-prices")[1],
        event("cache-prices", "tick", json!({ "p": 1 })),
        "{lines:?}"
    );
    assert_eq!(on("cache-prices")[0].1, "pusher:subscription_succeeded");
    assert_eq!(
        on("private-cache-orders")[1],
        event("private-cache-orders", "message", json!({ "order": 7 })),
        "{lines:?}"
    );
    // Then live events, once.
    s.publish("cache-prices", json!("next")).await;
    assert_eq!(
        event_of(&later.next_event().await),
        event("cache-prices", "message", json!("next"))
    );
    first.exit().await;
    later.exit().await;
}

#[tokio::test]
async fn a_presence_cache_channel_sends_its_members_then_the_miss_or_the_last_event() {
    let (s, creds) = server_with_credentials(None).await;
    let room = "presence-cache-room";
    let (mut one, socket) = established(&s, &creds).await;
    let data = r#"{"user_id":"1"}"#;
    subscribe_presence(&mut one, &creds, &socket, room, data, data).await;
    let ok = one.frame().await;
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    let miss = one.frame().await;
    assert_eq!(
        miss,
        json!({ "event": "pusher:cache_miss", "channel": room })
    );

    s.publish(room, json!({ "topic": "hello" })).await;
    assert_eq!(one.frame().await["event"], "message");
    let (mut two, socket) = established(&s, &creds).await;
    let data = r#"{"user_id":"2"}"#;
    subscribe_presence(&mut two, &creds, &socket, room, data, data).await;
    let ok = two.frame().await;
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    assert_eq!(
        two.frame().await,
        json!({ "event": "message", "channel": room, "data": r#"{"topic":"hello"}"# })
    );
}
