//! A presence change as the scripts publish it on its channel's Redis channel (next to the
//! channel's message batches, which start with the codec's version byte, 1):
//!
//! ```text
//! p VERSION \n j LEN:USER DATA     a join (VERSION in decimal, LEN the user's bytes)
//! p VERSION \n l LEN:USER          a leave
//! ```

use std::sync::Arc;

use herald_core::presence::MemberChange;

/// The first byte of a presence change.
pub(crate) const MARK: u8 = b'p';

/// The change's version and the change; `None` if `payload` is not one.
pub(crate) fn decode(payload: &[u8]) -> Option<(u64, MemberChange)> {
    let rest = payload.strip_prefix(&[MARK])?;
    let newline = rest.iter().position(|b| *b == b'\n')?;
    let version: u64 = std::str::from_utf8(&rest[..newline]).ok()?.parse().ok()?;
    let rest = &rest[newline + 1..];
    let (&kind, rest) = rest.split_first()?;
    let colon = rest.iter().position(|b| *b == b':')?;
    let len: usize = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
    let rest = &rest[colon + 1..];
    let user = std::str::from_utf8(rest.get(..len)?).ok()?;
    let tail = &rest[len..];
    let change = match kind {
        b'j' => MemberChange::Added {
            user: user.into(),
            data: Arc::from(std::str::from_utf8(tail).ok()?),
        },
        b'l' if tail.is_empty() => MemberChange::Removed { user: user.into() },
        _ => return None,
    };
    Some((version, change))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_read_back_whatever_the_user_holds() {
        assert_eq!(
            decode("p42\nj6:a:b\né{\"x\":1}".as_bytes()),
            Some((
                42,
                MemberChange::Added {
                    user: "a:b\né".into(),
                    data: Arc::from("{\"x\":1}"),
                }
            ))
        );
        assert_eq!(
            decode(b"p7\nl3:bob"),
            Some((7, MemberChange::Removed { user: "bob".into() }))
        );
        for bad in [
            &b"p7\nl3:bobx"[..],
            b"p\nl3:bob",
            b"p7\nx3:bob",
            b"p7\nl9:bob",
            b"\x01",
        ] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }
}
