//! What the MQTT listener is started with: [`MqttSettings`], the limits a connection announces
//! in its CONNACK and holds the client to, and the anonymous mode. Plain values: `herald-config`
//! reads them from the `[mqtt]` table (docs/config.md, "MQTT"), `herald-server` hands them to
//! every connection ([`crate::serve::serve`]), tests build them directly.

use crate::access::Rule;

/// The default [`MqttSettings::max_keep_alive`]: 300 seconds (5 minutes).
pub const DEFAULT_MAX_KEEP_ALIVE: u16 = 300;

/// The default [`MqttSettings::max_packet_size`]: 1 MiB.
pub const DEFAULT_MAX_PACKET_SIZE: u32 = 1 << 20;

/// The default [`MqttSettings::receive_maximum`].
pub const DEFAULT_RECEIVE_MAXIMUM: u16 = 100;

/// The default [`MqttSettings::max_inflight_out`].
pub const DEFAULT_MAX_INFLIGHT_OUT: u16 = 100;

/// The default [`MqttSettings::max_topic_aliases`] (Mosquitto's `max_topic_alias` default too).
pub const DEFAULT_MAX_TOPIC_ALIASES: u16 = 10;

/// The default [`MqttSettings::max_topic_aliases_out`].
pub const DEFAULT_MAX_TOPIC_ALIASES_OUT: u16 = 10;

/// The default [`MqttSettings::sys_interval`]: 10 seconds.
pub const DEFAULT_SYS_INTERVAL: u32 = 10;

/// The default [`MqttSettings::max_session_expiry`]: 7 days, in seconds.
pub const DEFAULT_MAX_SESSION_EXPIRY: u32 = 7 * 24 * 3600;

/// The default [`MqttSettings::max_retained_per_filter`].
pub const DEFAULT_MAX_RETAINED_PER_FILTER: u16 = 10_000;

/// The default [`MqttSettings::max_offline_channels_per_filter`].
pub const DEFAULT_MAX_OFFLINE_CHANNELS_PER_FILTER: u16 = 1000;

/// The largest packet MQTT can carry: a fixed header of 5 bytes and a Remaining Length of
/// 268,435,455 (MQTT 5.0 2.1.4), the most [`MqttSettings::max_packet_size`] may say.
pub const LARGEST_PACKET: u32 = 268_435_460;

/// The MQTT listener's limits and anonymous mode, shared by all its connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttSettings {
    /// The longest Keep Alive a client may use, in seconds. A v5 client that asks for more, or
    /// for 0 (no keep-alive), is told this value as the CONNACK's **Server Keep Alive**
    /// (MQTT 5.0 3.2.2.3.14) and held to it; a 3.1.1 client (whose CONNACK cannot say it) is
    /// held to it all the same: closed after one and a half times this without a packet. At
    /// least 1; default [`DEFAULT_MAX_KEEP_ALIVE`] (300).
    pub max_keep_alive: u16,
    /// The largest packet accepted from a client, in bytes, announced in a v5 CONNACK as
    /// **Maximum Packet Size** (MQTT 5.0 3.2.2.3.6); a larger packet closes the connection
    /// (v5: DISCONNECT 0x95 Packet too large). Default [`DEFAULT_MAX_PACKET_SIZE`] (1 MiB), at
    /// most [`LARGEST_PACKET`].
    pub max_packet_size: u32,
    /// How many QoS 1 and 2 PUBLISHes a client may have unacknowledged towards the server,
    /// announced in a v5 CONNACK as **Receive Maximum** (MQTT 5.0 3.2.2.3.3). 1 to 65,535;
    /// default [`DEFAULT_RECEIVE_MAXIMUM`] (100).
    pub receive_maximum: u16,
    /// How many QoS 1 and 2 PUBLISHes the server has unacknowledged towards one client at
    /// most, whatever larger **Receive Maximum** the client announced (MQTT 5.0 4.9, flow
    /// control; a 3.1.1 client announces none). 1 to 65,535; default
    /// [`DEFAULT_MAX_INFLIGHT_OUT`] (100).
    pub max_inflight_out: u16,
    /// How many topic aliases a client may set towards the server, announced in a v5 CONNACK
    /// as **Topic Alias Maximum** (MQTT 5.0 3.2.2.3.8); 0 accepts none. Default
    /// [`DEFAULT_MAX_TOPIC_ALIASES`] (10).
    pub max_topic_aliases: u16,
    /// How many topic aliases the server sets towards a v5 client at most (MQTT 5.0
    /// 3.3.2.3.4), within the client's own **Topic Alias Maximum**: the first topics sent get
    /// one each, kept for the connection (`topic_aliases.rs`). 0 sets none. Each costs the
    /// connection its topic's bytes. Default [`DEFAULT_MAX_TOPIC_ALIASES_OUT`] (10).
    pub max_topic_aliases_out: u16,
    /// The longest a persistent session is kept after its connection ended, in seconds: a v5
    /// client's Session Expiry Interval above it (or 0xFFFFFFFF, never) is held to it and
    /// told so in the CONNACK's **Session Expiry Interval** (MQTT 5.0 3.2.2.3.2); a 3.1.1
    /// client with Clean Session 0 (whose session never expires by the standard) is kept this
    /// long. 0 keeps no session beyond its connection. Default
    /// [`DEFAULT_MAX_SESSION_EXPIRY`] (7 days).
    pub max_session_expiry: u32,
    /// Most retained messages a wildcard SUBSCRIBE is sent: the retained message of each
    /// channel the filter matches, up to this many (the bound on what one SUBSCRIBE queues and
    /// reads), found among at most four times as many stored retained messages per filter
    /// prefix. 0 sends none. Default [`DEFAULT_MAX_RETAINED_PER_FILTER`] (10,000).
    pub max_retained_per_filter: u16,
    /// Most channels a wildcard filter of a resumed persistent session replays what it missed
    /// of (`crate::session`'s `missed.rs`): the channels the filter matches that had QoS 1 or
    /// 2 messages while the client was away, in name order, found among at most ten times as
    /// many channels listed per filter prefix. Channels past it are not replayed (their new
    /// messages still arrive live). 0 replays none. Default
    /// [`DEFAULT_MAX_OFFLINE_CHANNELS_PER_FILTER`] (1,000).
    pub max_offline_channels_per_filter: u16,
    /// How often the `$SYS/` statistics are published, in seconds, as Mosquitto's
    /// `sys_interval` (`crate::sys`); 0 publishes none. Default [`DEFAULT_SYS_INTERVAL`] (10).
    pub sys_interval: u32,
    /// Whether a CONNECT without credentials (no password) is accepted, in
    /// [`MqttSettings::anonymous_app`] and limited by [`MqttSettings::anonymous_rules`] (a
    /// development mode, as Mosquitto's `allow_anonymous`). Off: such a CONNECT is refused
    /// (v5 0x87 Not authorized, 3.1.1 return code 0x05). Default false.
    pub allow_anonymous: bool,
    /// With [`MqttSettings::allow_anonymous`]: a CONNECT whose password is not shaped like a
    /// Herald credential (neither a JWT, three dot-separated base64url parts, nor a publisher
    /// API key, `hk_…`) is taken as one without a password (the client is anonymous), as
    /// Mosquitto with `allow_anonymous true` and no password file takes any password. A
    /// password shaped like a credential that fails is refused all the same (v5 0x86 Bad User
    /// Name or Password, 3.1.1 return code 0x04). Off (the default): every password is checked
    /// as a credential.
    pub anonymous_ignores_unknown_passwords: bool,
    /// The app anonymous clients belong to. Default `"default"`.
    pub anonymous_app: String,
    /// What anonymous clients may publish and subscribe to: the ordered allow and deny rules
    /// of [`crate::access`] (a connection asks them through [`crate::access::Rules::new`];
    /// `herald-config` has checked them with it at start). Empty (the default): nothing.
    pub anonymous_rules: Vec<Rule>,
}

impl Default for MqttSettings {
    fn default() -> Self {
        MqttSettings {
            max_keep_alive: DEFAULT_MAX_KEEP_ALIVE,
            max_packet_size: DEFAULT_MAX_PACKET_SIZE,
            receive_maximum: DEFAULT_RECEIVE_MAXIMUM,
            max_inflight_out: DEFAULT_MAX_INFLIGHT_OUT,
            max_topic_aliases: DEFAULT_MAX_TOPIC_ALIASES,
            max_topic_aliases_out: DEFAULT_MAX_TOPIC_ALIASES_OUT,
            max_session_expiry: DEFAULT_MAX_SESSION_EXPIRY,
            max_retained_per_filter: DEFAULT_MAX_RETAINED_PER_FILTER,
            max_offline_channels_per_filter: DEFAULT_MAX_OFFLINE_CHANNELS_PER_FILTER,
            sys_interval: DEFAULT_SYS_INTERVAL,
            allow_anonymous: false,
            anonymous_ignores_unknown_passwords: false,
            anonymous_app: "default".to_owned(),
            anonymous_rules: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let s = MqttSettings::default();
        assert_eq!(
            (
                s.max_keep_alive,
                s.max_packet_size,
                s.receive_maximum,
                s.max_inflight_out,
                s.max_topic_aliases
            ),
            (300, 1_048_576, 100, 100, 10)
        );
        assert_eq!(s.max_topic_aliases_out, 10);
        assert_eq!(s.max_session_expiry, 604_800);
        assert_eq!(s.max_retained_per_filter, 10_000);
        assert_eq!(s.max_offline_channels_per_filter, 1000);
        assert_eq!(s.sys_interval, 10);
        assert!(!s.allow_anonymous && s.anonymous_rules.is_empty());
        assert!(!s.anonymous_ignores_unknown_passwords);
        assert_eq!(s.anonymous_app, "default");
    }
}
