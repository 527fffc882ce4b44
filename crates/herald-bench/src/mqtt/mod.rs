//! MQTT in `herald bench`: subscribers (`--transport mqtt`) and publishers speaking MQTT 3.1.1 or
//! 5.0 to Herald's MQTT listener (`mqtt_listen`) or, for `--peer mosquitto`, to `mosquitto`, with
//! a minimal client written here ([`packet`], [`client`]), so both sides of a ratio come from
//! the same worker processes, counting and /proc readings.
//!
//! How each operation of a scenario maps to MQTT:
//! - a subscriber of channel `a/b` is a connection (Clean Session / Clean Start, or with
//!   `--mqtt-session-expiry` a persistent session: Clean Start 0 and that Session Expiry
//!   Interval; 3.1.1: Clean Session 0) that `SUBSCRIBE`s to the topic `a/b` (one filter per
//!   `SUBSCRIBE`, at `--mqtt-qos`), ready once every `SUBACK` granted it; a channel is a topic
//!   in Herald (docs/mqtt.md, section 3);
//! - a `subscribe-storm` user connects with no subscription; at the storm it writes one
//!   `SUBSCRIBE` per topic, all at once (or with `--one-at-a-time` each once the previous one's
//!   `SUBACK` came), and every granted `SUBACK` is one acknowledged subscription;
//! - a publish is a `PUBLISH` at QoS 1 of the same stamped payload (`{"ts":N}`), the publisher
//!   waiting for its `PUBACK` as Herald's HTTP publishers wait for their answer (Herald's
//!   `PUBACK` comes once the message is durably stored, as its HTTP answer; Mosquitto, without
//!   persistence, answers once it has handed the message to its subscribers' queues);
//! - a message delivered at QoS 1 is acknowledged with a `PUBACK` at once; a connection sends a
//!   `PINGREQ` every keep-alive ([`KEEP_ALIVE_SECS`]).
//!
//! With Herald the user name is the app id (`default`) and the password the run's client token;
//! Mosquitto runs with `allow_anonymous` and gets neither.

pub mod client;
pub mod packet;

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

pub use client::MqttClient;
pub use packet::Version;

/// The keep-alive every bench connection asks for, in seconds; it sends a `PINGREQ` this often.
pub const KEEP_ALIVE_SECS: u16 = 60;

/// Where and how the MQTT connections of a run connect.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MqttConfig {
    /// The server's MQTT address (Herald's `mqtt_listen`, or Mosquitto's listener).
    pub addr: SocketAddr,
    /// The protocol version.
    pub version: Version,
    /// The QoS subscriptions ask for (0 or 1).
    pub qos: u8,
    /// The `CONNECT` user name (Herald: the app id), if any.
    pub username: Option<String>,
    /// The `CONNECT` password (Herald: a client token or API key), if any.
    pub password: Option<String>,
    /// The subscribers' persistent session (`--mqtt-session-expiry`): Clean Start 0 and this
    /// Session Expiry Interval in seconds. `None`: Clean Start 1. Publishers are always clean.
    #[serde(default)]
    pub session_expiry: Option<u32>,
}
