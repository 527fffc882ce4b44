//! Variable Byte Integers (MQTT 5.0 1.5.5, 3.1.1 2.2.3): seven bits per byte, least significant
//! first, the high bit saying another byte follows; at most four bytes, so at most 268,435,455.
//!
//! Decoding accepts a non-minimal encoding (the minimum-bytes rule [MQTT-1.5.5-1] binds the
//! sender) but refuses a fourth byte with its continuation bit set: a fifth byte is a Malformed
//! Packet. Encoding always writes the minimum number of bytes.

use super::encode::Sink;

/// The largest value four bytes can hold.
pub const MAX: u32 = 268_435_455;

/// What the front of a buffer holds as a Variable Byte Integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Varint {
    /// The value and how many bytes it took.
    Value(u32, usize),
    /// The buffer ends before the last byte.
    Incomplete,
    /// A fourth byte with its continuation bit set.
    TooLong,
}

/// Reads a Variable Byte Integer from the front of `bytes`, without consuming anything.
pub fn read(bytes: &[u8]) -> Varint {
    let mut value: u32 = 0;
    for (i, byte) in bytes.iter().take(4).enumerate() {
        value |= u32::from(byte & 0x7F) << (7 * i);
        if byte & 0x80 == 0 {
            return Varint::Value(value, i + 1);
        }
    }
    if bytes.len() >= 4 {
        Varint::TooLong
    } else {
        Varint::Incomplete
    }
}

/// How many bytes `value` takes, encoded minimally.
pub fn len(value: u32) -> usize {
    match value {
        0..=127 => 1,
        128..=16_383 => 2,
        16_384..=2_097_151 => 3,
        _ => 4,
    }
}

/// Writes `value` (at most [`MAX`], which the caller checked) in the minimum number of bytes.
pub fn put<S: Sink>(out: &mut S, mut value: u32) {
    loop {
        let byte = (value & 0x7F) as u8;
        value >>= 7;
        if value == 0 {
            out.put_u8(byte);
            return;
        }
        out.put_u8(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    fn encoded(value: u32) -> Vec<u8> {
        let mut out = BytesMut::new();
        put(&mut out, value);
        out.to_vec()
    }

    #[test]
    fn the_specifications_boundaries_encode_and_decode() {
        // MQTT 5.0 table 1-1 / 3.1.1 table 2.4: the edges of one to four bytes.
        for (value, bytes) in [
            (0, &[0x00][..]),
            (127, &[0x7F]),
            (128, &[0x80, 0x01]),
            (16_383, &[0xFF, 0x7F]),
            (16_384, &[0x80, 0x80, 0x01]),
            (2_097_151, &[0xFF, 0xFF, 0x7F]),
            (2_097_152, &[0x80, 0x80, 0x80, 0x01]),
            (MAX, &[0xFF, 0xFF, 0xFF, 0x7F]),
        ] {
            assert_eq!(encoded(value), bytes, "{value}");
            assert_eq!(len(value), bytes.len());
            assert_eq!(read(bytes), Varint::Value(value, bytes.len()));
        }
    }

    #[test]
    fn a_fifth_byte_is_refused_and_a_short_buffer_waits() {
        // [MQTT-1.5.5-1]: at most four bytes.
        assert_eq!(read(&[0x80, 0x80, 0x80, 0x80, 0x01]), Varint::TooLong);
        assert_eq!(read(&[0xFF, 0xFF, 0xFF, 0xFF]), Varint::TooLong);
        assert_eq!(read(&[0x80, 0x80]), Varint::Incomplete);
        assert_eq!(read(&[]), Varint::Incomplete);
    }

    #[test]
    fn a_non_minimal_encoding_is_accepted_on_decode() {
        assert_eq!(read(&[0x80, 0x00]), Varint::Value(0, 2));
    }
}
