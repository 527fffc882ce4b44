//! PUBLISH and its acknowledgements PUBACK, PUBREC, PUBREL, PUBCOMP (MQTT 5.0 3.3-3.7; 3.1.1
//! 3.3-3.7).
//!
//! PUBLISH rules: QoS 3 is malformed [MQTT-3.3.1-4]; DUP is 0 at QoS 0 [MQTT-3.3.1-2]; a packet
//! identifier is present only at QoS 1 and 2 [MQTT-2.2.1-2] and is not 0 [MQTT-2.2.1-3]; the
//! topic name holds no wildcard [MQTT-3.3.2-2] (answered with 0x90 Topic Name invalid); an
//! empty topic name is a Protocol Error unless a v5 Topic Alias is present (MQTT 5.0 3.3.2.3.4;
//! 3.1.1 [MQTT-4.7.3-1]); a Response Topic holds no wildcard [MQTT-3.3.2-14]. The payload is
//! the rest of the packet, as a slice of the read buffer.
//!
//! Acknowledgements: v5 carries a reason code from its packet's list ([MQTT-3.4.2-1] ...
//! [MQTT-3.7.2-1], another is a Malformed Packet) and properties; the reason code and property
//! length are left out when the reason is Success without properties, and the property length
//! when there are none (3.4.2.1). 3.1.1 carries the packet identifier only, so an error reason
//! cannot be encoded for it.

use std::num::{NonZeroU16, NonZeroU32};

use bytes::Bytes;

use super::connect::write_message_properties;
use super::decode::{DecodeError, Reader};
use super::encode::{check_reason, EncodeError, Sink};
use super::properties::{self, id, put, Context, WriteProperties};
use super::reason::{self, ReasonCode};
use super::strings::put_string;
use super::topic::{TopicError, TopicName};
use super::{Packet, PacketId, PayloadFormat, ProtocolVersion, QoS, UserProperties};

/// PUBLISH: an application message, both ways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    /// DUP: a re-delivery of an earlier attempt (QoS 1 and 2 only).
    pub dup: bool,
    /// QoS.
    pub qos: QoS,
    /// RETAIN.
    pub retain: bool,
    /// Topic Name; empty only in a v5 PUBLISH with a Topic Alias.
    pub topic: TopicName,
    /// Packet Identifier: present exactly when QoS is 1 or 2.
    pub packet_id: Option<PacketId>,
    /// v5 properties.
    pub properties: PublishProperties,
    /// The application message, a slice of the read buffer.
    pub payload: Bytes,
}

/// PUBLISH's v5 properties (MQTT 5.0 3.3.2.3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PublishProperties {
    /// Payload Format Indicator.
    pub payload_format: PayloadFormat,
    /// Message Expiry Interval in seconds; `None`: does not expire.
    pub message_expiry_interval: Option<u32>,
    /// Topic Alias (never 0).
    pub topic_alias: Option<NonZeroU16>,
    /// Response Topic.
    pub response_topic: Option<TopicName>,
    /// Correlation Data.
    pub correlation_data: Option<Bytes>,
    /// User Properties.
    pub user_properties: UserProperties,
    /// Subscription Identifiers of the subscriptions that matched (server to client; several
    /// when several matched).
    pub subscription_identifiers: Vec<NonZeroU32>,
    /// Content Type.
    pub content_type: Option<String>,
}

/// The v5 properties of PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK and UNSUBACK.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AckProperties {
    /// Reason String.
    pub reason_string: Option<String>,
    /// User Properties.
    pub user_properties: UserProperties,
}

impl AckProperties {
    /// Whether there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.reason_string.is_none() && self.user_properties.is_empty()
    }

    pub(crate) fn read(body: &mut Reader) -> Result<AckProperties, DecodeError> {
        let p = properties::read(body, Context::Ack)?;
        Ok(AckProperties {
            reason_string: p.reason_string,
            user_properties: p.user_properties,
        })
    }
}

impl WriteProperties for AckProperties {
    fn write_properties<S: Sink>(&self, out: &mut S) -> Result<(), EncodeError> {
        put::opt_string(out, id::REASON_STRING, &self.reason_string)?;
        put::user_properties(out, &self.user_properties)
    }
}

fn topic_error(e: TopicError) -> DecodeError {
    DecodeError::new(ReasonCode::TopicNameInvalid, format!("PUBLISH: {e}"))
}

/// Decodes a PUBLISH body; `flags` is the fixed header's low nibble.
pub(crate) fn decode_publish(
    flags: u8,
    version: ProtocolVersion,
    body: &mut Reader,
) -> Result<Packet, DecodeError> {
    let dup = flags & 0x08 != 0;
    let retain = flags & 0x01 != 0;
    let Some(qos) = QoS::from_u8((flags >> 1) & 0x03) else {
        return Err(DecodeError::malformed("PUBLISH with QoS 3 [MQTT-3.3.1-4]"));
    };
    if dup && qos == QoS::AtMostOnce {
        return Err(DecodeError::malformed(
            "PUBLISH with DUP set at QoS 0 [MQTT-3.3.1-2]",
        ));
    }
    let topic = TopicName::new(body.string()?).map_err(topic_error)?;
    let packet_id = match qos {
        QoS::AtMostOnce => None,
        _ => Some(body.packet_id()?),
    };
    let properties = match version {
        ProtocolVersion::V5 => {
            let p = properties::read(body, Context::Publish)?;
            PublishProperties {
                payload_format: p.payload_format.unwrap_or_default(),
                message_expiry_interval: p.message_expiry_interval,
                topic_alias: p.topic_alias,
                response_topic: p.response_topic,
                correlation_data: p.correlation_data,
                user_properties: p.user_properties,
                subscription_identifiers: p.subscription_identifiers,
                content_type: p.content_type,
            }
        }
        ProtocolVersion::V311 => PublishProperties::default(),
    };
    if topic.is_empty() {
        match version {
            ProtocolVersion::V5 if properties.topic_alias.is_none() => {
                return Err(DecodeError::protocol(
                    "PUBLISH with an empty Topic Name and no Topic Alias (3.3.2.3.4)",
                ))
            }
            ProtocolVersion::V5 => {}
            ProtocolVersion::V311 => {
                return Err(topic_error(TopicError::Empty));
            }
        }
    }
    Ok(Packet::Publish(Publish {
        dup,
        qos,
        retain,
        topic,
        packet_id,
        properties,
        payload: body.rest(),
    }))
}

impl Publish {
    pub(crate) fn write<S: Sink>(
        &self,
        version: ProtocolVersion,
        out: &mut S,
    ) -> Result<(), EncodeError> {
        if (self.qos == QoS::AtMostOnce) != self.packet_id.is_none() {
            return Err(EncodeError::Invalid(
                "a PUBLISH has a Packet Identifier exactly when its QoS is 1 or 2 [MQTT-2.2.1-2]",
            ));
        }
        if self.dup && self.qos == QoS::AtMostOnce {
            return Err(EncodeError::Invalid("DUP set at QoS 0 [MQTT-3.3.1-2]"));
        }
        if self.topic.is_empty()
            && (version == ProtocolVersion::V311 || self.properties.topic_alias.is_none())
        {
            return Err(EncodeError::Invalid(
                "an empty Topic Name without a Topic Alias",
            ));
        }
        put_string(out, self.topic.as_str())?;
        if let Some(packet_id) = self.packet_id {
            out.put_u16(packet_id.get());
        }
        if version == ProtocolVersion::V5 {
            self.properties.write_with_length(out)?;
        }
        out.put_slice(&self.payload);
        Ok(())
    }
}

impl WriteProperties for PublishProperties {
    fn write_properties<S: Sink>(&self, out: &mut S) -> Result<(), EncodeError> {
        write_message_properties(
            out,
            self.payload_format,
            self.message_expiry_interval,
            &self.content_type,
            &self.response_topic,
            &self.correlation_data,
        )?;
        if let Some(alias) = self.topic_alias {
            put::u16(out, id::TOPIC_ALIAS, alias.get());
        }
        for identifier in &self.subscription_identifiers {
            put::varint(out, id::SUBSCRIPTION_IDENTIFIER, identifier.get())?;
        }
        put::user_properties(out, &self.user_properties)
    }
}

/// Defines one acknowledgement packet of the PUBLISH flows: the same fields, its own reason
/// code list.
macro_rules! publish_ack {
    ($(#[$doc:meta])* $name:ident, $wire:literal, $codes:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name {
            /// The Packet Identifier of the PUBLISH (or PUBREL) it answers.
            pub packet_id: PacketId,
            /// The reason code (v5; Success under 3.1.1).
            pub reason_code: ReasonCode,
            /// v5 properties.
            pub properties: AckProperties,
        }

        impl $name {
            /// A successful acknowledgement of `packet_id`.
            pub fn new(packet_id: PacketId) -> Self {
                $name {
                    packet_id,
                    reason_code: ReasonCode::Success,
                    properties: AckProperties::default(),
                }
            }

            pub(crate) fn decode(version: ProtocolVersion, body: &mut Reader) -> Result<Self, DecodeError> {
                let packet_id = body.packet_id()?;
                let mut ack = $name::new(packet_id);
                if version == ProtocolVersion::V5 && !body.is_empty() {
                    let code = body.u8()?;
                    ack.reason_code = ReasonCode::from_byte(code, $codes).ok_or_else(|| {
                        DecodeError::malformed(format!(
                            concat!($wire, " with reason code 0x{:02X}"),
                            code
                        ))
                    })?;
                    if !body.is_empty() {
                        ack.properties = AckProperties::read(body)?;
                    }
                }
                Ok(ack)
            }

            pub(crate) fn write<S: Sink>(&self, version: ProtocolVersion, out: &mut S) -> Result<(), EncodeError> {
                check_reason($wire, self.reason_code, $codes)?;
                out.put_u16(self.packet_id.get());
                match version {
                    ProtocolVersion::V311 if self.reason_code != ReasonCode::Success => {
                        Err(EncodeError::NotInVersion(concat!("a ", $wire, " reason code other than Success")))
                    }
                    ProtocolVersion::V311 => Ok(()),
                    ProtocolVersion::V5 => {
                        if self.reason_code != ReasonCode::Success || !self.properties.is_empty() {
                            out.put_u8(self.reason_code.value());
                        }
                        if !self.properties.is_empty() {
                            self.properties.write_with_length(out)?;
                        }
                        Ok(())
                    }
                }
            }
        }
    };
}

publish_ack!(
    /// PUBACK: the answer to a QoS 1 PUBLISH.
    PubAck, "PUBACK", reason::PUBACK
);
publish_ack!(
    /// PUBREC: the first answer to a QoS 2 PUBLISH.
    PubRec, "PUBREC", reason::PUBACK
);
publish_ack!(
    /// PUBREL: the answer to PUBREC.
    PubRel, "PUBREL", reason::PUBREL
);
publish_ack!(
    /// PUBCOMP: the answer to PUBREL, ending a QoS 2 flow.
    PubComp, "PUBCOMP", reason::PUBREL
);

/// Decodes PUBACK (4), PUBREC (5), PUBREL (6) or PUBCOMP (7).
pub(crate) fn decode_ack(
    packet_type: u8,
    version: ProtocolVersion,
    body: &mut Reader,
) -> Result<Packet, DecodeError> {
    Ok(match packet_type {
        4 => Packet::PubAck(PubAck::decode(version, body)?),
        5 => Packet::PubRec(PubRec::decode(version, body)?),
        6 => Packet::PubRel(PubRel::decode(version, body)?),
        _ => Packet::PubComp(PubComp::decode(version, body)?),
    })
}
