//! Positions and their string forms: [`Epoch`] and [`Cursor`] (`(epoch, seq)`, the resume
//! position of every transport), the cursor strings of SSE (`id:` / `Last-Event-ID`) and
//! long-poll (`since=` / `cursor`), and the device inbox cursor string.
//!
//! A cursor string holds one position per subscribed channel, in the order the channels were
//! named, separated by commas; each position is `EPOCH:SEQ` (`:SEQ` or plain `SEQ` when the
//! epoch is unknown). Example for `?channel=a&channel=b`: `3f2a91c0:41,9bd0e2aa:7`.

use std::fmt;
use std::sync::Arc;

use crate::error::HeraldError;

/// A channel log's epoch: changes only if the channel's log was lost or reset, so a cursor from
/// another epoch cannot be resumed. Empty for a channel that has never had a message.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Epoch(Arc<str>);

impl Epoch {
    /// Wraps an epoch string.
    pub fn new(s: &str) -> Self {
        Epoch(Arc::from(s))
    }

    /// A fresh random epoch (8 lowercase hex digits).
    pub fn generate() -> Self {
        Epoch::new(&format!("{:08x}", rand::random::<u32>()))
    }

    /// The epoch as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// A position in a channel: the last message a client has seen. `seq == 0` means "before the
/// first message" and is valid in any epoch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cursor {
    /// Epoch the seq belongs to; may be empty when `seq == 0` or when the client does not know it.
    pub epoch: Epoch,
    /// Seq of the last message seen.
    pub seq: u64,
}

/// A device's inbox position as one string: `EPOCH:SEQ,EPOCH:SEQ`, the app's broadcast log
/// (`$app`) first, then the device's own log (`$device`).
pub fn encode_inbox(app: &Cursor, device: &Cursor) -> String {
    format!("{}:{},{}:{}", app.epoch, app.seq, device.epoch, device.seq)
}

/// Parses [`encode_inbox`]'s form into `(app, device)`. Lenient by contract: a missing or
/// unreadable position reads as "nothing acknowledged" in that log (empty epoch, seq 0).
pub fn decode_inbox(s: &str) -> (Cursor, Cursor) {
    let mut parts = s.split(',').map(|p| {
        let (epoch, seq) = p.rsplit_once(':').unwrap_or(("", p));
        Cursor {
            epoch: Epoch::new(epoch),
            seq: seq.parse().unwrap_or(0),
        }
    });
    let app = parts.next().unwrap_or_default();
    let device = parts.next().unwrap_or_default();
    (app, device)
}

/// Encodes positions as a cursor string.
pub fn encode<'a>(cursors: impl IntoIterator<Item = &'a Cursor>) -> String {
    let cursors = cursors.into_iter();
    let mut s = String::with_capacity(cursors.size_hint().0 * 16);
    for (i, c) in cursors.enumerate() {
        if i > 0 {
            s.push(',');
        }
        push_position(&mut s, c);
    }
    s
}

/// Appends one position's text, `EPOCH:SEQ`, to `out`.
fn push_position(out: &mut String, c: &Cursor) {
    out.push_str(c.epoch.as_str());
    out.push(':');
    out.push_str(itoa::Buffer::new().format(c.seq));
}

/// A cursor string kept up to date while positions move one at a time, as a stream writes a
/// batch of messages, each with the cursor after it. Moving a position rewrites that position's
/// text in place (and shifts what follows only when its length changes), so writing a message
/// to a stream of many channels does not format every channel's position again.
#[derive(Debug, Clone)]
pub struct CursorText {
    text: String,
    /// Where each position's text ends in `text` (at the comma after it, or the end).
    ends: Vec<usize>,
    /// The new text of the position being moved.
    scratch: String,
}

impl CursorText {
    /// The cursor string of `cursors` ([`encode`]'s text).
    pub fn new<'a>(cursors: impl ExactSizeIterator<Item = &'a Cursor>) -> CursorText {
        let mut text = String::with_capacity(cursors.len() * 16);
        let mut ends = Vec::with_capacity(cursors.len());
        for (i, c) in cursors.enumerate() {
            if i > 0 {
                text.push(',');
            }
            push_position(&mut text, c);
            ends.push(text.len());
        }
        CursorText {
            text,
            ends,
            scratch: String::new(),
        }
    }

    /// Moves position `i` to `cursor`. Panics if there is no position `i`.
    pub fn set(&mut self, i: usize, cursor: &Cursor) {
        let start = if i == 0 { 0 } else { self.ends[i - 1] + 1 };
        let end = self.ends[i];
        self.scratch.clear();
        push_position(&mut self.scratch, cursor);
        // In place when the length is the same (the same epoch, a seq with as many digits);
        // otherwise what follows shifts once and the later ends move with it.
        self.text.replace_range(start..end, &self.scratch);
        let (new, old) = (self.scratch.len(), end - start);
        if new != old {
            for e in &mut self.ends[i..] {
                *e = *e + new - old;
            }
        }
    }

    /// The cursor string.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Parses a cursor string for `channels` channels. A cursor with fewer positions than channels
/// leaves the rest unset (`None`); more positions than channels is an error.
pub fn decode(s: &str, channels: usize) -> Result<Vec<Option<Cursor>>, HeraldError> {
    let mut out = vec![None; channels];
    if s.trim().is_empty() {
        return Ok(out);
    }
    let parts: Vec<&str> = s.split(',').collect();
    if parts.len() > channels {
        return Err(HeraldError::bad_request(format!(
            "cursor {s:?} has {} positions but {channels} channel(s) were named",
            parts.len()
        )));
    }
    for (slot, part) in out.iter_mut().zip(parts) {
        let part = part.trim();
        let (epoch, seq) = part.rsplit_once(':').unwrap_or(("", part));
        let seq = seq.parse::<u64>().map_err(|_| {
            HeraldError::bad_request(format!(
                "invalid cursor position {part:?}: expected EPOCH:SEQ or SEQ"
            ))
        })?;
        if !epoch.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(HeraldError::bad_request(format!(
                "invalid epoch in cursor position {part:?}"
            )));
        }
        *slot = Some(Cursor {
            epoch: Epoch::new(epoch),
            seq,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn c(e: &str, s: u64) -> Cursor {
        Cursor {
            epoch: Epoch::new(e),
            seq: s,
        }
    }

    #[test]
    fn roundtrip_and_forms() {
        let cs = vec![c("3f2a", 41), c("", 0)];
        let s = encode(&cs);
        assert_eq!(s, "3f2a:41,:0");
        let back = decode(&s, 2).unwrap();
        assert_eq!(back, vec![Some(cs[0].clone()), Some(cs[1].clone())]);
        assert_eq!(decode("17", 1).unwrap(), vec![Some(c("", 17))]);
        assert_eq!(decode("5", 2).unwrap(), vec![Some(c("", 5)), None]);
        assert!(decode("1,2", 1).is_err());
        assert!(decode("x:y", 1).is_err());
        assert!(decode("a-b:1", 1).is_err());
    }

    #[test]
    fn a_cursor_text_moves_one_position_at_a_time() {
        let mut cs = vec![c("3f2a", 9), c("", 0), c("b1", 41)];
        let mut text = CursorText::new(cs.iter());
        assert_eq!(text.as_str(), "3f2a:9,:0,b1:41");
        // longer (a digit more, an epoch where there was none), the same length, shorter
        for (i, to) in [
            (0, c("3f2a", 10)),
            (1, c("9bd0", 1)),
            (2, c("b1", 42)),
            (0, c("", 7)),
        ] {
            text.set(i, &to);
            cs[i] = to;
            assert_eq!(text.as_str(), encode(&cs));
        }
        assert_eq!(text.as_str(), ":7,9bd0:1,b1:42");
        assert_eq!(CursorText::new([].iter()).as_str(), "");
    }

    proptest! {
        #[test]
        fn never_panics(s in ".{0,64}", n in 0usize..4) {
            let _ = decode(&s, n);
        }

        /// However positions move, the text is what encoding them afresh gives.
        #[test]
        fn a_cursor_text_is_always_the_encoding(
            start in proptest::collection::vec(("[a-z0-9]{0,9}", any::<u64>()), 1..12),
            moves in proptest::collection::vec((any::<usize>(), "[a-z0-9]{0,9}", any::<u64>()), 0..40),
        ) {
            let mut cs: Vec<Cursor> = start.iter().map(|(e, s)| c(e, *s)).collect();
            let mut text = CursorText::new(cs.iter());
            prop_assert_eq!(text.as_str(), encode(&cs));
            for (i, e, s) in moves {
                let i = i % cs.len();
                cs[i] = c(&e, s);
                text.set(i, &cs[i]);
                prop_assert_eq!(text.as_str(), encode(&cs));
            }
        }
    }
}
