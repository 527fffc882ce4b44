//! Topic filters over channel names: `+` (one level) and `#` (any number of levels, the parent
//! included), as MQTT has them, matched against the topic-style name each channel maps back to
//! ([`super`]), so a filter sees `sensors/living room` whether its channel is plain or encoded,
//! and `+` never matches across an encoded `/` (the encoding keeps levels).
//!
//! A topic starting with `$` is matched only by a filter whose first level is a literal
//! ([MQTT-4.7.2-1]): `#` and `+/x` do not see `$SYS/x` (the channel `==24SYS/x`). An app's push
//! logs (`$app`, `$device`, local names starting with `$`) are matched by no filter at all:
//! their names are not topics.
//!
//! For indexing, a filter says the channel-name prefixes every channel it matches starts with
//! ([`TopicFilter::prefixes`]): the literal levels before its first wildcard as a plain name,
//! and `=` followed by those levels escaped, for encoded channels. Each is whole levels, so a
//! matching channel's first level is the prefix's first level ([`TopicFilter::index_keys`],
//! [`index_key`]).

use std::borrow::Cow;
use std::fmt;

use super::{decode_reason, encode, encode_levels, ENCODED_PREFIX};
use crate::error::{ErrorCode, HeraldError};
use crate::tenant::RESERVED;

/// A valid topic filter with at least one wildcard (or, made by [`TopicFilter::parse_any`],
/// none), ready to match channels.
#[derive(Clone, PartialEq, Eq)]
pub struct TopicFilter {
    filter: Box<str>,
    /// The prefix of plain channels (channels that are their own topic) that can match; `None`
    /// when the literal levels make every matching topic an encoded one (an empty level, `$`, a
    /// space...).
    plain_prefix: Option<Box<str>>,
    /// The prefix of encoded channels that can match: `=` and the escaped literal levels.
    encoded_prefix: Box<str>,
}

impl TopicFilter {
    /// Parses `filter`: not empty, no U+0000, `#` only as the whole last level, `+` only as a
    /// whole level, and at least one of them (a filter without wildcards names one channel).
    pub fn parse(filter: &str) -> Result<TopicFilter, HeraldError> {
        Self::parse_with(filter, true)
    }

    /// Parses `filter` as [`TopicFilter::parse`] does, but a filter without wildcards is
    /// accepted too: it matches the one topic it names (a shared subscription's filter may be
    /// a plain topic, and its group is matched like a wildcard filter).
    pub fn parse_any(filter: &str) -> Result<TopicFilter, HeraldError> {
        Self::parse_with(filter, false)
    }

    fn parse_with(filter: &str, wildcard_required: bool) -> Result<TopicFilter, HeraldError> {
        let refuse = |why: &str| {
            HeraldError::new(
                ErrorCode::ChannelInvalid,
                format!(
                    "invalid topic filter {:?}: {why}",
                    filter.chars().take(64).collect::<String>()
                ),
            )
        };
        if filter.is_empty() {
            return Err(refuse("it is empty"));
        }
        if filter.contains('\0') {
            return Err(refuse("it contains U+0000"));
        }
        let mut levels = filter.split('/').peekable();
        let mut wildcard = false;
        while let Some(level) = levels.next() {
            if level.contains('#') && (level != "#" || levels.peek().is_some()) {
                return Err(refuse("'#' must be the whole last level"));
            }
            if level.contains('+') && level != "+" {
                return Err(refuse("'+' must be a whole level"));
            }
            wildcard |= level == "#" || level == "+";
        }
        if !wildcard && wildcard_required {
            return Err(refuse("it has no wildcard ('+' or '#')"));
        }
        let literal: Vec<&str> = filter
            .split('/')
            .take_while(|level| *level != "+" && *level != "#")
            .collect();
        let (plain_prefix, encoded_prefix) = if literal.is_empty() {
            (Some("".into()), ENCODED_PREFIX.to_string().into())
        } else {
            let literal = literal.join("/");
            let plain = match encode(&literal) {
                Cow::Borrowed(plain) => Some(plain.into()),
                Cow::Owned(_) => None,
            };
            (plain, encode_levels(&literal).into())
        };
        Ok(TopicFilter {
            filter: filter.into(),
            plain_prefix,
            encoded_prefix,
        })
    }

    /// The filter as given.
    pub fn as_str(&self) -> &str {
        &self.filter
    }

    /// Whether the filter's first level is a wildcard (it then matches no `$` topic).
    fn starts_with_wildcard(&self) -> bool {
        self.filter.starts_with(['+', '#'])
    }

    /// Whether this filter matches topic-style name `topic`.
    pub fn matches_topic(&self, topic: &str) -> bool {
        if topic.starts_with('$') && self.starts_with_wildcard() {
            return false;
        }
        let mut filter_levels = self.filter.split('/');
        let mut topic_levels = topic.split('/');
        loop {
            match (filter_levels.next(), topic_levels.next()) {
                (Some("#"), _) => return true,
                (Some("+"), Some(_)) => {}
                (Some(f), Some(t)) if f == t => {}
                (None, None) => return true,
                _ => return false,
            }
        }
    }

    /// Whether this filter matches the channel whose name within its app is `local` (its
    /// public name: no `app~` scope): the topic the channel maps back to is matched. An app's
    /// push logs (names starting with `$`) match nothing.
    pub fn matches_local(&self, local: &str) -> bool {
        if local.starts_with(RESERVED) {
            return false;
        }
        if local.starts_with(ENCODED_PREFIX) {
            if !local.starts_with(&*self.encoded_prefix) {
                return false;
            }
            return decode_reason(local).is_ok_and(|topic| self.matches_topic(&topic));
        }
        match &self.plain_prefix {
            Some(prefix) if local.starts_with(&**prefix) => self.matches_topic(local),
            _ => false,
        }
    }

    /// The channel-name prefixes (within the app) of the channels this filter can match: the
    /// plain one (if the literal levels are a plain name) and the encoded one. Both are whole
    /// levels, so `a/+` gives `a` and `=a`: a prefix of `a/b`, and of `ab` too, which the match
    /// then refuses.
    pub fn prefixes(&self) -> impl Iterator<Item = &str> {
        self.plain_prefix
            .as_deref()
            .into_iter()
            .chain(std::iter::once(&*self.encoded_prefix))
    }

    /// The keys this filter is indexed under: the first level of each prefix (`None` for a
    /// filter starting with a wildcard, whose plain prefix is empty: it is looked at for every
    /// channel).
    pub fn index_keys(&self) -> impl Iterator<Item = Option<&str>> {
        let rooted = self.plain_prefix.as_deref() == Some("");
        let keys: [Option<Option<&str>>; 2] = if rooted {
            [Some(None), None]
        } else {
            [
                self.plain_prefix.as_deref().map(|p| Some(index_key(p))),
                Some(Some(index_key(&self.encoded_prefix))),
            ]
        };
        keys.into_iter().flatten()
    }
}

/// The key a channel (by its name within its app) is looked up under: its first level.
pub fn index_key(local: &str) -> &str {
    match local.bytes().position(|b| b == b'/') {
        Some(at) => &local[..at],
        None => local,
    }
}

impl fmt::Debug for TopicFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.filter, f)
    }
}

impl fmt::Display for TopicFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.filter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChannelName;

    fn filter(f: &str) -> TopicFilter {
        TopicFilter::parse(f).unwrap()
    }

    /// Whether `f` matches the channel `topic` maps to, through its channel name.
    fn sees(f: &str, topic: &str) -> bool {
        let channel = ChannelName::from_topic(topic).unwrap();
        filter(f).matches_local(channel.as_str())
    }

    #[test]
    fn plus_is_one_level_and_hash_any_number_including_the_parent() {
        assert!(sees("a/+/c", "a/b/c"));
        assert!(!sees("a/+/c", "a/b/d/c"));
        assert!(!sees("a/+/c", "a/c"));
        assert!(sees("a/#", "a"), "'#' matches the parent level");
        assert!(sees("a/#", "a/b/c"));
        assert!(!sees("a/#", "ab"));
        assert!(!sees("a/+", "ab/c"));
        assert!(sees("+", "news"));
        assert!(!sees("+", "a/b"));
        assert!(sees("#", "a/b/c"));
        assert!(sees("+/+", "a/b"));
        assert!(sees("a/+", "a/"), "'+' matches an empty level");
        assert!(sees("+/a", "/a"));
    }

    #[test]
    fn a_leading_wildcard_sees_no_dollar_topic() {
        for f in ["#", "+", "+/x", "+/+", "+/#"] {
            assert!(!sees(f, "$SYS/x"), "{f}");
            assert!(!sees(f, "$SYS"), "{f}");
        }
        assert!(sees("+/x", "a/x"));
        assert!(sees("$SYS/#", "$SYS/x"));
        assert!(sees("$SYS/+", "$SYS/x"));
        assert!(sees("$SYS/#", "$SYS"));
        assert!(sees("#", "a$b"), "only a leading '$' is excluded");
    }

    #[test]
    fn encoded_channels_are_matched_by_their_topic() {
        assert!(sees("sensors/+", "sensors/living room"));
        assert!(sees("sensors/+/temp", "sensors/living room/temp"));
        assert!(sees("+/ménu", "café/ménu"));
        assert!(sees("a/+/b", "a//b"));
        assert!(sees("#", "/a"));
        assert!(sees("/#", "/a"));
        assert!(sees("a b/#", "a b/c"));
        // '+' never crosses an encoded '/': `a/x y/z` has three levels.
        assert!(!sees("a/+", "a/x y/z"));
        assert!(sees("a/+/+", "a/x y/z"));
        // A channel whose name holds '=' escapes is not read as its text.
        assert!(!sees("=a/#", "a b/c"));
    }

    #[test]
    fn push_logs_match_nothing() {
        let f = filter("$device/#");
        assert!(!f.matches_local("$device"));
        assert!(!f.matches_local("$dev/phone-1"));
        assert!(!filter("$app/#").matches_local("$app"));
        assert!(!filter("+").matches_local("$app"));
    }

    #[test]
    fn invalid_filters_are_refused() {
        for bad in ["", "a/#/b", "a#", "a/b+", "+a", "a/b", "news", "a\0/#"] {
            assert!(TopicFilter::parse(bad).is_err(), "{bad:?}");
        }
        for ok in ["#", "+", "a/+/c", "/+", "+/", "a/#", "$SYS/#", "café/+"] {
            assert!(TopicFilter::parse(ok).is_ok(), "{ok:?}");
        }
    }

    #[test]
    fn prefixes_and_index_keys_are_whole_levels() {
        let f = filter("sensors/kitchen/+");
        assert_eq!(
            f.prefixes().collect::<Vec<_>>(),
            ["sensors/kitchen", "=sensors/kitchen"]
        );
        assert_eq!(
            f.index_keys().collect::<Vec<_>>(),
            [Some("sensors"), Some("=sensors")]
        );
        let spaced = filter("living room/#");
        assert_eq!(spaced.prefixes().collect::<Vec<_>>(), ["=living=20room"]);
        assert_eq!(
            spaced.index_keys().collect::<Vec<_>>(),
            [Some("=living=20room")]
        );
        assert_eq!(filter("#").index_keys().collect::<Vec<_>>(), [None]);
        assert_eq!(filter("+/a").index_keys().collect::<Vec<_>>(), [None]);
        assert_eq!(filter("/+").index_keys().collect::<Vec<_>>(), [Some("==")]);
        // Every channel a filter matches is found under one of its keys.
        for (f, topic) in [
            ("sensors/+", "sensors/living room"),
            ("sensors/#", "sensors"),
            ("/+", "/a"),
            ("a/+/b", "a//b"),
            ("$SYS/#", "$SYS/x"),
        ] {
            let channel = ChannelName::from_topic(topic).unwrap();
            let key = index_key(channel.as_str());
            assert!(
                filter(f).index_keys().any(|k| k == Some(key)),
                "{f} {topic} {key}"
            );
        }
    }
}
