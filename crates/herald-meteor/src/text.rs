//! What `~text~` holds for a Herald message: a JSON string's contents as they are (Meteor
//! controllers send text, which Herald stores as a JSON string), any other JSON value as compact
//! JSON text (whitespace outside strings removed, key order kept). Encoded once per message, in
//! the frame slot Meteor reserves at start ([`reserve_slot`]), and shared by every Meteor
//! connection. [`write_escaped`] then places it into a mode's template as the mode's
//! [`TextEscape`] says: inside a JavaScript string of an HTML page, or as it is.

use std::sync::LazyLock;

use bytes::Bytes;
use herald_core::message::FrameSlot;
use herald_core::StoredMessage;

use crate::conf::TextEscape;

/// Where a message keeps its `~text~`: one slot for the process, reserved once.
static TEXT_SLOT: LazyLock<FrameSlot> = LazyLock::new(|| FrameSlot::reserve("meteor text"));

/// Reserves the `~text~` slot in every message's frame cache (done when the Meteor transport
/// starts; the first message encoded would do it otherwise).
pub fn reserve_slot() {
    LazyLock::force(&TEXT_SLOT);
}

/// The message's `~text~`.
pub fn of(message: &StoredMessage) -> Bytes {
    message.frame(*TEXT_SLOT, |m| encode(&m.data))
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

/// Appends `text` to `out` escaped for `escape`.
pub fn write_escaped(escape: TextEscape, text: &[u8], out: &mut Vec<u8>) {
    match escape {
        TextEscape::None => out.extend_from_slice(text),
        TextEscape::JavaScript => write_js_string_body(text, out),
    }
}

/// The body of a JavaScript string literal (between its quotes, single or double) inside an HTML
/// `<script>` element that evaluates to `text`: backslash, both quotes, line terminators
/// (including U+2028 and U+2029), every other control character, and `<`, `>`, `&` (so no
/// `</script>` or `<!--` can end or change the script) are escaped. Every escape is also a JSON
/// escape, so the result is a valid JSON string body too. Other bytes, UTF-8 included, are kept.
fn write_js_string_body(text: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0xE2 if matches!(text.get(i + 1..i + 3), Some([0x80, 0xA8 | 0xA9])) => {
                let last = if text[i + 2] == 0xA8 { b'8' } else { b'9' };
                out.extend_from_slice(b"\\u202");
                out.push(last);
                i += 3;
                continue;
            }
            b'\'' | b'<' | b'>' | b'&' | 0x7F | 0..=0x1F => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xF)]);
            }
            _ => out.push(b),
        }
        i += 1;
    }
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

    #[test]
    fn text_is_encoded_once_in_meteors_own_slot() {
        let message = StoredMessage::new(
            herald_core::ChannelName::parse("news").unwrap(),
            herald_core::Epoch::new("e1"),
            7,
            None,
            0,
            Bytes::from_static(br#""hi""#),
        );
        let push = herald_core::frames::ws_message(&message);
        let text = of(&message);
        assert_eq!(&text[..], b"hi");
        assert_eq!(of(&message).as_ptr(), text.as_ptr(), "encoded once");
        assert_eq!(
            herald_core::frames::ws_message(&message).as_ptr(),
            push.as_ptr()
        );
        assert_eq!(
            herald_core::frames::message_entry(&message).len(),
            push.len() - 12
        );
    }

    fn js(text: &str) -> String {
        let mut out = Vec::new();
        write_escaped(TextEscape::JavaScript, text.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn javascript_escaping_keeps_the_script_and_the_string() {
        assert_eq!(
            js("a\"b'c\\d</script><!--\r\n\t\u{0}\u{7f}\u{2028}\u{2029}é€😀&"),
            "a\\\"b\\u0027c\\\\d\\u003C/script\\u003E\\u003C!--\\r\\n\\t\\u0000\\u007F\\u2028\\u2029é€😀\\u0026"
        );
        let mut out = Vec::new();
        write_escaped(TextEscape::None, b"a\"</script>", &mut out);
        assert_eq!(out, b"a\"</script>");
    }

    proptest::proptest! {
        #[test]
        fn javascript_escaping_is_a_json_string_of_the_same_text(text in "\\PC{0,60}|[\"'\\\\<>\u{2028}\u{2029}\r\n]{0,20}") {
            let body = js(&text);
            let breaks_out = ['<', '\n', '\r', '\u{2028}', '\u{2029}'];
            proptest::prop_assert!(!body.contains(breaks_out), "{}", body);
            let back: String = serde_json::from_str(&format!("\"{body}\"")).unwrap();
            proptest::prop_assert_eq!(back, text);
        }
    }
}
