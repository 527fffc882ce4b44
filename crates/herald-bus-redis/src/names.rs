//! Redis channel names. Each Herald channel has its own sharded Redis channel
//! (`PREFIX:{TAG}:NAME`), so a node receives only the channels it follows. `TAG` is one of
//! [`TAGS`] hash tags picked by a stable hash of the name: Redis Cluster places a channel by its
//! tag, and channels that share a tag share a slot, so one `SSUBSCRIBE` can name many of them
//! (a subscribe storm of 100,000 channels is at most [`TAGS`] commands, sent together).
//! Cache events go to one sharded channel of their own, `PREFIX:{events}`.

use herald_core::ChannelName;

/// Hash tags channels are spread over.
pub const TAGS: u32 = 256;

/// The names one bus uses, under its prefix (several Herald clusters can share one Redis).
#[derive(Debug, Clone)]
pub struct Names {
    prefix: String,
}

impl Names {
    /// Names under `prefix`.
    pub fn new(prefix: &str) -> Names {
        Names {
            prefix: prefix.to_owned(),
        }
    }

    /// The hash tag `channel` is placed by.
    pub fn tag(channel: &ChannelName) -> u32 {
        // FNV-1a: the same on every node and every build (std's hasher is seeded per process).
        let hash = channel
            .as_str()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        (hash % u64::from(TAGS)) as u32
    }

    /// The Redis channel carrying `channel`'s messages.
    pub fn channel(&self, channel: &ChannelName) -> String {
        self.tagged(channel, "")
    }

    /// `PREFIX:{TAG}:KIND` + `channel`'s name, built without `format!`: a subscribe storm
    /// names each new channel's Redis channel and head key once each, and the formatting
    /// machinery was most of that cost.
    fn tagged(&self, channel: &ChannelName, kind: &str) -> String {
        let name = channel.as_str();
        let mut out = String::with_capacity(self.prefix.len() + kind.len() + name.len() + 7);
        out.push_str(&self.prefix);
        out.push_str(":{");
        out.push_str(itoa::Buffer::new().format(Names::tag(channel)));
        out.push_str("}:");
        out.push_str(kind);
        out.push_str(name);
        out
    }

    /// The Herald channel a Redis channel of this bus carries, if it is one.
    pub fn parse_channel<'a>(&self, redis: &'a str) -> Option<&'a str> {
        let rest = redis.strip_prefix(&self.prefix)?.strip_prefix(":{")?;
        let (_, name) = rest.split_once("}:")?;
        Some(name)
    }

    /// The Redis channel a node subscribes to last in one `SSUBSCRIBE` of a round (the
    /// `round`th of node `node`), under hash tag `tag` (that of the command's channels, so a
    /// Redis Cluster takes it with them): Redis subscribes a command's channels in order, so
    /// once it counts a subscriber of this one, every channel the command named is subscribed
    /// (`crate::subscriptions`). Nothing is published on it.
    pub fn round_marker(&self, tag: u32, node: u64, round: u64) -> String {
        format!("{}:{{{tag}}}:round:{node:016x}:{round}", self.prefix)
    }

    /// The key holding `channel`'s head (`crate::heads`), under the hash tag of its Redis
    /// channel, so the script publishing a batch also moves it.
    pub fn head(&self, channel: &ChannelName) -> String {
        self.tagged(channel, "head:")
    }

    /// The key saying Redis holds the head of every channel that has a log (`crate::heads`).
    pub fn heads_vouch(&self) -> String {
        format!("{}:heads", self.prefix)
    }

    /// The sharded Redis channel carrying every message of `app` while its feed is on
    /// (`crate::feeds`).
    pub fn feed(&self, app: &str) -> String {
        format!("{}:{{feed:{app}}}", self.prefix)
    }

    /// Whether `redis` is one of this bus's app feeds.
    pub fn is_feed(&self, redis: &str) -> bool {
        redis
            .strip_prefix(&self.prefix)
            .is_some_and(|rest| rest.starts_with(":{feed:"))
    }

    /// The sorted set of the nodes holding apps' feeds on (`crate::feeds`).
    pub fn feeds(&self) -> String {
        format!("{}:feeds", self.prefix)
    }

    /// The sorted set of the nodes holding shared subscription groups (`crate::shares`).
    pub fn shares(&self) -> String {
        format!("{}:shares", self.prefix)
    }

    /// The Redis channel carrying cache events.
    pub fn events(&self) -> String {
        format!("{}:{{events}}", self.prefix)
    }

    /// The hash holding one node's presence counts.
    pub fn presence(&self, node: u64) -> String {
        format!("{}:presence:{node:016x}", self.prefix)
    }

    /// The prefix of the lifecycle records' keys (`PREFIX:{lifecycle}:`), all under one hash
    /// tag so one script may change any of them ([`crate::lifecycle`]).
    pub fn lifecycle(&self) -> String {
        format!("{}:{{lifecycle}}:", self.prefix)
    }

    /// The base of the keys of `channel`'s presence members (`crate::members`), under the
    /// hash tag of its Redis channel, so a script changing them may publish on it.
    pub fn members(&self, channel: &ChannelName) -> String {
        format!(
            "{}:{{{}}}:presence:{}",
            self.prefix,
            Names::tag(channel),
            channel.as_str()
        )
    }

    /// The prefix of the keys recording which node holds which presence members
    /// (`PREFIX:{presence}:`, one hash tag, `crate::members`).
    pub fn presence_nodes(&self) -> String {
        format!("{}:{{presence}}:", self.prefix)
    }

    /// The sorted set of nodes that published presence (scored by the last time, in ms).
    pub fn nodes(&self) -> String {
        format!("{}:nodes", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_and_parse_back() {
        let names = Names::new("herald");
        let channel = herald_core::tenant::parse_full("shop~chat/room-42").unwrap();
        let redis = names.channel(&channel);
        assert!(redis.starts_with("herald:{"));
        assert_eq!(names.parse_channel(&redis), Some("shop~chat/room-42"));
        assert_eq!(names.parse_channel("other:{1}:x"), None);
        // Built by hand, as `format!` would write them, for tags of one, two and three digits.
        let mut digits = std::collections::HashSet::new();
        for i in 0..2000 {
            let channel = ChannelName::parse(&format!("c{i}")).unwrap();
            let tag = Names::tag(&channel);
            digits.insert(tag.to_string().len());
            assert_eq!(names.channel(&channel), format!("herald:{{{tag}}}:c{i}"));
            assert_eq!(names.head(&channel), format!("herald:{{{tag}}}:head:c{i}"));
        }
        assert_eq!(
            digits.len(),
            3,
            "tags of one, two and three digits were tried"
        );
        assert_eq!(Names::tag(&channel), Names::tag(&channel.clone()));
        assert!(Names::tag(&channel) < TAGS);
        // The tag is a fixed function of the name (the same on every node).
        assert_eq!(
            Names::tag(&ChannelName::parse("a").unwrap()),
            (0xaf63_dc4c_8601_ec8c_u64 % u64::from(TAGS)) as u32
        );
    }
}
