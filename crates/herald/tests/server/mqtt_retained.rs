//! Retained messages kept until replaced or cleared, as MQTT says and as Home Assistant's
//! discovery needs (issue 33; herald-mqtt's `retained.rs`, the store's retained table): a
//! retained message outlives its channel's history and a kill -9 after its PUBACK
//! [MQTT-3.3.1-5]; a RETAIN 0 publish after it leaves it for new subscribers [MQTT-3.3.1-12];
//! an empty retained payload clears it [MQTT-3.3.1-10]; a wildcard SUBSCRIBE gets every one of
//! 500 retained topics (mosquitto_sub, as Home Assistant subscribes `homeassistant/#`); a
//! retained message published through one node of a cluster is sent on subscribe at the other.
//! Raw clients (herald-mqtt's codec) see each PUBLISH and its RETAIN flag.

use std::time::Duration;

use herald_mqtt::packet::{Packet, ProtocolVersion};

use crate::mqtt_cluster::Cluster;
use crate::mqtt_conformance::{publish, publish_stored, subscribe_until_marker};
use crate::mqtt_session::Raw;
use crate::support::mqtt::mosquitto_sub;
use crate::support::{Server, API_KEY};

const VERSIONS: [ProtocolVersion; 2] = [ProtocolVersion::V311, ProtocolVersion::V5];

fn retained(topic: &str, payload: &str) -> (String, String, bool) {
    (topic.to_owned(), payload.to_owned(), true)
}

fn marker(topic: &str) -> (String, String, bool) {
    (topic.to_owned(), "marker".to_owned(), false)
}

#[tokio::test]
async fn a_retained_message_outlives_its_history_and_a_kill_9_and_retain_0_leaves_it() {
    // A history of one message: the retained one is trimmed from it after a few more.
    let mut server = Server::builder()
        .mqtt()
        .config("[history]\nsize = 1\n")
        .start()
        .await;
    for version in VERSIONS {
        let topic = format!("homeassistant/light/{version:?}/config");
        let (mut publisher, _) = Raw::connect(server.mqtt_addr(), version, Some(API_KEY), 60).await;
        publish_stored(&mut publisher, &topic, "{\"name\":\"lamp\"}", true).await;
        // RETAIN 0 publishes after it neither replace nor hide it [MQTT-3.3.1-12], and push it
        // out of the history (a count trim runs past the size and some slack).
        for i in 0..20 {
            publish_stored(&mut publisher, &topic, &format!("state {i}"), false).await;
        }
        let got = subscribe_until_marker(
            server.mqtt_addr(),
            version,
            &mut publisher,
            &topic,
            &topic,
            "marker",
        )
        .await;
        assert_eq!(
            got,
            [retained(&topic, "{\"name\":\"lamp\"}"), marker(&topic)],
            "{version:?}: the retained message, not the newest RETAIN 0 one"
        );
    }
    // Killed after the PUBACKs: the retained messages were stored with them.
    server.restart().await;
    for version in VERSIONS {
        let topic = format!("homeassistant/light/{version:?}/config");
        let (mut publisher, _) = Raw::connect(server.mqtt_addr(), version, Some(API_KEY), 60).await;
        let got = subscribe_until_marker(
            server.mqtt_addr(),
            version,
            &mut publisher,
            &topic,
            &topic,
            "marker",
        )
        .await;
        assert_eq!(
            got,
            [retained(&topic, "{\"name\":\"lamp\"}"), marker(&topic)],
            "{version:?} after kill -9"
        );
    }
}

#[tokio::test]
async fn an_empty_retained_payload_clears_it_for_exact_and_wildcard_subscribers() {
    let server = Server::builder().mqtt().start().await;
    let addr = server.mqtt_addr();
    for version in VERSIONS {
        let base = format!("cleared/{version:?}");
        let (topic, other) = (format!("{base}/a"), format!("{base}/b"));
        let (mut publisher, _) = Raw::connect(addr, version, Some(API_KEY), 60).await;
        publish_stored(&mut publisher, &topic, "on", true).await;
        publish_stored(&mut publisher, &other, "kept", true).await;
        // Kept behind a RETAIN 0 message, until the clear.
        publish_stored(&mut publisher, &topic, "state", false).await;
        let got =
            subscribe_until_marker(addr, version, &mut publisher, &topic, &topic, "marker").await;
        assert_eq!(got, [retained(&topic, "on"), marker(&topic)], "{version:?}");
        publish_stored(&mut publisher, &topic, "", true).await;
        // A RETAIN 0 message after the clear brings nothing back.
        publish_stored(&mut publisher, &topic, "later", false).await;
        let got =
            subscribe_until_marker(addr, version, &mut publisher, &topic, &topic, "marker").await;
        assert_eq!(got, [marker(&topic)], "{version:?}: cleared");
        let filter = format!("{base}/+");
        let got =
            subscribe_until_marker(addr, version, &mut publisher, &filter, &topic, "marker").await;
        assert_eq!(
            got,
            [retained(&other, "kept"), marker(&topic)],
            "{version:?}: only the topic not cleared"
        );
    }
}

#[tokio::test]
async fn a_wildcard_subscribe_gets_every_one_of_500_retained_topics() {
    let server = Server::builder().mqtt().start().await;
    let addr = server.mqtt_addr();
    let (mut publisher, _) = Raw::connect(addr, ProtocolVersion::V5, Some(API_KEY), 60).await;
    // 500 devices' discovery configs, published once each with RETAIN (pipelined, then every
    // PUBACK awaited), and a RETAIN 0 state after some of them.
    let topic = |i: usize| format!("homeassistant/sensor/d{i:03}/config");
    for i in 0..500 {
        raw_send_retained(&mut publisher, &topic(i), i).await;
    }
    let mut acked = 0;
    while acked < 500 {
        match publisher.next().await {
            Some(Packet::PubAck(_)) => acked += 1,
            Some(_) => continue,
            None => panic!("the publisher was closed; {}", publisher.why_closed()),
        }
    }
    for i in (0..500).step_by(7) {
        publish_stored(&mut publisher, &topic(i), "not retained", false).await;
    }
    let key = API_KEY.to_owned();
    let out = mosquitto_sub(
        addr,
        &[
            "-V",
            "mqttv5",
            "-u",
            "default",
            "-P",
            &key,
            "-t",
            "homeassistant/#",
            "-q",
            "1",
            "-C",
            "500",
            "-W",
            "60",
            "-F",
            "%r %t %p",
        ],
    )
    .await
    .ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    let expected: Vec<String> = (0..500).map(|i| format!("1 {} {i}", topic(i))).collect();
    assert_eq!(
        lines, expected,
        "every retained config, in name order, with RETAIN"
    );
}

/// Sends a QoS 1 PUBLISH with RETAIN of `n` to `topic` without waiting for its PUBACK.
async fn raw_send_retained(raw: &mut Raw, topic: &str, n: usize) {
    let id = u16::try_from(n % 60_000 + 1).unwrap();
    raw.send(&publish(topic, &n.to_string(), true, id)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retained_message_published_on_one_node_is_sent_on_subscribe_at_the_other() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let cluster = Cluster::start().await;
        let (one, two) = (&cluster.one, &cluster.two);
        for version in VERSIONS {
            let topic = format!("cluster/{version:?}/config");
            let (mut on_one, _) = Raw::connect(one.mqtt_addr(), version, Some(API_KEY), 60).await;
            publish_stored(&mut on_one, &topic, "cfg", true).await;
            publish_stored(&mut on_one, &topic, "state", false).await;
            let (mut on_two, _) = Raw::connect(two.mqtt_addr(), version, Some(API_KEY), 60).await;
            for filter in [topic.clone(), format!("cluster/{version:?}/#")] {
                let got = subscribe_until_marker(
                    two.mqtt_addr(),
                    version,
                    &mut on_two,
                    &filter,
                    &topic,
                    "marker",
                )
                .await;
                assert_eq!(
                    got,
                    [retained(&topic, "cfg"), marker(&topic)],
                    "{version:?} {filter} at the other node"
                );
            }
        }
    })
    .await
    .expect("the test finishes within two minutes");
}
