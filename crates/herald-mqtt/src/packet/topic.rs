//! Topic names and topic filters (MQTT 5.0 4.7 and 4.8.2; 3.1.1 4.7): the validated types a
//! PUBLISH, a will, a SUBSCRIBE and an UNSUBSCRIBE carry, shared subscriptions
//! (`$share/{ShareName}/{filter}`), and [`matches()`], which says whether a filter matches a name.
//!
//! Every valid name is accepted as is: empty levels, a leading or trailing `/`, spaces, a
//! leading `$`. Both are UTF-8 strings without U+0000 ([`super::strings`]) of at most 65,535
//! bytes [MQTT-4.7.3-3].

use std::fmt;

use super::strings;

/// Why a string is not a valid topic name or topic filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// A filter (or a will's or response topic) must be at least one character [MQTT-4.7.3-1].
    #[error("a topic filter must be at least one character long [MQTT-4.7.3-1]")]
    Empty,
    /// A topic name holds `+` or `#` [MQTT-3.3.2-2] [MQTT-4.7.0-1].
    #[error("a topic name must not contain the wildcards + or # [MQTT-3.3.2-2]")]
    WildcardInName,
    /// `#` is not alone in the last level [MQTT-4.7.1-1].
    #[error("# must be the last character, alone in its level [MQTT-4.7.1-1]")]
    MisplacedMultiLevelWildcard,
    /// `+` is not alone in its level [MQTT-4.7.1-2].
    #[error("+ must occupy an entire level [MQTT-4.7.1-2]")]
    MisplacedSingleLevelWildcard,
    /// `$share/` followed by an empty ShareName or one holding `+` or `#` [MQTT-4.8.2-1].
    #[error("a ShareName must be at least one character without / + or # [MQTT-4.8.2-1]")]
    InvalidShareName,
    /// `$share/{ShareName}` not followed by `/` and a topic filter [MQTT-4.8.2-2].
    #[error("a shared subscription needs /{{filter}} after its ShareName [MQTT-4.8.2-2]")]
    MissingSharedFilter,
    /// U+0000 [MQTT-4.7.3-2].
    #[error("a topic must not contain U+0000 [MQTT-4.7.3-2]")]
    Nul,
    /// More than 65,535 bytes [MQTT-4.7.3-3].
    #[error("a topic must not be longer than 65,535 bytes [MQTT-4.7.3-3]")]
    TooLong,
}

fn check_string(text: &str) -> Result<(), TopicError> {
    if text.contains('\0') {
        return Err(TopicError::Nul);
    }
    if text.len() > strings::MAX_LEN {
        return Err(TopicError::TooLong);
    }
    Ok(())
}

/// A topic name: where a PUBLISH goes. No wildcards.
///
/// It may be empty, which only a v5 PUBLISH carrying a Topic Alias may send [MQTT-3.3.2-8]
/// ([`super::decode()`] refuses it elsewhere); [`TopicName::new_non_empty`] refuses it for
/// callers that know they need a real name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TopicName(String);

impl TopicName {
    /// `name` if it is a valid topic name (possibly empty).
    pub fn new(name: impl Into<String>) -> Result<TopicName, TopicError> {
        let name = name.into();
        check_string(&name)?;
        if name.contains(['+', '#']) {
            return Err(TopicError::WildcardInName);
        }
        Ok(TopicName(name))
    }

    /// `name` if it is a valid, non-empty topic name [MQTT-4.7.3-1].
    pub fn new_non_empty(name: impl Into<String>) -> Result<TopicName, TopicError> {
        let name = TopicName::new(name)?;
        if name.is_empty() {
            return Err(TopicError::Empty);
        }
        Ok(name)
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it is the empty name (a v5 PUBLISH using a Topic Alias).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The name, as a `String`.
    pub fn into_string(self) -> String {
        self.0
    }
}

/// A topic filter: what a SUBSCRIBE or UNSUBSCRIBE names, with `+` and `#` wildcards, possibly
/// a shared subscription `$share/{ShareName}/{filter}`.
///
/// Herald reads `$share/` as a shared subscription under 3.1.1 too (as other brokers do); a
/// `$share/` filter that breaks the ShareName rules is refused in both versions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicFilter(String);

/// A shared subscription's parts (MQTT 5.0 4.8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedFilter<'a> {
    /// The ShareName: the group whose members take turns receiving each message.
    pub share_name: &'a str,
    /// The topic filter after the ShareName, which messages are matched against.
    pub filter: &'a str,
}

const SHARE_PREFIX: &str = "$share/";

impl TopicFilter {
    /// `filter` if it is a valid topic filter.
    pub fn new(filter: impl Into<String>) -> Result<TopicFilter, TopicError> {
        let filter = filter.into();
        check_string(&filter)?;
        let plain = match filter.strip_prefix(SHARE_PREFIX) {
            Some(rest) => {
                let (share_name, inner) = rest
                    .split_once('/')
                    .ok_or(TopicError::MissingSharedFilter)?;
                if share_name.is_empty() || share_name.contains(['+', '#']) {
                    return Err(TopicError::InvalidShareName);
                }
                if inner.is_empty() {
                    return Err(TopicError::MissingSharedFilter);
                }
                inner
            }
            None => &filter,
        };
        check_plain_filter(plain)?;
        Ok(TopicFilter(filter))
    }

    /// The filter as sent (with its `$share/{ShareName}/` prefix if shared).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The filter, as a `String`.
    pub fn into_string(self) -> String {
        self.0
    }

    /// Its parts if it is a shared subscription.
    pub fn shared(&self) -> Option<SharedFilter<'_>> {
        let rest = self.0.strip_prefix(SHARE_PREFIX)?;
        let (share_name, filter) = rest.split_once('/')?;
        Some(SharedFilter { share_name, filter })
    }

    /// The filter messages are matched against: the part after the ShareName if shared,
    /// otherwise all of it.
    pub fn match_filter(&self) -> &str {
        self.shared().map_or(&self.0, |s| s.filter)
    }

    /// Whether it holds a `+` or `#` level (for Wildcard Subscription Available).
    pub fn has_wildcards(&self) -> bool {
        self.match_filter()
            .split('/')
            .any(|level| level == "+" || level == "#")
    }

    /// Whether it matches `topic` (see [`matches()`]).
    pub fn matches(&self, topic: &str) -> bool {
        matches(self.match_filter(), topic)
    }
}

/// Checks the wildcard rules of a filter without its `$share/` prefix.
fn check_plain_filter(filter: &str) -> Result<(), TopicError> {
    if filter.is_empty() {
        return Err(TopicError::Empty);
    }
    let mut levels = filter.split('/').peekable();
    while let Some(level) = levels.next() {
        if level.contains('#') && (level != "#" || levels.peek().is_some()) {
            return Err(TopicError::MisplacedMultiLevelWildcard);
        }
        if level.contains('+') && level != "+" {
            return Err(TopicError::MisplacedSingleLevelWildcard);
        }
    }
    Ok(())
}

/// Whether topic filter `filter` (valid, without a `$share/` prefix) matches topic name
/// `topic`: levels compare exactly, `+` matches any one level (an empty one too), `#` any
/// number of levels including none, so `sport/#` matches `sport` (MQTT 5.0 4.7.1). A filter
/// starting with a wildcard does not match a topic starting with `$` [MQTT-4.7.2-1], so `#`
/// does not see `$SYS/...`.
pub fn matches(filter: &str, topic: &str) -> bool {
    if topic.starts_with('$') && filter.starts_with(['+', '#']) {
        return false;
    }
    let mut filter_levels = filter.split('/');
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

impl fmt::Display for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for TopicFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for TopicName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for TopicFilter {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_take_anything_but_wildcards_mqtt_3_3_2_2() {
        for ok in [
            "a",
            "/",
            "a//b",
            "/finance",
            " spaced out ",
            "$SYS/x",
            "é€😀",
            "",
        ] {
            assert!(TopicName::new(ok).is_ok(), "{ok:?}");
        }
        for bad in ["a/+", "#", "a+b", "sport/#"] {
            assert_eq!(
                TopicName::new(bad),
                Err(TopicError::WildcardInName),
                "{bad:?}"
            );
        }
        assert_eq!(TopicName::new("a\0"), Err(TopicError::Nul));
        assert_eq!(TopicName::new_non_empty(""), Err(TopicError::Empty));
        assert_eq!(TopicName::new("x".repeat(65_536)), Err(TopicError::TooLong));
    }

    #[test]
    fn multi_level_wildcard_only_last_and_alone_mqtt_4_7_1_1() {
        for ok in ["#", "sport/#", "sport/tennis/#", "/#", "+/#"] {
            assert!(TopicFilter::new(ok).is_ok(), "{ok:?}");
        }
        for bad in [
            "sport/tennis#",
            "sport/tennis/#/ranking",
            "#/",
            "##",
            "a/#b",
        ] {
            assert_eq!(
                TopicFilter::new(bad),
                Err(TopicError::MisplacedMultiLevelWildcard),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn single_level_wildcard_alone_in_its_level_mqtt_4_7_1_2() {
        for ok in ["+", "+/tennis/#", "sport/+/player1", "/+", "+/+", "a/+/"] {
            assert!(TopicFilter::new(ok).is_ok(), "{ok:?}");
        }
        for bad in ["sport+", "a/b+/c", "++"] {
            assert_eq!(
                TopicFilter::new(bad),
                Err(TopicError::MisplacedSingleLevelWildcard),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn filters_are_at_least_one_character_mqtt_4_7_3_1() {
        assert_eq!(TopicFilter::new(""), Err(TopicError::Empty));
    }

    #[test]
    fn shared_subscriptions_mqtt_4_8_2_1_and_2() {
        let f = TopicFilter::new("$share/group/sport/+").unwrap();
        assert_eq!(
            f.shared(),
            Some(SharedFilter {
                share_name: "group",
                filter: "sport/+"
            })
        );
        assert!(f.matches("sport/tennis"));
        assert!(f.has_wildcards());
        assert_eq!(
            TopicFilter::new("$share//a"),
            Err(TopicError::InvalidShareName)
        );
        assert_eq!(
            TopicFilter::new("$share/g+/a"),
            Err(TopicError::InvalidShareName)
        );
        assert_eq!(
            TopicFilter::new("$share/#/a"),
            Err(TopicError::InvalidShareName)
        );
        assert_eq!(
            TopicFilter::new("$share/g"),
            Err(TopicError::MissingSharedFilter)
        );
        assert_eq!(
            TopicFilter::new("$share/g/"),
            Err(TopicError::MissingSharedFilter)
        );
        assert_eq!(
            TopicFilter::new("$share/g/a#"),
            Err(TopicError::MisplacedMultiLevelWildcard)
        );
        // Not the prefix: ordinary filters.
        assert_eq!(TopicFilter::new("$share").unwrap().shared(), None);
        assert_eq!(TopicFilter::new("$sharex/a/b").unwrap().shared(), None);
    }

    #[test]
    fn matching_follows_the_specifications_examples() {
        // MQTT 5.0 4.7.1.2 and 4.7.1.3.
        assert!(matches("sport/tennis/player1/#", "sport/tennis/player1"));
        assert!(matches(
            "sport/tennis/player1/#",
            "sport/tennis/player1/ranking"
        ));
        assert!(matches(
            "sport/tennis/player1/#",
            "sport/tennis/player1/score/wimbledon"
        ));
        assert!(matches("sport/#", "sport"));
        assert!(matches("sport/tennis/+", "sport/tennis/player1"));
        assert!(!matches("sport/tennis/+", "sport/tennis/player1/ranking"));
        assert!(!matches("sport/+", "sport"));
        assert!(matches("sport/+", "sport/"));
        assert!(matches("+/+", "/finance"));
        assert!(matches("/+", "/finance"));
        assert!(!matches("+", "/finance"));
        assert!(matches("#", "a/b/c"));
        assert!(!matches("a/b", "a/b/c"));
        assert!(!matches("a/b/c", "a/b"));
        assert!(matches("a//b", "a//b"));
    }

    #[test]
    fn leading_wildcards_do_not_match_dollar_topics_mqtt_4_7_2_1() {
        assert!(!matches("#", "$SYS/broker/clients"));
        assert!(!matches("+/monitor/Clients", "$SYS/monitor/Clients"));
        assert!(matches("$SYS/#", "$SYS/monitor/Clients"));
        assert!(matches("$SYS/monitor/+", "$SYS/monitor/Clients"));
        assert!(matches("a/#", "a/$b"));
    }
}
