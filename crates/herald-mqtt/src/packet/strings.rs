//! UTF-8 Encoded Strings and Binary Data (MQTT 5.0 1.5.4, 1.5.6; 3.1.1 1.5.3): a two-byte length
//! then that many bytes, so at most 65,535.
//!
//! A string must be well-formed UTF-8 [MQTT-1.5.4-1] (which excludes the encodings of the
//! surrogates U+D800..U+DFFF: Rust's UTF-8 check refuses them) and must not hold U+0000
//! [MQTT-1.5.4-2]; either is a Malformed Packet. A leading U+FEFF (byte order mark) is kept as
//! a character, never stripped [MQTT-1.5.4-3]. Control characters and noncharacters
//! (U+0001..U+001F, U+007F..U+009F, U+FFFE, ...) are accepted: the specification says a sender
//! SHOULD NOT send them and a receiver MAY treat them as malformed, and Herald does not, so that
//! every topic a client can publish to is reachable.

use super::encode::{EncodeError, Sink};

/// The longest string or binary value: its length is a two-byte integer.
pub const MAX_LEN: usize = 65_535;

/// `bytes` as a string if it is an MQTT UTF-8 Encoded String's content, or why not.
pub fn validate(bytes: &[u8]) -> Result<&str, &'static str> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| "a string is not well-formed UTF-8 [MQTT-1.5.4-1]")?;
    if text.contains('\0') {
        return Err("a string holds U+0000 [MQTT-1.5.4-2]");
    }
    Ok(text)
}

/// Writes a UTF-8 Encoded String; refuses one longer than 65,535 bytes or holding U+0000 (which
/// the peer would have to treat as malformed).
pub fn put_string<S: Sink>(out: &mut S, text: &str) -> Result<(), EncodeError> {
    if text.contains('\0') {
        return Err(EncodeError::Invalid("a string holds U+0000 [MQTT-1.5.4-2]"));
    }
    put_binary(out, text.as_bytes())
}

/// Writes Binary Data; refuses more than 65,535 bytes.
pub fn put_binary<S: Sink>(out: &mut S, bytes: &[u8]) -> Result<(), EncodeError> {
    let len = u16::try_from(bytes.len()).map_err(|_| EncodeError::StringTooLong(bytes.len()))?;
    out.put_u16(len);
    out.put_slice(bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn ill_formed_utf8_is_refused_mqtt_1_5_4_1() {
        assert!(validate(b"\xC3\x28").is_err());
        assert!(validate(b"\xFF").is_err());
        // An encoded surrogate (U+D800) is not well-formed UTF-8.
        assert!(validate(b"\xED\xA0\x80").is_err());
        // An overlong encoding of '/'.
        assert!(validate(b"\xC0\xAF").is_err());
    }

    #[test]
    fn u0000_is_refused_mqtt_1_5_4_2() {
        assert!(validate(b"a\0b").is_err());
        assert!(validate("a\u{0}".as_bytes()).is_err());
        let mut out = BytesMut::new();
        assert!(put_string(&mut out, "a\0").is_err());
    }

    #[test]
    fn a_byte_order_mark_is_kept_mqtt_1_5_4_3() {
        assert_eq!(validate(b"\xEF\xBB\xBFa").unwrap(), "\u{FEFF}a");
    }

    #[test]
    fn control_characters_and_noncharacters_are_accepted() {
        assert_eq!(
            validate("\u{1}\u{7F}\u{9F}\u{FFFF}".as_bytes())
                .unwrap()
                .chars()
                .count(),
            4
        );
    }

    #[test]
    fn the_example_string_encodes_as_in_the_specification() {
        // MQTT 5.0 figure 1-1: "A𪛔" is 0x00 0x05 0x41 0xF0 0xAA 0x9B 0x94.
        let mut out = BytesMut::new();
        put_string(&mut out, "A\u{2A6D4}").unwrap();
        assert_eq!(&out[..], &[0x00, 0x05, 0x41, 0xF0, 0xAA, 0x9B, 0x94]);
        assert!(matches!(
            put_binary(&mut out, &[0; 65_536]),
            Err(EncodeError::StringTooLong(65_536))
        ));
    }
}
