//! Reason codes: every v5 reason code with its byte value and the specification's name, which
//! codes each packet may carry (a code outside its packet's list is a Malformed Packet when
//! decoded and refused when encoded), and the mapping to 3.1.1's CONNACK return codes and
//! SUBACK's failure code 0x80.
//!
//! Byte 0x00 has three names (Success, Normal disconnection, Granted QoS 0), so the type is an
//! enum of names and [`ReasonCode::from_byte`] needs the packet type to pick the name.

/// A v5 reason code (MQTT 5.0, 2.4), named as the specification names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant's doc is its name in `ReasonCode::name`
pub enum ReasonCode {
    Success,
    NormalDisconnection,
    GrantedQoS0,
    GrantedQoS1,
    GrantedQoS2,
    DisconnectWithWillMessage,
    NoMatchingSubscribers,
    NoSubscriptionExisted,
    ContinueAuthentication,
    ReAuthenticate,
    UnspecifiedError,
    MalformedPacket,
    ProtocolError,
    ImplementationSpecificError,
    UnsupportedProtocolVersion,
    ClientIdentifierNotValid,
    BadUserNameOrPassword,
    NotAuthorized,
    ServerUnavailable,
    ServerBusy,
    Banned,
    ServerShuttingDown,
    BadAuthenticationMethod,
    KeepAliveTimeout,
    SessionTakenOver,
    TopicFilterInvalid,
    TopicNameInvalid,
    PacketIdentifierInUse,
    PacketIdentifierNotFound,
    ReceiveMaximumExceeded,
    TopicAliasInvalid,
    PacketTooLarge,
    MessageRateTooHigh,
    QuotaExceeded,
    AdministrativeAction,
    PayloadFormatInvalid,
    RetainNotSupported,
    QoSNotSupported,
    UseAnotherServer,
    ServerMoved,
    SharedSubscriptionsNotSupported,
    ConnectionRateExceeded,
    MaximumConnectTime,
    SubscriptionIdentifiersNotSupported,
    WildcardSubscriptionsNotSupported,
}

use ReasonCode::*;

/// Every reason code with its byte and name, in the specification's table order.
const TABLE: &[(ReasonCode, u8, &str)] = &[
    (Success, 0x00, "Success"),
    (NormalDisconnection, 0x00, "Normal disconnection"),
    (GrantedQoS0, 0x00, "Granted QoS 0"),
    (GrantedQoS1, 0x01, "Granted QoS 1"),
    (GrantedQoS2, 0x02, "Granted QoS 2"),
    (
        DisconnectWithWillMessage,
        0x04,
        "Disconnect with Will Message",
    ),
    (NoMatchingSubscribers, 0x10, "No matching subscribers"),
    (NoSubscriptionExisted, 0x11, "No subscription existed"),
    (ContinueAuthentication, 0x18, "Continue authentication"),
    (ReAuthenticate, 0x19, "Re-authenticate"),
    (UnspecifiedError, 0x80, "Unspecified error"),
    (MalformedPacket, 0x81, "Malformed Packet"),
    (ProtocolError, 0x82, "Protocol Error"),
    (
        ImplementationSpecificError,
        0x83,
        "Implementation specific error",
    ),
    (
        UnsupportedProtocolVersion,
        0x84,
        "Unsupported Protocol Version",
    ),
    (
        ClientIdentifierNotValid,
        0x85,
        "Client Identifier not valid",
    ),
    (BadUserNameOrPassword, 0x86, "Bad User Name or Password"),
    (NotAuthorized, 0x87, "Not authorized"),
    (ServerUnavailable, 0x88, "Server unavailable"),
    (ServerBusy, 0x89, "Server busy"),
    (Banned, 0x8A, "Banned"),
    (ServerShuttingDown, 0x8B, "Server shutting down"),
    (BadAuthenticationMethod, 0x8C, "Bad authentication method"),
    (KeepAliveTimeout, 0x8D, "Keep Alive timeout"),
    (SessionTakenOver, 0x8E, "Session taken over"),
    (TopicFilterInvalid, 0x8F, "Topic Filter invalid"),
    (TopicNameInvalid, 0x90, "Topic Name invalid"),
    (PacketIdentifierInUse, 0x91, "Packet Identifier in use"),
    (
        PacketIdentifierNotFound,
        0x92,
        "Packet Identifier not found",
    ),
    (ReceiveMaximumExceeded, 0x93, "Receive Maximum exceeded"),
    (TopicAliasInvalid, 0x94, "Topic Alias invalid"),
    (PacketTooLarge, 0x95, "Packet too large"),
    (MessageRateTooHigh, 0x96, "Message rate too high"),
    (QuotaExceeded, 0x97, "Quota exceeded"),
    (AdministrativeAction, 0x98, "Administrative action"),
    (PayloadFormatInvalid, 0x99, "Payload format invalid"),
    (RetainNotSupported, 0x9A, "Retain not supported"),
    (QoSNotSupported, 0x9B, "QoS not supported"),
    (UseAnotherServer, 0x9C, "Use another server"),
    (ServerMoved, 0x9D, "Server moved"),
    (
        SharedSubscriptionsNotSupported,
        0x9E,
        "Shared Subscriptions not supported",
    ),
    (ConnectionRateExceeded, 0x9F, "Connection rate exceeded"),
    (MaximumConnectTime, 0xA0, "Maximum connect time"),
    (
        SubscriptionIdentifiersNotSupported,
        0xA1,
        "Subscription Identifiers not supported",
    ),
    (
        WildcardSubscriptionsNotSupported,
        0xA2,
        "Wildcard Subscriptions not supported",
    ),
];

/// The reason codes CONNACK may carry [MQTT-3.2.2-8].
pub const CONNACK: &[ReasonCode] = &[
    Success,
    UnspecifiedError,
    MalformedPacket,
    ProtocolError,
    ImplementationSpecificError,
    UnsupportedProtocolVersion,
    ClientIdentifierNotValid,
    BadUserNameOrPassword,
    NotAuthorized,
    ServerUnavailable,
    ServerBusy,
    Banned,
    BadAuthenticationMethod,
    TopicNameInvalid,
    PacketTooLarge,
    QuotaExceeded,
    PayloadFormatInvalid,
    RetainNotSupported,
    QoSNotSupported,
    UseAnotherServer,
    ServerMoved,
    ConnectionRateExceeded,
];

/// The reason codes PUBACK and PUBREC may carry [MQTT-3.4.2-1] [MQTT-3.5.2-1].
pub const PUBACK: &[ReasonCode] = &[
    Success,
    NoMatchingSubscribers,
    UnspecifiedError,
    ImplementationSpecificError,
    NotAuthorized,
    TopicNameInvalid,
    PacketIdentifierInUse,
    QuotaExceeded,
    PayloadFormatInvalid,
];

/// The reason codes PUBREL and PUBCOMP may carry [MQTT-3.6.2-1] [MQTT-3.7.2-1].
pub const PUBREL: &[ReasonCode] = &[Success, PacketIdentifierNotFound];

/// The reason codes SUBACK may carry, one per topic filter [MQTT-3.9.3-2].
pub const SUBACK: &[ReasonCode] = &[
    GrantedQoS0,
    GrantedQoS1,
    GrantedQoS2,
    UnspecifiedError,
    ImplementationSpecificError,
    NotAuthorized,
    TopicFilterInvalid,
    PacketIdentifierInUse,
    QuotaExceeded,
    SharedSubscriptionsNotSupported,
    SubscriptionIdentifiersNotSupported,
    WildcardSubscriptionsNotSupported,
];

/// The reason codes UNSUBACK may carry, one per topic filter [MQTT-3.11.3-2].
pub const UNSUBACK: &[ReasonCode] = &[
    Success,
    NoSubscriptionExisted,
    UnspecifiedError,
    ImplementationSpecificError,
    NotAuthorized,
    TopicFilterInvalid,
    PacketIdentifierInUse,
];

/// The reason codes DISCONNECT may carry [MQTT-3.14.2-1].
pub const DISCONNECT: &[ReasonCode] = &[
    NormalDisconnection,
    DisconnectWithWillMessage,
    UnspecifiedError,
    MalformedPacket,
    ProtocolError,
    ImplementationSpecificError,
    NotAuthorized,
    ServerBusy,
    ServerShuttingDown,
    KeepAliveTimeout,
    SessionTakenOver,
    TopicFilterInvalid,
    TopicNameInvalid,
    ReceiveMaximumExceeded,
    TopicAliasInvalid,
    PacketTooLarge,
    MessageRateTooHigh,
    QuotaExceeded,
    AdministrativeAction,
    PayloadFormatInvalid,
    RetainNotSupported,
    QoSNotSupported,
    UseAnotherServer,
    ServerMoved,
    SharedSubscriptionsNotSupported,
    ConnectionRateExceeded,
    MaximumConnectTime,
    SubscriptionIdentifiersNotSupported,
    WildcardSubscriptionsNotSupported,
];

/// The reason codes AUTH may carry [MQTT-3.15.2-1].
pub const AUTH: &[ReasonCode] = &[Success, ContinueAuthentication, ReAuthenticate];

impl ReasonCode {
    /// Its byte on the wire (v5).
    pub fn value(self) -> u8 {
        TABLE
            .iter()
            .find(|(code, _, _)| *code == self)
            .map_or(0x80, |(_, byte, _)| *byte)
    }

    /// Its name as the specification writes it ("Packet too large"), e.g. for logs.
    pub fn name(self) -> &'static str {
        TABLE
            .iter()
            .find(|(code, _, _)| *code == self)
            .map_or("Unspecified error", |(_, _, name)| name)
    }

    /// Whether it reports a failure (byte 0x80 or above).
    pub fn is_error(self) -> bool {
        self.value() >= 0x80
    }

    /// The code of `byte` among `allowed` (one of this module's per-packet lists), `None` if
    /// that packet may not carry it.
    pub fn from_byte(byte: u8, allowed: &[ReasonCode]) -> Option<ReasonCode> {
        allowed.iter().copied().find(|code| code.value() == byte)
    }

    /// The 3.1.1 CONNACK return code for this reason (3.1.1, 3.2.2.3): 0 accepted, 1
    /// unacceptable protocol version, 2 identifier rejected, 3 server unavailable, 4 bad user
    /// name or password, 5 not authorized. v5 codes without a 3.1.1 twin map to the nearest:
    /// a server-side refusal (busy, banned by load, moved, quota, rate) to 3, Bad authentication
    /// method to 4, Banned to 5; the rest (packet errors, which 3.1.1 answers by closing without a
    /// CONNACK) have none.
    pub fn v311_connack_code(self) -> Option<u8> {
        Some(match self {
            Success => 0,
            UnsupportedProtocolVersion => 1,
            ClientIdentifierNotValid => 2,
            ServerUnavailable
            | ServerBusy
            | UseAnotherServer
            | ServerMoved
            | QuotaExceeded
            | ConnectionRateExceeded
            | UnspecifiedError
            | ImplementationSpecificError => 3,
            BadUserNameOrPassword | BadAuthenticationMethod => 4,
            NotAuthorized | Banned => 5,
            _ => return None,
        })
    }

    /// The reason of a 3.1.1 CONNACK return code; `None` for the reserved 6..=255.
    pub fn from_v311_connack_code(code: u8) -> Option<ReasonCode> {
        Some(match code {
            0 => Success,
            1 => UnsupportedProtocolVersion,
            2 => ClientIdentifierNotValid,
            3 => ServerUnavailable,
            4 => BadUserNameOrPassword,
            5 => NotAuthorized,
            _ => return None,
        })
    }

    /// The 3.1.1 SUBACK return code for this reason (3.1.1, 3.9.3): the granted QoS, or 0x80
    /// (Failure) for every v5 error code; `None` for codes SUBACK may not carry.
    pub fn v311_suback_code(self) -> Option<u8> {
        match self {
            GrantedQoS0 => Some(0),
            GrantedQoS1 => Some(1),
            GrantedQoS2 => Some(2),
            code if SUBACK.contains(&code) => Some(0x80),
            _ => None,
        }
    }

    /// The reason of a 3.1.1 SUBACK return code (0x80 is [`ReasonCode::UnspecifiedError`]);
    /// `None` for anything else, which 3.1.1 reserves.
    pub fn from_v311_suback_code(code: u8) -> Option<ReasonCode> {
        match code {
            0 => Some(GrantedQoS0),
            1 => Some(GrantedQoS1),
            2 => Some(GrantedQoS2),
            0x80 => Some(UnspecifiedError),
            _ => None,
        }
    }
}

impl std::fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (0x{:02X})", self.name(), self.value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_one_entry_and_bytes_are_distinct_except_zero() {
        for (i, (code, byte, _)) in TABLE.iter().enumerate() {
            assert_eq!(TABLE.iter().filter(|(c, _, _)| c == code).count(), 1);
            if *byte != 0 {
                assert!(
                    !TABLE[i + 1..].iter().any(|(_, b, _)| b == byte),
                    "{code:?}"
                );
            }
        }
    }

    #[test]
    fn zero_takes_its_name_from_the_packet() {
        assert_eq!(ReasonCode::from_byte(0, PUBACK), Some(Success));
        assert_eq!(
            ReasonCode::from_byte(0, DISCONNECT),
            Some(NormalDisconnection)
        );
        assert_eq!(ReasonCode::from_byte(0, SUBACK), Some(GrantedQoS0));
        assert_eq!(
            ReasonCode::from_byte(0x95, DISCONNECT),
            Some(PacketTooLarge)
        );
        // [MQTT-3.4.2-1]: PUBACK may not carry Granted QoS 1.
        assert_eq!(ReasonCode::from_byte(0x01, PUBACK), None);
    }

    #[test]
    fn v311_codes_map_both_ways() {
        for code in 0..=5 {
            let reason = ReasonCode::from_v311_connack_code(code).unwrap();
            assert_eq!(reason.v311_connack_code(), Some(code));
        }
        assert_eq!(ReasonCode::from_v311_connack_code(6), None);
        assert_eq!(NotAuthorized.v311_suback_code(), Some(0x80));
        assert_eq!(
            ReasonCode::from_v311_suback_code(0x80),
            Some(UnspecifiedError)
        );
        assert_eq!(ReasonCode::from_v311_suback_code(3), None);
        assert_eq!(PacketTooLarge.to_string(), "Packet too large (0x95)");
    }
}
