//! Encoding: [`encode`] appends a packet's bytes for a protocol version, [`encoded_len`] says how
//! many there would be (so a server can honour the client's Maximum Packet Size before sending).
//!
//! Both run the same code over a [`Sink`]: a `BytesMut` that keeps the bytes, or a [`Counter`]
//! that only counts them, so the length and the bytes cannot disagree. The remaining length and
//! every property length are counted first, then written.
//!
//! What is written decodes: a value the peer would have to refuse (a reason code its packet may
//! not carry, a QoS 0 PUBLISH with a packet identifier, AUTH under 3.1.1, an empty SUBSCRIBE, a
//! string over 65,535 bytes) is an [`EncodeError`], not bytes. v5-only fields are not written for
//! 3.1.1; properties equal to their default when absent are left out where the specification
//! gives the default (Receive Maximum 65535, Maximum QoS 2, Retain Available 1, ...).

use bytes::{BufMut, BytesMut};

use super::reason::ReasonCode;
use super::{varint, Packet, ProtocolVersion};

/// Where encoded bytes go.
pub trait Sink {
    /// Appends one byte.
    fn put_u8(&mut self, byte: u8);
    /// Appends bytes.
    fn put_slice(&mut self, bytes: &[u8]);
    /// Appends a Two Byte Integer (big-endian).
    fn put_u16(&mut self, value: u16) {
        self.put_slice(&value.to_be_bytes());
    }
    /// Appends a Four Byte Integer (big-endian).
    fn put_u32(&mut self, value: u32) {
        self.put_slice(&value.to_be_bytes());
    }
}

impl Sink for BytesMut {
    fn put_u8(&mut self, byte: u8) {
        BufMut::put_u8(self, byte);
    }
    fn put_slice(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// A [`Sink`] that counts bytes and keeps none.
#[derive(Debug, Default)]
pub struct Counter(pub usize);

impl Sink for Counter {
    fn put_u8(&mut self, _: u8) {
        self.0 += 1;
    }
    fn put_slice(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

/// Why a packet cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A string or binary value longer than a two-byte length can say.
    #[error("a string or binary value of {0} bytes is longer than 65,535 bytes")]
    StringTooLong(usize),
    /// The remaining length is more than a Variable Byte Integer can say.
    #[error("a remaining length of {0} bytes is more than 268,435,455")]
    PacketTooLarge(usize),
    /// A reason code its packet may not carry.
    #[error("{packet} may not carry reason code {code}")]
    ReasonCodeNotAllowed {
        /// The packet type's name.
        packet: &'static str,
        /// The code.
        code: ReasonCode,
    },
    /// A packet or value that does not exist in the version encoded for.
    #[error("{0} does not exist in MQTT 3.1.1")]
    NotInVersion(&'static str),
    /// A combination of fields the specification forbids, with the rule.
    #[error("{0}")]
    Invalid(&'static str),
}

/// Appends the encoding of `packet` for `version` to `out`. On an error nothing is appended.
pub fn encode(
    packet: &Packet,
    version: ProtocolVersion,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let mut counter = Counter::default();
    write_body(packet, version, &mut counter)?;
    let remaining = counter.0;
    let remaining_u32 = u32::try_from(remaining)
        .ok()
        .filter(|len| *len <= varint::MAX)
        .ok_or(EncodeError::PacketTooLarge(remaining))?;
    out.reserve(1 + varint::len(remaining_u32) + remaining);
    Sink::put_u8(out, packet.packet_type() << 4 | fixed_header_flags(packet));
    varint::put(out, remaining_u32);
    write_body(packet, version, out)
}

/// How many bytes [`encode`] appends for `packet` under `version`: the packet size Maximum
/// Packet Size limits (fixed header included). Meaningless if `encode` would fail.
pub fn encoded_len(packet: &Packet, version: ProtocolVersion) -> usize {
    let mut counter = Counter::default();
    let _ = write_body(packet, version, &mut counter);
    let remaining = counter.0;
    1 + varint::len(u32::try_from(remaining).unwrap_or(u32::MAX)) + remaining
}

/// The low nibble of the first byte [MQTT-2.2.2-1]: PUBLISH's DUP, QoS and RETAIN; 0b0010 for
/// PUBREL, SUBSCRIBE and UNSUBSCRIBE; 0 for the rest.
fn fixed_header_flags(packet: &Packet) -> u8 {
    match packet {
        Packet::Publish(p) => u8::from(p.dup) << 3 | p.qos.as_u8() << 1 | u8::from(p.retain),
        Packet::PubRel(_) | Packet::Subscribe(_) | Packet::Unsubscribe(_) => 0b0010,
        _ => 0,
    }
}

fn write_body<S: Sink>(
    packet: &Packet,
    version: ProtocolVersion,
    out: &mut S,
) -> Result<(), EncodeError> {
    match packet {
        Packet::Connect(p) => p.write(version, out),
        Packet::ConnAck(p) => p.write(version, out),
        Packet::Publish(p) => p.write(version, out),
        Packet::PubAck(p) => p.write(version, out),
        Packet::PubRec(p) => p.write(version, out),
        Packet::PubRel(p) => p.write(version, out),
        Packet::PubComp(p) => p.write(version, out),
        Packet::Subscribe(p) => p.write(version, out),
        Packet::SubAck(p) => p.write(version, out),
        Packet::Unsubscribe(p) => p.write(version, out),
        Packet::UnsubAck(p) => p.write(version, out),
        Packet::PingReq | Packet::PingResp => Ok(()),
        Packet::Disconnect(p) => p.write(version, out),
        Packet::Auth(p) => p.write(version, out),
    }
}

/// Refuses `code` unless it is one of `allowed` (a [`super::reason`] list).
pub(crate) fn check_reason(
    packet: &'static str,
    code: ReasonCode,
    allowed: &[ReasonCode],
) -> Result<(), EncodeError> {
    if allowed.contains(&code) {
        Ok(())
    } else {
        Err(EncodeError::ReasonCodeNotAllowed { packet, code })
    }
}

#[cfg(test)]
mod tests;
