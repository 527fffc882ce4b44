//! Generators of valid packets for the property tests: every packet type with every v5 field,
//! and [`to_v311`], the same packet as 3.1.1 can carry it.

use std::num::{NonZeroU16, NonZeroU32};

use bytes::Bytes;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;

use super::super::reason;
use super::super::*;

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 é€😀/_$-]{0,8}"
}

fn binary() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..12).prop_map(Bytes::from)
}

fn packet_id() -> impl Strategy<Value = PacketId> {
    (1..=u16::MAX).prop_map(|n| PacketId::new(n).unwrap())
}

fn qos() -> impl Strategy<Value = QoS> {
    select(vec![QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce])
}

fn topic() -> impl Strategy<Value = TopicName> {
    "[a-z0-9 é$/]{1,10}".prop_map(|t| TopicName::new(t).unwrap())
}

fn filter() -> impl Strategy<Value = TopicFilter> {
    (
        option::of("[a-z]{1,3}"),
        vec(prop_oneof!["[a-z$ ]{0,3}", Just("+".to_owned())], 1..4),
        any::<bool>(),
    )
        .prop_filter_map("a valid filter", |(share, levels, hash)| {
            let mut filter = levels.join("/");
            if hash {
                filter.push_str(if filter.is_empty() { "#" } else { "/#" });
            }
            if let Some(share) = share {
                filter = format!("$share/{share}/{filter}");
            }
            TopicFilter::new(filter).ok()
        })
}

fn user_properties() -> impl Strategy<Value = UserProperties> {
    vec((text(), text()), 0..3)
}

fn subscription_id() -> impl Strategy<Value = NonZeroU32> {
    (1..=varint::MAX).prop_map(|n| NonZeroU32::new(n).unwrap())
}

fn non_zero_u16() -> impl Strategy<Value = NonZeroU16> {
    (1..=u16::MAX).prop_map(|n| NonZeroU16::new(n).unwrap())
}

fn non_zero_u32() -> impl Strategy<Value = NonZeroU32> {
    (1..=u32::MAX).prop_map(|n| NonZeroU32::new(n).unwrap())
}

fn payload_format() -> impl Strategy<Value = PayloadFormat> {
    select(vec![PayloadFormat::Unspecified, PayloadFormat::Utf8])
}

/// An Authentication Method with optional data, or neither.
fn authentication() -> impl Strategy<Value = (Option<String>, Option<Bytes>)> {
    option::of((text(), option::of(binary())))
        .prop_map(|auth| auth.map_or((None, None), |(m, d)| (Some(m), d)))
}

fn will() -> impl Strategy<Value = Will> {
    let properties = (
        any::<u32>(),
        payload_format(),
        option::of(any::<u32>()),
        option::of(text()),
        option::of(topic()),
        option::of(binary()),
        user_properties(),
    )
        .prop_map(
            |(delay, format, expiry, content, response, correlation, user)| WillProperties {
                will_delay_interval: delay,
                payload_format: format,
                message_expiry_interval: expiry,
                content_type: content,
                response_topic: response,
                correlation_data: correlation,
                user_properties: user,
            },
        );
    (topic(), binary(), qos(), any::<bool>(), properties).prop_map(
        |(topic, payload, qos, retain, properties)| Will {
            topic,
            payload,
            qos,
            retain,
            properties,
        },
    )
}

fn connect() -> impl Strategy<Value = Packet> {
    let properties = (
        any::<u32>(),
        non_zero_u16(),
        option::of(non_zero_u32()),
        any::<u16>(),
        any::<bool>(),
        any::<bool>(),
        user_properties(),
        authentication(),
    )
        .prop_map(
            |(expiry, receive, size, aliases, response, problem, user, auth)| ConnectProperties {
                session_expiry_interval: expiry,
                receive_maximum: receive,
                maximum_packet_size: size,
                topic_alias_maximum: aliases,
                request_response_information: response,
                request_problem_information: problem,
                user_properties: user,
                authentication_method: auth.0,
                authentication_data: auth.1,
            },
        );
    (
        any::<bool>(),
        any::<u16>(),
        text(),
        option::of(will()),
        option::of(text()),
        option::of(binary()),
        properties,
    )
        .prop_map(
            |(clean_start, keep_alive, client_id, will, username, password, properties)| {
                Packet::Connect(Box::new(Connect {
                    protocol_version: ProtocolVersion::V5,
                    clean_start,
                    keep_alive,
                    client_id,
                    will,
                    username,
                    password,
                    properties,
                }))
            },
        )
}

fn connack() -> impl Strategy<Value = Packet> {
    let limits = (
        option::of(any::<u32>()),
        non_zero_u16(),
        select(vec![QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce]),
        any::<bool>(),
        option::of(non_zero_u32()),
        any::<u16>(),
        any::<[bool; 3]>(),
        option::of(any::<u16>()),
    );
    let texts = (
        option::of(text()),
        option::of(text()),
        option::of(text()),
        option::of(text()),
        user_properties(),
        authentication(),
    );
    (any::<bool>(), select(reason::CONNACK), limits, texts).prop_map(
        |(present, reason_code, limits, texts)| {
            let (expiry, receive, max_qos, retain, size, aliases, available, keep_alive) = limits;
            let (assigned, reason_string, response, reference, user, auth) = texts;
            Packet::ConnAck(Box::new(ConnAck {
                session_present: present && !reason_code.is_error(),
                reason_code,
                properties: ConnAckProperties {
                    session_expiry_interval: expiry,
                    receive_maximum: receive,
                    maximum_qos: max_qos,
                    retain_available: retain,
                    maximum_packet_size: size,
                    assigned_client_identifier: assigned,
                    topic_alias_maximum: aliases,
                    reason_string,
                    user_properties: user,
                    wildcard_subscription_available: available[0],
                    subscription_identifiers_available: available[1],
                    shared_subscription_available: available[2],
                    server_keep_alive: keep_alive,
                    response_information: response,
                    server_reference: reference,
                    authentication_method: auth.0,
                    authentication_data: auth.1,
                },
            }))
        },
    )
}

fn publish() -> impl Strategy<Value = Packet> {
    let properties = (
        payload_format(),
        option::of(any::<u32>()),
        option::of(non_zero_u16()),
        option::of(topic()),
        option::of(binary()),
        user_properties(),
        vec(subscription_id(), 0..3),
        option::of(text()),
    )
        .prop_map(
            |(format, expiry, alias, response, correlation, user, ids, content)| {
                PublishProperties {
                    payload_format: format,
                    message_expiry_interval: expiry,
                    topic_alias: alias,
                    response_topic: response,
                    correlation_data: correlation,
                    user_properties: user,
                    subscription_identifiers: ids,
                    content_type: content,
                }
            },
        );
    (
        qos(),
        packet_id(),
        any::<[bool; 3]>(),
        topic(),
        properties,
        binary(),
    )
        .prop_map(
            |(qos, packet_id, [dup, retain, empty_topic], topic, properties, payload)| {
                let aliased = properties.topic_alias.is_some();
                Packet::Publish(Publish {
                    dup: dup && qos != QoS::AtMostOnce,
                    qos,
                    retain,
                    topic: if empty_topic && aliased {
                        TopicName::default()
                    } else {
                        topic
                    },
                    packet_id: (qos != QoS::AtMostOnce).then_some(packet_id),
                    properties,
                    payload,
                })
            },
        )
}

fn ack_properties() -> impl Strategy<Value = AckProperties> {
    (option::of(text()), user_properties()).prop_map(|(reason_string, user_properties)| {
        AckProperties {
            reason_string,
            user_properties,
        }
    })
}

fn publish_ack() -> impl Strategy<Value = Packet> {
    (
        packet_id(),
        0..4u8,
        select(reason::PUBACK),
        select(reason::PUBREL),
        ack_properties(),
    )
        .prop_map(
            |(id, kind, puback_code, pubrel_code, properties)| match kind {
                0 => Packet::PubAck(PubAck {
                    packet_id: id,
                    reason_code: puback_code,
                    properties,
                }),
                1 => Packet::PubRec(PubRec {
                    packet_id: id,
                    reason_code: puback_code,
                    properties,
                }),
                2 => Packet::PubRel(PubRel {
                    packet_id: id,
                    reason_code: pubrel_code,
                    properties,
                }),
                _ => Packet::PubComp(PubComp {
                    packet_id: id,
                    reason_code: pubrel_code,
                    properties,
                }),
            },
        )
}

fn options() -> impl Strategy<Value = SubscriptionOptions> {
    let handling = select(vec![
        RetainHandling::SendAtSubscribe,
        RetainHandling::SendAtSubscribeIfNew,
        RetainHandling::DoNotSend,
    ]);
    (qos(), any::<bool>(), any::<bool>(), handling).prop_map(|(qos, no_local, rap, handling)| {
        SubscriptionOptions {
            qos,
            no_local,
            retain_as_published: rap,
            retain_handling: handling,
        }
    })
}

fn subscriptions() -> impl Strategy<Value = Packet> {
    let subscribe = (
        packet_id(),
        option::of(subscription_id()),
        user_properties(),
        vec((filter(), options()), 1..4),
    )
        .prop_map(|(packet_id, identifier, user, filters)| {
            let filters = filters
                .into_iter()
                .map(|(f, mut o)| {
                    o.no_local &= f.shared().is_none();
                    (f, o)
                })
                .collect();
            Packet::Subscribe(Subscribe {
                packet_id,
                properties: SubscribeProperties {
                    subscription_identifier: identifier,
                    user_properties: user,
                },
                filters,
            })
        });
    let suback = (
        packet_id(),
        ack_properties(),
        vec(select(reason::SUBACK), 1..4),
    )
        .prop_map(|(packet_id, properties, reason_codes)| {
            Packet::SubAck(SubAck {
                packet_id,
                properties,
                reason_codes,
            })
        });
    let unsubscribe = (packet_id(), user_properties(), vec(filter(), 1..4)).prop_map(
        |(packet_id, user_properties, filters)| {
            Packet::Unsubscribe(Unsubscribe {
                packet_id,
                properties: UnsubscribeProperties { user_properties },
                filters,
            })
        },
    );
    let unsuback = (
        packet_id(),
        ack_properties(),
        vec(select(reason::UNSUBACK), 1..4),
    )
        .prop_map(|(packet_id, properties, reason_codes)| {
            Packet::UnsubAck(UnsubAck {
                packet_id,
                properties,
                reason_codes,
            })
        });
    prop_oneof![subscribe, suback, unsubscribe, unsuback]
}

fn disconnect_and_auth() -> impl Strategy<Value = Packet> {
    let disconnect = (
        select(reason::DISCONNECT),
        option::of(any::<u32>()),
        option::of(text()),
        user_properties(),
        option::of(text()),
    )
        .prop_map(|(reason_code, expiry, reason_string, user, reference)| {
            Packet::Disconnect(Disconnect {
                reason_code,
                properties: DisconnectProperties {
                    session_expiry_interval: expiry,
                    reason_string,
                    user_properties: user,
                    server_reference: reference,
                },
            })
        });
    let auth = (
        select(reason::AUTH),
        option::of((text(), option::of(binary()))),
        option::of(text()),
        user_properties(),
    )
        .prop_map(|(reason_code, auth, reason_string, user)| {
            Packet::Auth(match auth {
                Some((method, data)) => Auth {
                    reason_code,
                    properties: AuthProperties {
                        authentication_method: Some(method),
                        authentication_data: data,
                        reason_string,
                        user_properties: user,
                    },
                },
                None => Auth {
                    reason_code: ReasonCode::Success,
                    properties: AuthProperties::default(),
                },
            })
        });
    prop_oneof![
        disconnect,
        auth,
        Just(Packet::PingReq),
        Just(Packet::PingResp)
    ]
}

/// Any valid v5 packet.
pub fn packet() -> impl Strategy<Value = Packet> {
    prop_oneof![
        connect(),
        connack(),
        publish(),
        publish_ack(),
        subscriptions(),
        disconnect_and_auth()
    ]
}

/// `packet` as 3.1.1 can carry it: v5-only fields at their defaults, reason codes through
/// 3.1.1's codes; `None` for AUTH.
pub fn to_v311(packet: Packet) -> Option<Packet> {
    fn plain<T: Default>(_: T) -> T {
        T::default()
    }
    Some(match packet {
        Packet::Connect(mut c) => {
            c.protocol_version = ProtocolVersion::V311;
            c.properties = plain(c.properties);
            if let Some(will) = &mut c.will {
                will.properties = WillProperties::default();
            }
            if c.password.is_some() && c.username.is_none() {
                c.username = Some(String::new());
            }
            c.clean_start |= c.client_id.is_empty();
            Packet::Connect(c)
        }
        Packet::ConnAck(mut c) => {
            c.properties = plain(c.properties);
            c.reason_code = c
                .reason_code
                .v311_connack_code()
                .and_then(ReasonCode::from_v311_connack_code)
                .unwrap_or(ReasonCode::Success);
            c.session_present &= !c.reason_code.is_error();
            Packet::ConnAck(c)
        }
        Packet::Publish(mut p) => {
            p.properties = PublishProperties::default();
            if p.topic.is_empty() {
                p.topic = TopicName::new("t").unwrap();
            }
            Packet::Publish(p)
        }
        Packet::PubAck(a) => Packet::PubAck(PubAck::new(a.packet_id)),
        Packet::PubRec(a) => Packet::PubRec(PubRec::new(a.packet_id)),
        Packet::PubRel(a) => Packet::PubRel(PubRel::new(a.packet_id)),
        Packet::PubComp(a) => Packet::PubComp(PubComp::new(a.packet_id)),
        Packet::Subscribe(mut s) => {
            s.properties = SubscribeProperties::default();
            for (_, options) in &mut s.filters {
                *options = SubscriptionOptions {
                    qos: options.qos,
                    ..Default::default()
                };
            }
            Packet::Subscribe(s)
        }
        Packet::SubAck(mut s) => {
            s.properties = AckProperties::default();
            for code in &mut s.reason_codes {
                *code = code
                    .v311_suback_code()
                    .and_then(ReasonCode::from_v311_suback_code)
                    .unwrap_or(ReasonCode::UnspecifiedError);
            }
            Packet::SubAck(s)
        }
        Packet::Unsubscribe(mut u) => {
            u.properties = UnsubscribeProperties::default();
            Packet::Unsubscribe(u)
        }
        Packet::UnsubAck(mut u) => {
            u.properties = AckProperties::default();
            u.reason_codes.clear();
            Packet::UnsubAck(u)
        }
        Packet::Disconnect(_) => Packet::Disconnect(Disconnect::default()),
        Packet::Auth(_) => return None,
        other => other,
    })
}
