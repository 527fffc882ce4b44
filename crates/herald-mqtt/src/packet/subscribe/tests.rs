//! SUBSCRIBE's and UNSUBSCRIBE's rules, each with its normative statement.

use crate::packet::testing::*;
use crate::packet::{Packet, ReasonCode, RetainHandling};

/// A SUBSCRIBE (packet id 1) of one filter with `options`, v5 (with an empty property list) or
/// 3.1.1.
fn subscribe(filter: &str, options: u8, v5: bool) -> Vec<u8> {
    let mut body = vec![0, 1];
    if v5 {
        body.push(0);
    }
    body.extend_from_slice(&(filter.len() as u16).to_be_bytes());
    body.extend_from_slice(filter.as_bytes());
    body.push(options);
    frame(0x82, &body)
}

#[test]
fn subscribe_without_a_filter_is_a_protocol_error() {
    assert!(protocol_error(&frame(0x82, &[0, 1, 0]), V5_).contains("MQTT-3.8.3-2"));
    assert!(protocol_error(&frame(0x82, &[0, 1]), V3_).contains("MQTT-3.8.3-3"));
    assert!(protocol_error(&frame(0xA2, &[0, 1, 0]), V5_).contains("MQTT-3.10.3-2"));
    protocol_error(&frame(0xA2, &[0, 1]), V3_);
}

#[test]
fn v5_subscription_options_are_decoded() {
    let Packet::Subscribe(s) = ok(&subscribe("a/+", 0x2D, true), V5_) else {
        panic!()
    };
    let (filter, o) = &s.filters[0];
    assert_eq!(filter.as_str(), "a/+");
    assert_eq!(o.qos, crate::packet::QoS::AtLeastOnce);
    assert!(o.no_local && o.retain_as_published);
    assert_eq!(o.retain_handling, RetainHandling::DoNotSend);
}

#[test]
fn reserved_option_bits_are_malformed_mqtt_3_8_3_5() {
    assert!(malformed(&subscribe("a", 0x40, true), V5_).contains("MQTT-3.8.3-5"));
    malformed(&subscribe("a", 0x80, true), V5_);
}

#[test]
fn v311_options_hold_only_the_qos_mqtt_3_8_3_4() {
    malformed(&subscribe("a", 0x04, false), V3_);
    malformed(&subscribe("a", 0x03, false), V3_);
    assert!(matches!(
        ok(&subscribe("a", 0x02, false), V3_),
        Packet::Subscribe(_)
    ));
}

#[test]
fn qos_3_and_retain_handling_3_are_protocol_errors() {
    protocol_error(&subscribe("a", 0x03, true), V5_);
    protocol_error(&subscribe("a", 0x30, true), V5_);
}

#[test]
fn no_local_on_a_shared_subscription_is_a_protocol_error_mqtt_3_8_3_4() {
    assert!(protocol_error(&subscribe("$share/g/a", 0x04, true), V5_).contains("MQTT-3.8.3-4"));
    assert!(matches!(
        ok(&subscribe("$share/g/a", 0x01, true), V5_),
        Packet::Subscribe(_)
    ));
}

#[test]
fn an_invalid_filter_is_topic_filter_invalid() {
    for filter in ["a/#/b", "a+", "", "$share//a", "$share/g"] {
        let e = decode_all(&subscribe(filter, 0, true), V5_).unwrap_err();
        assert_eq!(e.reason_code, ReasonCode::TopicFilterInvalid, "{filter:?}");
    }
    let e = decode_all(&frame(0xA2, &[0, 1, 0, 0, 2, b'#', b'#']), V5_).unwrap_err();
    assert_eq!(e.reason_code, ReasonCode::TopicFilterInvalid);
}

#[test]
fn several_filters_keep_their_order() {
    let body = [0, 7, 0, 1, b'a', 1, 0, 1, b'b', 2, 0, 1, b'#', 0];
    let Packet::Subscribe(s) = ok(&frame(0x82, &body), V3_) else {
        panic!()
    };
    let filters: Vec<&str> = s.filters.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(filters, ["a", "b", "#"]);
    assert_eq!(s.packet_id.get(), 7);
}

#[test]
fn suback_and_unsuback_need_a_reason_code() {
    protocol_error(&frame(0x90, &[0, 1, 0]), V5_);
    protocol_error(&frame(0xB0, &[0, 1, 0]), V5_);
    // 3.1.1 UNSUBACK has none.
    assert!(
        matches!(ok(&frame(0xB0, &[0, 1]), V3_), Packet::UnsubAck(u) if u.reason_codes.is_empty())
    );
}
