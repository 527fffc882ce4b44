//! Byte-exact vectors written by hand from the specifications' packet layouts: each packet
//! encodes to exactly these bytes, [`encoded_len`] says how many, and the bytes decode back to
//! the packet. Also the encoder's refusals.

use std::num::{NonZeroU16, NonZeroU32};

use bytes::{Bytes, BytesMut};

use super::*;
use crate::packet::testing::ok;
use crate::packet::*;

fn id(n: u16) -> PacketId {
    PacketId::new(n).unwrap()
}

/// Encodes `packet` for `version`, checks the bytes and the length, decodes them back.
fn vector(packet: Packet, version: ProtocolVersion, bytes: &[u8]) {
    let mut out = BytesMut::new();
    encode(&packet, version, &mut out).unwrap();
    assert_eq!(&out[..], bytes, "{packet:?}");
    assert_eq!(encoded_len(&packet, version), bytes.len());
    let decode_version = match packet {
        Packet::Connect(_) => None,
        _ => Some(version),
    };
    assert_eq!(ok(bytes, decode_version), packet);
}

fn connect(version: ProtocolVersion) -> Connect {
    Connect {
        protocol_version: version,
        clean_start: true,
        keep_alive: 60,
        client_id: "abc".into(),
        will: None,
        username: None,
        password: None,
        properties: ConnectProperties::default(),
    }
}

#[test]
fn connect_vectors() {
    // 3.1.1 3.1: name "MQTT", level 4, flags Clean Session, keep alive 60, client id "abc".
    let mut bytes = vec![0x10, 15, 0, 4, b'M', b'Q', b'T', b'T', 4, 0x02, 0, 60, 0, 3];
    bytes.extend_from_slice(b"abc");
    vector(
        Packet::Connect(Box::new(connect(ProtocolVersion::V311))),
        ProtocolVersion::V311,
        &bytes,
    );

    // v5: the same with level 5 and an empty property list.
    let mut bytes = vec![
        0x10, 16, 0, 4, b'M', b'Q', b'T', b'T', 5, 0x02, 0, 60, 0, 0, 3,
    ];
    bytes.extend_from_slice(b"abc");
    vector(
        Packet::Connect(Box::new(connect(ProtocolVersion::V5))),
        ProtocolVersion::V5,
        &bytes,
    );

    // v5 with Session Expiry Interval 120, a QoS 1 retained will "w" = "x" with Will Delay
    // Interval 10, user name "u", password [1, 2].
    let mut c = connect(ProtocolVersion::V5);
    c.properties.session_expiry_interval = 120;
    c.will = Some(Will {
        topic: TopicName::new("w").unwrap(),
        payload: Bytes::from_static(b"x"),
        qos: QoS::AtLeastOnce,
        retain: true,
        properties: WillProperties {
            will_delay_interval: 10,
            ..Default::default()
        },
    });
    c.username = Some("u".into());
    c.password = Some(Bytes::from_static(&[1, 2]));
    let bytes = [
        0x10,
        40, // fixed header
        0,
        4,
        b'M',
        b'Q',
        b'T',
        b'T',
        5,           // protocol name and level
        0b1110_1110, // user name, password, will retain, will QoS 1, will, clean start
        0,
        60, // keep alive
        5,
        0x11,
        0,
        0,
        0,
        120, // properties: Session Expiry Interval 120
        0,
        3,
        b'a',
        b'b',
        b'c', // client id
        5,
        0x18,
        0,
        0,
        0,
        10, // will properties: Will Delay Interval 10
        0,
        1,
        b'w',
        0,
        1,
        b'x', // will topic, will payload
        0,
        1,
        b'u',
        0,
        2,
        1,
        2, // user name, password
    ];
    vector(Packet::Connect(Box::new(c)), ProtocolVersion::V5, &bytes);
}

#[test]
fn connack_vectors() {
    let accepted = ConnAck {
        session_present: false,
        reason_code: ReasonCode::Success,
        properties: ConnAckProperties::default(),
    };
    vector(
        Packet::ConnAck(Box::new(accepted.clone())),
        ProtocolVersion::V311,
        &[0x20, 2, 0, 0],
    );
    // Defaults are not sent: an empty property list.
    vector(
        Packet::ConnAck(Box::new(accepted.clone())),
        ProtocolVersion::V5,
        &[0x20, 3, 0, 0, 0],
    );
    let refused = ConnAck {
        reason_code: ReasonCode::UnsupportedProtocolVersion,
        ..accepted.clone()
    };
    vector(
        Packet::ConnAck(Box::new(refused.clone())),
        ProtocolVersion::V311,
        &[0x20, 2, 0, 1],
    );
    vector(
        Packet::ConnAck(Box::new(refused)),
        ProtocolVersion::V5,
        &[0x20, 3, 0, 0x84, 0],
    );
    let mut resumed = ConnAck {
        session_present: true,
        ..accepted
    };
    resumed.properties.receive_maximum = NonZeroU16::new(10).unwrap();
    resumed.properties.maximum_qos = QoS::AtLeastOnce;
    resumed.properties.retain_available = false;
    let bytes = [0x20, 10, 1, 0, 7, 0x21, 0, 10, 0x24, 1, 0x25, 0];
    vector(
        Packet::ConnAck(Box::new(resumed)),
        ProtocolVersion::V5,
        &bytes,
    );
}

fn publish(qos: QoS, packet_id: Option<u16>) -> Publish {
    Publish {
        dup: false,
        qos,
        retain: false,
        topic: TopicName::new("a/b").unwrap(),
        packet_id: packet_id.map(id),
        properties: PublishProperties::default(),
        payload: Bytes::from_static(b"hi"),
    }
}

#[test]
fn publish_vectors() {
    let bytes = [0x32, 9, 0, 3, b'a', b'/', b'b', 0, 10, b'h', b'i'];
    vector(
        Packet::Publish(publish(QoS::AtLeastOnce, Some(10))),
        ProtocolVersion::V311,
        &bytes,
    );
    let mut p = publish(QoS::ExactlyOnce, Some(10));
    p.dup = true;
    p.retain = true;
    let bytes = [0x3D, 10, 0, 3, b'a', b'/', b'b', 0, 10, 0, b'h', b'i'];
    vector(Packet::Publish(p), ProtocolVersion::V5, &bytes);
    // v5, QoS 0, an empty topic with Topic Alias 1 and two Subscription Identifiers.
    let mut p = publish(QoS::AtMostOnce, None);
    p.topic = TopicName::new("").unwrap();
    p.properties.topic_alias = NonZeroU16::new(1);
    p.properties.subscription_identifiers =
        vec![NonZeroU32::new(1).unwrap(), NonZeroU32::new(200).unwrap()];
    let bytes = [
        0x30, 13, 0, 0, 8, 0x23, 0, 1, 0x0B, 1, 0x0B, 0xC8, 0x01, b'h', b'i',
    ];
    vector(Packet::Publish(p), ProtocolVersion::V5, &bytes);
}

#[test]
fn acknowledgement_vectors() {
    vector(
        Packet::PubAck(PubAck::new(id(10))),
        ProtocolVersion::V311,
        &[0x40, 2, 0, 10],
    );
    vector(
        Packet::PubAck(PubAck::new(id(10))),
        ProtocolVersion::V5,
        &[0x40, 2, 0, 10],
    );
    let mut rec = PubRec::new(id(10));
    rec.reason_code = ReasonCode::NoMatchingSubscribers;
    vector(
        Packet::PubRec(rec),
        ProtocolVersion::V5,
        &[0x50, 3, 0, 10, 0x10],
    );
    vector(
        Packet::PubRel(PubRel::new(id(10))),
        ProtocolVersion::V311,
        &[0x62, 2, 0, 10],
    );
    let mut comp = PubComp::new(id(10));
    comp.properties.reason_string = Some("no".into());
    let bytes = [0x70, 9, 0, 10, 0, 5, 0x1F, 0, 2, b'n', b'o'];
    vector(Packet::PubComp(comp), ProtocolVersion::V5, &bytes);
}

#[test]
fn subscribe_vectors() {
    let filter = TopicFilter::new("a/#").unwrap();
    let s = Subscribe {
        packet_id: id(1),
        properties: SubscribeProperties::default(),
        filters: vec![(
            filter.clone(),
            SubscriptionOptions {
                qos: QoS::AtLeastOnce,
                ..Default::default()
            },
        )],
    };
    let bytes = [0x82, 8, 0, 1, 0, 3, b'a', b'/', b'#', 1];
    vector(Packet::Subscribe(s), ProtocolVersion::V311, &bytes);
    let s = Subscribe {
        packet_id: id(1),
        properties: SubscribeProperties {
            subscription_identifier: NonZeroU32::new(5),
            user_properties: Vec::new(),
        },
        filters: vec![(
            filter.clone(),
            SubscriptionOptions {
                qos: QoS::AtLeastOnce,
                no_local: true,
                retain_as_published: true,
                retain_handling: RetainHandling::DoNotSend,
            },
        )],
    };
    let bytes = [0x82, 11, 0, 1, 2, 0x0B, 5, 0, 3, b'a', b'/', b'#', 0x2D];
    vector(Packet::Subscribe(s), ProtocolVersion::V5, &bytes);
    let u = Unsubscribe {
        packet_id: id(2),
        properties: UnsubscribeProperties::default(),
        filters: vec![TopicFilter::new("x").unwrap()],
    };
    vector(
        Packet::Unsubscribe(u.clone()),
        ProtocolVersion::V311,
        &[0xA2, 5, 0, 2, 0, 1, b'x'],
    );
    vector(
        Packet::Unsubscribe(u),
        ProtocolVersion::V5,
        &[0xA2, 6, 0, 2, 0, 0, 1, b'x'],
    );
}

#[test]
fn suback_and_unsuback_vectors() {
    let s = SubAck {
        packet_id: id(1),
        properties: AckProperties::default(),
        reason_codes: vec![ReasonCode::GrantedQoS0, ReasonCode::UnspecifiedError],
    };
    vector(
        Packet::SubAck(s),
        ProtocolVersion::V311,
        &[0x90, 4, 0, 1, 0, 0x80],
    );
    let s = SubAck {
        packet_id: id(1),
        properties: AckProperties::default(),
        reason_codes: vec![ReasonCode::GrantedQoS1, ReasonCode::NotAuthorized],
    };
    vector(
        Packet::SubAck(s.clone()),
        ProtocolVersion::V5,
        &[0x90, 5, 0, 1, 0, 1, 0x87],
    );
    // 3.1.1 has one failure code: every v5 error is sent as 0x80.
    let mut out = BytesMut::new();
    encode(&Packet::SubAck(s), ProtocolVersion::V311, &mut out).unwrap();
    assert_eq!(&out[..], &[0x90, 4, 0, 1, 1, 0x80]);
    let u = UnsubAck {
        packet_id: id(2),
        properties: AckProperties::default(),
        reason_codes: vec![ReasonCode::NoSubscriptionExisted],
    };
    vector(
        Packet::UnsubAck(u.clone()),
        ProtocolVersion::V5,
        &[0xB0, 4, 0, 2, 0, 0x11],
    );
    let u = UnsubAck {
        reason_codes: Vec::new(),
        ..u
    };
    vector(Packet::UnsubAck(u), ProtocolVersion::V311, &[0xB0, 2, 0, 2]);
}

#[test]
fn ping_disconnect_and_auth_vectors() {
    vector(Packet::PingReq, ProtocolVersion::V311, &[0xC0, 0]);
    vector(Packet::PingResp, ProtocolVersion::V5, &[0xD0, 0]);
    vector(
        Packet::Disconnect(Disconnect::default()),
        ProtocolVersion::V311,
        &[0xE0, 0],
    );
    vector(
        Packet::Disconnect(Disconnect::default()),
        ProtocolVersion::V5,
        &[0xE0, 0],
    );
    let taken_over = Disconnect {
        reason_code: ReasonCode::SessionTakenOver,
        properties: DisconnectProperties::default(),
    };
    vector(
        Packet::Disconnect(taken_over),
        ProtocolVersion::V5,
        &[0xE0, 1, 0x8E],
    );
    let shutting_down = Disconnect {
        reason_code: ReasonCode::ServerShuttingDown,
        properties: DisconnectProperties {
            reason_string: Some("bye".into()),
            ..Default::default()
        },
    };
    let bytes = [0xE0, 8, 0x8B, 6, 0x1F, 0, 3, b'b', b'y', b'e'];
    vector(
        Packet::Disconnect(shutting_down),
        ProtocolVersion::V5,
        &bytes,
    );
    let bare = Auth {
        reason_code: ReasonCode::Success,
        properties: AuthProperties::default(),
    };
    vector(Packet::Auth(bare), ProtocolVersion::V5, &[0xF0, 0]);
    let step = Auth {
        reason_code: ReasonCode::ContinueAuthentication,
        properties: AuthProperties {
            authentication_method: Some("SCRAM".into()),
            ..Default::default()
        },
    };
    let bytes = [0xF0, 10, 0x18, 8, 0x15, 0, 5, b'S', b'C', b'R', b'A', b'M'];
    vector(Packet::Auth(step), ProtocolVersion::V5, &bytes);
}

#[test]
fn a_large_remaining_length_takes_several_bytes() {
    let mut p = publish(QoS::AtMostOnce, None);
    p.payload = Bytes::from(vec![7; 200]);
    let mut out = BytesMut::new();
    encode(&Packet::Publish(p.clone()), ProtocolVersion::V311, &mut out).unwrap();
    // 2 + 3 + 200 = 205 = 0x4D + 1 * 128.
    assert_eq!(&out[..3], &[0x30, 0xCD, 0x01]);
    assert_eq!(out.len(), 3 + 205);
    assert_eq!(ok(&out, Some(ProtocolVersion::V311)), Packet::Publish(p));
}

#[test]
fn what_the_peer_would_refuse_is_not_encoded() {
    let mut out = BytesMut::new();
    let v5 = ProtocolVersion::V5;
    let v3 = ProtocolVersion::V311;
    let refused = |packet: Packet, version, out: &mut BytesMut| {
        let result = encode(&packet, version, out);
        assert!(result.is_err(), "{packet:?} encoded");
        assert!(out.is_empty(), "nothing is appended on an error");
    };
    refused(
        Packet::Publish(publish(QoS::AtMostOnce, Some(1))),
        v5,
        &mut out,
    );
    refused(
        Packet::Publish(publish(QoS::AtLeastOnce, None)),
        v5,
        &mut out,
    );
    let mut dup = publish(QoS::AtMostOnce, None);
    dup.dup = true;
    refused(Packet::Publish(dup), v3, &mut out);
    let mut empty = publish(QoS::AtMostOnce, None);
    empty.topic = TopicName::new("").unwrap();
    refused(Packet::Publish(empty.clone()), v5, &mut out);
    empty.properties.topic_alias = NonZeroU16::new(1);
    refused(Packet::Publish(empty), v3, &mut out);
    let mut ack = PubAck::new(id(1));
    ack.reason_code = ReasonCode::GrantedQoS1; // [MQTT-3.4.2-1]
    refused(Packet::PubAck(ack.clone()), v5, &mut out);
    ack.reason_code = ReasonCode::NotAuthorized; // no 3.1.1 form
    refused(Packet::PubAck(ack), v3, &mut out);
    refused(
        Packet::Auth(Auth {
            reason_code: ReasonCode::Success,
            properties: Default::default(),
        }),
        v3,
        &mut out,
    );
    let empty_subscribe = Subscribe {
        packet_id: id(1),
        properties: Default::default(),
        filters: Vec::new(),
    };
    refused(Packet::Subscribe(empty_subscribe), v5, &mut out);
    let connack = ConnAck {
        session_present: true,
        reason_code: ReasonCode::NotAuthorized,
        properties: Default::default(),
    };
    refused(Packet::ConnAck(Box::new(connack)), v5, &mut out);
    let mut c = connect(v3);
    c.password = Some(Bytes::new());
    refused(Packet::Connect(Box::new(c.clone())), v3, &mut out);
    refused(Packet::Connect(Box::new(c)), v5, &mut out); // not its own version
    let mut long = publish(QoS::AtMostOnce, None);
    long.properties.content_type = Some("x".repeat(70_000));
    refused(Packet::Publish(long), v5, &mut out);
}
