//! Normative statements of the MQTT standards that Eclipse Paho's interoperability suite
//! (docs/mqtt.md, "Conformance") found the listener breaking, each checked here in both versions
//! with a raw client (herald-mqtt's codec on a socket, `mqtt_session.rs`'s `Raw`) so that what
//! comes back is seen packet by packet.

use std::net::SocketAddr;
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicU16, Ordering};

use herald_mqtt::packet::{
    Bytes, Connect, ConnectProperties, Packet, ProtocolVersion, PubAck, Publish, QoS, TopicName,
    Will,
};

use crate::mqtt_session::Raw;
use crate::support::{Server, API_KEY};

const VERSIONS: [ProtocolVersion; 2] = [ProtocolVersion::V311, ProtocolVersion::V5];

/// A QoS 1 PUBLISH with packet id `id`.
pub(crate) fn publish(topic: &str, payload: &str, retain: bool, id: u16) -> Packet {
    Packet::Publish(Publish {
        dup: false,
        qos: QoS::AtLeastOnce,
        retain,
        topic: TopicName::new(topic).unwrap(),
        packet_id: NonZeroU16::new(id),
        properties: Default::default(),
        payload: Bytes::copy_from_slice(payload.as_bytes()),
    })
}

/// A SUBSCRIBE to `filter` at QoS 1.
fn subscribe(filter: &str) -> Packet {
    crate::mqtt_shared::subscribe(filter, QoS::AtLeastOnce, false)
}

/// Publishes at QoS 1 and waits for the PUBACK: the message is stored when this returns. Each
/// call takes a packet id of its own.
pub(crate) async fn publish_stored(raw: &mut Raw, topic: &str, payload: &str, retain: bool) {
    static NEXT: AtomicU16 = AtomicU16::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed) % 60_000 + 1;
    raw.send(&publish(topic, payload, retain, id)).await;
    loop {
        match raw.next().await {
            Some(Packet::PubAck(ack)) if ack.packet_id.get() == id => return,
            Some(_) => continue,
            None => panic!("the publisher was closed; {}", raw.why_closed()),
        }
    }
}

/// Subscribes a new connection to `filter` at QoS 1, then publishes `marker` on `topic`
/// through `publisher` once the SUBACK came: every PUBLISH the subscriber got up to and
/// including the marker, as (topic, payload, RETAIN). A retained message is queued before the
/// marker's live delivery (it may come before or after the SUBACK), so it is in the list if
/// the server sent one.
pub(crate) async fn subscribe_until_marker(
    addr: SocketAddr,
    version: ProtocolVersion,
    publisher: &mut Raw,
    filter: &str,
    topic: &str,
    marker: &str,
) -> Vec<(String, String, bool)> {
    let (mut raw, _) = Raw::connect(addr, version, Some(API_KEY), 60).await;
    raw.send(&subscribe(filter)).await;
    let mut got = Vec::new();
    let mut subacked = false;
    loop {
        match raw.next().await {
            Some(Packet::SubAck(_)) if !subacked => {
                subacked = true;
                publish_stored(publisher, topic, marker, false).await;
            }
            Some(Packet::Publish(p)) => {
                if let Some(id) = p.packet_id {
                    raw.send(&Packet::PubAck(PubAck::new(id))).await;
                }
                let payload = String::from_utf8_lossy(&p.payload).into_owned();
                let is_marker = payload == marker;
                got.push((p.topic.as_str().to_owned(), payload, p.retain));
                if is_marker {
                    return got;
                }
            }
            Some(_) => continue,
            None => panic!("the subscriber was closed; {}", raw.why_closed()),
        }
    }
}

#[tokio::test]
async fn a_message_published_or_willed_without_retain_is_never_sent_as_the_retained_message() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    for version in VERSIONS {
        let base = format!("conformance/{version:?}");
        let (mut publisher, _) = Raw::connect(mqtt, version, Some(API_KEY), 60).await;
        // The newest message of `x` was published with RETAIN 0: it must not be stored as the
        // retained message [MQTT-3.3.1-12] (v5: [MQTT-3.3.1-8]).
        publish_stored(&mut publisher, &format!("{base}/x"), "plain", false).await;
        // The newest message of `will` is a will with Will Retain 0: published as a
        // non-retained message [MQTT-3.1.2-16] (v5: [MQTT-3.1.2-14]), which a watcher sees
        // before anyone subscribes anew.
        let will_topic = format!("{base}/will");
        let (mut watcher, _) = Raw::connect(mqtt, version, Some(API_KEY), 60).await;
        watcher.send(&subscribe(&will_topic)).await;
        match watcher.next().await {
            Some(Packet::SubAck(_)) => {}
            other => panic!("expected SUBACK, got {other:?}; {}", watcher.why_closed()),
        }
        let connect = Connect {
            protocol_version: version,
            clean_start: true,
            keep_alive: 60,
            client_id: format!("willer-{version:?}"),
            will: Some(Will {
                topic: TopicName::new(will_topic.as_str()).unwrap(),
                payload: Bytes::from_static(b"gone"),
                qos: QoS::AtLeastOnce,
                retain: false,
                properties: Default::default(),
            }),
            username: Some("default".into()),
            password: Some(Bytes::from_static(API_KEY.as_bytes())),
            properties: ConnectProperties::default(),
        };
        let (willer, _) = Raw::connect_packet(mqtt, connect).await;
        // Closed without DISCONNECT: the will is published.
        drop(willer);
        loop {
            match watcher.next().await {
                Some(Packet::Publish(p)) if &p.payload[..] == b"gone" => break,
                Some(_) => continue,
                None => panic!("the watcher was closed; {}", watcher.why_closed()),
            }
        }

        // New subscriptions, exact and wildcard: nothing retained before the live marker.
        for (filter, topic) in [
            (format!("{base}/x"), format!("{base}/x")),
            (will_topic.clone(), will_topic.clone()),
            (format!("{base}/+"), format!("{base}/x")),
        ] {
            let got = subscribe_until_marker(
                server.mqtt_addr(),
                version,
                &mut publisher,
                &filter,
                &topic,
                "marker",
            )
            .await;
            assert_eq!(
                got,
                [(topic.clone(), "marker".into(), false)],
                "{version:?} SUBSCRIBE {filter}: only the live marker, no retained message"
            );
        }

        // A message published with RETAIN 1 is the retained message [MQTT-3.3.1-5], sent to a
        // new subscription with RETAIN 1 [MQTT-3.3.1-8].
        let kept = format!("{base}/kept");
        publish_stored(&mut publisher, &kept, "kept", true).await;
        let got = subscribe_until_marker(
            server.mqtt_addr(),
            version,
            &mut publisher,
            &kept,
            &kept,
            "marker",
        )
        .await;
        assert_eq!(
            got,
            [
                (kept.clone(), "kept".into(), true),
                (kept.clone(), "marker".into(), false)
            ],
            "{version:?}"
        );
    }
}
