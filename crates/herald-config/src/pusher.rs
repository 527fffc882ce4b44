//! The `[pusher]` table ([`PUSHER_KEYS`]): the Pusher client protocol's activity timeout, pong
//! timeout and client-event rate (docs/config.md, "`[pusher]`: Pusher's client protocol").
//!
//! ```toml
//! [pusher]
//! activity_timeout = 120        # seconds, or a duration ("2m")
//! pong_timeout = 30
//! client_events_per_second = 10
//! ```

use std::time::Duration;

use herald_server::vocabulary::PusherClientSettings;
use toml::Value;

use super::layers::{Layers, Raw};
use super::validate::{duration, text, ConfigError};

/// The keys of the `[pusher]` table.
pub(super) const PUSHER_KEYS: &[&str] = &[
    "activity_timeout",
    "pong_timeout",
    "client_events_per_second",
];

/// A whole number.
fn whole(raw: &Raw) -> Result<u64, String> {
    match raw {
        Raw::Toml(Value::Integer(n)) => {
            u64::try_from(*n).map_err(|_| "must not be negative".into())
        }
        Raw::Toml(v) => Err(format!("expected a whole number, found {}", v.type_str())),
        other => text(other)?
            .trim()
            .parse()
            .map_err(|_| "expected a whole number".into()),
    }
}

/// Whole seconds from 1 to `max`: a number of seconds or a duration ("2m").
fn seconds(max: u64) -> impl Fn(&Raw) -> Result<Duration, String> {
    move |raw| {
        let secs = match raw {
            Raw::Toml(Value::Integer(_)) => whole(raw)?,
            Raw::Text(t) | Raw::Toml(Value::String(t))
                if !t.trim().is_empty() && t.trim().bytes().all(|b| b.is_ascii_digit()) =>
            {
                whole(&Raw::Text(t.clone()))?
            }
            _ => {
                let d = duration(raw)?;
                if d.subsec_nanos() != 0 {
                    return Err("must be whole seconds".into());
                }
                d.as_secs()
            }
        };
        if (1..=max).contains(&secs) {
            Ok(Duration::from_secs(secs))
        } else {
            Err(format!("must be 1s to {max}s"))
        }
    }
}

impl Layers {
    /// The Pusher client protocol's settings.
    pub(super) fn pusher(&self) -> Result<PusherClientSettings, ConfigError> {
        let d = PusherClientSettings::default();
        Ok(PusherClientSettings {
            activity_timeout: self.get(
                "pusher.activity_timeout",
                d.activity_timeout,
                seconds(3600),
            )?,
            pong_timeout: self.get("pusher.pong_timeout", d.pong_timeout, seconds(600))?,
            client_events_per_second: self.get(
                "pusher.client_events_per_second",
                d.client_events_per_second,
                |raw| {
                    let n = whole(raw)?;
                    u32::try_from(n)
                        .ok()
                        .filter(|n| *n <= 10_000)
                        .ok_or_else(|| "must be 0 to 10000".to_owned())
                },
            )?,
            ..d
        })
    }
}
