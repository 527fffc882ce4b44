//! MQTT 5 Subscription Identifiers (herald-mqtt's `subscriptions.rs`, `outbound.rs`) with
//! Eclipse Paho: the CONNACK says they are available, each subscription keeps the identifier of
//! the SUBSCRIBE that made it, and the copy of a message a client is sent through each matching
//! subscription carries that subscription's identifier [MQTT-3.3.4-3], [MQTT-3.3.4-5], also
//! once a persistent session resumed them after a restart of the server (they are stored with
//! the session).

use serde_json::{json, Value};

use crate::support::mqtt::PahoRun;
use crate::support::Server;

/// The Subscription Identifiers of each message a Paho run received, as (payload, ids).
fn identifiers(events: &[Value]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter(|e| e["event"] == "message")
        .map(|e| {
            let payload = e["payload"].as_str().unwrap_or_default().to_owned();
            (payload, e["properties"]["SubscriptionIdentifier"].clone())
        })
        .collect()
}

#[tokio::test]
async fn a_message_carries_the_identifiers_of_its_matching_subscriptions_across_a_restart() {
    let mut server = Server::builder().mqtt().start().await;
    // A wildcard needs the encoded channels covered too (docs/mqtt.md, "Wildcards").
    let token = server.token(&["ids/*", "=ids/*"], &[]);
    let session = |subscribe: Value, expect: u64| {
        json!({
            "version": "5", "username": "default", "password": token, "client_id": "ids",
            "clean": false, "session_expiry": 3600, "subscribe": subscribe, "expect": expect,
            "timeout": 15
        })
    };
    let subscribe = json!([
        { "topic": "ids/a", "qos": 1, "subscription_identifier": 5 },
        { "topic": "ids/+", "qos": 1, "subscription_identifier": 268435455 },
        { "topic": "ids/b", "qos": 1 }
    ]);
    let mut first = PahoRun::start(server.mqtt_addr(), session(subscribe, 4));
    let connack = first.until("connack").await;
    // Absent means 1 (MQTT 5.0 3.2.2.3.12).
    let available = &connack["properties"]["SubscriptionIdentifierAvailable"];
    assert_eq!(available.as_u64().unwrap_or(1), 1, "{connack}");
    first.until("subscribed").await;
    server.publish("ids/a", json!("a")).await;
    server.publish("ids/b", json!("b")).await;
    let (code, events) = first.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    assert_eq!(
        identifiers(&events),
        [
            ("\"a\"".to_owned(), json!([5])),
            ("\"a\"".to_owned(), json!([268435455])),
            // The subscription to ids/b has no identifier: its copy has none.
            ("\"b\"".to_owned(), Value::Null),
            ("\"b\"".to_owned(), json!([268435455])),
        ],
        "a copy per subscription, each with its subscription's identifier: {events:?}"
    );
    // Published while the client is away, then the server restarts: the session's stored
    // subscriptions keep their identifiers.
    server.publish("ids/a", json!("missed")).await;
    server.restart().await;
    let mut again = PahoRun::start(server.mqtt_addr(), session(json!([]), 4));
    let connack = again.until("connack").await;
    assert_eq!(connack["session_present"], json!(true), "{connack}");
    // What it missed comes through the resumed subscriptions; a live one as well.
    again.until("message").await;
    again.until("message").await;
    server.publish("ids/a", json!("live")).await;
    let (code, events) = again.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    assert_eq!(
        identifiers(&events),
        [
            ("\"missed\"".to_owned(), json!([5])),
            ("\"missed\"".to_owned(), json!([268435455])),
            ("\"live\"".to_owned(), json!([5])),
            ("\"live\"".to_owned(), json!([268435455])),
        ],
        "{events:?}"
    );
}
