//! v5 properties (MQTT 5.0 2.2.2): the property table (identifier, type, which packets may carry
//! it), reading a packet's property list into `Properties` with the table's rules, and writing
//! single properties.
//!
//! Rules on reading: an identifier the table does not know is a Malformed Packet; a property on
//! a packet the table does not list it for is a Protocol Error; a property other than User
//! Property (and Subscription Identifier in PUBLISH) appearing twice is a Protocol Error (each
//! property's section: "It is a Protocol Error to include ... more than once");
//! values out of range are Protocol Errors: Receive Maximum 0, Maximum Packet Size 0, Topic Alias
//! 0, Subscription Identifier 0, a one-byte flag other than 0 or 1, Maximum QoS other than 0 or 1;
//! Authentication Data without Authentication Method is a Protocol Error. The property length
//! must end exactly at a property's end.

use std::num::{NonZeroU16, NonZeroU32};

use bytes::Bytes;

use super::decode::{DecodeError, Reader};
use super::encode::{Counter, EncodeError, Sink};
use super::strings::{put_binary, put_string};
use super::topic::TopicName;
use super::{varint, PayloadFormat, QoS, UserProperties};

/// Property identifiers (MQTT 5.0 table 2-4).
#[allow(missing_docs)]
pub mod id {
    pub const PAYLOAD_FORMAT_INDICATOR: u8 = 0x01;
    pub const MESSAGE_EXPIRY_INTERVAL: u8 = 0x02;
    pub const CONTENT_TYPE: u8 = 0x03;
    pub const RESPONSE_TOPIC: u8 = 0x08;
    pub const CORRELATION_DATA: u8 = 0x09;
    pub const SUBSCRIPTION_IDENTIFIER: u8 = 0x0B;
    pub const SESSION_EXPIRY_INTERVAL: u8 = 0x11;
    pub const ASSIGNED_CLIENT_IDENTIFIER: u8 = 0x12;
    pub const SERVER_KEEP_ALIVE: u8 = 0x13;
    pub const AUTHENTICATION_METHOD: u8 = 0x15;
    pub const AUTHENTICATION_DATA: u8 = 0x16;
    pub const REQUEST_PROBLEM_INFORMATION: u8 = 0x17;
    pub const WILL_DELAY_INTERVAL: u8 = 0x18;
    pub const REQUEST_RESPONSE_INFORMATION: u8 = 0x19;
    pub const RESPONSE_INFORMATION: u8 = 0x1A;
    pub const SERVER_REFERENCE: u8 = 0x1C;
    pub const REASON_STRING: u8 = 0x1F;
    pub const RECEIVE_MAXIMUM: u8 = 0x21;
    pub const TOPIC_ALIAS_MAXIMUM: u8 = 0x22;
    pub const TOPIC_ALIAS: u8 = 0x23;
    pub const MAXIMUM_QOS: u8 = 0x24;
    pub const RETAIN_AVAILABLE: u8 = 0x25;
    pub const USER_PROPERTY: u8 = 0x26;
    pub const MAXIMUM_PACKET_SIZE: u8 = 0x27;
    pub const WILDCARD_SUBSCRIPTION_AVAILABLE: u8 = 0x28;
    pub const SUBSCRIPTION_IDENTIFIER_AVAILABLE: u8 = 0x29;
    pub const SHARED_SUBSCRIPTION_AVAILABLE: u8 = 0x2A;
}

/// Which property list is being read: a packet's, or a will's (CONNECT's payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    Connect,
    Will,
    ConnAck,
    Publish,
    /// PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK, UNSUBACK: Reason String and User Property.
    Ack,
    Subscribe,
    Unsubscribe,
    Disconnect,
    Auth,
}

use Context as C;

/// The name of property `identifier` and the contexts that may carry it (table 2-4); `None` for
/// an identifier the table does not have.
fn table(identifier: u32) -> Option<(&'static str, &'static [Context])> {
    let Ok(identifier) = u8::try_from(identifier) else {
        return None;
    };
    Some(match identifier {
        id::PAYLOAD_FORMAT_INDICATOR => ("Payload Format Indicator", &[C::Publish, C::Will]),
        id::MESSAGE_EXPIRY_INTERVAL => ("Message Expiry Interval", &[C::Publish, C::Will]),
        id::CONTENT_TYPE => ("Content Type", &[C::Publish, C::Will]),
        id::RESPONSE_TOPIC => ("Response Topic", &[C::Publish, C::Will]),
        id::CORRELATION_DATA => ("Correlation Data", &[C::Publish, C::Will]),
        id::SUBSCRIPTION_IDENTIFIER => ("Subscription Identifier", &[C::Publish, C::Subscribe]),
        id::SESSION_EXPIRY_INTERVAL => (
            "Session Expiry Interval",
            &[C::Connect, C::ConnAck, C::Disconnect],
        ),
        id::ASSIGNED_CLIENT_IDENTIFIER => ("Assigned Client Identifier", &[C::ConnAck]),
        id::SERVER_KEEP_ALIVE => ("Server Keep Alive", &[C::ConnAck]),
        id::AUTHENTICATION_METHOD => ("Authentication Method", &[C::Connect, C::ConnAck, C::Auth]),
        id::AUTHENTICATION_DATA => ("Authentication Data", &[C::Connect, C::ConnAck, C::Auth]),
        id::REQUEST_PROBLEM_INFORMATION => ("Request Problem Information", &[C::Connect]),
        id::WILL_DELAY_INTERVAL => ("Will Delay Interval", &[C::Will]),
        id::REQUEST_RESPONSE_INFORMATION => ("Request Response Information", &[C::Connect]),
        id::RESPONSE_INFORMATION => ("Response Information", &[C::ConnAck]),
        id::SERVER_REFERENCE => ("Server Reference", &[C::ConnAck, C::Disconnect]),
        id::REASON_STRING => (
            "Reason String",
            &[C::ConnAck, C::Ack, C::Disconnect, C::Auth],
        ),
        id::RECEIVE_MAXIMUM => ("Receive Maximum", &[C::Connect, C::ConnAck]),
        id::TOPIC_ALIAS_MAXIMUM => ("Topic Alias Maximum", &[C::Connect, C::ConnAck]),
        id::TOPIC_ALIAS => ("Topic Alias", &[C::Publish]),
        id::MAXIMUM_QOS => ("Maximum QoS", &[C::ConnAck]),
        id::RETAIN_AVAILABLE => ("Retain Available", &[C::ConnAck]),
        id::USER_PROPERTY => (
            "User Property",
            &[
                C::Connect,
                C::Will,
                C::ConnAck,
                C::Publish,
                C::Ack,
                C::Subscribe,
                C::Unsubscribe,
                C::Disconnect,
                C::Auth,
            ],
        ),
        id::MAXIMUM_PACKET_SIZE => ("Maximum Packet Size", &[C::Connect, C::ConnAck]),
        id::WILDCARD_SUBSCRIPTION_AVAILABLE => ("Wildcard Subscription Available", &[C::ConnAck]),
        id::SUBSCRIPTION_IDENTIFIER_AVAILABLE => {
            ("Subscription Identifier Available", &[C::ConnAck])
        }
        id::SHARED_SUBSCRIPTION_AVAILABLE => ("Shared Subscription Available", &[C::ConnAck]),
        _ => return None,
    })
}

/// Every property one list can hold, as read; each packet's decoder moves the ones its table
/// row allows into its typed properties struct.
#[derive(Debug, Default)]
pub(crate) struct Properties {
    pub payload_format: Option<PayloadFormat>,
    pub message_expiry_interval: Option<u32>,
    pub content_type: Option<String>,
    pub response_topic: Option<TopicName>,
    pub correlation_data: Option<Bytes>,
    pub subscription_identifiers: Vec<NonZeroU32>,
    pub session_expiry_interval: Option<u32>,
    pub assigned_client_identifier: Option<String>,
    pub server_keep_alive: Option<u16>,
    pub authentication_method: Option<String>,
    pub authentication_data: Option<Bytes>,
    pub request_problem_information: Option<bool>,
    pub will_delay_interval: Option<u32>,
    pub request_response_information: Option<bool>,
    pub response_information: Option<String>,
    pub server_reference: Option<String>,
    pub reason_string: Option<String>,
    pub receive_maximum: Option<NonZeroU16>,
    pub topic_alias_maximum: Option<u16>,
    pub topic_alias: Option<NonZeroU16>,
    pub maximum_qos: Option<QoS>,
    pub retain_available: Option<bool>,
    pub user_properties: UserProperties,
    pub maximum_packet_size: Option<NonZeroU32>,
    pub wildcard_subscription_available: Option<bool>,
    pub subscription_identifiers_available: Option<bool>,
    pub shared_subscription_available: Option<bool>,
}

/// Stores `value` in `slot`, refusing a second occurrence.
fn once<T>(slot: &mut Option<T>, value: T, name: &str) -> Result<(), DecodeError> {
    if slot.is_some() {
        return Err(DecodeError::protocol(format!(
            "the {name} property appears more than once"
        )));
    }
    *slot = Some(value);
    Ok(())
}

fn flag(value: u8, name: &str) -> Result<bool, DecodeError> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError::protocol(format!(
            "{name} of {value}, not 0 or 1"
        ))),
    }
}

fn zero(name: &str) -> DecodeError {
    DecodeError::protocol(format!("{name} of 0"))
}

/// Reads a property length and the property list it covers, for `context`.
pub(crate) fn read(body: &mut Reader, context: Context) -> Result<Properties, DecodeError> {
    let len = body.varint()? as usize;
    let mut list = Reader::new(body.take(len)?);
    let mut p = Properties::default();
    while !list.is_empty() {
        let identifier = list.varint()?;
        let Some((name, contexts)) = table(identifier) else {
            return Err(DecodeError::malformed(format!(
                "unknown property identifier 0x{identifier:02X}"
            )));
        };
        if !contexts.contains(&context) {
            return Err(DecodeError::protocol(format!(
                "the {name} property is not allowed in {}",
                context_name(context)
            )));
        }
        match identifier as u8 {
            id::PAYLOAD_FORMAT_INDICATOR => {
                let format = match list.u8()? {
                    0 => PayloadFormat::Unspecified,
                    1 => PayloadFormat::Utf8,
                    other => {
                        return Err(DecodeError::protocol(format!(
                            "Payload Format Indicator of {other}, not 0 or 1"
                        )))
                    }
                };
                once(&mut p.payload_format, format, name)?
            }
            id::MESSAGE_EXPIRY_INTERVAL => once(&mut p.message_expiry_interval, list.u32()?, name)?,
            id::CONTENT_TYPE => once(&mut p.content_type, list.string()?, name)?,
            id::RESPONSE_TOPIC => {
                // [MQTT-3.3.2-13] a UTF-8 string, [MQTT-3.3.2-14] without wildcards.
                let topic = TopicName::new_non_empty(list.string()?).map_err(|e| {
                    DecodeError::new(
                        super::ReasonCode::TopicNameInvalid,
                        format!("Response Topic: {e}"),
                    )
                })?;
                once(&mut p.response_topic, topic, name)?
            }
            id::CORRELATION_DATA => once(&mut p.correlation_data, list.binary()?, name)?,
            id::SUBSCRIPTION_IDENTIFIER => {
                let value = NonZeroU32::new(list.varint()?)
                    .ok_or_else(|| zero("Subscription Identifier"))?;
                if context == C::Subscribe && !p.subscription_identifiers.is_empty() {
                    return Err(DecodeError::protocol(
                        "the Subscription Identifier property appears more than once in SUBSCRIBE",
                    ));
                }
                p.subscription_identifiers.push(value)
            }
            id::SESSION_EXPIRY_INTERVAL => once(&mut p.session_expiry_interval, list.u32()?, name)?,
            id::ASSIGNED_CLIENT_IDENTIFIER => {
                once(&mut p.assigned_client_identifier, list.string()?, name)?
            }
            id::SERVER_KEEP_ALIVE => once(&mut p.server_keep_alive, list.u16()?, name)?,
            id::AUTHENTICATION_METHOD => once(&mut p.authentication_method, list.string()?, name)?,
            id::AUTHENTICATION_DATA => once(&mut p.authentication_data, list.binary()?, name)?,
            id::REQUEST_PROBLEM_INFORMATION => once(
                &mut p.request_problem_information,
                flag(list.u8()?, name)?,
                name,
            )?,
            id::WILL_DELAY_INTERVAL => once(&mut p.will_delay_interval, list.u32()?, name)?,
            id::REQUEST_RESPONSE_INFORMATION => once(
                &mut p.request_response_information,
                flag(list.u8()?, name)?,
                name,
            )?,
            id::RESPONSE_INFORMATION => once(&mut p.response_information, list.string()?, name)?,
            id::SERVER_REFERENCE => once(&mut p.server_reference, list.string()?, name)?,
            id::REASON_STRING => once(&mut p.reason_string, list.string()?, name)?,
            id::RECEIVE_MAXIMUM => {
                let value = NonZeroU16::new(list.u16()?).ok_or_else(|| zero(name))?;
                once(&mut p.receive_maximum, value, name)?
            }
            id::TOPIC_ALIAS_MAXIMUM => once(&mut p.topic_alias_maximum, list.u16()?, name)?,
            id::TOPIC_ALIAS => {
                let value = NonZeroU16::new(list.u16()?).ok_or_else(|| zero(name))?;
                once(&mut p.topic_alias, value, name)?
            }
            id::MAXIMUM_QOS => {
                let qos = match list.u8()? {
                    0 => QoS::AtMostOnce,
                    1 => QoS::AtLeastOnce,
                    other => {
                        return Err(DecodeError::protocol(format!(
                            "Maximum QoS of {other}, not 0 or 1"
                        )))
                    }
                };
                once(&mut p.maximum_qos, qos, name)?
            }
            id::RETAIN_AVAILABLE => once(&mut p.retain_available, flag(list.u8()?, name)?, name)?,
            id::USER_PROPERTY => {
                let key = list.string()?;
                let value = list.string()?;
                p.user_properties.push((key, value))
            }
            id::MAXIMUM_PACKET_SIZE => {
                let value = NonZeroU32::new(list.u32()?).ok_or_else(|| zero(name))?;
                once(&mut p.maximum_packet_size, value, name)?
            }
            id::WILDCARD_SUBSCRIPTION_AVAILABLE => once(
                &mut p.wildcard_subscription_available,
                flag(list.u8()?, name)?,
                name,
            )?,
            id::SUBSCRIPTION_IDENTIFIER_AVAILABLE => once(
                &mut p.subscription_identifiers_available,
                flag(list.u8()?, name)?,
                name,
            )?,
            id::SHARED_SUBSCRIPTION_AVAILABLE => once(
                &mut p.shared_subscription_available,
                flag(list.u8()?, name)?,
                name,
            )?,
            _ => {
                return Err(DecodeError::malformed(format!(
                    "unknown property identifier 0x{identifier:02X}"
                )))
            }
        }
    }
    if p.authentication_data.is_some() && p.authentication_method.is_none() {
        return Err(DecodeError::protocol(
            "Authentication Data without an Authentication Method",
        ));
    }
    Ok(p)
}

fn context_name(context: Context) -> &'static str {
    match context {
        C::Connect => "CONNECT",
        C::Will => "the Will Properties",
        C::ConnAck => "CONNACK",
        C::Publish => "PUBLISH",
        C::Ack => "an acknowledgement",
        C::Subscribe => "SUBSCRIBE",
        C::Unsubscribe => "UNSUBSCRIBE",
        C::Disconnect => "DISCONNECT",
        C::Auth => "AUTH",
    }
}

/// A packet's typed properties, which can write themselves as a property list.
pub(crate) trait WriteProperties {
    /// Writes the properties (without the property length).
    fn write_properties<S: Sink>(&self, out: &mut S) -> Result<(), EncodeError>;

    /// Writes the property length then the properties.
    fn write_with_length<S: Sink>(&self, out: &mut S) -> Result<(), EncodeError> {
        let mut counter = Counter::default();
        self.write_properties(&mut counter)?;
        let len = u32::try_from(counter.0)
            .ok()
            .filter(|len| *len <= varint::MAX)
            .ok_or(EncodeError::PacketTooLarge(counter.0))?;
        varint::put(out, len);
        self.write_properties(out)
    }
}

/// Writers of one property each.
pub(crate) mod put {
    use super::*;

    pub fn byte<S: Sink>(out: &mut S, identifier: u8, value: u8) {
        out.put_u8(identifier);
        out.put_u8(value);
    }

    pub fn u16<S: Sink>(out: &mut S, identifier: u8, value: u16) {
        out.put_u8(identifier);
        out.put_u16(value);
    }

    pub fn u32<S: Sink>(out: &mut S, identifier: u8, value: u32) {
        out.put_u8(identifier);
        out.put_u32(value);
    }

    pub fn varint<S: Sink>(out: &mut S, identifier: u8, value: u32) -> Result<(), EncodeError> {
        if value > varint::MAX {
            return Err(EncodeError::Invalid(
                "a Subscription Identifier above 268,435,455",
            ));
        }
        out.put_u8(identifier);
        varint::put(out, value);
        Ok(())
    }

    pub fn string<S: Sink>(out: &mut S, identifier: u8, value: &str) -> Result<(), EncodeError> {
        out.put_u8(identifier);
        put_string(out, value)
    }

    pub fn binary<S: Sink>(out: &mut S, identifier: u8, value: &[u8]) -> Result<(), EncodeError> {
        out.put_u8(identifier);
        put_binary(out, value)
    }

    pub fn opt_string<S: Sink>(
        out: &mut S,
        identifier: u8,
        value: &Option<String>,
    ) -> Result<(), EncodeError> {
        match value {
            Some(v) => string(out, identifier, v),
            None => Ok(()),
        }
    }

    pub fn opt_binary<S: Sink>(
        out: &mut S,
        identifier: u8,
        value: &Option<Bytes>,
    ) -> Result<(), EncodeError> {
        match value {
            Some(v) => binary(out, identifier, v),
            None => Ok(()),
        }
    }

    pub fn user_properties<S: Sink>(
        out: &mut S,
        properties: &UserProperties,
    ) -> Result<(), EncodeError> {
        for (key, value) in properties {
            out.put_u8(id::USER_PROPERTY);
            put_string(out, key)?;
            put_string(out, value)?;
        }
        Ok(())
    }
}
