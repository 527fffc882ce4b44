//! The MQTT packet model and codec, for MQTT 5.0 and 3.1.1.
//!
//! One struct per control packet carries every field of both versions; a field that exists in 5.0
//! only (properties, most reason codes) is ignored when encoding for 3.1.1 and holds its default
//! when decoded from 3.1.1. v5 properties are typed fields of a per-packet properties struct; a
//! property whose absence means a default value (Receive Maximum 65535, Maximum QoS 2, ...) is a
//! plain field holding that default, one whose absence means something else (no Maximum Packet
//! Size: no limit) is an `Option`.
//!
//! Payloads and binary data are [`Bytes`] slices of the read buffer (no copy); strings are
//! checked UTF-8 ([`strings`]); topic names and filters are the validated types of [`topic`].
//!
//! - [`decode()`], [`encode()`], [`encoded_len()`]: the API a connection calls (modules
//!   [`mod@decode`] and [`mod@encode`] hold them and their errors);
//! - [`connect`]: CONNECT and its will; [`connack`]: CONNACK; [`publish`]: PUBLISH and its four
//!   acknowledgements; [`subscribe`]: SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK;
//!   [`disconnect`]: DISCONNECT and AUTH;
//! - [`reason`]: reason codes; [`properties`]: the v5 property table; [`varint`], [`strings`],
//!   [`topic`]: the data representations and topic rules.

pub mod connack;
pub mod connect;
pub mod decode;
pub mod disconnect;
pub mod encode;
pub mod properties;
#[cfg(test)]
mod proptests;
pub mod publish;
pub mod reason;
pub mod strings;
pub mod subscribe;
#[cfg(test)]
mod testing;
pub mod topic;
pub mod varint;

use std::num::NonZeroU16;

pub use bytes::{Bytes, BytesMut};
pub use connack::{ConnAck, ConnAckProperties};
pub use connect::{Connect, ConnectProperties, Will, WillProperties};
pub use decode::{decode, DecodeError, ErrorResponse};
pub use disconnect::{Auth, AuthProperties, Disconnect, DisconnectProperties};
pub use encode::{encode, encoded_len, EncodeError};
pub use publish::{AckProperties, PubAck, PubComp, PubRec, PubRel, Publish, PublishProperties};
pub use reason::ReasonCode;
pub use subscribe::{
    RetainHandling, SubAck, Subscribe, SubscribeProperties, SubscriptionOptions, UnsubAck,
    Unsubscribe, UnsubscribeProperties,
};
pub use topic::{matches, SharedFilter, TopicError, TopicFilter, TopicName};

/// The protocol level a connection speaks, fixed by its CONNECT.
///
/// MQTT 3.1 (protocol name `MQIsdp`, level 3) is refused: [`decode()`] answers its CONNECT with
/// [`ErrorResponse::ConnAck`] in 3.1.1's format with return code 0x01 (unacceptable protocol
/// version), as 3.1.1 says for an unsupported level [MQTT-3.1.2-2]. Any other unknown level of
/// protocol name `MQTT` is refused the same way below 5, and with v5's CONNACK reason code 0x84
/// (Unsupported Protocol Version) above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProtocolVersion {
    /// MQTT 3.1.1, protocol level 4.
    V311,
    /// MQTT 5.0, protocol level 5.
    V5,
}

impl ProtocolVersion {
    /// The Protocol Level byte of CONNECT.
    pub fn level(self) -> u8 {
        match self {
            ProtocolVersion::V311 => 4,
            ProtocolVersion::V5 => 5,
        }
    }

    /// The version of a Protocol Level byte, if Herald speaks it.
    pub fn from_level(level: u8) -> Option<ProtocolVersion> {
        match level {
            4 => Some(ProtocolVersion::V311),
            5 => Some(ProtocolVersion::V5),
            _ => None,
        }
    }
}

/// A delivery guarantee: PUBLISH's QoS, a subscription's maximum QoS, a will's QoS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum QoS {
    /// QoS 0: at most once, no acknowledgement.
    #[default]
    AtMostOnce = 0,
    /// QoS 1: at least once, PUBACK.
    AtLeastOnce = 1,
    /// QoS 2: exactly once, PUBREC / PUBREL / PUBCOMP.
    ExactlyOnce = 2,
}

impl QoS {
    /// The QoS of its two-bit value; `None` for 3, which no packet may carry.
    pub fn from_u8(value: u8) -> Option<QoS> {
        match value {
            0 => Some(QoS::AtMostOnce),
            1 => Some(QoS::AtLeastOnce),
            2 => Some(QoS::ExactlyOnce),
            _ => None,
        }
    }

    /// Its two-bit value.
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}

/// A Packet Identifier: non-zero on the wire [MQTT-2.2.1-3] (3.1.1 [MQTT-2.3.1-1]), so it is
/// non-zero in the type.
pub type PacketId = NonZeroU16;

/// v5 User Properties (name, value), in the order they were sent; the same name may appear more
/// than once and the order is kept when forwarded [MQTT-3.3.2-17] [MQTT-3.3.2-18].
pub type UserProperties = Vec<(String, String)>;

/// v5 Payload Format Indicator of a PUBLISH or a will.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PayloadFormat {
    /// 0 (the default when absent): unspecified bytes.
    #[default]
    Unspecified,
    /// 1: UTF-8 encoded character data.
    Utf8,
}

/// One MQTT control packet, of either version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    /// CONNECT (1), client to server.
    Connect(Box<Connect>),
    /// CONNACK (2), server to client.
    ConnAck(Box<ConnAck>),
    /// PUBLISH (3), both ways.
    Publish(Publish),
    /// PUBACK (4), both ways.
    PubAck(PubAck),
    /// PUBREC (5), both ways.
    PubRec(PubRec),
    /// PUBREL (6), both ways.
    PubRel(PubRel),
    /// PUBCOMP (7), both ways.
    PubComp(PubComp),
    /// SUBSCRIBE (8), client to server.
    Subscribe(Subscribe),
    /// SUBACK (9), server to client.
    SubAck(SubAck),
    /// UNSUBSCRIBE (10), client to server.
    Unsubscribe(Unsubscribe),
    /// UNSUBACK (11), server to client.
    UnsubAck(UnsubAck),
    /// PINGREQ (12), client to server.
    PingReq,
    /// PINGRESP (13), server to client.
    PingResp,
    /// DISCONNECT (14): client to server in both versions, also server to client in v5.
    Disconnect(Disconnect),
    /// AUTH (15), v5 only, both ways.
    Auth(Auth),
}

impl Packet {
    /// The control packet type, the high nibble of the first byte (1 for CONNECT ... 15 for AUTH).
    pub fn packet_type(&self) -> u8 {
        match self {
            Packet::Connect(_) => 1,
            Packet::ConnAck(_) => 2,
            Packet::Publish(_) => 3,
            Packet::PubAck(_) => 4,
            Packet::PubRec(_) => 5,
            Packet::PubRel(_) => 6,
            Packet::PubComp(_) => 7,
            Packet::Subscribe(_) => 8,
            Packet::SubAck(_) => 9,
            Packet::Unsubscribe(_) => 10,
            Packet::UnsubAck(_) => 11,
            Packet::PingReq => 12,
            Packet::PingResp => 13,
            Packet::Disconnect(_) => 14,
            Packet::Auth(_) => 15,
        }
    }

    /// The packet type's name as the specification writes it (`"PUBLISH"`), for logs and
    /// reason strings.
    pub fn name(&self) -> &'static str {
        packet_type_name(self.packet_type())
    }
}

/// The name of control packet type `packet_type` (`"RESERVED"` for 0 and anything above 15).
pub fn packet_type_name(packet_type: u8) -> &'static str {
    const NAMES: [&str; 16] = [
        "RESERVED",
        "CONNECT",
        "CONNACK",
        "PUBLISH",
        "PUBACK",
        "PUBREC",
        "PUBREL",
        "PUBCOMP",
        "SUBSCRIBE",
        "SUBACK",
        "UNSUBSCRIBE",
        "UNSUBACK",
        "PINGREQ",
        "PINGRESP",
        "DISCONNECT",
        "AUTH",
    ];
    NAMES
        .get(usize::from(packet_type))
        .copied()
        .unwrap_or("RESERVED")
}
