//! What QoS a message goes out with, and No Local, with third-party clients (herald-mqtt's
//! `origin.rs` and `deliver.rs`): a message reaches a subscription at the lower of the QoS it
//! was published with and the QoS granted [MQTT-3.8.4-8] (a message from another transport
//! counts as QoS 2), and a v5 No Local subscription is not sent the client's own publishes,
//! whatever their QoS [MQTT-3.8.3-3].

use serde_json::{json, Value};

use crate::support::mqtt::{mosquitto_pub, PahoRun};
use crate::support::Server;

/// The messages of a finished Paho run as (payload, qos).
fn received(events: &[Value]) -> Vec<(String, u64)> {
    events
        .iter()
        .filter(|e| e["event"] == "message")
        .map(|e| {
            let payload = e["payload"].as_str().unwrap_or_default().to_owned();
            (payload, e["qos"].as_u64().unwrap_or(99))
        })
        .collect()
}

#[tokio::test]
async fn a_qos_2_subscription_gets_each_message_at_the_qos_it_was_published_with() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["qos/*"], &["qos/*"]);
    for version in ["5", "3.1.1"] {
        let topic = format!("qos/v{}", version.replace('.', ""));
        let mut sub = PahoRun::start(
            mqtt,
            json!({
                "version": version, "username": "default", "password": token,
                "subscribe": [{ "topic": topic, "qos": 2 }], "expect": 3, "timeout": 15
            }),
        );
        sub.until("subscribed").await;
        for (qos, payload) in [("0", "\"zero\""), ("1", "\"one\"")] {
            let args = [
                "-V", "mqttv5", "-u", "default", "-P", &token, "-q", qos, "-t", &topic, "-m",
                payload,
            ];
            mosquitto_pub(mqtt, &args).await.ok();
        }
        // An HTTP publish is durable with a seq: published at QoS 2, as it were.
        server.publish(&topic, json!("http")).await;
        let (code, events) = sub.finish().await;
        assert_eq!(code, Some(0), "{events:?}");
        assert_eq!(
            received(&events),
            [
                ("\"zero\"".to_owned(), 0),
                ("\"one\"".to_owned(), 1),
                ("\"http\"".to_owned(), 2)
            ],
            "MQTT {version}: the lower of the publish's QoS and the granted QoS 2"
        );
    }
}

#[tokio::test]
async fn a_qos_1_publish_reaches_a_persistent_qos_2_subscription_at_qos_1_after_a_restart() {
    let mut server = Server::builder().mqtt().start().await;
    let token = server.token(&["qos/*"], &["qos/*"]);
    let session = |expect: u64| {
        json!({
            "version": "5", "username": "default", "password": token, "client_id": "keeper",
            "clean": false, "session_expiry": 3600,
            "subscribe": [{ "topic": "qos/kept", "qos": 2 }], "expect": expect, "timeout": 15
        })
    };
    let first = PahoRun::start(server.mqtt_addr(), session(0));
    let (code, events) = first.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    let args = [
        "-V", "mqttv5", "-u", "default", "-P", &token, "-q", "1", "-t", "qos/kept", "-m", "1",
    ];
    mosquitto_pub(server.mqtt_addr(), &args).await.ok();
    server.restart().await;
    // The session resumes from the channel log: the message says the QoS it was published with.
    let again = PahoRun::start(server.mqtt_addr(), session(1));
    let (code, events) = again.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    assert_eq!(received(&events), [("1".to_owned(), 1)], "{events:?}");
}

#[tokio::test]
async fn no_local_keeps_a_clients_own_qos_0_and_1_publishes_from_it() {
    let server = Server::builder().mqtt().start().await;
    let token = server.token(&["nl/*"], &["nl/*"]);
    let mut client = PahoRun::start(
        server.mqtt_addr(),
        json!({
            "version": "5", "username": "default", "password": token, "client_id": "echo",
            "subscribe": [{ "topic": "nl/t", "qos": 1, "no_local": true }],
            "publish": [
                { "topic": "nl/t", "payload": "\"own-0\"", "qos": 0 },
                { "topic": "nl/t", "payload": "\"own-1\"", "qos": 1 }
            ],
            "expect": 1, "timeout": 15
        }),
    );
    // Its QoS 1 publish was acknowledged, so both of its own messages are stored before this
    // one: were they sent back, they would come first.
    client.until("published").await;
    client.until("published").await;
    server.publish("nl/t", json!("other")).await;
    let (code, events) = client.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    assert_eq!(
        received(&events),
        [("\"other\"".to_owned(), 1)],
        "only the message another publisher sent"
    );
}
