//! Decoding: [`decode`] takes one packet off the front of a read buffer, strictly, and
//! [`DecodeError`] says what the server must answer when it cannot.
//!
//! Framing first: the fixed header's remaining length (a Variable Byte Integer of at most four
//! bytes), then the packet size against the server's Maximum Packet Size, refused before the rest
//! is buffered. The whole packet is split off the buffer and frozen, so payloads and binary data
//! are slices of it (no copy). Then the fixed header's flags [MQTT-2.2.2-1] [MQTT-2.2.2-2], the
//! packet's own rules (in its module), and that the remaining length holds exactly the content:
//! bytes left over are a Malformed Packet.
//!
//! Which answer: before CONNECT and under 3.1.1, close the connection without sending anything
//! (3.1.1 has no DISCONNECT from the server; [MQTT-4.8.0-1] of 3.1.1 says close); under v5,
//! DISCONNECT with the error's reason code [MQTT-4.13.1-1]; for a CONNECT the server refuses
//! (unsupported protocol level, a malformed v5 CONNECT, 3.1.1's empty client id without a clean
//! session) a CONNACK in the CONNECT's version, as [`ErrorResponse::ConnAck`] says.

use std::borrow::Cow;

use bytes::{Buf, Bytes, BytesMut};

use super::connack::{ConnAck, ConnAckProperties};
use super::disconnect::{Disconnect, DisconnectProperties};
use super::reason::ReasonCode;
use super::varint::{self, Varint};
use super::{
    connack, connect, disconnect, publish, strings, subscribe, Packet, PacketId, ProtocolVersion,
};

/// What the server must do about a packet it cannot accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorResponse {
    /// Close the network connection without sending anything: before CONNECT, or under 3.1.1.
    Close,
    /// Send DISCONNECT with [`DecodeError::reason_code`] (and the message as its Reason String
    /// if the client asked for problem information), then close: v5 after CONNECT.
    Disconnect,
    /// Send CONNACK with the reason code, in this version's format (for 3.1.1 its return code,
    /// [`ReasonCode::v311_connack_code`]), then close: a CONNECT the server refuses.
    ConnAck(ProtocolVersion),
}

/// Why a packet was refused, and what the server answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({reason_code})")]
pub struct DecodeError {
    /// The v5 reason code of the answer: 0x81 Malformed Packet, 0x82 Protocol Error, 0x95
    /// Packet too large, 0x84 Unsupported Protocol Version, 0x90 Topic Name invalid, ...
    pub reason_code: ReasonCode,
    /// What to send before closing.
    pub response: ErrorResponse,
    /// A short human reason, with the normative statement's number where there is one: the v5
    /// Reason String.
    pub message: Cow<'static, str>,
}

impl DecodeError {
    /// An error with `reason_code`; its response is set by [`decode`].
    pub(crate) fn new(reason_code: ReasonCode, message: impl Into<Cow<'static, str>>) -> Self {
        DecodeError {
            reason_code,
            response: ErrorResponse::Close,
            message: message.into(),
        }
    }

    /// A Malformed Packet (0x81).
    pub(crate) fn malformed(message: impl Into<Cow<'static, str>>) -> Self {
        DecodeError::new(ReasonCode::MalformedPacket, message)
    }

    /// A Protocol Error (0x82).
    pub(crate) fn protocol(message: impl Into<Cow<'static, str>>) -> Self {
        DecodeError::new(ReasonCode::ProtocolError, message)
    }

    /// The packet to send before closing, and the version to encode it in: a DISCONNECT or
    /// CONNACK carrying the reason code and, under v5, the message as its Reason String (allowed
    /// on both whatever Request Problem Information says; check [`super::encoded_len`] against
    /// the client's Maximum Packet Size and drop the string if it does not fit, [MQTT-3.14.2-3]
    /// [MQTT-3.2.2-19]); `None` when the connection is just closed.
    pub fn answer(&self) -> Option<(Packet, ProtocolVersion)> {
        let reason_string = Some(self.message.clone().into_owned());
        match self.response {
            ErrorResponse::Close => None,
            ErrorResponse::Disconnect => Some((
                Packet::Disconnect(Disconnect {
                    reason_code: self.reason_code,
                    properties: DisconnectProperties {
                        reason_string,
                        ..Default::default()
                    },
                }),
                ProtocolVersion::V5,
            )),
            ErrorResponse::ConnAck(version) => Some((
                Packet::ConnAck(Box::new(ConnAck {
                    session_present: false,
                    reason_code: self.reason_code,
                    properties: ConnAckProperties {
                        reason_string: reason_string.filter(|_| version == ProtocolVersion::V5),
                        ..Default::default()
                    },
                })),
                version,
            )),
        }
    }

    pub(crate) fn with_response(mut self, response: ErrorResponse) -> Self {
        self.response = response;
        self
    }
}

/// Decodes one packet from the front of `buf` if a whole one is there, advancing `buf` past it;
/// `Ok(None)` if more bytes are needed (nothing consumed).
///
/// `version` is `None` until the connection's CONNECT has been decoded (then only a CONNECT is
/// accepted [MQTT-3.1.0-1]), then the CONNECT's version (then a CONNECT is a Protocol Error
/// [MQTT-3.1.0-2]). `max_packet_size` is the largest whole packet (fixed header included) the
/// server accepts; a packet declaring more is refused as soon as its fixed header is read.
/// After an error the buffer's content is unspecified: the connection is to be closed.
pub fn decode(
    buf: &mut BytesMut,
    version: Option<ProtocolVersion>,
    max_packet_size: u32,
) -> Result<Option<Packet>, DecodeError> {
    let default_response = match version {
        Some(ProtocolVersion::V5) => ErrorResponse::Disconnect,
        _ => ErrorResponse::Close,
    };
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    let packet_type = first >> 4;
    let flags = first & 0x0F;
    match (version, packet_type) {
        (None, 1) => {}
        (None, _) => {
            return Err(DecodeError::protocol(
                "the first packet must be CONNECT [MQTT-3.1.0-1]",
            ))
        }
        (Some(_), 1) => {
            return Err(DecodeError::protocol("a second CONNECT [MQTT-3.1.0-2]")
                .with_response(default_response))
        }
        (Some(_), _) => {}
    }
    let (remaining, length_bytes) = match varint::read(&buf[1..]) {
        Varint::Value(value, bytes) => (value as usize, bytes),
        Varint::Incomplete => return Ok(None),
        Varint::TooLong => {
            return Err(DecodeError::malformed(
                "the remaining length is longer than four bytes [MQTT-1.5.5-1]",
            )
            .with_response(default_response))
        }
    };
    let size = 1 + length_bytes + remaining;
    if size > max_packet_size as usize {
        return Err(DecodeError::new(
            ReasonCode::PacketTooLarge,
            format!(
                "a packet of {size} bytes is larger than the Maximum Packet Size {max_packet_size}"
            ),
        )
        .with_response(default_response));
    }
    if buf.len() < size {
        return Ok(None);
    }
    let mut frame = buf.split_to(size).freeze();
    frame.advance(1 + length_bytes);
    let mut body = Reader::new(frame);
    match version {
        // A CONNECT's errors carry their own response (it depends on the CONNECT's level).
        None => {
            let packet = connect::decode_connect(flags, &mut body)?;
            Ok(Some(packet))
        }
        Some(version) => decode_after_connect(packet_type, flags, version, &mut body)
            .map(Some)
            .map_err(|e| e.with_response(default_response)),
    }
}

fn decode_after_connect(
    packet_type: u8,
    flags: u8,
    version: ProtocolVersion,
    body: &mut Reader,
) -> Result<Packet, DecodeError> {
    let expected_flags = match packet_type {
        3 => flags, // PUBLISH: DUP, QoS, RETAIN, checked by publish.rs
        6 | 8 | 10 => 0b0010,
        _ => 0,
    };
    if flags != expected_flags {
        return Err(DecodeError::malformed(format!(
            "{} with fixed header flags {flags:04b} instead of {expected_flags:04b} [MQTT-2.2.2-2]",
            super::packet_type_name(packet_type)
        )));
    }
    let packet = match packet_type {
        2 => connack::decode_connack(version, body)?,
        3 => publish::decode_publish(flags, version, body)?,
        4..=7 => publish::decode_ack(packet_type, version, body)?,
        8 => subscribe::decode_subscribe(version, body)?,
        9 => subscribe::decode_suback(version, body)?,
        10 => subscribe::decode_unsubscribe(version, body)?,
        11 => subscribe::decode_unsuback(version, body)?,
        12 => Packet::PingReq,
        13 => Packet::PingResp,
        14 => disconnect::decode_disconnect(version, body)?,
        15 if version == ProtocolVersion::V5 => disconnect::decode_auth(body)?,
        15 => {
            return Err(DecodeError::malformed(
                "packet type 15 is reserved in MQTT 3.1.1",
            ))
        }
        _ => return Err(DecodeError::malformed("packet type 0 is reserved")),
    };
    body.end(super::packet_type_name(packet_type))?;
    Ok(packet)
}

/// A cursor over a packet's bytes after the fixed header; every read past the end is a
/// Malformed Packet (a length that promises more than the remaining length holds).
#[derive(Debug)]
pub(crate) struct Reader {
    bytes: Bytes,
}

fn short() -> DecodeError {
    DecodeError::malformed("the packet ends inside a field (remaining length too short)")
}

impl Reader {
    pub(crate) fn new(bytes: Bytes) -> Reader {
        Reader { bytes }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len()
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        self.bytes.try_get_u8().map_err(|_| short())
    }

    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        self.bytes.try_get_u16().map_err(|_| short())
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        self.bytes.try_get_u32().map_err(|_| short())
    }

    pub(crate) fn varint(&mut self) -> Result<u32, DecodeError> {
        match varint::read(&self.bytes) {
            Varint::Value(value, len) => {
                self.bytes.advance(len);
                Ok(value)
            }
            Varint::Incomplete => Err(short()),
            Varint::TooLong => Err(DecodeError::malformed(
                "a Variable Byte Integer longer than four bytes [MQTT-1.5.5-1]",
            )),
        }
    }

    /// The next `len` bytes.
    pub(crate) fn take(&mut self, len: usize) -> Result<Bytes, DecodeError> {
        if len > self.bytes.len() {
            return Err(short());
        }
        Ok(self.bytes.split_to(len))
    }

    /// Everything left (a PUBLISH's payload).
    pub(crate) fn rest(&mut self) -> Bytes {
        std::mem::take(&mut self.bytes)
    }

    /// Binary Data: a two-byte length and that many bytes.
    pub(crate) fn binary(&mut self) -> Result<Bytes, DecodeError> {
        let len = self.u16()?;
        self.take(usize::from(len))
    }

    /// A UTF-8 Encoded String, validated ([`strings::validate`]).
    pub(crate) fn string(&mut self) -> Result<String, DecodeError> {
        let bytes = self.binary()?;
        strings::validate(&bytes)
            .map(str::to_owned)
            .map_err(DecodeError::malformed)
    }

    /// A Packet Identifier, which must not be 0 [MQTT-2.2.1-3].
    pub(crate) fn packet_id(&mut self) -> Result<PacketId, DecodeError> {
        PacketId::new(self.u16()?)
            .ok_or_else(|| DecodeError::protocol("a Packet Identifier of 0 [MQTT-2.2.1-3]"))
    }

    /// Refuses bytes left after the packet's content.
    pub(crate) fn end(&self, packet: &str) -> Result<(), DecodeError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::malformed(format!(
                "{} bytes after the end of the {packet} (remaining length too long)",
                self.bytes.len()
            )))
        }
    }
}

#[cfg(test)]
mod tests;
