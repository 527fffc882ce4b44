//! CONNACK (MQTT 5.0 3.2; 3.1.1 3.2): the server's answer to CONNECT.
//!
//! Its reserved acknowledge flag bits are 0 [MQTT-3.2.2-1]; Session Present is 0 with an error
//! code (v5 [MQTT-3.2.2-6], 3.1.1 [MQTT-3.2.2-4]); the reason code is one of CONNACK's
//! [MQTT-3.2.2-8], and under 3.1.1 one of the six return codes ([`ReasonCode::v311_connack_code`]
//! maps v5 codes to them). Properties equal to their default are not sent.

use std::num::{NonZeroU16, NonZeroU32};

use bytes::Bytes;

use super::connect::check_authentication;
use super::decode::{DecodeError, Reader};
use super::encode::{check_reason, EncodeError, Sink};
use super::properties::{self, id, put, Context, WriteProperties};
use super::reason::{self, ReasonCode};
use super::{Packet, ProtocolVersion, QoS, UserProperties};

/// CONNACK: the server's answer to CONNECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnAck {
    /// Session Present: the server resumed a session.
    pub session_present: bool,
    /// The reason code (3.1.1: the return code, mapped by [`ReasonCode::v311_connack_code`]).
    pub reason_code: ReasonCode,
    /// v5 properties.
    pub properties: ConnAckProperties,
}

/// CONNACK's v5 properties (MQTT 5.0 3.2.2.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnAckProperties {
    /// Session Expiry Interval the server uses; `None`: the client's.
    pub session_expiry_interval: Option<u32>,
    /// Receive Maximum of the server (default 65,535).
    pub receive_maximum: NonZeroU16,
    /// Maximum QoS the server supports (default 2; only 0 or 1 are sent).
    pub maximum_qos: QoS,
    /// Retain Available (default true).
    pub retain_available: bool,
    /// Maximum Packet Size the server accepts; `None`: no limit.
    pub maximum_packet_size: Option<NonZeroU32>,
    /// Assigned Client Identifier, when the client sent an empty one.
    pub assigned_client_identifier: Option<String>,
    /// Topic Alias Maximum the server accepts (default 0).
    pub topic_alias_maximum: u16,
    /// Reason String.
    pub reason_string: Option<String>,
    /// User Properties.
    pub user_properties: UserProperties,
    /// Wildcard Subscription Available (default true).
    pub wildcard_subscription_available: bool,
    /// Subscription Identifiers Available (default true).
    pub subscription_identifiers_available: bool,
    /// Shared Subscription Available (default true).
    pub shared_subscription_available: bool,
    /// Server Keep Alive, which replaces the client's; `None`: the client's.
    pub server_keep_alive: Option<u16>,
    /// Response Information.
    pub response_information: Option<String>,
    /// Server Reference (with 0x9C / 0x9D).
    pub server_reference: Option<String>,
    /// Authentication Method.
    pub authentication_method: Option<String>,
    /// Authentication Data.
    pub authentication_data: Option<Bytes>,
}

impl Default for ConnAckProperties {
    fn default() -> Self {
        ConnAckProperties {
            session_expiry_interval: None,
            receive_maximum: NonZeroU16::MAX,
            maximum_qos: QoS::ExactlyOnce,
            retain_available: true,
            maximum_packet_size: None,
            assigned_client_identifier: None,
            topic_alias_maximum: 0,
            reason_string: None,
            user_properties: Vec::new(),
            wildcard_subscription_available: true,
            subscription_identifiers_available: true,
            shared_subscription_available: true,
            server_keep_alive: None,
            response_information: None,
            server_reference: None,
            authentication_method: None,
            authentication_data: None,
        }
    }
}

/// Decodes a CONNACK body.
pub(crate) fn decode_connack(
    version: ProtocolVersion,
    body: &mut Reader,
) -> Result<Packet, DecodeError> {
    let flags = body.u8()?;
    if flags & 0xFE != 0 {
        return Err(DecodeError::malformed(
            "reserved CONNACK acknowledge flags are not 0 [MQTT-3.2.2-1]",
        ));
    }
    let session_present = flags & 0x01 != 0;
    let code = body.u8()?;
    let reason_code = match version {
        ProtocolVersion::V5 => ReasonCode::from_byte(code, reason::CONNACK),
        ProtocolVersion::V311 => ReasonCode::from_v311_connack_code(code),
    }
    .ok_or_else(|| DecodeError::malformed(format!("CONNACK with reason code 0x{code:02X}")))?;
    if session_present && reason_code.is_error() {
        return Err(DecodeError::protocol(if version == ProtocolVersion::V5 {
            "Session Present with an error code [MQTT-3.2.2-6]"
        } else {
            "Session Present with an error code [MQTT-3.2.2-4]"
        }));
    }
    let properties = if version == ProtocolVersion::V5 {
        let p = properties::read(body, Context::ConnAck)?;
        ConnAckProperties {
            session_expiry_interval: p.session_expiry_interval,
            receive_maximum: p.receive_maximum.unwrap_or(NonZeroU16::MAX),
            maximum_qos: p.maximum_qos.unwrap_or(QoS::ExactlyOnce),
            retain_available: p.retain_available.unwrap_or(true),
            maximum_packet_size: p.maximum_packet_size,
            assigned_client_identifier: p.assigned_client_identifier,
            topic_alias_maximum: p.topic_alias_maximum.unwrap_or(0),
            reason_string: p.reason_string,
            user_properties: p.user_properties,
            wildcard_subscription_available: p.wildcard_subscription_available.unwrap_or(true),
            subscription_identifiers_available: p
                .subscription_identifiers_available
                .unwrap_or(true),
            shared_subscription_available: p.shared_subscription_available.unwrap_or(true),
            server_keep_alive: p.server_keep_alive,
            response_information: p.response_information,
            server_reference: p.server_reference,
            authentication_method: p.authentication_method,
            authentication_data: p.authentication_data,
        }
    } else {
        ConnAckProperties::default()
    };
    Ok(Packet::ConnAck(Box::new(ConnAck {
        session_present,
        reason_code,
        properties,
    })))
}

impl ConnAck {
    pub(crate) fn write<S: Sink>(
        &self,
        version: ProtocolVersion,
        out: &mut S,
    ) -> Result<(), EncodeError> {
        if self.session_present && self.reason_code.is_error() {
            return Err(EncodeError::Invalid(
                "Session Present with an error code [MQTT-3.2.2-6]",
            ));
        }
        out.put_u8(u8::from(self.session_present));
        match version {
            ProtocolVersion::V5 => {
                check_reason("CONNACK", self.reason_code, reason::CONNACK)?;
                out.put_u8(self.reason_code.value());
                self.properties.write_with_length(out)
            }
            ProtocolVersion::V311 => {
                let code = self.reason_code.v311_connack_code().ok_or(
                    EncodeError::ReasonCodeNotAllowed {
                        packet: "a 3.1.1 CONNACK",
                        code: self.reason_code,
                    },
                )?;
                out.put_u8(code);
                Ok(())
            }
        }
    }
}

impl WriteProperties for ConnAckProperties {
    fn write_properties<S: Sink>(&self, out: &mut S) -> Result<(), EncodeError> {
        check_authentication(&self.authentication_method, &self.authentication_data)?;
        if let Some(interval) = self.session_expiry_interval {
            put::u32(out, id::SESSION_EXPIRY_INTERVAL, interval);
        }
        if self.receive_maximum != NonZeroU16::MAX {
            put::u16(out, id::RECEIVE_MAXIMUM, self.receive_maximum.get());
        }
        if self.maximum_qos != QoS::ExactlyOnce {
            put::byte(out, id::MAXIMUM_QOS, self.maximum_qos.as_u8());
        }
        if !self.retain_available {
            put::byte(out, id::RETAIN_AVAILABLE, 0);
        }
        if let Some(size) = self.maximum_packet_size {
            put::u32(out, id::MAXIMUM_PACKET_SIZE, size.get());
        }
        put::opt_string(
            out,
            id::ASSIGNED_CLIENT_IDENTIFIER,
            &self.assigned_client_identifier,
        )?;
        if self.topic_alias_maximum != 0 {
            put::u16(out, id::TOPIC_ALIAS_MAXIMUM, self.topic_alias_maximum);
        }
        put::opt_string(out, id::REASON_STRING, &self.reason_string)?;
        put::user_properties(out, &self.user_properties)?;
        if !self.wildcard_subscription_available {
            put::byte(out, id::WILDCARD_SUBSCRIPTION_AVAILABLE, 0);
        }
        if !self.subscription_identifiers_available {
            put::byte(out, id::SUBSCRIPTION_IDENTIFIER_AVAILABLE, 0);
        }
        if !self.shared_subscription_available {
            put::byte(out, id::SHARED_SUBSCRIPTION_AVAILABLE, 0);
        }
        if let Some(keep_alive) = self.server_keep_alive {
            put::u16(out, id::SERVER_KEEP_ALIVE, keep_alive);
        }
        put::opt_string(out, id::RESPONSE_INFORMATION, &self.response_information)?;
        put::opt_string(out, id::SERVER_REFERENCE, &self.server_reference)?;
        put::opt_string(out, id::AUTHENTICATION_METHOD, &self.authentication_method)?;
        put::opt_binary(out, id::AUTHENTICATION_DATA, &self.authentication_data)
    }
}
