//! SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK (MQTT 5.0 3.8-3.11; 3.1.1 3.8-3.11).
//!
//! SUBSCRIBE holds at least one topic filter (v5 [MQTT-3.8.3-2], 3.1.1 [MQTT-3.8.3-3]), each a
//! valid filter ([`super::topic`]; an invalid one is answered with 0x8F Topic Filter invalid)
//! followed by its options byte: under 3.1.1 only the QoS bits may be set [MQTT-3-8.3-4]; under
//! v5 bits 6 and 7 are reserved [MQTT-3.8.3-5] (Malformed Packet), QoS 3 and Retain Handling 3
//! are Protocol Errors, and No Local on a shared subscription is a Protocol Error
//! [MQTT-3.8.3-4]. UNSUBSCRIBE holds at least one filter (v5 and 3.1.1 [MQTT-3.10.3-2]). SUBACK
//! carries one reason code per filter [MQTT-3.9.3-1] from its list ([MQTT-3.9.3-2]; 3.1.1's
//! return codes 0, 1, 2 and 0x80 [MQTT-3.9.3-2]), UNSUBACK one per filter under v5 only.

use std::num::NonZeroU32;

use super::decode::{DecodeError, Reader};
use super::encode::{check_reason, EncodeError, Sink};
use super::properties::{self, id, put, Context, WriteProperties};
use super::publish::AckProperties;
use super::reason::{self, ReasonCode};
use super::strings::put_string;
use super::topic::TopicFilter;
use super::{Packet, PacketId, ProtocolVersion, QoS, UserProperties};

/// SUBSCRIBE: topic filters to subscribe to, client to server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    /// Packet Identifier, echoed in the SUBACK.
    pub packet_id: PacketId,
    /// v5 properties.
    pub properties: SubscribeProperties,
    /// The topic filters and their options, at least one.
    pub filters: Vec<(TopicFilter, SubscriptionOptions)>,
}

/// SUBSCRIBE's v5 properties (MQTT 5.0 3.8.2.1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscribeProperties {
    /// Subscription Identifier (1..=268,435,455), sent back on matching PUBLISHes.
    pub subscription_identifier: Option<NonZeroU32>,
    /// User Properties.
    pub user_properties: UserProperties,
}

/// A subscription's options (MQTT 5.0 3.8.3.1; 3.1.1 has the QoS only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SubscriptionOptions {
    /// Maximum QoS of the messages sent for this subscription.
    pub qos: QoS,
    /// No Local: do not send the client its own messages.
    pub no_local: bool,
    /// Retain As Published: keep the RETAIN flag of forwarded messages.
    pub retain_as_published: bool,
    /// Retain Handling: when to send retained messages.
    pub retain_handling: RetainHandling,
}

/// When retained messages are sent for a subscription (MQTT 5.0 3.8.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetainHandling {
    /// 0: at subscribe time.
    #[default]
    SendAtSubscribe,
    /// 1: at subscribe time if the subscription did not exist.
    SendAtSubscribeIfNew,
    /// 2: never at subscribe time.
    DoNotSend,
}

impl SubscriptionOptions {
    fn byte(&self, version: ProtocolVersion) -> u8 {
        let mut byte = self.qos.as_u8();
        if version == ProtocolVersion::V5 {
            byte |= u8::from(self.no_local) << 2
                | u8::from(self.retain_as_published) << 3
                | (self.retain_handling as u8) << 4;
        }
        byte
    }

    fn from_byte(byte: u8, version: ProtocolVersion) -> Result<SubscriptionOptions, DecodeError> {
        let qos = QoS::from_u8(byte & 0x03);
        if version == ProtocolVersion::V311 {
            return match qos {
                Some(qos) if byte & 0xFC == 0 => Ok(SubscriptionOptions {
                    qos,
                    ..Default::default()
                }),
                _ => Err(DecodeError::malformed(
                    "subscription options other than QoS 0, 1 or 2 [MQTT-3-8.3-4]",
                )),
            };
        }
        if byte & 0xC0 != 0 {
            return Err(DecodeError::malformed(
                "reserved subscription option bits are not 0 [MQTT-3.8.3-5]",
            ));
        }
        let qos = qos.ok_or_else(|| DecodeError::protocol("a subscription with Maximum QoS 3"))?;
        let retain_handling = match (byte >> 4) & 0x03 {
            0 => RetainHandling::SendAtSubscribe,
            1 => RetainHandling::SendAtSubscribeIfNew,
            2 => RetainHandling::DoNotSend,
            _ => {
                return Err(DecodeError::protocol(
                    "a subscription with Retain Handling 3",
                ))
            }
        };
        Ok(SubscriptionOptions {
            qos,
            no_local: byte & 0x04 != 0,
            retain_as_published: byte & 0x08 != 0,
            retain_handling,
        })
    }
}

fn read_filter(body: &mut Reader) -> Result<TopicFilter, DecodeError> {
    TopicFilter::new(body.string()?)
        .map_err(|e| DecodeError::new(ReasonCode::TopicFilterInvalid, e.to_string()))
}

/// Decodes a SUBSCRIBE body.
pub(crate) fn decode_subscribe(
    version: ProtocolVersion,
    body: &mut Reader,
) -> Result<Packet, DecodeError> {
    let packet_id = body.packet_id()?;
    let properties = match version {
        ProtocolVersion::V5 => {
            let p = properties::read(body, Context::Subscribe)?;
            SubscribeProperties {
                subscription_identifier: p.subscription_identifiers.first().copied(),
                user_properties: p.user_properties,
            }
        }
        ProtocolVersion::V311 => SubscribeProperties::default(),
    };
    let mut filters = Vec::new();
    while !body.is_empty() {
        let filter = read_filter(body)?;
        let options = SubscriptionOptions::from_byte(body.u8()?, version)?;
        if options.no_local && filter.shared().is_some() {
            return Err(DecodeError::protocol(
                "No Local on a shared subscription [MQTT-3.8.3-4]",
            ));
        }
        filters.push((filter, options));
    }
    if filters.is_empty() {
        return Err(DecodeError::protocol(match version {
            ProtocolVersion::V5 => "SUBSCRIBE without a topic filter [MQTT-3.8.3-2]",
            ProtocolVersion::V311 => "SUBSCRIBE without a topic filter [MQTT-3.8.3-3]",
        }));
    }
    Ok(Packet::Subscribe(Subscribe {
        packet_id,
        properties,
        filters,
    }))
}

impl Subscribe {
    pub(crate) fn write<S: Sink>(
        &self,
        version: ProtocolVersion,
        out: &mut S,
    ) -> Result<(), EncodeError> {
        if self.filters.is_empty() {
            return Err(EncodeError::Invalid(
                "SUBSCRIBE without a topic filter [MQTT-3.8.3-2]",
            ));
        }
        out.put_u16(self.packet_id.get());
        if version == ProtocolVersion::V5 {
            self.properties.write_with_length(out)?;
        }
        for (filter, options) in &self.filters {
            if version == ProtocolVersion::V5 && options.no_local && filter.shared().is_some() {
                return Err(EncodeError::Invalid(
                    "No Local on a shared subscription [MQTT-3.8.3-4]",
                ));
            }
            put_string(out, filter.as_str())?;
            out.put_u8(options.byte(version));
        }
        Ok(())
    }
}

impl WriteProperties for SubscribeProperties {
    fn write_properties<S: Sink>(&self, out: &mut S) -> Result<(), EncodeError> {
        if let Some(identifier) = self.subscription_identifier {
            put::varint(out, id::SUBSCRIPTION_IDENTIFIER, identifier.get())?;
        }
        put::user_properties(out, &self.user_properties)
    }
}

/// SUBACK: the answer to SUBSCRIBE, server to client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubAck {
    /// The SUBSCRIBE's Packet Identifier.
    pub packet_id: PacketId,
    /// v5 properties.
    pub properties: AckProperties,
    /// One reason code per topic filter, in order: the granted QoS or why not (3.1.1: every
    /// error is sent as 0x80 Failure and decoded as [`ReasonCode::UnspecifiedError`]).
    pub reason_codes: Vec<ReasonCode>,
}

/// Decodes a SUBACK body.
pub(crate) fn decode_suback(
    version: ProtocolVersion,
    body: &mut Reader,
) -> Result<Packet, DecodeError> {
    let packet_id = body.packet_id()?;
    let properties = match version {
        ProtocolVersion::V5 => AckProperties::read(body)?,
        ProtocolVersion::V311 => AckProperties::default(),
    };
    let mut reason_codes = Vec::with_capacity(body.remaining());
    while !body.is_empty() {
        let code = body.u8()?;
        let reason = match version {
            ProtocolVersion::V5 => ReasonCode::from_byte(code, reason::SUBACK),
            ProtocolVersion::V311 => ReasonCode::from_v311_suback_code(code),
        };
        reason_codes.push(reason.ok_or_else(|| {
            DecodeError::malformed(format!(
                "SUBACK with reason code 0x{code:02X} [MQTT-3.9.3-2]"
            ))
        })?);
    }
    if reason_codes.is_empty() {
        return Err(DecodeError::protocol(
            "SUBACK without a reason code [MQTT-3.9.3-1]",
        ));
    }
    Ok(Packet::SubAck(SubAck {
        packet_id,
        properties,
        reason_codes,
    }))
}

impl SubAck {
    pub(crate) fn write<S: Sink>(
        &self,
        version: ProtocolVersion,
        out: &mut S,
    ) -> Result<(), EncodeError> {
        if self.reason_codes.is_empty() {
            return Err(EncodeError::Invalid(
                "SUBACK without a reason code [MQTT-3.9.3-1]",
            ));
        }
        out.put_u16(self.packet_id.get());
        if version == ProtocolVersion::V5 {
            self.properties.write_with_length(out)?;
        }
        for code in &self.reason_codes {
            check_reason("SUBACK", *code, reason::SUBACK)?;
            out.put_u8(match version {
                ProtocolVersion::V5 => code.value(),
                ProtocolVersion::V311 => code.v311_suback_code().unwrap_or(0x80),
            });
        }
        Ok(())
    }
}

/// UNSUBSCRIBE: topic filters to unsubscribe from, client to server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsubscribe {
    /// Packet Identifier, echoed in the UNSUBACK.
    pub packet_id: PacketId,
    /// v5 properties.
    pub properties: UnsubscribeProperties,
    /// The topic filters, at least one.
    pub filters: Vec<TopicFilter>,
}

/// UNSUBSCRIBE's v5 properties (MQTT 5.0 3.10.2.1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UnsubscribeProperties {
    /// User Properties.
    pub user_properties: UserProperties,
}

impl WriteProperties for UnsubscribeProperties {
    fn write_properties<S: Sink>(&self, out: &mut S) -> Result<(), EncodeError> {
        put::user_properties(out, &self.user_properties)
    }
}

/// Decodes an UNSUBSCRIBE body.
pub(crate) fn decode_unsubscribe(
    version: ProtocolVersion,
    body: &mut Reader,
) -> Result<Packet, DecodeError> {
    let packet_id = body.packet_id()?;
    let properties = match version {
        ProtocolVersion::V5 => UnsubscribeProperties {
            user_properties: properties::read(body, Context::Unsubscribe)?.user_properties,
        },
        ProtocolVersion::V311 => UnsubscribeProperties::default(),
    };
    let mut filters = Vec::new();
    while !body.is_empty() {
        filters.push(read_filter(body)?);
    }
    if filters.is_empty() {
        return Err(DecodeError::protocol(
            "UNSUBSCRIBE without a topic filter [MQTT-3.10.3-2]",
        ));
    }
    Ok(Packet::Unsubscribe(Unsubscribe {
        packet_id,
        properties,
        filters,
    }))
}

impl Unsubscribe {
    pub(crate) fn write<S: Sink>(
        &self,
        version: ProtocolVersion,
        out: &mut S,
    ) -> Result<(), EncodeError> {
        if self.filters.is_empty() {
            return Err(EncodeError::Invalid(
                "UNSUBSCRIBE without a topic filter [MQTT-3.10.3-2]",
            ));
        }
        out.put_u16(self.packet_id.get());
        if version == ProtocolVersion::V5 {
            self.properties.write_with_length(out)?;
        }
        for filter in &self.filters {
            put_string(out, filter.as_str())?;
        }
        Ok(())
    }
}

/// UNSUBACK: the answer to UNSUBSCRIBE, server to client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsubAck {
    /// The UNSUBSCRIBE's Packet Identifier.
    pub packet_id: PacketId,
    /// v5 properties.
    pub properties: AckProperties,
    /// v5: one reason code per topic filter, in order; 3.1.1 has none (not written, empty when
    /// decoded).
    pub reason_codes: Vec<ReasonCode>,
}

/// Decodes an UNSUBACK body.
pub(crate) fn decode_unsuback(
    version: ProtocolVersion,
    body: &mut Reader,
) -> Result<Packet, DecodeError> {
    let packet_id = body.packet_id()?;
    let mut unsuback = UnsubAck {
        packet_id,
        properties: AckProperties::default(),
        reason_codes: Vec::new(),
    };
    if version == ProtocolVersion::V5 {
        unsuback.properties = AckProperties::read(body)?;
        while !body.is_empty() {
            let code = body.u8()?;
            unsuback
                .reason_codes
                .push(
                    ReasonCode::from_byte(code, reason::UNSUBACK).ok_or_else(|| {
                        DecodeError::malformed(format!(
                            "UNSUBACK with reason code 0x{code:02X} [MQTT-3.11.3-2]"
                        ))
                    })?,
                );
        }
        if unsuback.reason_codes.is_empty() {
            return Err(DecodeError::protocol(
                "UNSUBACK without a reason code [MQTT-3.11.3-1]",
            ));
        }
    }
    Ok(Packet::UnsubAck(unsuback))
}

impl UnsubAck {
    pub(crate) fn write<S: Sink>(
        &self,
        version: ProtocolVersion,
        out: &mut S,
    ) -> Result<(), EncodeError> {
        out.put_u16(self.packet_id.get());
        if version == ProtocolVersion::V5 {
            if self.reason_codes.is_empty() {
                return Err(EncodeError::Invalid(
                    "UNSUBACK without a reason code [MQTT-3.11.3-1]",
                ));
            }
            self.properties.write_with_length(out)?;
            for code in &self.reason_codes {
                check_reason("UNSUBACK", *code, reason::UNSUBACK)?;
                out.put_u8(code.value());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
