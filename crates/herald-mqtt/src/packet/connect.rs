//! CONNECT and its will (MQTT 5.0 3.1; 3.1.1 3.1).
//!
//! CONNECT is the one packet decoded before the version is known, so its errors choose their own
//! [`ErrorResponse`]: a protocol name other than `MQTT` (or `MQIsdp`) closes the connection
//! [MQTT-3.1.2-1]; an unsupported level is answered with a CONNACK (3.1.1's return code 0x01 for
//! levels below 5, MQTT 3.1's `MQIsdp` level 3 included, [MQTT-3.1.2-2]; v5's 0x84 above 5);
//! after the level, a v5 CONNECT's errors are answered with a CONNACK carrying the error's code
//! (allowed by [MQTT-3.1.4-1] and 4.13) and a 3.1.1 CONNECT's by closing without one
//! ([MQTT-3.1.4-1] of 3.1.1), except 3.1.1's empty client id without a clean session, which gets
//! return code 0x02 [MQTT-3.1.3-8].
//!
//! Flag rules: reserved bit 0 is 0 [MQTT-3.1.2-3]; with the Will Flag 0, Will QoS and Will
//! Retain are 0 (v5 [MQTT-3.1.2-11] [MQTT-3.1.2-13], 3.1.1 [MQTT-3.1.2-13] [MQTT-3.1.2-15]);
//! Will QoS 3 is malformed (v5 [MQTT-3.1.2-12], 3.1.1 [MQTT-3.1.2-14]); under 3.1.1 a password
//! needs a user name [MQTT-3.1.2-22] (v5 allows a password alone).

use std::num::{NonZeroU16, NonZeroU32};

use bytes::Bytes;

use super::decode::{DecodeError, ErrorResponse, Reader};
use super::encode::{EncodeError, Sink};
use super::properties::{self, id, put, Context, WriteProperties};
use super::reason::ReasonCode;
use super::strings::{put_binary, put_string};
use super::topic::TopicName;
use super::{Packet, PayloadFormat, ProtocolVersion, QoS, UserProperties};

/// CONNECT: the first packet of a connection, client to server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connect {
    /// The protocol level it asked for; the connection speaks it from now on.
    pub protocol_version: ProtocolVersion,
    /// Clean Start (v5) / Clean Session (3.1.1): discard any existing session.
    pub clean_start: bool,
    /// Keep Alive in seconds; 0 turns keep-alive off.
    pub keep_alive: u16,
    /// The Client Identifier; may be empty (the server assigns one, or 3.1.1 with a clean
    /// session).
    pub client_id: String,
    /// The will message, if the Will Flag is set.
    pub will: Option<Will>,
    /// User Name, if its flag is set.
    pub username: Option<String>,
    /// Password, if its flag is set (binary data).
    pub password: Option<Bytes>,
    /// v5 properties.
    pub properties: ConnectProperties,
}

/// CONNECT's v5 properties (MQTT 5.0 3.1.2.11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectProperties {
    /// Session Expiry Interval in seconds; 0 (the default) ends the session with the connection,
    /// 0xFFFFFFFF never.
    pub session_expiry_interval: u32,
    /// Receive Maximum: QoS 1 and 2 PUBLISHes the client processes at once (default 65,535).
    pub receive_maximum: NonZeroU16,
    /// Maximum Packet Size the client accepts; `None`: no limit beyond the protocol's.
    pub maximum_packet_size: Option<NonZeroU32>,
    /// Topic Alias Maximum the client accepts from the server (default 0: none).
    pub topic_alias_maximum: u16,
    /// Request Response Information (default false).
    pub request_response_information: bool,
    /// Request Problem Information (default true): whether Reason Strings and User Properties
    /// may be sent on packets other than PUBLISH, CONNACK and DISCONNECT.
    pub request_problem_information: bool,
    /// User Properties.
    pub user_properties: UserProperties,
    /// Authentication Method, for enhanced authentication.
    pub authentication_method: Option<String>,
    /// Authentication Data (only with a method).
    pub authentication_data: Option<Bytes>,
}

impl Default for ConnectProperties {
    fn default() -> Self {
        ConnectProperties {
            session_expiry_interval: 0,
            receive_maximum: NonZeroU16::MAX,
            maximum_packet_size: None,
            topic_alias_maximum: 0,
            request_response_information: false,
            request_problem_information: true,
            user_properties: Vec::new(),
            authentication_method: None,
            authentication_data: None,
        }
    }
}

/// A will: the message the server publishes when the connection ends without a DISCONNECT (or
/// v5's DISCONNECT with reason 0x04).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Will {
    /// Will Topic: a non-empty topic name.
    pub topic: TopicName,
    /// Will Payload.
    pub payload: Bytes,
    /// Will QoS.
    pub qos: QoS,
    /// Will Retain.
    pub retain: bool,
    /// v5 Will Properties.
    pub properties: WillProperties,
}

/// A will's v5 properties (MQTT 5.0 3.1.3.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WillProperties {
    /// Will Delay Interval in seconds (default 0).
    pub will_delay_interval: u32,
    /// Payload Format Indicator.
    pub payload_format: PayloadFormat,
    /// Message Expiry Interval in seconds; `None`: does not expire.
    pub message_expiry_interval: Option<u32>,
    /// Content Type.
    pub content_type: Option<String>,
    /// Response Topic.
    pub response_topic: Option<TopicName>,
    /// Correlation Data.
    pub correlation_data: Option<Bytes>,
    /// User Properties.
    pub user_properties: UserProperties,
}

const FLAG_CLEAN_START: u8 = 0x02;
const FLAG_WILL: u8 = 0x04;
const FLAG_WILL_RETAIN: u8 = 0x20;
const FLAG_PASSWORD: u8 = 0x40;
const FLAG_USERNAME: u8 = 0x80;

/// Decodes a CONNECT body (the version is not known yet); each error carries its response.
pub(crate) fn decode_connect(flags: u8, body: &mut Reader) -> Result<Packet, DecodeError> {
    if flags != 0 {
        return Err(DecodeError::malformed(
            "CONNECT with fixed header flags other than 0000 [MQTT-2.2.2-2]",
        ));
    }
    let name = body.binary()?;
    let level = body.u8()?;
    let refuse_level = |format| {
        DecodeError::new(
            ReasonCode::UnsupportedProtocolVersion,
            format!("protocol level {level} is not supported (3.1.1 and 5.0 are)"),
        )
        .with_response(ErrorResponse::ConnAck(format))
    };
    let version = match (&name[..], level) {
        (b"MQTT", 4) => ProtocolVersion::V311,
        (b"MQTT", 5) => ProtocolVersion::V5,
        (b"MQTT", 6..) => return Err(refuse_level(ProtocolVersion::V5)),
        (b"MQTT", _) | (b"MQIsdp", 3) => return Err(refuse_level(ProtocolVersion::V311)),
        _ => {
            return Err(DecodeError::protocol(
                "the protocol name is not MQTT [MQTT-3.1.2-1]",
            ))
        }
    };
    let connect = decode_connect_rest(version, body).map_err(|e| {
        let response = match (version, e.response) {
            (_, ErrorResponse::ConnAck(v)) => ErrorResponse::ConnAck(v),
            (ProtocolVersion::V5, _) => ErrorResponse::ConnAck(ProtocolVersion::V5),
            (ProtocolVersion::V311, _) => ErrorResponse::Close,
        };
        e.with_response(response)
    })?;
    Ok(Packet::Connect(Box::new(connect)))
}

fn decode_connect_rest(
    version: ProtocolVersion,
    body: &mut Reader,
) -> Result<Connect, DecodeError> {
    let v5 = version == ProtocolVersion::V5;
    let flags = body.u8()?;
    if flags & 0x01 != 0 {
        return Err(DecodeError::malformed(
            "the reserved CONNECT flag is not 0 [MQTT-3.1.2-3]",
        ));
    }
    let will_flag = flags & FLAG_WILL != 0;
    let will_qos = (flags >> 3) & 0x03;
    let will_retain = flags & FLAG_WILL_RETAIN != 0;
    if !will_flag && will_qos != 0 {
        return Err(DecodeError::malformed(if v5 {
            "Will QoS is not 0 without the Will Flag [MQTT-3.1.2-11]"
        } else {
            "Will QoS is not 0 without the Will Flag [MQTT-3.1.2-13]"
        }));
    }
    if !will_flag && will_retain {
        return Err(DecodeError::malformed(if v5 {
            "Will Retain is set without the Will Flag [MQTT-3.1.2-13]"
        } else {
            "Will Retain is set without the Will Flag [MQTT-3.1.2-15]"
        }));
    }
    let Some(will_qos) = QoS::from_u8(will_qos) else {
        return Err(DecodeError::malformed(if v5 {
            "Will QoS 3 [MQTT-3.1.2-12]"
        } else {
            "Will QoS 3 [MQTT-3.1.2-14]"
        }));
    };
    let has_username = flags & FLAG_USERNAME != 0;
    let has_password = flags & FLAG_PASSWORD != 0;
    if !v5 && has_password && !has_username {
        return Err(DecodeError::malformed(
            "the Password Flag is set without the User Name Flag [MQTT-3.1.2-22]",
        ));
    }
    let clean_start = flags & FLAG_CLEAN_START != 0;
    let keep_alive = body.u16()?;
    let properties = if v5 {
        let p = properties::read(body, Context::Connect)?;
        ConnectProperties {
            session_expiry_interval: p.session_expiry_interval.unwrap_or(0),
            receive_maximum: p.receive_maximum.unwrap_or(NonZeroU16::MAX),
            maximum_packet_size: p.maximum_packet_size,
            topic_alias_maximum: p.topic_alias_maximum.unwrap_or(0),
            request_response_information: p.request_response_information.unwrap_or(false),
            request_problem_information: p.request_problem_information.unwrap_or(true),
            user_properties: p.user_properties,
            authentication_method: p.authentication_method,
            authentication_data: p.authentication_data,
        }
    } else {
        ConnectProperties::default()
    };
    // [MQTT-3.1.3-3] (3.1.1 [MQTT-3.1.3-3]): the Client Identifier is present, first.
    let client_id = body.string()?;
    if !v5 && client_id.is_empty() && !clean_start {
        return Err(DecodeError::new(
            ReasonCode::ClientIdentifierNotValid,
            "an empty Client Identifier needs Clean Session 1 [MQTT-3.1.3-8]",
        )
        .with_response(ErrorResponse::ConnAck(ProtocolVersion::V311)));
    }
    let will = if will_flag {
        let properties = if v5 {
            let p = properties::read(body, Context::Will)?;
            WillProperties {
                will_delay_interval: p.will_delay_interval.unwrap_or(0),
                payload_format: p.payload_format.unwrap_or_default(),
                message_expiry_interval: p.message_expiry_interval,
                content_type: p.content_type,
                response_topic: p.response_topic,
                correlation_data: p.correlation_data,
                user_properties: p.user_properties,
            }
        } else {
            WillProperties::default()
        };
        let topic = TopicName::new_non_empty(body.string()?).map_err(|e| {
            DecodeError::new(ReasonCode::TopicNameInvalid, format!("Will Topic: {e}"))
        })?;
        let payload = body.binary()?;
        Some(Will {
            topic,
            payload,
            qos: will_qos,
            retain: will_retain,
            properties,
        })
    } else {
        None
    };
    let username = if has_username {
        Some(body.string()?)
    } else {
        None
    };
    let password = if has_password {
        Some(body.binary()?)
    } else {
        None
    };
    body.end("CONNECT")?;
    Ok(Connect {
        protocol_version: version,
        clean_start,
        keep_alive,
        client_id,
        will,
        username,
        password,
        properties,
    })
}

impl Connect {
    pub(crate) fn write<S: Sink>(
        &self,
        version: ProtocolVersion,
        out: &mut S,
    ) -> Result<(), EncodeError> {
        if version != self.protocol_version {
            return Err(EncodeError::Invalid(
                "a CONNECT is encoded in its own protocol version",
            ));
        }
        let v5 = version == ProtocolVersion::V5;
        if !v5 && self.password.is_some() && self.username.is_none() {
            return Err(EncodeError::Invalid(
                "a 3.1.1 password needs a user name [MQTT-3.1.2-22]",
            ));
        }
        if !v5 && self.client_id.is_empty() && !self.clean_start {
            return Err(EncodeError::Invalid(
                "an empty 3.1.1 Client Identifier needs Clean Session 1 [MQTT-3.1.3-7]",
            ));
        }
        put_string(out, "MQTT")?;
        out.put_u8(version.level());
        let mut flags = 0;
        if self.clean_start {
            flags |= FLAG_CLEAN_START;
        }
        if let Some(will) = &self.will {
            if will.topic.is_empty() {
                return Err(EncodeError::Invalid("an empty Will Topic [MQTT-4.7.3-1]"));
            }
            flags |= FLAG_WILL | will.qos.as_u8() << 3;
            if will.retain {
                flags |= FLAG_WILL_RETAIN;
            }
        }
        if self.password.is_some() {
            flags |= FLAG_PASSWORD;
        }
        if self.username.is_some() {
            flags |= FLAG_USERNAME;
        }
        out.put_u8(flags);
        out.put_u16(self.keep_alive);
        if v5 {
            self.properties.write_with_length(out)?;
        }
        put_string(out, &self.client_id)?;
        if let Some(will) = &self.will {
            if v5 {
                will.properties.write_with_length(out)?;
            }
            put_string(out, will.topic.as_str())?;
            put_binary(out, &will.payload)?;
        }
        if let Some(username) = &self.username {
            put_string(out, username)?;
        }
        if let Some(password) = &self.password {
            put_binary(out, password)?;
        }
        Ok(())
    }
}

pub(crate) fn check_authentication(
    method: &Option<String>,
    data: &Option<Bytes>,
) -> Result<(), EncodeError> {
    if data.is_some() && method.is_none() {
        return Err(EncodeError::Invalid(
            "Authentication Data without an Authentication Method",
        ));
    }
    Ok(())
}

impl WriteProperties for ConnectProperties {
    fn write_properties<S: Sink>(&self, out: &mut S) -> Result<(), EncodeError> {
        check_authentication(&self.authentication_method, &self.authentication_data)?;
        if self.session_expiry_interval != 0 {
            put::u32(
                out,
                id::SESSION_EXPIRY_INTERVAL,
                self.session_expiry_interval,
            );
        }
        if self.receive_maximum != NonZeroU16::MAX {
            put::u16(out, id::RECEIVE_MAXIMUM, self.receive_maximum.get());
        }
        if let Some(size) = self.maximum_packet_size {
            put::u32(out, id::MAXIMUM_PACKET_SIZE, size.get());
        }
        if self.topic_alias_maximum != 0 {
            put::u16(out, id::TOPIC_ALIAS_MAXIMUM, self.topic_alias_maximum);
        }
        if self.request_response_information {
            put::byte(out, id::REQUEST_RESPONSE_INFORMATION, 1);
        }
        if !self.request_problem_information {
            put::byte(out, id::REQUEST_PROBLEM_INFORMATION, 0);
        }
        put::user_properties(out, &self.user_properties)?;
        put::opt_string(out, id::AUTHENTICATION_METHOD, &self.authentication_method)?;
        put::opt_binary(out, id::AUTHENTICATION_DATA, &self.authentication_data)
    }
}

impl WriteProperties for WillProperties {
    fn write_properties<S: Sink>(&self, out: &mut S) -> Result<(), EncodeError> {
        if self.will_delay_interval != 0 {
            put::u32(out, id::WILL_DELAY_INTERVAL, self.will_delay_interval);
        }
        write_message_properties(
            out,
            self.payload_format,
            self.message_expiry_interval,
            &self.content_type,
            &self.response_topic,
            &self.correlation_data,
        )?;
        put::user_properties(out, &self.user_properties)
    }
}

/// The properties a PUBLISH and a will share.
pub(crate) fn write_message_properties<S: Sink>(
    out: &mut S,
    payload_format: PayloadFormat,
    message_expiry_interval: Option<u32>,
    content_type: &Option<String>,
    response_topic: &Option<TopicName>,
    correlation_data: &Option<Bytes>,
) -> Result<(), EncodeError> {
    if payload_format == PayloadFormat::Utf8 {
        put::byte(out, id::PAYLOAD_FORMAT_INDICATOR, 1);
    }
    if let Some(interval) = message_expiry_interval {
        put::u32(out, id::MESSAGE_EXPIRY_INTERVAL, interval);
    }
    put::opt_string(out, id::CONTENT_TYPE, content_type)?;
    if let Some(topic) = response_topic {
        if topic.is_empty() {
            return Err(EncodeError::Invalid(
                "an empty Response Topic [MQTT-4.7.3-1]",
            ));
        }
        put::string(out, id::RESPONSE_TOPIC, topic.as_str())?;
    }
    put::opt_binary(out, id::CORRELATION_DATA, correlation_data)
}

#[cfg(test)]
mod tests;
