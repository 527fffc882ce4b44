//! Which channels a listener wants events about ([`ChannelInterest`]: subscriptions made and
//! ended, channels occupied and vacated), and the union over the listeners that the hub asks
//! before it builds such an event (`ChannelFilter`).
//!
//! A node opens and closes channels far more often than a webhook endpoint wants to hear of
//! them: an endpoint on `rooms/**` does not care about the thousand `user/...` channels a
//! subscribe storm opens. Each listener states the literal prefixes of the channels it may
//! want (full names as the hub keys them, app scope included); a channel none of them starts
//! with is not built into an event at all. A prefix is a superset: the listener still matches
//! its own patterns on what it is told.
//!
//! With a relay set (a cluster) every channel is told: the relay keeps each channel's nodes in
//! pairs of occupied and vacated, and a filter that changed between the two would leave its
//! records stale. Presence members, though about a channel, are told whatever the filter.

use super::Kinds;

/// The kinds the filter applies to: events about one channel that the hub emits.
pub(super) const ABOUT_A_CHANNEL: Kinds = Kinds::SUBSCRIPTIONS.union(Kinds::CHANNELS);

/// The channels a listener wants subscriptions made and ended, and channels occupied and
/// vacated, told about.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ChannelInterest {
    /// Every channel (what a listener wants until it says otherwise).
    #[default]
    All,
    /// The channels whose full name (as [`crate::ChannelName::as_str`] gives it, `app~name`
    /// for apps other than the default one) starts with one of these.
    Prefixes(Vec<String>),
}

/// The union of the interests of the listeners that want channel events: what the hub asks
/// before it builds one.
#[derive(Debug, Clone, Default)]
pub(super) enum ChannelFilter {
    /// Every channel.
    #[default]
    All,
    /// Channels starting with one of these (sorted, none a prefix of another).
    Prefixes(Box<[Box<str>]>),
}

impl ChannelFilter {
    /// The union of `interests`: every channel as soon as one of them wants every channel.
    pub(super) fn union<'a>(interests: impl IntoIterator<Item = &'a ChannelInterest>) -> Self {
        let mut prefixes: Vec<&str> = Vec::new();
        for interest in interests {
            match interest {
                ChannelInterest::All => return ChannelFilter::All,
                ChannelInterest::Prefixes(some) => {
                    prefixes.extend(some.iter().map(String::as_str));
                }
            }
        }
        prefixes.sort_unstable();
        prefixes.dedup();
        // A prefix that an earlier (shorter, sorted first) one starts with adds nothing.
        let mut kept: Vec<Box<str>> = Vec::with_capacity(prefixes.len());
        for prefix in prefixes {
            if prefix.is_empty() {
                return ChannelFilter::All;
            }
            if kept.last().is_some_and(|last| prefix.starts_with(&**last)) {
                continue;
            }
            kept.push(prefix.into());
        }
        ChannelFilter::Prefixes(kept.into_boxed_slice())
    }

    /// Whether an event about `channel` (its full name) may be wanted.
    #[inline]
    pub(super) fn admits(&self, channel: &str) -> bool {
        match self {
            ChannelFilter::All => true,
            ChannelFilter::Prefixes(prefixes) => prefixes
                .iter()
                .any(|prefix| channel.as_bytes().starts_with(prefix.as_bytes())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefixes(list: &[&str]) -> ChannelInterest {
        ChannelInterest::Prefixes(list.iter().map(|p| p.to_string()).collect())
    }

    #[test]
    fn one_listener_wanting_every_channel_makes_the_union_every_channel() {
        let union = ChannelFilter::union(&[prefixes(&["rooms/"]), ChannelInterest::All]);
        assert!(union.admits("anything"));
        let union = ChannelFilter::union(&[prefixes(&["rooms/", ""])]);
        assert!(union.admits("anything"), "an empty prefix is every channel");
    }

    #[test]
    fn the_union_admits_what_some_prefix_starts() {
        let union =
            ChannelFilter::union(&[prefixes(&["shop~rooms/", "news"]), prefixes(&["shop~"])]);
        for (channel, admitted) in [
            ("shop~rooms/1", true),
            ("shop~lobby", true),
            ("news", true),
            ("newsroom", true),
            ("rooms/1", false),
            ("shopx~rooms/1", false),
            ("other~news", false),
        ] {
            assert_eq!(union.admits(channel), admitted, "{channel}");
        }
        // "shop~rooms/" is inside "shop~": one prefix kept for both.
        let ChannelFilter::Prefixes(kept) = union else {
            panic!("prefixes expected");
        };
        assert_eq!(&*kept, &["news".into(), "shop~".into()] as &[Box<str>]);
    }

    #[test]
    fn no_prefix_admits_nothing() {
        let union = ChannelFilter::union(&[prefixes(&[])]);
        assert!(!union.admits("news"));
    }
}
