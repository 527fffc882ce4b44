//! One test per decoding rule, named or commented with its normative statement.

use bytes::BytesMut;

use super::*;
use crate::packet::testing::*;
use crate::packet::{Packet, ProtocolVersion::*};

// ---- framing -------------------------------------------------------------------------------

#[test]
fn an_incomplete_packet_waits_and_consumes_nothing() {
    let bytes = frame(0x30, &[0, 1, b't', b'x']); // v3.1.1 PUBLISH QoS 0
    for cut in 0..bytes.len() {
        let mut buf = BytesMut::from(&bytes[..cut]);
        assert_eq!(decode(&mut buf, V3_, u32::MAX), Ok(None), "cut at {cut}");
        assert_eq!(buf.len(), cut);
    }
}

#[test]
fn one_packet_at_a_time_is_taken_off_the_front() {
    let mut bytes = frame(0xC0, &[]);
    bytes.extend(frame(0x30, &[0, 1, b't', b'x']));
    bytes.push(0xD0);
    let mut buf = BytesMut::from(&bytes[..]);
    assert_eq!(decode(&mut buf, V3_, u32::MAX), Ok(Some(Packet::PingReq)));
    assert!(matches!(
        decode(&mut buf, V3_, u32::MAX),
        Ok(Some(Packet::Publish(_)))
    ));
    assert_eq!(decode(&mut buf, V3_, u32::MAX), Ok(None));
    assert_eq!(&buf[..], &[0xD0]);
}

#[test]
fn a_remaining_length_of_five_bytes_is_malformed_mqtt_1_5_5_1() {
    malformed(&[0x30, 0x80, 0x80, 0x80, 0x80, 0x01], V5_);
    // Refused as soon as the fourth byte says another follows, without waiting.
    malformed(&[0x30, 0xFF, 0xFF, 0xFF, 0xFF], V3_);
}

#[test]
fn a_packet_over_the_maximum_size_is_refused_before_it_is_buffered() {
    // Only the fixed header is there; it declares 1,000 bytes.
    let mut buf = BytesMut::from(&[0x30, 0xE8, 0x07][..]);
    let e = decode(&mut buf, V5_, 100).unwrap_err();
    assert_eq!(
        (e.reason_code, e.response),
        (ReasonCode::PacketTooLarge, ErrorResponse::Disconnect)
    );
    // The limit counts the whole packet, fixed header included: 2 + 3 bytes.
    let publish = frame(0x30, &[0, 1, b't']);
    assert!(decode(&mut BytesMut::from(&publish[..]), V3_, 5)
        .unwrap()
        .is_some());
    let e = decode(&mut BytesMut::from(&publish[..]), V3_, 4).unwrap_err();
    assert_eq!(
        (e.reason_code, e.response),
        (ReasonCode::PacketTooLarge, ErrorResponse::Close)
    );
}

#[test]
fn bytes_after_the_content_are_malformed() {
    malformed(&frame(0xC0, &[0]), V5_); // PINGREQ with a body
    malformed(&frame(0x40, &[0, 1, 0]), V3_); // 3.1.1 PUBACK is two bytes
    malformed(&frame(0xE0, &[0]), V3_); // 3.1.1 DISCONNECT is empty
    malformed(&frame(0xE0, &[0, 0, 0]), V5_); // property length 0, then a stray byte
}

#[test]
fn a_length_reaching_past_the_packet_is_malformed() {
    malformed(&frame(0x30, &[0, 9, b't']), V3_); // topic length 9 in a 3-byte body
    malformed(&frame(0x30, &[0, 1, b't', 5, 0x23]), V5_); // property length 5, one byte left
    malformed(&frame(0x30, &[0, 1, b't', 2, 0x23, 0]), V5_); // Topic Alias cut short
}

#[test]
fn the_first_packet_must_be_connect_mqtt_3_1_0_1() {
    let message = refused(
        &frame(0xC0, &[]),
        None,
        ReasonCode::ProtocolError,
        ErrorResponse::Close,
    );
    assert!(message.contains("MQTT-3.1.0-1"));
    // Refused from its first byte, without waiting for the rest.
    refused(
        &[0x30],
        None,
        ReasonCode::ProtocolError,
        ErrorResponse::Close,
    );
}

#[test]
fn a_second_connect_is_a_protocol_error_mqtt_3_1_0_2() {
    let connect = connect_v5(0x02, &[], &[]);
    assert!(protocol_error(&connect, V5_).contains("MQTT-3.1.0-2"));
    protocol_error(&connect_v311(0x02, &[0, 1, b'c']), V3_);
}

#[test]
fn reserved_fixed_header_flags_are_malformed_mqtt_2_2_2_1_and_2() {
    malformed(&frame(0x41, &[0, 1]), V5_); // PUBACK 0001
    malformed(&frame(0x60, &[0, 1]), V5_); // PUBREL must be 0010
    malformed(&frame(0x80, &[0, 1, 0, 0, 1, b'a', 0]), V5_); // SUBSCRIBE must be 0010
    malformed(&frame(0xA0, &[0, 1, 0, 0, 1, b'a']), V3_); // UNSUBSCRIBE must be 0010
    malformed(&frame(0xC8, &[]), V3_); // PINGREQ 1000
    malformed(&frame(0x12, &connect_body(b"MQTT", 4, 2, &[0, 0])), None); // CONNECT 0010
    assert!(matches!(ok(&frame(0x62, &[0, 1]), V3_), Packet::PubRel(_)));
}

#[test]
fn reserved_packet_types_are_malformed() {
    malformed(&frame(0x00, &[]), V5_);
    malformed(&frame(0xF0, &[]), V3_); // AUTH does not exist in 3.1.1
    assert!(matches!(ok(&frame(0xF0, &[]), V5_), Packet::Auth(_)));
}

// ---- strings -------------------------------------------------------------------------------

#[test]
fn ill_formed_utf8_is_malformed_mqtt_1_5_4_1() {
    malformed(&frame(0x30, &[0, 2, 0xC3, 0x28]), V3_);
    malformed(&frame(0x30, &[0, 3, 0xED, 0xA0, 0x80]), V5_); // U+D800
}

#[test]
fn u0000_is_malformed_mqtt_1_5_4_2() {
    malformed(&frame(0x30, &[0, 2, b'a', 0, 0]), V5_);
    malformed(&frame(0x82, &[0, 1, 0, 0, 1, 0, 0]), V5_); // in a topic filter
}

#[test]
fn a_byte_order_mark_is_kept_mqtt_1_5_4_3() {
    let Packet::Publish(p) = ok(&frame(0x30, &[0, 4, 0xEF, 0xBB, 0xBF, b'a']), V3_) else {
        panic!("a PUBLISH")
    };
    assert_eq!(p.topic.as_str(), "\u{FEFF}a");
}

// ---- PUBLISH -------------------------------------------------------------------------------

#[test]
fn publish_qos_3_is_malformed_mqtt_3_3_1_4() {
    malformed(&frame(0x36, &[0, 1, b't', 0, 1]), V3_);
    malformed(&frame(0x36, &[0, 1, b't', 0, 1, 0]), V5_);
}

#[test]
fn dup_at_qos_0_is_malformed_mqtt_3_3_1_2() {
    malformed(&frame(0x38, &[0, 1, b't']), V3_);
    assert!(matches!(ok(&frame(0x3A, &[0, 1, b't', 0, 1]), V3_), Packet::Publish(p) if p.dup));
}

#[test]
fn wildcards_in_a_topic_name_are_refused_mqtt_3_3_2_2() {
    for topic in [&b"a/+"[..], b"#", b"a#"] {
        let mut body = vec![0, topic.len() as u8];
        body.extend_from_slice(topic);
        body.push(0);
        let e = decode_all(&frame(0x30, &body), V5_).unwrap_err();
        assert_eq!(e.reason_code, ReasonCode::TopicNameInvalid);
        assert_eq!(e.response, ErrorResponse::Disconnect);
        assert!(e.message.contains("MQTT-3.3.2-2"), "{}", e.message);
    }
}

#[test]
fn an_empty_topic_needs_a_v5_topic_alias() {
    protocol_error(&frame(0x30, &[0, 0, 0]), V5_);
    let Packet::Publish(p) = ok(&frame(0x30, &[0, 0, 3, 0x23, 0, 7, b'x']), V5_) else {
        panic!("a PUBLISH")
    };
    assert_eq!(
        (p.topic.as_str(), p.properties.topic_alias.map(|a| a.get())),
        ("", Some(7))
    );
    assert_eq!(&p.payload[..], b"x");
    // [MQTT-4.7.3-1] under 3.1.1.
    let e = decode_all(&frame(0x30, &[0, 0]), V3_).unwrap_err();
    assert_eq!(e.response, ErrorResponse::Close);
}

#[test]
fn packet_identifiers_are_not_zero_mqtt_2_2_1_3() {
    assert!(protocol_error(&frame(0x32, &[0, 1, b't', 0, 0]), V5_).contains("MQTT-2.2.1-3"));
    protocol_error(&frame(0x40, &[0, 0]), V3_);
    protocol_error(&frame(0x82, &[0, 0, 0, 0, 1, b'a', 0]), V5_);
    protocol_error(&frame(0xB0, &[0, 0]), V3_);
}

#[test]
fn a_response_topic_has_no_wildcards_mqtt_3_3_2_14() {
    let e = decode_all(&publish_v5(&[0x08, 0, 3, b'a', b'/', b'#']), V5_).unwrap_err();
    assert_eq!(e.reason_code, ReasonCode::TopicNameInvalid);
}

// ---- properties ----------------------------------------------------------------------------

#[test]
fn a_property_twice_is_a_protocol_error() {
    // Message Expiry Interval twice.
    protocol_error(&publish_v5(&[0x02, 0, 0, 0, 1, 0x02, 0, 0, 0, 2]), V5_);
    // Session Expiry Interval twice in CONNECT: answered with a CONNACK.
    let e = decode_all(
        &connect_v5(0x02, &[0x11, 0, 0, 0, 1, 0x11, 0, 0, 0, 1], &[]),
        None,
    )
    .unwrap_err();
    assert_eq!(
        (e.reason_code, e.response),
        (ReasonCode::ProtocolError, ErrorResponse::ConnAck(V5))
    );
}

#[test]
fn user_properties_repeat_and_keep_their_order() {
    let p = [
        0x26, 0, 1, b'k', 0, 1, b'2', 0x26, 0, 1, b'a', 0, 0, 0x26, 0, 1, b'k', 0, 1, b'1',
    ];
    let Packet::Publish(publish) = ok(&publish_v5(&p), V5_) else {
        panic!("a PUBLISH")
    };
    let pairs: Vec<(&str, &str)> = publish
        .properties
        .user_properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(pairs, [("k", "2"), ("a", ""), ("k", "1")]);
}

#[test]
fn a_publish_carries_several_subscription_identifiers_but_subscribe_one() {
    let Packet::Publish(p) = ok(&publish_v5(&[0x0B, 1, 0x0B, 0x80, 0x01]), V5_) else {
        panic!("a PUBLISH")
    };
    let ids: Vec<u32> = p
        .properties
        .subscription_identifiers
        .iter()
        .map(|i| i.get())
        .collect();
    assert_eq!(ids, [1, 128]);
    protocol_error(
        &frame(0x82, &[0, 1, 4, 0x0B, 1, 0x0B, 2, 0, 1, b'a', 0]),
        V5_,
    );
}

#[test]
fn zero_values_are_protocol_errors() {
    // Subscription Identifier 0, Topic Alias 0.
    protocol_error(&frame(0x82, &[0, 1, 2, 0x0B, 0, 0, 1, b'a', 0]), V5_);
    protocol_error(&publish_v5(&[0x23, 0, 0]), V5_);
    // Receive Maximum 0 and Maximum Packet Size 0 in CONNECT and CONNACK.
    for property in [&[0x21, 0, 0][..], &[0x27, 0, 0, 0, 0]] {
        let e = decode_all(&connect_v5(0x02, property, &[]), None).unwrap_err();
        assert_eq!(e.reason_code, ReasonCode::ProtocolError, "{e}");
        let mut body = vec![0, 0, property.len() as u8];
        body.extend_from_slice(property);
        protocol_error(&frame(0x20, &body), V5_);
    }
}

#[test]
fn one_byte_flags_are_0_or_1() {
    let e = decode_all(&connect_v5(0x02, &[0x17, 2], &[]), None).unwrap_err();
    assert_eq!(e.reason_code, ReasonCode::ProtocolError);
    protocol_error(&frame(0x20, &[0, 0, 2, 0x24, 2]), V5_); // Maximum QoS 2 is never sent
    protocol_error(&frame(0x20, &[0, 0, 2, 0x25, 7]), V5_); // Retain Available 7
    protocol_error(&publish_v5(&[0x01, 2]), V5_); // Payload Format Indicator 2
}

#[test]
fn a_property_on_the_wrong_packet_is_a_protocol_error() {
    protocol_error(&publish_v5(&[0x11, 0, 0, 0, 1]), V5_); // Session Expiry in PUBLISH
    protocol_error(&frame(0x40, &[0, 1, 0, 2, 0x23, 0, 1, 0]), V5_); // Topic Alias in PUBACK
    let e = decode_all(&connect_v5(0x02, &[0x23, 0, 1], &[]), None).unwrap_err();
    assert_eq!(e.reason_code, ReasonCode::ProtocolError);
    // Will Delay Interval belongs in the will's properties, not CONNECT's.
    let e = decode_all(&connect_v5(0x02, &[0x18, 0, 0, 0, 1], &[]), None).unwrap_err();
    assert_eq!(e.reason_code, ReasonCode::ProtocolError);
}

#[test]
fn an_unknown_property_is_malformed() {
    malformed(&publish_v5(&[0x7F, 0]), V5_);
    malformed(&publish_v5(&[0x80, 0x01, 0]), V5_); // identifier 128, as a varint
}

#[test]
fn authentication_data_needs_a_method() {
    let e = decode_all(&connect_v5(0x02, &[0x16, 0, 1, 9], &[]), None).unwrap_err();
    assert_eq!(e.reason_code, ReasonCode::ProtocolError);
    protocol_error(&frame(0xF0, &[0x18, 0]), V5_); // AUTH Continue without a method
}

// ---- reason codes --------------------------------------------------------------------------

#[test]
fn a_reason_code_outside_its_packets_list_is_malformed() {
    malformed(&frame(0x40, &[0, 1, 0x01]), V5_); // PUBACK: 0x01 is SUBACK's [MQTT-3.4.2-1]
    malformed(&frame(0x62, &[0, 1, 0x10]), V5_); // PUBREL [MQTT-3.6.2-1]
    malformed(&frame(0xE0, &[0x05]), V5_); // DISCONNECT [MQTT-3.14.2-1]
    malformed(&frame(0x90, &[0, 1, 0, 0x03]), V5_); // SUBACK [MQTT-3.9.3-2]
    malformed(&frame(0x90, &[0, 1, 0x81]), V3_); // 3.1.1 SUBACK: 0, 1, 2, 0x80
    malformed(&frame(0x20, &[0, 6]), V3_); // 3.1.1 CONNACK return code 6 is reserved
    malformed(&frame(0xF0, &[0x01, 0]), V5_); // AUTH [MQTT-3.15.2-1]
}

#[test]
fn acknowledgements_omit_success_and_empty_properties() {
    let Packet::PubAck(a) = ok(&frame(0x40, &[0, 9]), V5_) else {
        panic!("PUBACK")
    };
    assert_eq!((a.packet_id.get(), a.reason_code), (9, ReasonCode::Success));
    let Packet::PubRec(a) = ok(&frame(0x50, &[0, 9, 0x10]), V5_) else {
        panic!("PUBREC")
    };
    assert_eq!(a.reason_code, ReasonCode::NoMatchingSubscribers);
    let Packet::Disconnect(d) = ok(&frame(0xE0, &[]), V5_) else {
        panic!("DISCONNECT")
    };
    assert_eq!(d.reason_code, ReasonCode::NormalDisconnection);
    let Packet::Disconnect(d) = ok(&frame(0xE0, &[0x04]), V5_) else {
        panic!("DISCONNECT")
    };
    assert_eq!(d.reason_code, ReasonCode::DisconnectWithWillMessage);
}

#[test]
fn connack_reserved_flags_and_session_present_mqtt_3_2_2_1_and_6() {
    malformed(&frame(0x20, &[0x02, 0, 0]), V5_);
    assert!(protocol_error(&frame(0x20, &[0x01, 0x87, 0]), V5_).contains("MQTT-3.2.2-6"));
    protocol_error(&frame(0x20, &[0x01, 0x05]), V3_); // 3.1.1 [MQTT-3.2.2-4]
}

#[test]
fn the_answer_to_a_refusal_encodes_in_its_version() {
    use crate::packet::encode;
    let answer_bytes = |bytes: &[u8], version| {
        let e = decode_all(bytes, version).unwrap_err();
        e.answer().map(|(packet, version)| {
            let mut out = BytesMut::new();
            encode(&packet, version, &mut out).unwrap();
            out.to_vec()
        })
    };
    // MQTT 3.1: 3.1.1's CONNACK with return code 1 [MQTT-3.1.2-2].
    let mqisdp = frame(
        0x10,
        &[
            0, 6, b'M', b'Q', b'I', b's', b'd', b'p', 3, 2, 0, 60, 0, 1, b'c',
        ],
    );
    assert_eq!(answer_bytes(&mqisdp, None), Some(vec![0x20, 2, 0, 1]));
    // v5 after CONNECT: DISCONNECT 0x81 with the reason as its Reason String.
    let disconnect = answer_bytes(&frame(0xC0, &[0]), V5_).unwrap();
    assert_eq!(&disconnect[..3], &[0xE0, disconnect.len() as u8 - 2, 0x81]);
    assert_eq!(disconnect[4], 0x1F);
    // 3.1.1 and before CONNECT: nothing, the connection is closed.
    assert_eq!(answer_bytes(&frame(0xC0, &[0]), V3_), None);
    assert_eq!(answer_bytes(&frame(0xC0, &[]), None), None);
    // A v5 CONNECT refused after its level: CONNACK with the code and the reason.
    let connack = answer_bytes(&connect_v5(0x01, &[], &[]), None).unwrap();
    assert_eq!(&connack[..4], &[0x20, connack.len() as u8 - 2, 0, 0x81]);
}
