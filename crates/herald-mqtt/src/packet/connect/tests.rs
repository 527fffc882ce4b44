//! CONNECT's rules, each with its normative statement: the protocol name and level (and the
//! answer each refusal gets), the flags, the will, 3.1.1's client identifier rule.

use crate::packet::testing::*;
use crate::packet::{
    DecodeError, ErrorResponse, Packet, ProtocolVersion, ProtocolVersion::*, QoS, ReasonCode,
};

fn connect_error(bytes: &[u8]) -> DecodeError {
    decode_all(bytes, None).expect_err("refused")
}

fn answer(e: &DecodeError) -> (ReasonCode, ErrorResponse) {
    (e.reason_code, e.response)
}

fn decoded(bytes: &[u8]) -> crate::packet::Connect {
    match ok(bytes, None) {
        Packet::Connect(c) => *c,
        other => panic!("not a CONNECT: {other:?}"),
    }
}

#[test]
fn levels_4_and_5_are_the_versions() {
    let c = decoded(&connect_v311(0x02, &[0, 1, b'c']));
    assert_eq!(
        (c.protocol_version, c.client_id.as_str(), c.keep_alive),
        (V311, "c", 60)
    );
    assert!(c.clean_start);
    assert_eq!(decoded(&connect_v5(0x00, &[], &[])).protocol_version, V5);
}

#[test]
fn a_wrong_protocol_name_closes_the_connection_mqtt_3_1_2_1() {
    let e = connect_error(&frame(0x10, &connect_body(b"MQTX", 4, 2, &[0, 0])));
    assert_eq!(e.response, ErrorResponse::Close);
    assert!(e.message.contains("MQTT-3.1.2-1"));
    // MQIsdp is 3.1's name, never 3.1.1's.
    let e = connect_error(&frame(0x10, &connect_body(b"MQIsdp", 4, 2, &[0, 0])));
    assert_eq!(e.response, ErrorResponse::Close);
}

#[test]
fn mqtt_3_1_is_refused_with_return_code_1_mqtt_3_1_2_2() {
    let e = connect_error(&frame(0x10, &connect_body(b"MQIsdp", 3, 2, &[0, 1, b'c'])));
    assert_eq!(
        answer(&e),
        (
            ReasonCode::UnsupportedProtocolVersion,
            ErrorResponse::ConnAck(V311)
        )
    );
    assert_eq!(e.reason_code.v311_connack_code(), Some(1));
}

#[test]
fn unknown_levels_get_the_unsupported_version_answer() {
    for (level, format) in [(3, V311), (2, V311), (0, V311), (6, V5), (255, V5)] {
        let e = connect_error(&frame(0x10, &connect_body(b"MQTT", level, 2, &[0, 0])));
        assert_eq!(
            answer(&e),
            (
                ReasonCode::UnsupportedProtocolVersion,
                ErrorResponse::ConnAck(format)
            ),
            "level {level}"
        );
    }
}

#[test]
fn the_reserved_flag_is_0_mqtt_3_1_2_3() {
    let e = connect_error(&connect_v5(0x03, &[], &[]));
    assert_eq!(
        answer(&e),
        (ReasonCode::MalformedPacket, ErrorResponse::ConnAck(V5))
    );
    assert!(e.message.contains("MQTT-3.1.2-3"));
    // 3.1.1 closes without a CONNACK [MQTT-3.1.4-1].
    let e = connect_error(&connect_v311(0x03, &[0, 1, b'c']));
    assert_eq!(
        answer(&e),
        (ReasonCode::MalformedPacket, ErrorResponse::Close)
    );
}

#[test]
fn will_qos_and_retain_are_0_without_the_will_flag() {
    // v5 [MQTT-3.1.2-11] and [MQTT-3.1.2-13]; 3.1.1 [MQTT-3.1.2-13] and [MQTT-3.1.2-15].
    let e = connect_error(&connect_v5(0x02 | 0x08, &[], &[]));
    assert!(e.message.contains("MQTT-3.1.2-11"), "{e}");
    let e = connect_error(&connect_v5(0x02 | 0x20, &[], &[]));
    assert!(e.message.contains("MQTT-3.1.2-13"), "{e}");
    let e = connect_error(&connect_v311(0x02 | 0x10, &[0, 1, b'c']));
    assert!(e.message.contains("MQTT-3.1.2-13"), "{e}");
    let e = connect_error(&connect_v311(0x02 | 0x20, &[0, 1, b'c']));
    assert!(e.message.contains("MQTT-3.1.2-15"), "{e}");
}

#[test]
fn will_qos_3_is_malformed() {
    // v5 [MQTT-3.1.2-12], 3.1.1 [MQTT-3.1.2-14].
    let will = [0, 0, 1, b't', 0, 0];
    let e = connect_error(&connect_v5(0x02 | 0x04 | 0x18, &[], &will));
    assert_eq!(
        answer(&e),
        (ReasonCode::MalformedPacket, ErrorResponse::ConnAck(V5))
    );
    let e = connect_error(&connect_v311(
        0x02 | 0x04 | 0x18,
        &[0, 1, b'c', 0, 1, b't', 0, 0],
    ));
    assert!(e.message.contains("MQTT-3.1.2-14"));
}

#[test]
fn a_will_is_decoded_with_its_properties() {
    // Will properties: Will Delay Interval 5, Content Type "j"; topic "w/x"; payload "bye".
    let will = [
        9, 0x18, 0, 0, 0, 5, 0x03, 0, 1, b'j', 0, 3, b'w', b'/', b'x', 0, 3, b'b', b'y', b'e',
    ];
    let c = decoded(&connect_v5(0x02 | 0x04 | 0x08 | 0x20, &[], &will));
    let w = c.will.expect("a will");
    assert_eq!(
        (w.topic.as_str(), &w.payload[..], w.qos, w.retain),
        ("w/x", &b"bye"[..], QoS::AtLeastOnce, true)
    );
    assert_eq!(w.properties.will_delay_interval, 5);
    assert_eq!(w.properties.content_type.as_deref(), Some("j"));
}

#[test]
fn a_will_topic_is_a_topic_name() {
    let e = connect_error(&connect_v5(0x02 | 0x04, &[], &[0, 0, 1, b'#', 0, 0]));
    assert_eq!(
        answer(&e),
        (ReasonCode::TopicNameInvalid, ErrorResponse::ConnAck(V5))
    );
    let e = connect_error(&connect_v5(0x02 | 0x04, &[], &[0, 0, 0, 0, 0]));
    assert_eq!(e.reason_code, ReasonCode::TopicNameInvalid); // empty [MQTT-4.7.3-1]
}

#[test]
fn a_password_needs_a_user_name_in_3_1_1_only_mqtt_3_1_2_22() {
    let e = connect_error(&connect_v311(0x02 | 0x40, &[0, 1, b'c', 0, 1, b'p']));
    assert_eq!(e.response, ErrorResponse::Close);
    assert!(e.message.contains("MQTT-3.1.2-22"));
    let c = decoded(&connect_v5(0x02 | 0x40, &[], &[0, 2, 1, 2]));
    assert_eq!(
        (c.username, c.password.as_deref()),
        (None, Some(&[1u8, 2][..]))
    );
    let c = decoded(&connect_v311(
        0x02 | 0xC0,
        &[0, 1, b'c', 0, 1, b'u', 0, 1, b'p'],
    ));
    assert_eq!(c.username.as_deref(), Some("u"));
}

#[test]
fn an_empty_client_id_without_clean_session_gets_return_code_2_mqtt_3_1_3_8() {
    let e = connect_error(&connect_v311(0x00, &[0, 0]));
    assert_eq!(
        answer(&e),
        (
            ReasonCode::ClientIdentifierNotValid,
            ErrorResponse::ConnAck(V311)
        )
    );
    assert_eq!(e.reason_code.v311_connack_code(), Some(2));
    // With a clean session it is accepted [MQTT-3.1.3-6]; v5 accepts both (the server assigns).
    assert_eq!(decoded(&connect_v311(0x02, &[0, 0])).client_id, "");
    let v5 = frame(0x10, &connect_body(b"MQTT", 5, 0x00, &[0, 0, 0]));
    assert_eq!(decoded(&v5).client_id, "");
    // A byte after the last field is malformed.
    let e = connect_error(&frame(0x10, &connect_body(b"MQTT", 5, 0x00, &[0, 0, 0, 0])));
    assert_eq!(
        answer(&e),
        (ReasonCode::MalformedPacket, ErrorResponse::ConnAck(V5))
    );
}

#[test]
fn connect_properties_are_typed_with_their_defaults() {
    let c = decoded(&connect_v5(0x02, &[], &[]));
    assert_eq!(c.properties, Default::default());
    assert_eq!(c.properties.receive_maximum.get(), 65_535);
    assert!(c.properties.request_problem_information);
    let props = [
        0x11, 0, 0, 0, 30, 0x21, 0, 10, 0x27, 0, 0, 1, 0, 0x22, 0, 4, 0x19, 1, 0x17, 0, 0x15, 0, 2,
        b'm', b'x',
    ];
    let c = decoded(&connect_v5(0x02, &props, &[]));
    let p = &c.properties;
    assert_eq!(p.session_expiry_interval, 30);
    assert_eq!(p.receive_maximum.get(), 10);
    assert_eq!(p.maximum_packet_size.map(|s| s.get()), Some(256));
    assert_eq!(p.topic_alias_maximum, 4);
    assert!(p.request_response_information && !p.request_problem_information);
    assert_eq!(p.authentication_method.as_deref(), Some("mx"));
}

#[test]
fn a_truncated_connect_is_malformed_in_its_version() {
    let whole = connect_v5(0x02, &[], &[]);
    let mut cut = whole[..whole.len() - 1].to_vec();
    cut[1] -= 1;
    let e = connect_error(&cut);
    assert_eq!(
        answer(&e),
        (ReasonCode::MalformedPacket, ErrorResponse::ConnAck(V5))
    );
    let _: Option<ProtocolVersion> = None;
}
