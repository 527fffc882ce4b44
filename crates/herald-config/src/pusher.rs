//! The `[pusher]` table ([`PUSHER_KEYS`]): the Pusher client protocol's activity timeout, pong
//! timeout, client-event rate and presence member limit (docs/config.md, "`[pusher]`:
//! Pusher's client protocol").
//!
//! ```toml
//! [pusher]
//! activity_timeout = 120        # seconds, or a duration ("2m")
//! pong_timeout = 30
//! client_events_per_second = 10
//! presence_max_members = 100
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
    "presence_max_members",
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
            presence_max_members: self.get(
                "pusher.presence_max_members",
                d.presence_max_members,
                |raw| {
                    let n = whole(raw)?;
                    u32::try_from(n)
                        .ok()
                        .filter(|n| (1..=1_000_000).contains(n))
                        .ok_or_else(|| "must be 1 to 1000000".to_owned())
                },
            )?,
            ..d
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::load;
    use super::super::ConfigFlags;
    use super::*;

    #[test]
    fn the_pusher_table_its_environment_and_its_bounds() {
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.pusher, PusherClientSettings::default());
        let file = "[pusher]\nactivity_timeout = \"2m\"\npong_timeout = 5\n\
                    client_events_per_second = 0\npresence_max_members = 3\n";
        let c = load(Some(file), &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.pusher.activity_timeout, Duration::from_secs(120));
        assert_eq!(c.pusher.pong_timeout, Duration::from_secs(5));
        assert_eq!(c.pusher.client_events_per_second, 0);
        assert_eq!(c.pusher.presence_max_members, 3);
        assert_eq!(PusherClientSettings::default().presence_max_members, 100);
        let env = [("HERALD_PUSHER_ACTIVITY_TIMEOUT", "30")];
        let c = load(Some(file), &env, ConfigFlags::default()).unwrap();
        assert_eq!(c.pusher.activity_timeout, Duration::from_secs(30));
        for (file, says) in [
            ("[pusher]\nactivity_timeout = 0\n", "must be 1s to 3600s"),
            (
                "[pusher]\npong_timeout = \"1.5s\"\n",
                "must be whole seconds",
            ),
            (
                "[pusher]\nclient_events_per_second = 10001\n",
                "must be 0 to 10000",
            ),
            (
                "[pusher]\npresence_max_members = 0\n",
                "must be 1 to 1000000",
            ),
            (
                "[pusher]\nactivity = 1\n",
                "unknown key \"pusher.activity\"",
            ),
        ] {
            let e = load(Some(file), &[], ConfigFlags::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{file}: {e}");
        }
        // Printed and read again, the same values.
        let again = load(Some(&c.to_toml_redacted()), &[], ConfigFlags::default()).unwrap();
        assert_eq!(again.pusher, c.pusher);
    }
}
