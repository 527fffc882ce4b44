//! Property tests: every packet type of both versions survives `decode(encode(p)) == p` (with
//! `encoded_len` equal to what `encode` wrote), and arbitrary or mutated bytes never panic,
//! never consume past the buffer, and whatever they decode to encodes and decodes to itself.

mod strategies;

use bytes::BytesMut;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use super::*;
use strategies::{packet, to_v311};

/// The version to decode `packet` with: none for a CONNECT, `version` for the rest.
fn decoding_version(packet: &Packet, version: ProtocolVersion) -> Option<ProtocolVersion> {
    match packet {
        Packet::Connect(_) => None,
        _ => Some(version),
    }
}

fn round_trip(packet: &Packet, version: ProtocolVersion) -> Result<(), TestCaseError> {
    let mut out = BytesMut::new();
    encode(packet, version, &mut out).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(encoded_len(packet, version), out.len());
    let decoded = decode(&mut out, decoding_version(packet, version), u32::MAX);
    prop_assert_eq!(decoded, Ok(Some(packet.clone())));
    prop_assert!(out.is_empty(), "the whole packet is consumed");
    Ok(())
}

/// Decodes packets from `bytes` until it needs more or refuses, checking what must hold.
fn decode_stream(
    bytes: &[u8],
    mut version: Option<ProtocolVersion>,
    max: u32,
) -> Result<(), TestCaseError> {
    let mut buf = BytesMut::from(bytes);
    loop {
        let before = buf.len();
        match decode(&mut buf, version, max) {
            Ok(Some(packet)) => {
                prop_assert!(buf.len() < before, "a packet consumes bytes");
                let speaking = match &packet {
                    Packet::Connect(c) => c.protocol_version,
                    _ => version.expect("only a CONNECT decodes before CONNECT"),
                };
                round_trip(&packet, speaking)?;
                version = Some(speaking);
            }
            Ok(None) => {
                prop_assert_eq!(buf.len(), before, "waiting consumes nothing");
                return Ok(());
            }
            Err(_) => return Ok(()),
        }
    }
}

fn any_version() -> impl Strategy<Value = Option<ProtocolVersion>> {
    select(vec![
        None,
        Some(ProtocolVersion::V311),
        Some(ProtocolVersion::V5),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn v5_packets_round_trip(packet in packet()) {
        round_trip(&packet, ProtocolVersion::V5)?;
    }

    #[test]
    fn v311_packets_round_trip(packet in packet()) {
        if let Some(packet) = to_v311(packet) {
            round_trip(&packet, ProtocolVersion::V311)?;
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in vec(any::<u8>(), 0..300),
        version in any_version(),
        max in prop_oneof![Just(u32::MAX), 0..300u32],
    ) {
        decode_stream(&bytes, version, max)?;
    }

    #[test]
    fn mutated_packets_never_panic(
        packet in packet(),
        v311 in any::<bool>(),
        edits in vec((any::<usize>(), any::<u8>()), 1..4),
        cut in any::<usize>(),
    ) {
        let (packet, version) = match (v311, to_v311(packet.clone())) {
            (true, Some(p)) => (p, ProtocolVersion::V311),
            _ => (packet, ProtocolVersion::V5),
        };
        let mut out = BytesMut::new();
        encode(&packet, version, &mut out).unwrap();
        let mut bytes = out.to_vec();
        for (at, byte) in edits {
            let at = at % bytes.len();
            bytes[at] = byte;
        }
        bytes.truncate(1 + cut % bytes.len());
        decode_stream(&bytes, decoding_version(&packet, version), u32::MAX)?;
    }
}
