//! Topic aliases the server sets towards a v5 client (MQTT 5.0 3.3.2.3.4): when the client's
//! CONNECT says a Topic Alias Maximum above 0, the first PUBLISH of a topic goes with the topic
//! name and an alias, and the next ones of that topic with the alias and an empty topic name.
//!
//! **First come, kept**: the first `min(client's maximum, mqtt.max_topic_aliases_out)` distinct
//! topics sent get aliases 1, 2, ..., and an alias is never given to another topic for the life
//! of the connection. That is Mosquitto's policy (its `alias__add_l2r` adds aliases while it
//! has fewer than the client's maximum and never replaces one). Chosen over least recently used
//! because it costs nothing per message but one lookup (no recency to keep), an alias never
//! changes meaning (a client that mishandles a reassigned alias, or one reading a capture, is
//! never misled), and what a connection holds is bounded by the setting. The price: a
//! connection whose first topics are rare ones gains little. Aliases are per connection: a new
//! connection (a reconnect, a resumed session) starts with none [MQTT-3.3.2-7].

/// The aliases one connection has set towards its client.
#[derive(Debug, Default)]
pub(crate) struct TopicAliases {
    /// The most aliases it may set: the client's Topic Alias Maximum, at most the server's.
    max: u16,
    /// The topics that have an alias, alias `n` at `n - 1`.
    topics: Vec<Box<[u8]>>,
}

/// What a PUBLISH of a topic goes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alias {
    /// No alias: the topic name alone.
    None,
    /// The topic has this alias: sent without its name.
    Known(std::num::NonZeroU16),
    /// The topic gets this alias if the PUBLISH is sent ([`TopicAliases::assign`]): sent
    /// with its name.
    New(std::num::NonZeroU16),
}

impl TopicAliases {
    /// The aliases of a connection whose client takes `client_max` and a server that sets
    /// `server_max` at most (0: none).
    pub(crate) fn new(client_max: u16, server_max: u16) -> Self {
        TopicAliases {
            max: client_max.min(server_max),
            topics: Vec::new(),
        }
    }

    /// The most aliases it may set, if it set none yet (what a parked connection keeps of it
    /// then); `None` if it set any.
    pub(crate) fn unused_max(&self) -> Option<u16> {
        self.topics.is_empty().then_some(self.max)
    }

    /// What a PUBLISH of `topic` (its name's bytes) goes with.
    pub(crate) fn lookup(&self, topic: &[u8]) -> Alias {
        if self.max == 0 || topic.is_empty() {
            return Alias::None;
        }
        if let Some(at) = self.topics.iter().position(|t| **t == *topic) {
            return Alias::Known(alias_at(at));
        }
        if self.topics.len() < usize::from(self.max) {
            return Alias::New(alias_at(self.topics.len()));
        }
        Alias::None
    }

    /// The PUBLISH [`TopicAliases::lookup`] said [`Alias::New`] for was sent: `topic` has
    /// its alias from now on.
    pub(crate) fn assign(&mut self, topic: &[u8]) {
        if self.topics.len() < usize::from(self.max) {
            self.topics.push(topic.into());
        }
    }
}

fn alias_at(at: usize) -> std::num::NonZeroU16 {
    let n = u16::try_from(at + 1).unwrap_or(u16::MAX);
    std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN)
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU16;

    use super::*;

    fn n(v: u16) -> NonZeroU16 {
        NonZeroU16::new(v).unwrap()
    }

    #[test]
    fn the_first_topics_get_aliases_that_never_change() {
        let mut aliases = TopicAliases::new(2, 10);
        assert_eq!(aliases.lookup(b"a"), Alias::New(n(1)));
        // Not sent (too large, say): the alias is not taken.
        assert_eq!(aliases.lookup(b"a"), Alias::New(n(1)));
        aliases.assign(b"a");
        assert_eq!(aliases.lookup(b"a"), Alias::Known(n(1)));
        assert_eq!(aliases.lookup(b"b"), Alias::New(n(2)));
        aliases.assign(b"b");
        assert_eq!(aliases.lookup(b"c"), Alias::None, "the client's maximum");
        aliases.assign(b"c");
        assert_eq!(aliases.lookup(b"c"), Alias::None);
        assert_eq!(aliases.lookup(b"b"), Alias::Known(n(2)));
    }

    #[test]
    fn none_without_a_maximum_on_either_side() {
        assert_eq!(TopicAliases::new(0, 10).lookup(b"a"), Alias::None);
        assert_eq!(TopicAliases::new(10, 0).lookup(b"a"), Alias::None);
        assert_eq!(TopicAliases::new(1, 1).lookup(b""), Alias::None);
    }
}
