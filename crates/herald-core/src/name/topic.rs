//! Topic-style names ↔ channel names: the lossless encoding that reserves a leading `=`.
//!
//! A *topic-style name* is any UTF-8 text without U+0000, `+` or `#` (the wildcards of topic
//! filters, which no topic contains) whose levels are separated by `/`,
//! as MQTT topics are: levels may be empty (`/a`, `a//b`) and hold any character (`$SYS`,
//! `café`, spaces). Such a name maps to exactly one channel name, and every channel name maps
//! back to one topic-style name:
//!
//! - a topic that is a channel name by itself and does not begin with `=` is that channel,
//!   unchanged (`sensors/kitchen/temp`);
//! - any other topic is `=` followed by its levels, kept and joined with `/`: an empty level is
//!   written `=`, and in every other level each byte outside `A-Z a-z 0-9 _ - : @` is written
//!   `=XX` (two upper-case hex digits). So `/a`, `a//b`, `$SYS/x` and `café/ménu` are the
//!   channels `==/a`, `=a/=/b`, `==24SYS/x` and `=caf=C3=A9/m=C3=A9nu`.
//!
//! The channel grammar ([`super`]) accepts a name beginning with `=` only when it is such an
//! encoding, written canonically (upper-case hex, no escape of a byte that needs none, never a
//! topic that is a channel name by itself), so the mapping is a bijection between channel names
//! and the topics whose encoding fits in [`MAX_CHANNEL_NAME_LEN`] bytes. Nothing here knows a
//! protocol beyond that: which topics a protocol may publish to is that protocol's rule, checked
//! by its crate.

use std::borrow::Cow;

pub mod filter;

use super::{validate_plain, ChannelName, MAX_CHANNEL_NAME_LEN};
use crate::error::{ErrorCode, HeraldError};

/// The first character of every channel name that encodes a topic.
pub const ENCODED_PREFIX: char = '=';

/// The channel-name text of `topic` (see the module doc): `topic` itself when it is a channel
/// name not beginning with `=`, its encoding otherwise. The text is not checked against the
/// length limit; [`ChannelName::from_topic`] does that.
pub fn encode(topic: &str) -> Cow<'_, str> {
    if is_plain(topic) {
        Cow::Borrowed(topic)
    } else {
        Cow::Owned(encode_levels(topic))
    }
}

/// `=` followed by the escaped levels of `topic`, even when `topic` is a channel name by
/// itself (whose channel is then `topic`, not this): the prefix every encoded channel whose
/// topic begins with these levels starts with, for indexing topic filters.
pub fn encode_levels(topic: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(topic.len() + 8);
    out.push(ENCODED_PREFIX);
    for (i, level) in topic.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if level.is_empty() {
            out.push(ENCODED_PREFIX);
            continue;
        }
        for b in level.bytes() {
            if is_unescaped_byte(b) {
                out.push(char::from(b));
            } else {
                out.push(ENCODED_PREFIX);
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0x0f)]));
            }
        }
    }
    out
}

/// The topic a channel name's text stands for: the name itself unless it begins with `=`, the
/// decoded topic otherwise. Fails (`channel_invalid`) for a name beginning with `=` that is not
/// a valid channel name, i.e. a canonical encoding of 1 to 255 bytes. A name not beginning with `=` is returned as it is, unchecked: parse
/// it with [`ChannelName::parse`] (which decodes as well) when it comes from outside.
pub fn decode(name: &str) -> Result<Cow<'_, str>, HeraldError> {
    let checked = match name.starts_with(ENCODED_PREFIX) {
        true => validate_plain(name).and_then(|()| decode_reason(name)),
        false => Ok(Cow::Borrowed(name)),
    };
    checked.map_err(|why| {
        HeraldError::new(
            ErrorCode::ChannelInvalid,
            format!("invalid channel name {:?}: {why}", super::truncate(name)),
        )
    })
}

impl ChannelName {
    /// The channel a topic-style name maps to (see the module doc). Refused (`channel_invalid`)
    /// when the topic is empty, contains U+0000, or its channel name would be longer than
    /// [`MAX_CHANNEL_NAME_LEN`] bytes. The name is not scoped to an app: see
    /// [`crate::tenant::AppId::channel`].
    pub fn from_topic(topic: &str) -> Result<ChannelName, HeraldError> {
        let refuse = |why: String| {
            HeraldError::new(
                ErrorCode::ChannelInvalid,
                format!("invalid topic name {:?}: {why}", super::truncate(topic)),
            )
        };
        if topic.is_empty() {
            return Err(refuse("it is empty".into()));
        }
        if topic.contains('\0') {
            return Err(refuse("it contains U+0000".into()));
        }
        if topic.contains(['+', '#']) {
            return Err(refuse(
                "it contains '+' or '#', the wildcards of topic filters".into(),
            ));
        }
        let name = encode(topic);
        if name.len() > MAX_CHANNEL_NAME_LEN {
            return Err(refuse(format!(
                "its channel name would be {} bytes, longer than {MAX_CHANNEL_NAME_LEN} (every \
                 byte outside A-Z a-z 0-9 _ - : @ takes 3)",
                name.len()
            )));
        }
        ChannelName::parse(&name).map_err(|e| refuse(e.message))
    }

    /// The topic-style name of this channel as its app sees it: [`ChannelName::public`],
    /// decoded when it begins with `=`. An app's push logs keep their public name (`$device`,
    /// `$app`).
    pub fn topic(&self) -> Cow<'_, str> {
        let public = self.public();
        // A parsed name beginning with `=` always decodes; a trusted one never begins with it.
        decode_reason(public).unwrap_or(Cow::Borrowed(public))
    }
}

/// Whether `topic` is a channel name by itself, so it maps to itself.
fn is_plain(topic: &str) -> bool {
    !topic.starts_with(ENCODED_PREFIX) && validate_plain(topic).is_ok()
}

/// The bytes a level keeps as they are in an encoded name.
fn is_unescaped_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':' | b'@')
}

/// Decodes `name` (see [`decode`]), saying in name.rs's words why an encoding is refused.
/// `name` is already known to be 1 to 255 bytes of channel-name characters with no empty
/// segment when the grammar calls this.
pub(super) fn decode_reason(name: &str) -> Result<Cow<'_, str>, &'static str> {
    let Some(encoded) = name.strip_prefix(ENCODED_PREFIX) else {
        return Ok(Cow::Borrowed(name));
    };
    let mut bytes = Vec::with_capacity(encoded.len());
    for (i, segment) in encoded.split('/').enumerate() {
        if i > 0 {
            bytes.push(b'/');
        }
        if segment == "=" {
            continue; // an empty level
        }
        if segment.is_empty() {
            return Err("a leading '=' (an encoded topic) must be followed by a level");
        }
        let mut rest = segment.as_bytes();
        while let Some((&b, after)) = rest.split_first() {
            if is_unescaped_byte(b) {
                bytes.push(b);
                rest = after;
            } else if b == b'=' {
                let byte = match after {
                    [hi, lo, ..] => hex_digit(*hi).zip(hex_digit(*lo)).map(|(h, l)| h << 4 | l),
                    _ => None,
                };
                let Some(byte) = byte else {
                    return Err(
                        "in an encoded topic, '=' starts an escape of two upper-case hex \
                                digits (or is a whole segment, an empty level)",
                    );
                };
                if is_unescaped_byte(byte) || byte == b'/' {
                    return Err(
                        "in an encoded topic, '=XX' may not escape A-Z a-z 0-9 _ - : @ \
                                or '/'",
                    );
                }
                bytes.push(byte);
                rest = &after[2..];
            } else {
                return Err(
                    "after a leading '=' (an encoded topic) a segment is '=' or \
                            A-Z a-z 0-9 _ - : @ and '=XX' escapes",
                );
            }
        }
    }
    let Ok(topic) = String::from_utf8(bytes) else {
        return Err("the '=XX' escapes of the encoded topic are not UTF-8 text");
    };
    if topic.is_empty() {
        return Err("the encoded topic is empty");
    }
    if topic.contains('\0') {
        return Err("the encoded topic contains U+0000");
    }
    if topic.contains(['+', '#']) {
        return Err("the encoded topic contains '+' or '#', the wildcards of topic filters");
    }
    if is_plain(&topic) {
        return Err(
            "the encoded topic is a channel name by itself: write it without the \
                    leading '=' and escapes",
        );
    }
    // The checks above make the encoding canonical; this keeps the bijection should they drift.
    if encode(&topic) != name {
        return Err("it is not the canonical encoding of its topic");
    }
    Ok(Cow::Owned(topic))
}

/// The value of an upper-case hex digit.
fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
