//! A refused QoS 1 or 2 PUBLISH is always answered: v5 with the refusal's reason code in its
//! PUBACK or PUBREC, 3.1.1 (whose acknowledgements have no reason code) with a positive one and
//! the message dropped [MQTT-3.3.5-2]; a message over the size limit (`max_frame_bytes`) gets
//! 0x83 Implementation specific error; and an answer the server cannot send within the client's
//! Maximum Packet Size closes the connection instead of leaving the client waiting.

use std::num::{NonZeroU16, NonZeroU32};

use herald_mqtt::packet::{
    self, ConnectProperties, Packet, ProtocolVersion, PubRel, QoS, ReasonCode, Subscribe,
    SubscribeProperties, SubscriptionOptions, TopicFilter,
};
use serde_json::json;

use crate::mqtt_session::{history, Raw};
use crate::support::mqtt::mosquitto_pub;
use crate::support::Server;

fn publish(topic: &str, qos: QoS, id: u16, payload: &str) -> Packet {
    Packet::Publish(packet::Publish {
        dup: false,
        qos,
        retain: false,
        topic: packet::TopicName::new(topic).unwrap(),
        packet_id: NonZeroU16::new(id),
        properties: Default::default(),
        payload: packet::Bytes::copy_from_slice(payload.as_bytes()),
    })
}

/// Sends a QoS 1 then a QoS 2 PUBLISH (PUBREL after its PUBREC) to `topic`; the codes of the
/// PUBACK, PUBREC and PUBCOMP and the PUBACK's reason string.
async fn publish_both_qos(
    raw: &mut Raw,
    topic: &str,
    payload: &str,
) -> ([ReasonCode; 3], Option<String>) {
    raw.send(&publish(topic, QoS::AtLeastOnce, 1, payload))
        .await;
    let (ack_code, why) = match raw.next().await {
        Some(Packet::PubAck(ack)) => (ack.reason_code, ack.properties.reason_string),
        other => panic!("expected PUBACK, got {other:?}; {}", raw.why_closed()),
    };
    raw.send(&publish(topic, QoS::ExactlyOnce, 2, payload))
        .await;
    let rec_code = match raw.next().await {
        Some(Packet::PubRec(rec)) => rec.reason_code,
        other => panic!("expected PUBREC, got {other:?}; {}", raw.why_closed()),
    };
    raw.send(&Packet::PubRel(PubRel::new(NonZeroU16::new(2).unwrap())))
        .await;
    let comp_code = match raw.next().await {
        Some(Packet::PubComp(comp)) => comp.reason_code,
        other => panic!("expected PUBCOMP, got {other:?}; {}", raw.why_closed()),
    };
    ([ack_code, rec_code, comp_code], why)
}

#[tokio::test]
async fn a_publish_the_token_does_not_allow_is_refused_in_v5_and_acknowledged_and_dropped_in_311() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &["allowed/*"]);
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 0).await;
    let (codes, why) = publish_both_qos(&mut raw, "locked", "1").await;
    use ReasonCode::{NotAuthorized, PacketIdentifierNotFound, Success};
    assert_eq!(
        codes,
        [NotAuthorized, NotAuthorized, PacketIdentifierNotFound]
    );
    assert!(why.is_some(), "a reason string");
    // 3.1.1: PUBACK, PUBREC and PUBCOMP as if stored; nothing stored.
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V311, Some(&token), 0).await;
    let (codes, _) = publish_both_qos(&mut raw, "locked", "2").await;
    assert_eq!(codes, [Success, Success, Success]);
    raw.send(&Packet::PingReq).await;
    assert_eq!(raw.next().await, Some(Packet::PingResp), "still connected");
    // mosquitto_pub exits 0 once its PUBACK came.
    mosquitto_pub(
        mqtt,
        &[
            "-V", "mqttv311", "-u", "default", "-P", &token, "-q", "1", "-t", "locked", "-m", "3",
        ],
    )
    .await
    .ok();
    assert_eq!(history(&server, "locked").await, []);
}

#[tokio::test]
async fn an_anonymous_311_publish_a_deny_rule_refuses_is_acknowledged_and_dropped() {
    let server = Server::builder()
        .mqtt()
        .config(
            "[mqtt]\nallow_anonymous = true\n\n[[mqtt.anonymous_rules]]\nallow = \"public/#\"\n\n\
             [[mqtt.anonymous_rules]]\ndeny = \"public/locked\"\naction = \"publish\"\n",
        )
        .start()
        .await;
    let mqtt = server.mqtt_addr();
    for qos in ["1", "2"] {
        mosquitto_pub(
            mqtt,
            &[
                "-V",
                "mqttv311",
                "-q",
                qos,
                "-t",
                "public/locked",
                "-m",
                "{}",
            ],
        )
        .await
        .ok();
    }
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V311, None, 0).await;
    let (codes, _) = publish_both_qos(&mut raw, "public/locked", "4").await;
    assert_eq!(codes, [ReasonCode::Success; 3]);
    assert_eq!(history(&server, "public/locked").await, []);
}

#[tokio::test]
async fn a_message_over_max_frame_bytes_gets_0x83_in_v5_and_is_acknowledged_and_dropped_in_311() {
    let server = Server::builder()
        .mqtt()
        .env("HERALD_MAX_FRAME_BYTES", "1024")
        .start()
        .await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &["*"]);
    let big = format!("\"{}\"", "x".repeat(2000));
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 0).await;
    let (codes, why) = publish_both_qos(&mut raw, "big", &big).await;
    use ReasonCode::{ImplementationSpecificError, PacketIdentifierNotFound, Success};
    assert_eq!(
        codes,
        [
            ImplementationSpecificError,
            ImplementationSpecificError,
            PacketIdentifierNotFound
        ]
    );
    let why = why.unwrap_or_default();
    assert!(why.contains("max_frame_bytes"), "{why}");
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V311, Some(&token), 0).await;
    let (codes, _) = publish_both_qos(&mut raw, "big", &big).await;
    assert_eq!(codes, [Success; 3]);
    // A message under the limit is stored all the same.
    let (codes, _) = publish_both_qos(&mut raw, "big", "7").await;
    assert_eq!(codes, [Success; 3]);
    assert_eq!(
        history(&server, "big").await,
        [(1, json!(7)), (2, json!(7))]
    );
}

#[tokio::test]
async fn an_answer_over_the_clients_maximum_packet_size_closes_the_connection() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &[]);
    // A CONNACK fits in 64 bytes without its reason string, a SUBACK for 100 filters does not.
    let properties = ConnectProperties {
        maximum_packet_size: NonZeroU32::new(64),
        ..ConnectProperties::default()
    };
    let (mut raw, connack) = Raw::connect_with(
        mqtt,
        ProtocolVersion::V5,
        Some(&token),
        0,
        "tiny",
        properties,
    )
    .await;
    assert_eq!(connack.reason_code, ReasonCode::Success);
    let filters = (0..100)
        .map(|n| {
            let filter = TopicFilter::new(format!("t{n}/#")).unwrap();
            (filter, SubscriptionOptions::default())
        })
        .collect();
    raw.send(&Packet::Subscribe(Subscribe {
        packet_id: NonZeroU16::new(1).unwrap(),
        properties: SubscribeProperties::default(),
        filters,
    }))
    .await;
    let disconnect = raw.until_closed().await;
    let disconnect = disconnect.unwrap_or_else(|| panic!("no DISCONNECT; {}", raw.why_closed()));
    assert_eq!(disconnect.reason_code, ReasonCode::UnspecifiedError);
}
