//! DISCONNECT and AUTH (MQTT 5.0 3.14, 3.15; 3.1.1 3.14).
//!
//! DISCONNECT: under 3.1.1 an empty packet, client to server; under v5 a reason code from its
//! list [MQTT-3.14.2-1] (left out when Normal disconnection without properties, 3.14.2.1) and
//! properties. AUTH exists in v5 only (under 3.1.1 type 15 is reserved, a Malformed Packet); its
//! reason code is one of three [MQTT-3.15.2-1], and an AUTH that is more than the bare
//! Success must name its Authentication Method (3.15.2.2.2).

use bytes::Bytes;

use super::decode::{DecodeError, Reader};
use super::encode::{check_reason, EncodeError, Sink};
use super::properties::{self, id, put, Context, WriteProperties};
use super::reason::{self, ReasonCode};
use super::{Packet, ProtocolVersion, UserProperties};

/// DISCONNECT: the end of a connection, said by the client (either version) or the server (v5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disconnect {
    /// The reason (3.1.1: always Normal disconnection).
    pub reason_code: ReasonCode,
    /// v5 properties.
    pub properties: DisconnectProperties,
}

impl Default for Disconnect {
    fn default() -> Self {
        Disconnect {
            reason_code: ReasonCode::NormalDisconnection,
            properties: DisconnectProperties::default(),
        }
    }
}

/// DISCONNECT's v5 properties (MQTT 5.0 3.14.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DisconnectProperties {
    /// Session Expiry Interval (client to server only [MQTT-3.14.2-2]).
    pub session_expiry_interval: Option<u32>,
    /// Reason String.
    pub reason_string: Option<String>,
    /// User Properties.
    pub user_properties: UserProperties,
    /// Server Reference (with 0x9C Use another server / 0x9D Server moved).
    pub server_reference: Option<String>,
}

impl DisconnectProperties {
    fn is_empty(&self) -> bool {
        self == &DisconnectProperties::default()
    }
}

impl WriteProperties for DisconnectProperties {
    fn write_properties<S: Sink>(&self, out: &mut S) -> Result<(), EncodeError> {
        if let Some(interval) = self.session_expiry_interval {
            put::u32(out, id::SESSION_EXPIRY_INTERVAL, interval);
        }
        put::opt_string(out, id::REASON_STRING, &self.reason_string)?;
        put::user_properties(out, &self.user_properties)?;
        put::opt_string(out, id::SERVER_REFERENCE, &self.server_reference)
    }
}

/// Decodes a DISCONNECT body.
pub(crate) fn decode_disconnect(
    version: ProtocolVersion,
    body: &mut Reader,
) -> Result<Packet, DecodeError> {
    let mut disconnect = Disconnect::default();
    if version == ProtocolVersion::V5 && !body.is_empty() {
        let code = body.u8()?;
        disconnect.reason_code =
            ReasonCode::from_byte(code, reason::DISCONNECT).ok_or_else(|| {
                DecodeError::malformed(format!(
                    "DISCONNECT with reason code 0x{code:02X} [MQTT-3.14.2-1]"
                ))
            })?;
        if !body.is_empty() {
            let p = properties::read(body, Context::Disconnect)?;
            disconnect.properties = DisconnectProperties {
                session_expiry_interval: p.session_expiry_interval,
                reason_string: p.reason_string,
                user_properties: p.user_properties,
                server_reference: p.server_reference,
            };
        }
    }
    Ok(Packet::Disconnect(disconnect))
}

impl Disconnect {
    pub(crate) fn write<S: Sink>(
        &self,
        version: ProtocolVersion,
        out: &mut S,
    ) -> Result<(), EncodeError> {
        check_reason("DISCONNECT", self.reason_code, reason::DISCONNECT)?;
        match version {
            ProtocolVersion::V311 if self.reason_code != ReasonCode::NormalDisconnection => {
                Err(EncodeError::NotInVersion(
                    "a DISCONNECT reason code other than Normal disconnection",
                ))
            }
            ProtocolVersion::V311 => Ok(()),
            ProtocolVersion::V5 => {
                if self.reason_code != ReasonCode::NormalDisconnection
                    || !self.properties.is_empty()
                {
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

/// AUTH: a step of enhanced authentication (v5 only), both ways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Auth {
    /// Success, Continue authentication or Re-authenticate.
    pub reason_code: ReasonCode,
    /// Properties.
    pub properties: AuthProperties,
}

/// AUTH's properties (MQTT 5.0 3.15.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthProperties {
    /// Authentication Method: required unless the AUTH is a bare Success.
    pub authentication_method: Option<String>,
    /// Authentication Data.
    pub authentication_data: Option<Bytes>,
    /// Reason String.
    pub reason_string: Option<String>,
    /// User Properties.
    pub user_properties: UserProperties,
}

impl WriteProperties for AuthProperties {
    fn write_properties<S: Sink>(&self, out: &mut S) -> Result<(), EncodeError> {
        put::opt_string(out, id::AUTHENTICATION_METHOD, &self.authentication_method)?;
        put::opt_binary(out, id::AUTHENTICATION_DATA, &self.authentication_data)?;
        put::opt_string(out, id::REASON_STRING, &self.reason_string)?;
        put::user_properties(out, &self.user_properties)
    }
}

/// Decodes an AUTH body (v5).
pub(crate) fn decode_auth(body: &mut Reader) -> Result<Packet, DecodeError> {
    if body.is_empty() {
        return Ok(Packet::Auth(Auth {
            reason_code: ReasonCode::Success,
            properties: AuthProperties::default(),
        }));
    }
    let code = body.u8()?;
    let reason_code = ReasonCode::from_byte(code, reason::AUTH).ok_or_else(|| {
        DecodeError::malformed(format!(
            "AUTH with reason code 0x{code:02X} [MQTT-3.15.2-1]"
        ))
    })?;
    let p = properties::read(body, Context::Auth)?;
    if p.authentication_method.is_none() {
        return Err(DecodeError::protocol(
            "AUTH without an Authentication Method (3.15.2.2.2)",
        ));
    }
    Ok(Packet::Auth(Auth {
        reason_code,
        properties: AuthProperties {
            authentication_method: p.authentication_method,
            authentication_data: p.authentication_data,
            reason_string: p.reason_string,
            user_properties: p.user_properties,
        },
    }))
}

impl Auth {
    pub(crate) fn write<S: Sink>(
        &self,
        version: ProtocolVersion,
        out: &mut S,
    ) -> Result<(), EncodeError> {
        if version == ProtocolVersion::V311 {
            return Err(EncodeError::NotInVersion("AUTH"));
        }
        check_reason("AUTH", self.reason_code, reason::AUTH)?;
        if self.reason_code == ReasonCode::Success && self.properties == AuthProperties::default() {
            return Ok(());
        }
        if self.properties.authentication_method.is_none() {
            return Err(EncodeError::Invalid(
                "AUTH without an Authentication Method (3.15.2.2.2)",
            ));
        }
        out.put_u8(self.reason_code.value());
        self.properties.write_with_length(out)
    }
}
