//! What `~text~` holds for a Herald message: a JSON string's contents as they are (Meteor
//! controllers send text, which Herald stores as a JSON string), any other JSON value as compact
//! JSON text (whitespace outside strings removed, key order kept). Encoded once per message and
//! shared by every Meteor connection.

use bytes::Bytes;
use herald_core::message::FrameKind;
use herald_core::StoredMessage;

/// The message's `~text~`.
pub fn of(message: &StoredMessage) -> Bytes {
    message.frame(FrameKind::MeteorText, |m| encode(&m.data))
}

fn encode(data: &[u8]) -> Bytes {
    if data.first() == Some(&b'"') || data.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'"')
    {
        if let Ok(s) = serde_json::from_slice::<String>(data) {
            return Bytes::from(s);
        }
    }
    Bytes::from(compact(data))
}

/// Valid JSON text without the whitespace between tokens.
fn compact(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let mut in_string = false;
    let mut escaped = false;
    for &b in json {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
            out.push(b);
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            out.push(b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_unquoted_and_objects_compacted() {
        assert_eq!(&encode(br#""hello \"you\"""#)[..], br#"hello "you""#);
        assert_eq!(&encode(b" \"x\" ")[..], b"x");
        assert_eq!(
            &encode(b"{ \"b\": 1,\n \"a\": \"s p\\\" \" }")[..],
            br#"{"b":1,"a":"s p\" "}"#
        );
        assert_eq!(&encode(b"[1, 2]")[..], b"[1,2]");
        assert_eq!(&encode(b"42")[..], b"42");
    }
}
