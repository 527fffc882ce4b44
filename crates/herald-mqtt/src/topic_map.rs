//! MQTT topics ↔ Herald channels, and topic filters over channels (docs/design/mqtt.md,
//! "Topics are channel names" and "Wildcards").
//!
//! The encoding itself is core's ([`herald_core::name::topic`]): a topic that is a channel name
//! not beginning with `=` is that channel, any other topic is `=` and its escaped levels
//! (`$SYS/x` is `==24SYS/x`), so every channel is one topic and every topic whose channel fits in
//! 255 bytes is one channel. This module adds what MQTT needs around it:
//!
//! - [`topic_to_channel`]: a PUBLISH's (or a will's) topic name to the app's channel, refused
//!   with a [`TopicRefused`] the connection answers with 0x90 Topic Name invalid (PUBACK,
//!   PUBREC or DISCONNECT);
//! - [`channel_to_topic`]: the topic a channel's message is sent on, from the channel's public
//!   name (never the app scope `app~`); `None` only for a topic holding `+` or `#`, which MQTT
//!   forbids in topic names: core refuses both in every channel name, plain or encoded (no
//!   HTTP publisher can reach such a channel), so this is a guard that no channel trips;
//! - [`parse_filter`]: a SUBSCRIBE's topic filter (its `$share/{ShareName}/` prefix already
//!   stripped by the caller) as either the one channel an exact filter names or a
//!   [`WildcardFilter`] matched against the topic each channel maps back to, so `+` never
//!   matches across an encoded `/` and [MQTT-4.7.2-1]'s `$` exclusion holds (`#` does not see
//!   `$SYS/x` nor the channel `==24SYS/x`).
//!
//! Matching itself is the codec's [`crate::packet::topic::matches`]; nothing is matched twice.

use std::borrow::Cow;
use std::fmt;

use herald_core::name::topic;
use herald_core::tenant::AppId;
use herald_core::ChannelName;

use crate::packet::topic::matches;
use crate::packet::ReasonCode;

/// A topic (or exact filter) that has no channel: why, for the log and a v5 Reason String.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct TopicRefused {
    /// What is wrong, for a person (starts with `invalid topic name "..."`).
    pub reason: String,
}

impl TopicRefused {
    /// The reason code a PUBLISH to this topic is answered with (PUBACK, PUBREC, or a
    /// DISCONNECT for QoS 0): 0x90 Topic Name invalid.
    pub fn publish_reason_code(&self) -> ReasonCode {
        ReasonCode::TopicNameInvalid
    }

    /// The reason code a SUBSCRIBE of this filter gets in its SUBACK: 0x8F Topic Filter
    /// invalid.
    pub fn subscribe_reason_code(&self) -> ReasonCode {
        ReasonCode::TopicFilterInvalid
    }
}

/// The channel of `app` that topic name `topic` maps to. Refused when the topic is empty, holds
/// `+`, `#` or U+0000, or its channel name would be longer than 255 bytes.
pub fn topic_to_channel(app: &AppId, topic: &str) -> Result<ChannelName, TopicRefused> {
    if topic.contains(['+', '#']) {
        return Err(TopicRefused {
            reason: format!(
                "invalid topic name {:?}: a topic name may not hold the wildcards + or #",
                truncate(topic)
            ),
        });
    }
    ChannelName::from_topic(topic)
        .map(|name| app.channel(&name))
        .map_err(|e| TopicRefused { reason: e.message })
}

/// The topic name a message of `channel` is sent on: the channel's public name (without its
/// app scope), decoded when it begins with `=`. An app's push logs keep their public names
/// (`$device`, `$app`). `None` when the topic would hold `+` or `#`, which no MQTT topic name
/// may [MQTT-3.3.2-2]: a guard only, since core refuses both in every channel name (a plain
/// name has neither, an encoded one that decodes to them is not a channel name).
pub fn channel_to_topic(channel: &ChannelName) -> Option<Cow<'_, str>> {
    let topic = channel.topic();
    (!topic.contains(['+', '#'])).then_some(topic)
}

/// Whether `channel`'s topic matches topic filter `filter` (valid, `$share/` prefix stripped):
/// MQTT's matching on the topic the channel maps back to, with [MQTT-4.7.2-1] (a filter
/// starting with `+` or `#` matches no topic starting with `$`). The channel's app is not
/// looked at: filters are registered per app.
pub fn filter_matches_channel(filter: &str, channel: &ChannelName) -> bool {
    channel_to_topic(channel).is_some_and(|topic| matches(filter, &topic))
}

/// What a SUBSCRIBE's topic filter subscribes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterTarget {
    /// A filter without wildcards: the one channel (of the app) it names.
    Exact(ChannelName),
    /// A filter with `+` or `#`: matched against every channel of the app.
    Wildcard(WildcardFilter),
}

/// `filter` (a valid topic filter, its `$share/{ShareName}/` prefix stripped by the caller) of
/// `app`'s client: the channel it names when it has no wildcard, refused as
/// [`topic_to_channel`] refuses that topic (answer 0x8F in the SUBACK); otherwise a
/// [`WildcardFilter`].
pub fn parse_filter(app: &AppId, filter: &str) -> Result<FilterTarget, TopicRefused> {
    if filter.split('/').any(|level| level == "+" || level == "#") {
        Ok(FilterTarget::Wildcard(WildcardFilter::new(filter)))
    } else {
        topic_to_channel(app, filter).map(FilterTarget::Exact)
    }
}

/// A topic filter with wildcards, as the filter registry matches it against channels.
#[derive(Clone, PartialEq, Eq)]
pub struct WildcardFilter {
    filter: Box<str>,
    /// The channel-name prefix of plain channels that can match (see [`Self::channel_prefixes`]);
    /// `None` when the filter's literal levels make every matching topic an encoded one.
    plain_prefix: Option<Box<str>>,
    /// The channel-name prefix of encoded channels (`=` and the escaped literal levels).
    encoded_prefix: Box<str>,
}

impl WildcardFilter {
    /// `filter`, a valid topic filter without a `$share/` prefix. Any filter is accepted; one
    /// whose literal levels are longer than a channel name can be matches nothing.
    pub fn new(filter: &str) -> WildcardFilter {
        let literal: Vec<&str> = filter
            .split('/')
            .take_while(|level| *level != "+" && *level != "#")
            .collect();
        if literal.is_empty() {
            return WildcardFilter {
                filter: filter.into(),
                plain_prefix: Some("".into()),
                encoded_prefix: topic::ENCODED_PREFIX.to_string().into(),
            };
        }
        // The encoding keeps levels, so the encoded literal levels begin every encoded channel
        // whose topic begins with those levels; a plain channel is its own topic, so it begins
        // with the literal levels themselves, which must then be a plain name.
        let literal = literal.join("/");
        let plain_prefix = match topic::encode(&literal) {
            Cow::Borrowed(plain) => Some(plain.into()),
            Cow::Owned(_) => None,
        };
        WildcardFilter {
            filter: filter.into(),
            plain_prefix,
            encoded_prefix: topic::encode_levels(&literal).into(),
        }
    }

    /// The filter.
    pub fn as_str(&self) -> &str {
        &self.filter
    }

    /// Whether `channel`'s topic matches this filter (see [`filter_matches_channel`]).
    pub fn matches_channel(&self, channel: &ChannelName) -> bool {
        filter_matches_channel(&self.filter, channel)
    }

    /// The channel-name prefixes (of public names, within the app) every channel this filter
    /// matches starts with, for indexing: one for channels that are their own topic and one for
    /// encoded channels (`=` followed by the escaped literal levels), or only the encoded one
    /// when the literal levels cannot be a plain channel name's (an empty level, `$`, a space).
    /// A prefix is a string prefix, not a level boundary: `a/+` gives `a` and `=a`, which `ab`
    /// also starts with; the match decides.
    pub fn channel_prefixes(&self) -> impl Iterator<Item = &str> {
        self.plain_prefix
            .as_deref()
            .into_iter()
            .chain(std::iter::once(&*self.encoded_prefix))
    }
}

impl fmt::Debug for WildcardFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.filter, f)
    }
}

fn truncate(topic: &str) -> String {
    topic.chars().take(64).collect()
}

#[cfg(test)]
mod tests;
