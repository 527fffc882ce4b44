//! Helpers of the codec's tests: hand-built packets and decoding with an expected answer.

use bytes::BytesMut;

use super::decode::{decode, DecodeError, ErrorResponse};
use super::{Packet, ProtocolVersion, ReasonCode};

pub const V5_: Option<ProtocolVersion> = Some(ProtocolVersion::V5);
pub const V3_: Option<ProtocolVersion> = Some(ProtocolVersion::V311);

/// A packet: `first` byte, a minimal remaining length, `body`.
pub fn frame(first: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![first];
    let mut len = body.len();
    loop {
        let byte = (len % 128) as u8;
        len /= 128;
        out.push(if len > 0 { byte | 0x80 } else { byte });
        if len == 0 {
            break;
        }
    }
    out.extend_from_slice(body);
    out
}

pub fn decode_all(
    bytes: &[u8],
    version: Option<ProtocolVersion>,
) -> Result<Option<Packet>, DecodeError> {
    decode(&mut BytesMut::from(bytes), version, u32::MAX)
}

pub fn ok(bytes: &[u8], version: Option<ProtocolVersion>) -> Packet {
    decode_all(bytes, version).unwrap().expect("a whole packet")
}

/// Decodes, expecting an error with `code` and `response`; returns the message.
pub fn refused(
    bytes: &[u8],
    version: Option<ProtocolVersion>,
    code: ReasonCode,
    response: ErrorResponse,
) -> String {
    let e = decode_all(bytes, version).expect_err("refused");
    assert_eq!((e.reason_code, e.response), (code, response), "{e}");
    e.message.into_owned()
}

pub fn malformed(bytes: &[u8], version: Option<ProtocolVersion>) -> String {
    let response = if version == V5_ {
        ErrorResponse::Disconnect
    } else {
        ErrorResponse::Close
    };
    refused(bytes, version, ReasonCode::MalformedPacket, response)
}

pub fn protocol_error(bytes: &[u8], version: Option<ProtocolVersion>) -> String {
    let response = if version == V5_ {
        ErrorResponse::Disconnect
    } else {
        ErrorResponse::Close
    };
    refused(bytes, version, ReasonCode::ProtocolError, response)
}

/// A CONNECT body: protocol name, level, flags, keep alive 60, then `rest`.
pub fn connect_body(name: &[u8], level: u8, flags: u8, rest: &[u8]) -> Vec<u8> {
    let mut body = vec![0, name.len() as u8];
    body.extend_from_slice(name);
    body.extend_from_slice(&[level, flags, 0, 60]);
    body.extend_from_slice(rest);
    body
}

/// A v5 CONNECT with `properties` and client id "c".
pub fn connect_v5(flags: u8, properties: &[u8], payload_after_id: &[u8]) -> Vec<u8> {
    let mut rest = vec![properties.len() as u8];
    rest.extend_from_slice(properties);
    rest.extend_from_slice(&[0, 1, b'c']);
    rest.extend_from_slice(payload_after_id);
    frame(0x10, &connect_body(b"MQTT", 5, flags, &rest))
}

pub fn connect_v311(flags: u8, payload: &[u8]) -> Vec<u8> {
    frame(0x10, &connect_body(b"MQTT", 4, flags, payload))
}

/// A v5 PUBLISH at QoS 0 to "t" with `properties`.
pub fn publish_v5(properties: &[u8]) -> Vec<u8> {
    let mut body = vec![0, 1, b't', properties.len() as u8];
    body.extend_from_slice(properties);
    frame(0x30, &body)
}
