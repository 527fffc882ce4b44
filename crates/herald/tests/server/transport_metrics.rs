//! `herald_connections{transport}` and `herald_messages_written_total{transport}` for the
//! Pusher and MQTT listeners, as for Herald's own transports: a connection counts from its
//! handshake to its end, parked or not, and every message written to it counts once.

use herald_mqtt::packet::QoS;
use serde_json::json;

use crate::mqtt_parking::{metric, subscribed_to, wait_for_metric};
use crate::mqtt_persistence::Raw;
use crate::pusher_client::{established, server_with_credentials};
use crate::support::Server;

const PUSHER_CONNECTIONS: &str = "herald_connections{transport=\"pusher\"}";
const PUSHER_WRITTEN: &str = "herald_messages_written_total{transport=\"pusher\"}";
const PARKED: &str = "herald_connections_parked";

#[tokio::test]
async fn pusher_connections_and_messages_are_counted_parked_or_not() {
    let config = "park_idle_after = \"100ms\"\n";
    let (s, creds) = server_with_credentials(Some(config)).await;
    assert_eq!(metric(&s, PUSHER_CONNECTIONS).await, 0);
    let (mut first, _) = established(&s, &creds).await;
    let (mut second, _) = established(&s, &creds).await;
    for ws in [&mut first, &mut second] {
        ws.send(json!({ "event": "pusher:subscribe", "data": { "channel": "news" } }))
            .await;
        let frame = ws.frame().await;
        assert_eq!(
            frame["event"],
            "pusher_internal:subscription_succeeded",
            "{frame} {}",
            ws.why_closed()
        );
    }
    assert_eq!(metric(&s, PUSHER_CONNECTIONS).await, 2);
    // Parked, they still count as open.
    wait_for_metric(&s, PARKED, 2).await;
    assert_eq!(metric(&s, PUSHER_CONNECTIONS).await, 2);
    // A Herald publish reaches both: two messages written.
    s.publish("news", json!({ "n": 1 })).await;
    for ws in [&mut first, &mut second] {
        let frame = ws.frame().await;
        assert_eq!(frame["channel"], "news", "{frame} {}", ws.why_closed());
    }
    wait_for_metric(&s, PUSHER_WRITTEN, 2).await;
    // Each end is counted once, whether it ends in its task or parked.
    drop(first);
    wait_for_metric(&s, PUSHER_CONNECTIONS, 1).await;
    wait_for_metric(&s, PARKED, 1).await;
    drop(second);
    wait_for_metric(&s, PUSHER_CONNECTIONS, 0).await;
    assert_eq!(metric(&s, PUSHER_WRITTEN).await, 2);
}

const MQTT_CONNECTIONS: &str = "herald_connections{transport=\"mqtt\"}";
const MQTT_WRITTEN: &str = "herald_messages_written_total{transport=\"mqtt\"}";

/// A v5 raw MQTT client `id` subscribed to `t/metrics` at QoS 0.
async fn mqtt_subscriber(s: &Server, id: &str) -> Raw {
    subscribed_to(s, id, 60, "t/metrics", QoS::AtMostOnce).await
}

#[tokio::test]
async fn mqtt_connections_and_messages_are_counted_parked_or_not() {
    let s = Server::builder()
        .mqtt()
        .env("HERALD_PARK_IDLE_AFTER", "100ms")
        .start()
        .await;
    assert_eq!(metric(&s, MQTT_CONNECTIONS).await, 0);
    let mut first = mqtt_subscriber(&s, "metrics-one").await;
    let mut second = mqtt_subscriber(&s, "metrics-two").await;
    assert_eq!(metric(&s, MQTT_CONNECTIONS).await, 2);
    wait_for_metric(&s, PARKED, 2).await;
    assert_eq!(metric(&s, MQTT_CONNECTIONS).await, 2);
    s.publish("t/metrics", json!(1)).await;
    for raw in [&mut first, &mut second] {
        let publish = raw.publish().await;
        assert_eq!(publish.topic.as_str(), "t/metrics");
    }
    wait_for_metric(&s, MQTT_WRITTEN, 2).await;
    drop(first);
    wait_for_metric(&s, MQTT_CONNECTIONS, 1).await;
    drop(second);
    wait_for_metric(&s, MQTT_CONNECTIONS, 0).await;
    assert_eq!(metric(&s, MQTT_WRITTEN).await, 2);
    // Neither was counted as a WebSocket.
    assert_eq!(metric(&s, "herald_connections{transport=\"ws\"}").await, 0);
}
