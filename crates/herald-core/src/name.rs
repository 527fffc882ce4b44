//! Channel names: the grammar every transport and the API accept.
//!
//! A name is 1 to 255 bytes of `A-Z a-z 0-9` and `_ - . : @ = /`; `/` separates segments and a
//! segment may not be empty (no leading, trailing or doubled `/`) nor a dot segment (`.`, `..`),
//! which a path-minded proxy, a log viewer or a URL would read as "here" or "up". Names are
//! case-sensitive.
//!
//! A leading `=` is reserved for encoded topics ([`topic`]): a name beginning with `=` is valid
//! only when it is the canonical encoding of a topic-style name (MQTT topics such as `/a` or
//! `$SYS/x` are the channels `==/a` and `==24SYS/x`), so every channel name is one topic and
//! every topic that fits is one channel name.

use std::fmt;
use std::sync::Arc;

use crate::error::{ErrorCode, HeraldError};

pub mod topic;

/// Longest channel name accepted, in bytes.
pub const MAX_CHANNEL_NAME_LEN: usize = 255;

/// A validated channel name. Cloning is cheap (reference-counted).
#[derive(Clone, Eq, PartialOrd, Ord)]
pub struct ChannelName(Arc<str>);

/// Two clones of one name are equal without reading their bytes: the hub and the bus keep
/// clones of the name the hub stored and look each other's maps up with them, and reading a
/// name's bytes after each hash probe (a cache miss per lookup) was a tenth of a cluster node's
/// CPU in a storm of new channels (docs/benchmarks/history.md, session 33). `Arc<str>`'s own
/// comparison reads the bytes even for one allocation (std compares pointers first only for
/// sized types).
impl PartialEq for ChannelName {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}

/// By the bytes, as [`PartialEq`] compares them (what a derive would hash).
impl std::hash::Hash for ChannelName {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl ChannelName {
    /// Validates `name` against the channel grammar.
    pub fn parse(name: &str) -> Result<Self, HeraldError> {
        validate(name).map_err(|why| {
            HeraldError::new(
                ErrorCode::ChannelInvalid,
                format!("invalid channel name {:?}: {why}", truncate(name)),
            )
        })?;
        Ok(ChannelName(Arc::from(name)))
    }

    /// The full name as the log and the hub key it, including the app scope of
    /// [`crate::tenant`] (`app~name`) for channels of apps other than the default one.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as the app's clients and publishers see it: without the app scope, and with
    /// a device's own inbox log shown as `$device`.
    pub fn public(&self) -> &str {
        crate::tenant::public_name(&self.0)
    }

    /// A name built by [`crate::tenant`] from already validated parts.
    pub(crate) fn from_trusted(name: String) -> Self {
        ChannelName(Arc::from(name))
    }
}

fn truncate(name: &str) -> String {
    name.chars().take(64).collect()
}

fn validate(name: &str) -> Result<(), &'static str> {
    validate_plain(name)?;
    if name.starts_with(topic::ENCODED_PREFIX) {
        topic::decode_reason(name)?;
    }
    Ok(())
}

/// The grammar without the reservation of a leading `=`.
fn validate_plain(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("it is empty");
    }
    if name.len() > MAX_CHANNEL_NAME_LEN {
        return Err("it is longer than 255 bytes");
    }
    if !name.bytes().all(is_name_byte) {
        return Err("only A-Z a-z 0-9 and _ - . : @ = / are allowed");
    }
    if name.split('/').any(str::is_empty) {
        return Err("a '/' may not start or end the name or follow another '/'");
    }
    if name.split('/').any(|s| s == "." || s == "..") {
        return Err("a segment may not be '.' or '..'");
    }
    Ok(())
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':' | b'@' | b'=' | b'/')
}

impl fmt::Display for ChannelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.public())
    }
}

impl fmt::Debug for ChannelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl AsRef<str> for ChannelName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl serde::Serialize for ChannelName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.public())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_are_equal_by_their_bytes_whether_or_not_they_share_an_allocation() {
        let news = ChannelName::parse("news/today").unwrap();
        let again = ChannelName::parse("news/today").unwrap();
        assert_eq!(news, news.clone());
        assert_eq!(news, again, "two allocations of one name");
        assert_ne!(news, ChannelName::parse("news/todax").unwrap());
        assert_ne!(news, ChannelName::parse("news").unwrap());
    }

    #[test]
    fn accepts_documented_examples() {
        for ok in [
            "news",
            "chat/room-42",
            "prices/EURUSD",
            "a:b@c=d.e_f",
            "x",
            "...",
            "a/.b",
            "v1.2/..x",
        ] {
            assert!(ChannelName::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_bad_names_with_reason() {
        for bad in [
            "", "/news", "news/", "a//b", "sp ace", "é", "a*b", "a?b", ".", "..", "a/../b",
            "a/./b", "../a", "a/..",
        ] {
            let err = ChannelName::parse(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::ChannelInvalid, "{bad}");
        }
        assert!(ChannelName::parse(&"a".repeat(256)).is_err());
        assert!(ChannelName::parse(&"a".repeat(255)).is_ok());
    }

    proptest! {
        #[test]
        fn never_panics_and_roundtrips(s in ".{0,300}") {
            if let Ok(n) = ChannelName::parse(&s) {
                prop_assert_eq!(n.as_str(), s.as_str());
            }
        }
    }
}
