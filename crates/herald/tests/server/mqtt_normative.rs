//! Normative statements of MQTT 5.0 and 3.1.1 that a check of the listener against the
//! standards' text (docs/mqtt.md, "Conformance", "Checked beyond Paho's suite") found broken,
//! each sent as packets by a raw client (`mqtt_session.rs`'s `Raw`), so that what comes back is
//! seen packet by packet.

use std::num::{NonZeroU16, NonZeroU32};

use herald_mqtt::packet::{
    Bytes, ConnectProperties, Packet, ProtocolVersion, PubComp, PubRec, PubRel, Publish,
    PublishProperties, QoS, ReasonCode, TopicName,
};

use crate::mqtt_persistence::default_app_connect;
use crate::mqtt_session::Raw;
use crate::support::{Server, API_KEY};

const VERSIONS: [ProtocolVersion; 2] = [ProtocolVersion::V311, ProtocolVersion::V5];

/// A QoS 1 PUBLISH of `payload` to `topic` with packet identifier `id` and `properties`.
fn publish_with(topic: &str, payload: &str, id: u16, properties: PublishProperties) -> Packet {
    publish_at(QoS::AtLeastOnce, topic, payload, id, properties)
}

/// A PUBLISH at `qos` (1 or 2) of `payload` to `topic` with packet identifier `id`.
fn publish_at(
    qos: QoS,
    topic: &str,
    payload: &str,
    id: u16,
    properties: PublishProperties,
) -> Packet {
    Packet::Publish(Publish {
        dup: false,
        qos,
        retain: false,
        topic: TopicName::new(topic).unwrap(),
        packet_id: NonZeroU16::new(id),
        properties,
        payload: Bytes::copy_from_slice(payload.as_bytes()),
    })
}

#[tokio::test]
async fn a_publish_from_a_client_with_a_subscription_identifier_is_a_protocol_error() {
    // [MQTT-3.3.4-6]: the Subscription Identifier is the server's to set on what it sends.
    let server = Server::builder().mqtt().start().await;
    let (mut raw, _) =
        Raw::connect(server.mqtt_addr(), ProtocolVersion::V5, Some(API_KEY), 60).await;
    let properties = PublishProperties {
        subscription_identifiers: vec![NonZeroU32::new(7).unwrap()],
        ..Default::default()
    };
    raw.send(&publish_with("normative/subid", "x", 1, properties))
        .await;
    let disconnect = raw.until_closed().await;
    let disconnect = disconnect.unwrap_or_else(|| panic!("no DISCONNECT; {}", raw.why_closed()));
    assert_eq!(
        disconnect.reason_code,
        ReasonCode::ProtocolError,
        "{disconnect:?}; {}",
        raw.why_closed()
    );
}

/// Connects `client_id` with the API key, Clean Start 0 and a session that outlives the
/// connection (v5: Session Expiry Interval 300 s; 3.1.1: Clean Session 0).
async fn connect_persistent(
    server: &Server,
    version: ProtocolVersion,
    client_id: &str,
) -> (Raw, bool) {
    let properties = ConnectProperties {
        session_expiry_interval: 300,
        ..Default::default()
    };
    let connect = default_app_connect(version, API_KEY, client_id, properties);
    let (raw, connack) = Raw::connect_packet(server.mqtt_addr(), connect).await;
    assert_eq!(connack.reason_code, ReasonCode::Success, "{connack:?}");
    (raw, connack.session_present)
}

#[tokio::test]
async fn a_qos2_publish_sent_again_after_reconnecting_is_not_delivered_twice() {
    // [MQTT-4.3.3-10] (3.1.1 [MQTT-4.3.3-2]): until its PUBREL, a PUBLISH with the same packet
    // identifier is the same message, and the id awaiting PUBREL is session state, so it holds
    // across a reconnect with the session present: the client's resend (DUP) after losing
    // the PUBREC is acknowledged, not delivered a second time.
    let server = Server::builder().mqtt().start().await;
    for version in VERSIONS {
        let topic = format!("normative/qos2/{version:?}");
        let (mut subscriber, _) =
            Raw::connect(server.mqtt_addr(), version, Some(API_KEY), 60).await;
        subscriber
            .send(&crate::mqtt_shared::subscribe(
                &topic,
                QoS::ExactlyOnce,
                false,
            ))
            .await;
        match subscriber.next().await {
            Some(Packet::SubAck(_)) => {}
            other => panic!(
                "expected SUBACK, got {other:?}; {}",
                subscriber.why_closed()
            ),
        }
        let client_id = format!("normative-qos2-{version:?}");
        let (mut publisher, _) = connect_persistent(&server, version, &client_id).await;
        let once = publish_at(QoS::ExactlyOnce, &topic, "once", 5, Default::default());
        publisher.send(&once).await;
        match publisher.next_packet().await {
            Packet::PubRec(rec) => assert_eq!(rec.packet_id.get(), 5),
            other => panic!("{version:?}: expected PUBREC, got {other:?}"),
        }
        // The connection is lost before the PUBREC reached the client: it reconnects and
        // sends the PUBLISH again, DUP set.
        drop(publisher);
        let (mut publisher, present) = connect_persistent(&server, version, &client_id).await;
        assert!(present, "{version:?}: the session is present");
        let Packet::Publish(mut again) = once else {
            unreachable!()
        };
        again.dup = true;
        publisher.send(&Packet::Publish(again)).await;
        match publisher.next_packet().await {
            Packet::PubRec(rec) => assert_eq!(rec.packet_id.get(), 5),
            other => panic!("{version:?}: expected PUBREC, got {other:?}"),
        }
        publisher
            .send(&Packet::PubRel(PubRel::new(NonZeroU16::new(5).unwrap())))
            .await;
        match publisher.next_packet().await {
            Packet::PubComp(comp) => {
                assert_eq!(comp.packet_id.get(), 5);
                assert_eq!(
                    comp.reason_code,
                    ReasonCode::Success,
                    "{version:?}: the id was held"
                );
            }
            other => panic!("{version:?}: expected PUBCOMP, got {other:?}"),
        }
        publisher
            .send(&publish_with(&topic, "marker", 6, Default::default()))
            .await;
        match publisher.next_packet().await {
            Packet::PubAck(ack) => assert_eq!(ack.packet_id.get(), 6),
            other => panic!("{version:?}: expected PUBACK, got {other:?}"),
        }
        // The subscriber gets the message once, then the marker.
        let mut got = Vec::new();
        loop {
            match subscriber.next().await {
                Some(Packet::Publish(p)) => {
                    let id = p.packet_id.expect("QoS 1 or 2");
                    match p.qos {
                        QoS::ExactlyOnce => subscriber.send(&Packet::PubRec(PubRec::new(id))).await,
                        _ => {
                            let ack = herald_mqtt::packet::PubAck::new(id);
                            subscriber.send(&Packet::PubAck(ack)).await
                        }
                    }
                    let payload = String::from_utf8_lossy(&p.payload).into_owned();
                    let done = payload == "marker";
                    got.push(payload);
                    if done {
                        break;
                    }
                }
                Some(Packet::PubRel(rel)) => {
                    subscriber
                        .send(&Packet::PubComp(PubComp::new(rel.packet_id)))
                        .await
                }
                Some(other) => panic!("{version:?}: unexpected {other:?}"),
                None => panic!("the subscriber was closed; {}", subscriber.why_closed()),
            }
        }
        assert_eq!(got, ["once", "marker"], "{version:?}");
    }
}

/// Reads `raw`'s packets until a SUBACK; panics on anything else.
async fn until_suback(raw: &mut Raw) {
    match raw.next().await {
        Some(Packet::SubAck(_)) => {}
        other => panic!("expected SUBACK, got {other:?}; {}", raw.why_closed()),
    }
}

#[tokio::test]
async fn a_qos2_message_sent_to_a_shared_subscriber_that_leaves_goes_to_no_other_member() {
    // [MQTT-4.8.2-5]: a QoS 2 PUBLISH sent to a member, not answered with PUBREC, may have
    // reached it; when its session ends the message must not be sent to another member.
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let version = ProtocolVersion::V5;
    let topic = "normative/shared/qos2";
    let group = format!("$share/g/{topic}");
    let leaving_id = "normative-shared-leaving";
    let props = ConnectProperties::default();
    let (mut leaving, _) =
        Raw::connect_with(mqtt, version, Some(API_KEY), 60, leaving_id, props.clone()).await;
    leaving
        .send(&crate::mqtt_shared::subscribe(
            &group,
            QoS::ExactlyOnce,
            false,
        ))
        .await;
    until_suback(&mut leaving).await;
    // A QoS 2 message through the group's one member, which does not answer it.
    let (mut publisher, _) = Raw::connect(mqtt, version, Some(API_KEY), 60).await;
    publisher
        .send(&publish_at(
            QoS::ExactlyOnce,
            topic,
            "first",
            1,
            Default::default(),
        ))
        .await;
    match publisher.next_packet().await {
        Packet::PubRec(rec) => assert_eq!(rec.reason_code, ReasonCode::Success, "{rec:?}"),
        other => panic!("expected PUBREC, got {other:?}"),
    }
    match leaving.next_packet().await {
        Packet::Publish(p) => {
            assert_eq!(&p.payload[..], b"first");
            assert_eq!(p.qos, QoS::ExactlyOnce);
        }
        other => panic!("expected the PUBLISH, got {other:?}"),
    }
    let (mut staying, _) = Raw::connect(mqtt, version, Some(API_KEY), 60).await;
    staying
        .send(&crate::mqtt_shared::subscribe(
            &group,
            QoS::ExactlyOnce,
            false,
        ))
        .await;
    until_suback(&mut staying).await;
    // The member leaves without PUBREC (its session ends with the connection); a CONNECT with
    // its client identifier is answered once that connection's end was dealt with.
    drop(leaving);
    let (again, _) = Raw::connect_with(mqtt, version, Some(API_KEY), 60, leaving_id, props).await;
    drop(again);
    publisher
        .send(&publish_with(topic, "marker", 2, Default::default()))
        .await;
    match publisher.next_packet().await {
        Packet::PubAck(ack) => assert_eq!(ack.packet_id.get(), 2),
        other => panic!("expected PUBACK, got {other:?}"),
    }
    match staying.next_packet().await {
        Packet::Publish(p) => assert_eq!(
            String::from_utf8_lossy(&p.payload),
            "marker",
            "the member left gets the next message, not the QoS 2 message the other was sent"
        ),
        other => panic!(
            "expected a PUBLISH, got {other:?}; {}",
            staying.why_closed()
        ),
    }
}
