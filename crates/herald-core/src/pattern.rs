//! Channel patterns in client tokens (`"channels": ["news", "chat/*"]`): which channels a token
//! may subscribe to or publish to.
//!
//! Grammar: a pattern is matched segment by segment (`/` separates segments). `*` as a whole
//! segment matches exactly one segment; `**` as the last segment matches one or more segments;
//! `*` inside a segment matches any run of characters within that segment (`prices/EUR*`).
//! A lone `**` matches every channel. Anything else matches literally.

pub use herald_proto::token::check_pattern;

/// A channel pattern. Kept as the one string it was written as (one allocation per pattern, as
/// every connection carries its token's patterns) and matched segment by segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelPattern {
    pattern: Box<str>,
}

impl ChannelPattern {
    /// Compiles a pattern. Any string is a valid pattern.
    pub fn new(pattern: &str) -> Self {
        ChannelPattern {
            pattern: pattern.into(),
        }
    }

    /// Whether `channel` matches this pattern. Most channels a pattern is asked about do not
    /// match it (a webhook endpoint's `rooms/**` against every channel the node opens), so the
    /// literal text before the first `*` is compared first: a channel that does not start with
    /// it cannot match, and a pattern without `*` matches only itself.
    pub fn matches(&self, channel: &str) -> bool {
        if &*self.pattern == "**" {
            return true;
        }
        let literal = self.literal_prefix();
        if literal.len() == self.pattern.len() {
            return *self.pattern == *channel;
        }
        if !channel.starts_with(literal) {
            return false;
        }
        self.matches_by_segment(channel)
    }

    /// The text before the first `*` (the whole pattern when it has none): every channel the
    /// pattern matches starts with it.
    pub fn literal_prefix(&self) -> &str {
        match self.pattern.bytes().position(|b| b == b'*') {
            Some(at) => &self.pattern[..at],
            None => &self.pattern,
        }
    }

    /// [`ChannelPattern::matches`], segment by segment.
    fn matches_by_segment(&self, channel: &str) -> bool {
        let mut names = channel.split('/');
        let mut segments = self.pattern.split('/').peekable();
        while let Some(seg) = segments.next() {
            if seg == "**" && segments.peek().is_none() {
                return names.next().is_some();
            }
            match names.next() {
                Some(name) if segment_matches(seg, name) => {}
                _ => return false,
            }
        }
        names.next().is_none()
    }
}

/// Glob within one segment: `*` matches any run of characters.
fn segment_matches(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return pattern == name;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = parts.split_first().expect("split yields at least one part");
    let Some(mut remaining) = name.strip_prefix(first) else {
        return false;
    };
    let (last, middle) = rest.split_last().expect("pattern contains '*'");
    for part in middle {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

/// A list of patterns; a channel is allowed if any matches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatternSet(Patterns);

/// How a [`PatternSet`] keeps its patterns. The lone `**` (every channel: what an anonymous
/// client may subscribe to, and what many tokens grant) is kept without an allocation: every
/// connection carries its token's two sets while it is open, parked or not.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Patterns {
    /// `["**"]`.
    Every,
    /// Any other list, as written.
    Listed(Box<[ChannelPattern]>),
}

impl Default for Patterns {
    fn default() -> Self {
        Patterns::Listed(Box::default())
    }
}

/// The pattern [`Patterns::Every`] stands for.
const EVERY: &str = "**";

impl PatternSet {
    /// Compiles each pattern.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Self {
        if let [only] = patterns {
            if only.as_ref() == EVERY {
                return PatternSet::all();
            }
        }
        PatternSet(Patterns::Listed(
            patterns
                .iter()
                .map(|p| ChannelPattern::new(p.as_ref()))
                .collect(),
        ))
    }

    /// A set that matches every channel (`["**"]`).
    pub fn all() -> Self {
        PatternSet(Patterns::Every)
    }

    /// Whether any pattern matches.
    pub fn allows(&self, channel: &str) -> bool {
        match &self.0 {
            Patterns::Every => true,
            Patterns::Listed(listed) => listed.iter().any(|p| p.matches(channel)),
        }
    }

    /// The patterns as written.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        let (every, listed) = self.parts();
        every.into_iter().chain(listed.iter().map(|p| &*p.pattern))
    }

    /// Each pattern's [`ChannelPattern::literal_prefix`]: every channel the set allows starts
    /// with one of them.
    pub fn literal_prefixes(&self) -> impl Iterator<Item = &str> {
        let (every, listed) = self.parts();
        every
            .map(|_| "")
            .into_iter()
            .chain(listed.iter().map(ChannelPattern::literal_prefix))
    }

    /// `**` if the set is [`Patterns::Every`], and the listed patterns.
    fn parts(&self) -> (Option<&'static str>, &[ChannelPattern]) {
        match &self.0 {
            Patterns::Every => (Some(EVERY), &[]),
            Patterns::Listed(listed) => (None, listed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, c: &str) -> bool {
        ChannelPattern::new(p).matches(c)
    }

    #[test]
    fn literal_and_wildcards() {
        assert!(m("news", "news"));
        assert!(!m("news", "news/uk"));
        assert!(m("chat/*", "chat/room-42"));
        assert!(!m("chat/*", "chat/room-42/x"));
        assert!(!m("chat/*", "chat"));
        assert!(m("chat/**", "chat/a/b"));
        assert!(!m("chat/**", "chat"));
        assert!(m("**", "anything/at/all"));
        assert!(m("prices/EUR*", "prices/EURUSD"));
        assert!(!m("prices/EUR*", "prices/USDEUR"));
        assert!(m("a*c*e", "abcde"));
        assert!(!m("a*c*e", "abcd"));
        assert!(m("*-room", "x-room"));
        assert!(!m("ab*ba", "aba"));
    }

    proptest::proptest! {
        /// The literal-prefix shortcut never changes an answer: patterns and channels over a
        /// small alphabet (so that they often share prefixes) agree with the segment walk.
        #[test]
        fn the_prefix_shortcut_agrees_with_the_segment_walk(
            pattern in "[ab/*]{0,8}",
            channel in "[ab/]{1,8}",
        ) {
            let compiled = ChannelPattern::new(&pattern);
            proptest::prop_assert_eq!(
                compiled.matches(&channel),
                compiled.matches_by_segment(&channel),
                "{} against {}", pattern, channel
            );
        }
    }

    #[test]
    fn set_allows_any() {
        let s = PatternSet::new(&["news", "chat/*"]);
        assert!(s.allows("news"));
        assert!(s.allows("chat/1"));
        assert!(!s.allows("other"));
        assert!(!PatternSet::default().allows("news"));
    }

    #[test]
    fn a_lone_double_star_is_the_set_of_every_channel_as_written() {
        let every = PatternSet::new(&["**"]);
        assert_eq!(every, PatternSet::all());
        assert!(every.allows("news"));
        assert!(every.allows("chat/room-42/x"));
        assert_eq!(every.patterns().collect::<Vec<_>>(), ["**"]);
        assert_eq!(every.literal_prefixes().collect::<Vec<_>>(), [""]);
        assert_eq!(
            every.literal_prefixes().collect::<Vec<_>>(),
            [ChannelPattern::new("**").literal_prefix()]
        );
        // `**` among others is kept as written.
        let listed = PatternSet::new(&["news", "**"]);
        assert!(listed.allows("anything/at/all"));
        assert_eq!(listed.patterns().collect::<Vec<_>>(), ["news", "**"]);
        assert_eq!(listed.literal_prefixes().collect::<Vec<_>>(), ["news", ""]);
        assert_ne!(listed, every);
        assert_eq!(PatternSet::default().patterns().count(), 0);
        assert_eq!(PatternSet::new::<&str>(&[]), PatternSet::default());
    }
}
