//! What QoS a message goes out with, and No Local, with third-party clients (herald-mqtt's
//! `origin.rs` and `deliver.rs`): a message reaches a subscription at the lower of the QoS it
//! was published with and the QoS granted [MQTT-3.8.4-8] (a message from another transport
//! counts as QoS 2), and a v5 No Local subscription is not sent the client's own publishes,
//! whatever their QoS [MQTT-3.8.3-3]. A message matching several of a client's subscriptions
//! goes to a v5 client once per subscription, each copy at that subscription's QoS with its
//! Subscription Identifier and under its own No Local, live and to a resumed persistent
//! session; to a 3.1.1 client once, at the highest QoS (herald-mqtt's `subscriptions.rs`).

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

/// The messages of a finished Paho run as (topic, payload, qos, Subscription Identifiers).
fn copies(events: &[Value]) -> Vec<(String, String, u64, Value)> {
    events
        .iter()
        .filter(|e| e["event"] == "message")
        .map(|e| {
            (
                e["topic"].as_str().unwrap_or_default().to_owned(),
                e["payload"].as_str().unwrap_or_default().to_owned(),
                e["qos"].as_u64().unwrap_or(99),
                e["properties"]["SubscriptionIdentifier"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn overlapping_subscriptions_send_a_v5_client_a_copy_each_and_a_3_1_1_client_one() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["ov5/*", "=ov5/*", "ov311/*", "=ov311/*"], &[]);
    for (version, prefix) in [("5", "ov5"), ("3.1.1", "ov311")] {
        // A second message only the filter matches: were there a second copy of the first to
        // a 3.1.1 client, it would come before this one.
        let expect = if version == "5" { 3 } else { 2 };
        let mut sub = PahoRun::start(
            mqtt,
            json!({
                "version": version, "username": "default", "password": token,
                "subscribe": [
                    { "topic": format!("{prefix}/a"), "qos": 2, "subscription_identifier": 1 },
                    { "topic": format!("{prefix}/+"), "qos": 1, "subscription_identifier": 2 }
                ],
                "expect": expect, "timeout": 15
            }),
        );
        sub.until("subscribed").await;
        server.publish(&format!("{prefix}/a"), json!("both")).await;
        server.publish(&format!("{prefix}/z"), json!("one")).await;
        let (code, events) = sub.finish().await;
        assert_eq!(code, Some(0), "{events:?}");
        let (a, z) = (format!("{prefix}/a"), format!("{prefix}/z"));
        let both = "\"both\"".to_owned();
        let expected = if version == "5" {
            vec![
                // Lowest QoS first, each with its subscription's identifier only.
                (a.clone(), both.clone(), 1, json!([2])),
                (a, both, 2, json!([1])),
                (z, "\"one\"".to_owned(), 1, json!([2])),
            ]
        } else {
            vec![
                (a, both, 2, Value::Null),
                (z, "\"one\"".to_owned(), 1, Value::Null),
            ]
        };
        // Paho hands a QoS 2 message over on PUBREL, after later QoS 1 ones.
        let mut got = copies(&events);
        got.sort_by_key(|c| format!("{c:?}"));
        let mut expected = expected;
        expected.sort_by_key(|c| format!("{c:?}"));
        assert_eq!(got, expected, "MQTT {version}");
    }
}

#[tokio::test]
async fn no_local_holds_back_only_its_own_subscriptions_copy() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["nl/*", "=nl/*"], &["nl/*"]);
    let mut client = PahoRun::start(
        mqtt,
        json!({
            "version": "5", "username": "default", "password": token,
            "subscribe": [
                { "topic": "nl/a", "qos": 1, "no_local": true, "subscription_identifier": 1 },
                { "topic": "nl/+", "qos": 1, "subscription_identifier": 2 }
            ],
            "publish": [{ "topic": "nl/a", "payload": "own", "qos": 1 }],
            "expect": 3, "timeout": 15
        }),
    );
    client.until("published").await;
    // From elsewhere: both subscriptions' copies.
    server.publish("nl/a", json!("other")).await;
    let (code, events) = client.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    let other = "\"other\"".to_owned();
    assert_eq!(
        copies(&events),
        [
            ("nl/a".to_owned(), "own".to_owned(), 1, json!([2])),
            ("nl/a".to_owned(), other.clone(), 1, json!([1])),
            ("nl/a".to_owned(), other, 1, json!([2])),
        ],
        "its own message only through nl/+, which has no No Local: {events:?}"
    );
}

#[tokio::test]
async fn a_resumed_v5_session_gets_each_subscriptions_copy_of_what_it_missed_once() {
    let mut server = Server::builder().mqtt().start().await;
    let token = server.token(&["ovp/*", "=ovp/*"], &[]);
    let session = |subscribe: Value, expect: u64| {
        json!({
            "version": "5", "username": "default", "password": token, "client_id": "overlap",
            "clean": false, "session_expiry": 3600, "subscribe": subscribe, "expect": expect,
            "timeout": 15
        })
    };
    let subscribe = json!([
        { "topic": "ovp/a", "qos": 1, "subscription_identifier": 1 },
        { "topic": "ovp/+", "qos": 2, "subscription_identifier": 2 }
    ]);
    let (code, events) = PahoRun::start(server.mqtt_addr(), session(subscribe, 0))
        .finish()
        .await;
    assert_eq!(code, Some(0), "{events:?}");
    // Kept for the session while it is away, then across a restart.
    server.publish("ovp/a", json!("missed")).await;
    server.restart().await;
    let mut again = PahoRun::start(server.mqtt_addr(), session(json!([]), 4));
    let connack = again.until("connack").await;
    assert_eq!(connack["session_present"], json!(true), "{connack}");
    again.until("message").await;
    again.until("message").await;
    // Were a copy of what it missed sent twice, it would come before these.
    server.publish("ovp/a", json!("live")).await;
    let (code, events) = again.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    let copy = |payload: &str, qos: u64, id: u64| {
        ("ovp/a".to_owned(), format!("{payload:?}"), qos, json!([id]))
    };
    assert_eq!(
        copies(&events),
        [
            copy("missed", 1, 1),
            copy("missed", 2, 2),
            copy("live", 1, 1),
            copy("live", 2, 2),
        ],
        "{events:?}"
    );
}
