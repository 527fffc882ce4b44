//! What the workers need of a push, kept with its receipt when it is accepted: how it is
//! delivered, its ack window, its audience (broadcasts), where it sits in the app's broadcast
//! log, and its rendered provider payloads.

use serde::{Deserialize, Serialize};

use crate::delivery::payloads::Payloads;
use crate::delivery::Delivery;

/// A push as the delivery workers read it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// How it is delivered.
    pub delivery: Delivery,
    /// The ack window, milliseconds (`auto`).
    pub ack_window_ms: u64,
    /// Whether it is in the app's broadcast log (a tag or app push) rather than in each
    /// device's own log.
    pub broadcast: bool,
    /// The tag expression of a tag push (`None`: the whole app, or a device or user push).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// Expires at, milliseconds since the Unix epoch.
    pub expires: i64,
    /// The payloads.
    pub payloads: Payloads,
}

impl DeliveryRecord {
    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a delivery record serializes")
    }

    /// Reads the stored form; `None` if it is damaged.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}
