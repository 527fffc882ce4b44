//! A channel message as the PUBLISH packet a subscriber is sent, encoded once per message and
//! protocol version and shared by every MQTT connection that sends it.
//!
//! The message's data is read once ([`crate::payload::from_data`], kept in the message's
//! extension slot): payload, properties, whether it was published with RETAIN and whether it is
//! a retained clear. The packet is encoded once per version in a frame slot of its own
//! (`mqtt publish v5`, `mqtt publish v3.1.1`) in its QoS 0 form with RETAIN 0: fixed header,
//! topic, (v5) properties, payload. A connection then copies it with the little that differs
//! for it ([`write`]): RETAIN set in the first byte (the retained message sent on subscribe,
//! or as published), and for QoS 1 and 2 the QoS and DUP bits, a remaining length two bytes longer and the
//! packet identifier after the topic. No per-connection encoding of topic, properties or payload.
//!
//! A v5 connection may add what is its own ([`Extras`], [`write_v5`]): the Subscription
//! Identifiers of its matching subscriptions and a Topic Alias (with the topic name left out
//! once the alias is set). They go in front of the shared properties, whose length grows by
//! theirs; the rest of the packet is copied as it is.
//!
//! A message published with a Message Expiry Interval is the exception: the interval it is
//! sent with is the time left [MQTT-3.3.2-6], which differs per delivery, so a v5 connection
//! encodes it itself ([`publish_packet`]); an expired message is not sent [MQTT-3.3.2-5].

use std::num::{NonZeroU16, NonZeroU32};
use std::sync::LazyLock;

use bytes::{Bytes, BytesMut};
use herald_core::message::FrameSlot;
use herald_core::StoredMessage;

use crate::packet::varint::{self, Varint};
use crate::packet::{self, Packet, PayloadFormat, ProtocolVersion, Publish, PublishProperties};
use crate::packet::{QoS, TopicName};
use crate::payload::{self, Outgoing};
use crate::topic_map;

/// Where a message keeps its v5 PUBLISH.
static SLOT_V5: LazyLock<FrameSlot> = LazyLock::new(|| FrameSlot::reserve("mqtt publish v5"));
/// Where a message keeps its 3.1.1 PUBLISH.
static SLOT_V311: LazyLock<FrameSlot> = LazyLock::new(|| FrameSlot::reserve("mqtt publish v3.1.1"));

/// Reserves both frame slots (done when the first connection starts).
pub(crate) fn reserve_slots() {
    LazyLock::force(&SLOT_V5);
    LazyLock::force(&SLOT_V311);
}

/// What the message's data says to MQTT, parsed once per message (its extension slot; parsed
/// again, per call, if the slot holds another crate's value).
pub(crate) fn outgoing(message: &StoredMessage) -> std::borrow::Cow<'_, Outgoing> {
    match message.extension(|m| Some(payload::from_data(&m.data))) {
        Some(outgoing) => std::borrow::Cow::Borrowed(outgoing),
        None => std::borrow::Cow::Owned(payload::from_data(&message.data)),
    }
}

/// The message's shared QoS 0 PUBLISH for `version` (empty when it cannot be one: a channel
/// without a topic, a packet over what MQTT can carry).
pub(crate) fn shared(message: &StoredMessage, version: ProtocolVersion) -> &Bytes {
    let slot = match version {
        ProtocolVersion::V5 => *SLOT_V5,
        ProtocolVersion::V311 => *SLOT_V311,
    };
    message.frame_ref(slot, |m| encode_shared(m, version))
}

fn encode_shared(message: &StoredMessage, version: ProtocolVersion) -> Bytes {
    let Some(publish) = publish_packet(message) else {
        return Bytes::new();
    };
    let mut out = BytesMut::new();
    match packet::encode(&Packet::Publish(publish), version, &mut out) {
        Ok(()) => out.freeze(),
        Err(_) => Bytes::new(),
    }
}

/// The message as a QoS 0 PUBLISH without RETAIN and without Message Expiry Interval: what
/// [`shared`] encodes, and what a connection completes itself for a message that expires
/// (whose expiry interval is the time left when it is sent [MQTT-3.3.2-6]). `None` for a
/// channel without a topic.
pub(crate) fn publish_packet(message: &StoredMessage) -> Option<Publish> {
    // A device's inbox logs (`$app` and its own) are delivered on the inbox's topic.
    let topic = match crate::inbox::is_inbox_log(&message.channel) {
        true => std::borrow::Cow::Borrowed(crate::inbox::INBOX_TOPIC),
        false => topic_map::channel_to_topic(&message.channel)?,
    };
    let topic = TopicName::new(topic.into_owned()).ok()?;
    let outgoing = outgoing(message);
    let props = &outgoing.props;
    let properties = PublishProperties {
        payload_format: match props.payload_format {
            Some(payload::PayloadFormat::Utf8) => PayloadFormat::Utf8,
            _ => PayloadFormat::Unspecified,
        },
        content_type: props.content_type.clone(),
        response_topic: props
            .response_topic
            .as_deref()
            .and_then(|t| TopicName::new(t).ok()),
        correlation_data: props.correlation_data.clone(),
        user_properties: props.user_properties.clone(),
        ..PublishProperties::default()
    };
    Some(Publish {
        dup: false,
        qos: QoS::AtMostOnce,
        retain: false,
        topic,
        packet_id: None,
        properties,
        payload: outgoing.payload.clone(),
    })
}

/// How a connection sends a message at QoS 1 or 2: its packet identifier, its QoS, and
/// whether it is sent again (DUP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Delivery {
    /// The packet identifier.
    pub(crate) id: NonZeroU16,
    /// QoS 1 or 2.
    pub(crate) qos: QoS,
    /// DUP: the message was sent before [MQTT-3.3.1-1].
    pub(crate) dup: bool,
}

/// Appends `shared` (a QoS 0 PUBLISH as [`shared`] made it) to `out` as this connection sends
/// it: with RETAIN if `retain`, and at QoS 1 or 2 with the packet identifier and DUP flag of
/// `delivery` if there is one. Returns the packet's length.
pub(crate) fn write(
    out: &mut Vec<u8>,
    shared: &[u8],
    retain: bool,
    delivery: Option<Delivery>,
) -> usize {
    let first = shared[0] | u8::from(retain);
    let Some(Delivery { id, qos, dup }) = delivery else {
        out.push(first);
        out.extend_from_slice(&shared[1..]);
        return shared.len();
    };
    let Varint::Value(remaining, length_bytes) = varint::read(&shared[1..]) else {
        return 0;
    };
    let body = &shared[1 + length_bytes..];
    let topic_end = 2 + usize::from(u16::from_be_bytes([body[0], body[1]]));
    let start = out.len();
    out.push(first | qos.as_u8() << 1 | u8::from(dup) << 3);
    put_varint(out, remaining + 2);
    out.extend_from_slice(&body[..topic_end]);
    out.extend_from_slice(&id.get().to_be_bytes());
    out.extend_from_slice(&body[topic_end..]);
    out.len() - start
}

/// How long `shared` is when sent at QoS 1 or 2 (two bytes of packet id, and perhaps one more of
/// remaining length).
pub(crate) fn len_at_qos1(shared: &[u8]) -> usize {
    match varint::read(&shared[1..]) {
        Varint::Value(remaining, _) => 1 + varint::len(remaining + 2) + remaining as usize + 2,
        _ => shared.len() + 2,
    }
}

/// What one v5 connection adds to a message's shared PUBLISH.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Extras {
    /// The Topic Alias it goes with, and whether the topic name is left out (the alias was
    /// set by an earlier PUBLISH of the connection) [MQTT-3.3.2-12].
    pub(crate) alias: Option<(NonZeroU16, bool)>,
    /// The Subscription Identifiers of the connection's matching subscriptions
    /// [MQTT-3.3.4-3].
    pub(crate) identifiers: Vec<NonZeroU32>,
}

impl Extras {
    /// Whether there is nothing to add (the shared packet goes as it is).
    pub(crate) fn is_empty(&self) -> bool {
        self.alias.is_none() && self.identifiers.is_empty()
    }

    /// The properties added, encoded.
    fn properties(&self) -> Vec<u8> {
        use crate::packet::properties::id;
        let mut out = Vec::new();
        if let Some((alias, _)) = self.alias {
            out.push(id::TOPIC_ALIAS);
            out.extend_from_slice(&alias.get().to_be_bytes());
        }
        for identifier in &self.identifiers {
            out.push(id::SUBSCRIPTION_IDENTIFIER);
            put_varint(&mut out, identifier.get());
        }
        out
    }

    /// Whether the topic name is left out.
    fn topic_left_out(&self) -> bool {
        self.alias.is_some_and(|(_, left_out)| left_out)
    }
}

/// The parts of a shared v5 PUBLISH (QoS 0): the topic name with its two length bytes, the
/// properties without their length, the payload.
struct Parts<'a> {
    topic: &'a [u8],
    properties: &'a [u8],
    payload: &'a [u8],
}

fn parts(shared: &[u8]) -> Option<Parts<'_>> {
    let Varint::Value(_, length_bytes) = varint::read(shared.get(1..)?) else {
        return None;
    };
    let body = shared.get(1 + length_bytes..)?;
    let topic_end = 2 + usize::from(u16::from_be_bytes([*body.first()?, *body.get(1)?]));
    let after_topic = body.get(topic_end..)?;
    let Varint::Value(properties_len, properties_len_bytes) = varint::read(after_topic) else {
        return None;
    };
    let properties_end = properties_len_bytes + properties_len as usize;
    Some(Parts {
        topic: &body[..topic_end],
        properties: after_topic.get(properties_len_bytes..properties_end)?,
        payload: after_topic.get(properties_end..)?,
    })
}

/// The topic name's bytes in the shared PUBLISH `shared` (empty if it is not one).
pub(crate) fn topic_of(shared: &[u8]) -> &[u8] {
    let Some(Varint::Value(_, length_bytes)) = shared.get(1..).map(varint::read) else {
        return &[];
    };
    let Some(body) = shared.get(1 + length_bytes..) else {
        return &[];
    };
    let [a, b, ..] = body else {
        return &[];
    };
    let len = usize::from(u16::from_be_bytes([*a, *b]));
    body.get(2..2 + len).unwrap_or(&[])
}

/// The Remaining Length of `parts` sent with `extras` (their properties `added`), at QoS 1 or 2
/// if `with_id`.
fn remaining_with(parts: &Parts<'_>, added: usize, with_id: bool, extras: &Extras) -> usize {
    let topic = if extras.topic_left_out() {
        2
    } else {
        parts.topic.len()
    };
    let properties = parts.properties.len() + added;
    topic
        + if with_id { 2 } else { 0 }
        + varint::len(properties as u32)
        + properties
        + parts.payload.len()
}

/// How long the shared v5 PUBLISH `shared` is when sent with `extras`, at QoS 1 or 2 if
/// `with_id` (0 if it is not one).
pub(crate) fn len_v5(shared: &[u8], with_id: bool, extras: &Extras) -> usize {
    let Some(parts) = parts(shared) else {
        return 0;
    };
    let remaining = remaining_with(&parts, extras.properties().len(), with_id, extras);
    1 + varint::len(remaining as u32) + remaining
}

/// Appends the shared v5 PUBLISH `shared` to `out` as [`write`] does, with `extras`' properties
/// in front of the shared ones and the topic name left out if they say so. Returns the
/// packet's length (0, nothing written, if `shared` is not a v5 PUBLISH).
pub(crate) fn write_v5(
    out: &mut Vec<u8>,
    shared: &[u8],
    retain: bool,
    delivery: Option<Delivery>,
    extras: &Extras,
) -> usize {
    let Some(parts) = parts(shared) else {
        return 0;
    };
    let added = extras.properties();
    let remaining = remaining_with(&parts, added.len(), delivery.is_some(), extras);
    let start = out.len();
    let mut first = shared[0] | u8::from(retain);
    if let Some(Delivery { qos, dup, .. }) = delivery {
        first |= qos.as_u8() << 1 | u8::from(dup) << 3;
    }
    out.push(first);
    put_varint(out, remaining as u32);
    match extras.topic_left_out() {
        true => out.extend_from_slice(&[0, 0]),
        false => out.extend_from_slice(parts.topic),
    }
    if let Some(Delivery { id, .. }) = delivery {
        out.extend_from_slice(&id.get().to_be_bytes());
    }
    put_varint(out, (parts.properties.len() + added.len()) as u32);
    out.extend_from_slice(&added);
    out.extend_from_slice(parts.properties);
    out.extend_from_slice(parts.payload);
    out.len() - start
}

/// Appends a Variable Byte Integer.
fn put_varint(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let mut byte = (value % 128) as u8;
        value /= 128;
        if value > 0 {
            byte |= 0x80;
        }
        out.push(byte);
        if value == 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herald_core::{ChannelName, Epoch};

    use super::*;

    fn message(channel: &str, data: &str) -> Arc<StoredMessage> {
        let channel = ChannelName::parse(channel).expect("a channel");
        let data = Bytes::copy_from_slice(data.as_bytes());
        Arc::new(StoredMessage::new(
            channel,
            Epoch::new("e"),
            1,
            None,
            0,
            data,
        ))
    }

    fn decoded(bytes: &[u8], version: ProtocolVersion) -> Publish {
        let mut buf = BytesMut::from(bytes);
        match packet::decode(&mut buf, Some(version), u32::MAX) {
            Ok(Some(Packet::Publish(p))) => p,
            other => panic!("not one PUBLISH: {other:?}"),
        }
    }

    #[test]
    fn the_shared_packet_is_patched_per_connection_into_what_the_codec_decodes() {
        for version in [ProtocolVersion::V311, ProtocolVersion::V5] {
            let m = message(
                "sensors/kitchen",
                r#"{"$mqtt":{"text":"ON","retain":true}}"#,
            );
            let shared = shared(&m, version).clone();
            assert!(
                Arc::ptr_eq(&m, &m) && shared == *super::shared(&m, version),
                "kept"
            );
            let mut out = Vec::new();
            let delivery = Delivery {
                id: NonZeroU16::new(513).unwrap(),
                qos: QoS::AtLeastOnce,
                dup: false,
            };
            let len = write(&mut out, &shared, true, Some(delivery));
            assert_eq!(len, out.len());
            assert_eq!(len, len_at_qos1(&shared));
            let p = decoded(&out, version);
            assert_eq!(p.topic.as_str(), "sensors/kitchen");
            assert_eq!(&p.payload[..], b"ON");
            assert!(p.retain);
            assert_eq!(p.qos, QoS::AtLeastOnce);
            assert_eq!(p.packet_id, NonZeroU16::new(513));
            let mut out = Vec::new();
            write(&mut out, &shared, false, None);
            let p = decoded(&out, version);
            assert_eq!(
                (p.qos, p.retain, p.packet_id),
                (QoS::AtMostOnce, false, None)
            );
        }
    }

    #[test]
    fn a_connections_extras_are_patched_into_what_the_codec_decodes() {
        let m = message(
            "sensors/kitchen",
            r#"{"$mqtt":{"text":"ON","content_type":"text/plain"}}"#,
        );
        let shared = shared(&m, ProtocolVersion::V5).clone();
        let extras = Extras {
            alias: Some((NonZeroU16::new(3).unwrap(), false)),
            identifiers: vec![NonZeroU32::new(1).unwrap(), NonZeroU32::new(300).unwrap()],
        };
        let delivery = Delivery {
            id: NonZeroU16::new(9).unwrap(),
            qos: QoS::AtLeastOnce,
            dup: true,
        };
        for (delivery, left_out) in [(None, false), (Some(delivery), false), (None, true)] {
            let extras = Extras {
                alias: extras.alias.map(|(a, _)| (a, left_out)),
                ..extras.clone()
            };
            let mut out = vec![0xAA];
            let len = write_v5(&mut out, &shared, true, delivery, &extras);
            assert_eq!(len, out.len() - 1);
            assert_eq!(len, len_v5(&shared, delivery.is_some(), &extras));
            let p = decoded(&out[1..], ProtocolVersion::V5);
            let topic = if left_out { "" } else { "sensors/kitchen" };
            assert_eq!(p.topic.as_str(), topic);
            assert_eq!(&p.payload[..], b"ON");
            assert!(p.retain);
            assert_eq!(p.packet_id, delivery.map(|d| d.id));
            assert_eq!(p.dup, delivery.is_some());
            assert_eq!(p.properties.topic_alias, NonZeroU16::new(3));
            assert_eq!(p.properties.subscription_identifiers, extras.identifiers);
            assert_eq!(p.properties.content_type.as_deref(), Some("text/plain"));
        }
        assert_eq!(topic_of(&shared), b"sensors/kitchen");
        assert_eq!(topic_of(&[]), b"");
    }

    #[test]
    fn a_remaining_length_that_grows_a_byte_at_qos1_still_decodes() {
        // A remaining length of 126 or 127 at QoS 0 needs two bytes at QoS 1.
        for size in 100..140 {
            let data = format!("\"{}\"", "x".repeat(size));
            let m = message("t", &data);
            let shared = shared(&m, ProtocolVersion::V311).clone();
            let mut out = Vec::new();
            let delivery = Delivery {
                id: NonZeroU16::new(1).unwrap(),
                qos: QoS::ExactlyOnce,
                dup: true,
            };
            write(&mut out, &shared, false, Some(delivery));
            let p = decoded(&out, ProtocolVersion::V311);
            assert_eq!(p.payload.len(), data.len());
            assert_eq!((p.qos, p.dup), (QoS::ExactlyOnce, true));
        }
    }
}
