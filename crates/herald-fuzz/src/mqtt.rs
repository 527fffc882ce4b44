//! `herald-mqtt`'s packet codec: a client's byte stream, split anywhere, decodes to the same
//! packets and the same refusal; waiting consumes nothing; every packet the decoder accepts
//! encodes (with `encoded_len` saying how many bytes) and decodes back to itself.

use herald_mqtt::packet::{BytesMut, DecodeError, Packet, ProtocolVersion};
use herald_mqtt::{decode, encode, encoded_len};

/// The packets decoded from `chunks` fed in turn to one buffer, and the error that stopped it.
fn read(
    mut version: Option<ProtocolVersion>,
    max: u32,
    chunks: &[&[u8]],
) -> (Vec<Packet>, Option<DecodeError>) {
    let mut buf = BytesMut::new();
    let mut packets = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            let before = buf.len();
            match decode(&mut buf, version, max) {
                Ok(Some(packet)) => {
                    assert!(buf.len() + 2 <= before, "a packet takes at least two bytes");
                    if let Packet::Connect(c) = &packet {
                        version = Some(c.protocol_version);
                    }
                    packets.push(packet);
                }
                Ok(None) => {
                    assert_eq!(buf.len(), before, "waiting for more consumed bytes");
                    break;
                }
                Err(e) => return (packets, Some(e)),
            }
        }
    }
    (packets, None)
}

/// MQTT packets: byte 0 picks the version the connection is in (before CONNECT, 3.1.1, 5.0)
/// and, with its high bit, a small Maximum Packet Size; byte 1 where the stream is split; the
/// rest is what the client sends.
pub fn mqtt_packets(data: &[u8]) {
    let [selector, split, stream @ ..] = data else {
        return;
    };
    let version = match selector & 0x03 {
        1 => Some(ProtocolVersion::V311),
        2 => Some(ProtocolVersion::V5),
        _ => None,
    };
    let max = if selector & 0x80 != 0 {
        2 + u32::from(selector & 0x7C) * 2
    } else {
        u32::MAX
    };
    let whole = read(version, max, &[stream]);
    let at = usize::from(*split) * stream.len() / 256;
    let (a, b) = stream.split_at(at);
    assert_eq!(
        read(version, max, &[a, b]),
        whole,
        "split at {at} changed what was read"
    );
    if stream.len() <= 512 {
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(
            read(version, max, &bytes),
            whole,
            "byte by byte changed what was read"
        );
    }
    let mut speaking = version;
    for packet in &whole.0 {
        let (encode_as, decode_as) = match packet {
            Packet::Connect(c) => (c.protocol_version, None),
            _ => {
                let v = speaking.expect("only a CONNECT decodes before CONNECT");
                (v, Some(v))
            }
        };
        speaking = Some(encode_as);
        let mut out = BytesMut::new();
        if let Err(e) = encode(packet, encode_as, &mut out) {
            panic!("a decoded packet does not encode ({e}): {packet:?}");
        }
        assert_eq!(
            encoded_len(packet, encode_as),
            out.len(),
            "encoded_len of {packet:?}"
        );
        let again = decode(&mut out, decode_as, u32::MAX);
        assert_eq!(
            again,
            Ok(Some(packet.clone())),
            "re-encoded packet decodes differently"
        );
        assert!(out.is_empty(), "bytes left after a re-encoded packet");
    }
}
