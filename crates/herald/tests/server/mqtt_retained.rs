//! Retained messages kept until replaced or cleared, as MQTT says and as Home Assistant's
//! discovery needs (issue 33; herald-mqtt's `retained.rs`, the store's retained table): a
//! retained message outlives its channel's history and a kill -9 after its PUBACK
//! [MQTT-3.3.1-5]; a RETAIN 0 publish after it leaves it for new subscribers [MQTT-3.3.1-12];
//! an empty retained payload clears it [MQTT-3.3.1-10]; a wildcard SUBSCRIBE gets every one of
//! 500 retained topics (mosquitto_sub, as Home Assistant subscribes `homeassistant/#`); a
//! retained message published through one node of a cluster is sent on subscribe at the other;
//! an HTTP publish (single and batch) of a `$mqtt` envelope with `"retain":true` sets or clears
//! it as an MQTT RETAIN 1 publish does; a persistent session's wildcard filter sent an older
//! retained message does not replay, on resume, what its channel had before the SUBSCRIBE; a
//! SUBSCRIBE is answered with its SUBACK before its retained messages, exact and wildcard.
//! Raw clients (herald-mqtt's codec) see each PUBLISH and its RETAIN flag.

use std::time::Duration;

use herald_mqtt::packet::{ConnectProperties, Disconnect, Packet, ProtocolVersion, QoS};
use serde_json::json;

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
    // Their PUBACKs say they are stored, not that they were delivered: their fan-out may come
    // after the SUBSCRIBE below, which gets only the retained configs all the same, as
    // retained messages (core's filters take only the commits made after them).
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

/// What `mosquitto_sub` of `version` (`mqttv311`, `mqttv5`) subscribed to `topic` prints for
/// the first message it gets, within 10 s, as `RETAIN payload`.
async fn mosquitto_first(server: &Server, version: &str, topic: &str) -> String {
    let out = mosquitto_sub(
        server.mqtt_addr(),
        &[
            "-V", version, "-u", "default", "-P", API_KEY, "-t", topic, "-q", "1", "-C", "1", "-W",
            "10", "-F", "%r %p",
        ],
    )
    .await
    .ok();
    out.stdout.trim().to_owned()
}

#[tokio::test]
async fn an_http_publish_of_a_retained_envelope_sets_and_clears_the_retained_message() {
    // A history of one message: the HTTP one is trimmed from it by the MQTT ones after it.
    let server = Server::builder()
        .mqtt()
        .config("[history]\nsize = 1\n")
        .start()
        .await;
    let addr = server.mqtt_addr();
    let (mut publisher, _) = Raw::connect(addr, ProtocolVersion::V5, Some(API_KEY), 60).await;
    let topic = "homeassistant/switch/http/config";
    server
        .publish(
            topic,
            json!({ "$mqtt": { "json": { "name": "lamp" }, "retain": true } }),
        )
        .await;
    for i in 0..20 {
        publish_stored(&mut publisher, topic, &format!("state {i}"), false).await;
    }
    for version in ["mqttv311", "mqttv5"] {
        assert_eq!(
            mosquitto_first(&server, version, topic).await,
            r#"1 {"name":"lamp"}"#,
            "{version}: the HTTP publish's payload, with RETAIN, not the newest RETAIN 0 message"
        );
    }
    // A batch's message sets it too.
    let batched = "homeassistant/switch/batch/config";
    let (status, body) = server
        .post(
            "/v1/batch",
            json!({ "messages": [
                { "channel": batched, "data": { "$mqtt": { "text": "ON", "retain": true } } },
                { "channel": "homeassistant/other", "data": { "plain": true } },
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    publish_stored(&mut publisher, batched, "state", false).await;
    for version in VERSIONS {
        let got =
            subscribe_until_marker(addr, version, &mut publisher, batched, batched, "marker").await;
        assert_eq!(
            got,
            [retained(batched, "ON"), marker(batched)],
            "{version:?}"
        );
    }
    // An HTTP clear ends it: a RETAIN 0 message after the clear brings nothing back.
    server
        .publish(
            topic,
            json!({ "$mqtt": { "text": "", "retain": true, "clear": true } }),
        )
        .await;
    publish_stored(&mut publisher, topic, "later", false).await;
    for version in VERSIONS {
        let got =
            subscribe_until_marker(addr, version, &mut publisher, topic, topic, "marker").await;
        assert_eq!(got, [marker(topic)], "{version:?}: cleared over HTTP");
        let got = subscribe_until_marker(
            addr,
            version,
            &mut publisher,
            "homeassistant/switch/+/config",
            topic,
            "marker",
        )
        .await;
        assert_eq!(
            got,
            [retained(batched, "ON"), marker(topic)],
            "{version:?}: a wildcard gets only the topic not cleared"
        );
    }
    // Its expiry is honoured: one already past is no retained message.
    let expired = "homeassistant/switch/expired/config";
    server
        .publish(
            expired,
            json!({ "$mqtt": { "text": "old", "retain": true, "expiry": 1 } }),
        )
        .await;
    publish_stored(&mut publisher, expired, "state", false).await;
    let got = subscribe_until_marker(
        addr,
        ProtocolVersion::V5,
        &mut publisher,
        expired,
        expired,
        "marker",
    )
    .await;
    assert_eq!(got, [marker(expired)], "expired");
}

#[tokio::test]
async fn a_resumed_wildcard_session_replays_nothing_its_channel_had_before_the_subscribe() {
    use crate::mqtt_persistence::Raw as Session;
    let server = Server::builder().mqtt().start().await;
    let addr = server.mqtt_addr();
    for version in VERSIONS {
        let topic = format!("resume/{version:?}/light");
        let (mut publisher, _) = Raw::connect(addr, version, Some(API_KEY), 60).await;
        publish_stored(&mut publisher, &topic, "cfg", true).await;
        // RETAIN 0 messages after the retained one, all before the SUBSCRIBE: not the session's.
        publish_stored(&mut publisher, &topic, "state 1", false).await;
        publish_stored(&mut publisher, &topic, "state 2", false).await;
        // The filter is made in a later millisecond than they were stored in.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let client_id = format!("resume-{version:?}");
        // v5: a Session Expiry Interval; 3.1.1: Clean Session 0 is enough.
        let properties = || match version {
            ProtocolVersion::V5 => ConnectProperties {
                session_expiry_interval: 3600,
                ..ConnectProperties::default()
            },
            _ => ConnectProperties::default(),
        };
        let (mut session, _) =
            Session::connect(addr, version, API_KEY, &client_id, false, properties()).await;
        let filter = format!("resume/{version:?}/#");
        session
            .send(&crate::mqtt_shared::subscribe(
                &filter,
                QoS::AtLeastOnce,
                false,
            ))
            .await;
        // The SUBACK and the retained message, in either order; the message acknowledged, and
        // the PUBACK handled before the DISCONNECT (a PINGRESP after it).
        let mut got = Vec::new();
        let mut subacked = false;
        while !subacked || got.is_empty() {
            match session.next().await {
                Some(Packet::SubAck(_)) => subacked = true,
                Some(Packet::Publish(p)) => {
                    if let Some(id) = p.packet_id {
                        session
                            .send(&Packet::PubAck(herald_mqtt::packet::PubAck::new(id)))
                            .await;
                    }
                    let payload = String::from_utf8_lossy(&p.payload).into_owned();
                    got.push((p.topic.as_str().to_owned(), payload, p.retain));
                }
                other => panic!("{version:?}: unexpected {other:?}"),
            }
        }
        assert_eq!(got, [retained(&topic, "cfg")], "{version:?}");
        assert_eq!(session.until_ping().await, Vec::<String>::new());
        session
            .send(&Packet::Disconnect(Disconnect::default()))
            .await;
        session.until_closed().await;

        let (mut back, connack) =
            Session::connect(addr, version, API_KEY, &client_id, false, properties()).await;
        assert!(connack.session_present, "{version:?}: {connack:?}");
        // What the resume replays is queued before the CONNACK: ahead of the marker.
        publish_stored(&mut publisher, &topic, "marker", false).await;
        let mut got = Vec::new();
        loop {
            let p = back.publish().await;
            if let Some(id) = p.packet_id {
                back.send(&Packet::PubAck(herald_mqtt::packet::PubAck::new(id)))
                    .await;
            }
            let payload = String::from_utf8_lossy(&p.payload).into_owned();
            got.push((p.topic.as_str().to_owned(), payload.clone(), p.retain));
            if payload == "marker" {
                break;
            }
        }
        assert_eq!(
            got,
            [marker(&topic)],
            "{version:?}: only what was published after the SUBSCRIBE"
        );
        back.send(&Packet::Disconnect(Disconnect::default())).await;
    }
}

#[tokio::test]
async fn a_subscribe_is_answered_with_its_suback_before_its_retained_messages() {
    // As Mosquitto does, and as test clients that read the SUBACK first expect (the standards
    // also allow the retained messages first, MQTT 5.0 3.8.4): exact and wildcard filters.
    let server = Server::builder().mqtt().start().await;
    let addr = server.mqtt_addr();
    for version in VERSIONS {
        let base = format!("suback-first/{version:?}");
        let (mut publisher, _) = Raw::connect(addr, version, Some(API_KEY), 60).await;
        publish_stored(&mut publisher, &format!("{base}/a"), "kept a", true).await;
        publish_stored(&mut publisher, &format!("{base}/b/c"), "kept c", true).await;
        for (filter, expected) in [
            (format!("{base}/a"), vec!["kept a"]),
            (format!("{base}/#"), vec!["kept a", "kept c"]),
        ] {
            let (mut sub, _) = Raw::connect(addr, version, Some(API_KEY), 60).await;
            sub.send(&crate::mqtt_shared::subscribe(
                &filter,
                QoS::AtMostOnce,
                false,
            ))
            .await;
            let first = sub.next_packet().await;
            assert!(
                matches!(first, Packet::SubAck(_)),
                "{version:?} {filter}: the SUBACK first, got {first:?}"
            );
            let mut got = Vec::new();
            while got.len() < expected.len() {
                match sub.next_packet().await {
                    Packet::Publish(p) => {
                        assert!(p.retain, "{version:?} {filter}: {p:?} sent as retained");
                        got.push(String::from_utf8_lossy(&p.payload).into_owned());
                    }
                    other => panic!("{version:?} {filter}: a retained PUBLISH, got {other:?}"),
                }
            }
            assert_eq!(got, expected, "{version:?} {filter}");
        }
    }
}
