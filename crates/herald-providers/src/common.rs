//! What every provider's payload is built from, and the one error payload rendering gives.
//!
//! [`Common`] holds the platform-neutral fields of a Herald push (filled by `herald-push`);
//! each provider's options type renders it, with its own overrides, into the request that
//! provider takes. [`PayloadError`] says why a push cannot be rendered for a provider (too
//! large, a missing or contradictory field), before anything is queued.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::value::RawValue;

/// Seconds since the Unix epoch (0 if the clock is before it): what JWT `iat`/`exp` claims count.
pub(crate) fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Milliseconds since the Unix epoch (0 if the clock is before it): what expiries count.
pub(crate) fn unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The fields every platform shares, taken from the Herald push.
#[derive(Debug, Clone, Copy, Default)]
pub struct Common<'a> {
    /// The notification's title.
    pub title: Option<&'a str>,
    /// The notification's body text.
    pub body: Option<&'a str>,
    /// The badge number to show on the app icon.
    pub badge: Option<u32>,
    /// The sound to play (`default` or a sound file name).
    pub sound: Option<&'a str>,
    /// The push's data, JSON, delivered to the app.
    pub data: Option<&'a RawValue>,
    /// Notifications with the same key replace each other on the device.
    pub collapse_key: Option<&'a str>,
    /// `Some(true)`: deliver now, waking the device; `Some(false)`: may be delayed to save
    /// power; `None`: the provider's default for the kind of notification.
    pub high_priority: Option<bool>,
    /// When the push expires, milliseconds since the Unix epoch; 0 or less: no expiry given (the
    /// provider's default storage policy).
    pub expires_ms: i64,
    /// The push's id in Herald (sent along so the app can ack it).
    pub push_id: &'a str,
}

/// Why a push cannot be rendered for one provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{provider} payload: {message}")]
pub struct PayloadError {
    /// `apns`, `fcm` or `webpush`.
    pub provider: &'static str,
    /// What is wrong, for the publisher.
    pub message: String,
    /// Whether the payload is over the provider's size limit.
    pub too_large: bool,
}

impl PayloadError {
    /// An invalid payload (not a size problem).
    pub fn invalid(provider: &'static str, message: impl Into<String>) -> Self {
        PayloadError {
            provider,
            message: message.into(),
            too_large: false,
        }
    }

    /// A payload of `size` bytes over the provider's `limit`.
    pub fn too_large(provider: &'static str, size: usize, limit: usize) -> Self {
        PayloadError {
            provider,
            message: format!("the payload is {size} bytes, over the limit of {limit}"),
            too_large: true,
        }
    }
}
