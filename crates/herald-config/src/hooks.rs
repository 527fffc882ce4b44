//! The `[hooks]` table: how webhook events are batched (`batch_max`, `batch_delay`; a
//! backlogged endpoint's batch grows to 10 × `batch_max`, at most 1,000, so `batch_max` is 1 to
//! 1,000), retried
//! (`retry_horizon`), bounded (`max_queued_per_endpoint`, `node_queue`,
//! `max_endpoints_per_app`) and sent (`request_timeout`), and how often a channel's
//! `subscription_count` may be told (`subscription_count_interval`); docs/config.md, "Webhooks".

use std::time::Duration;

use herald_server::vocabulary::HooksConfig;

use super::layers::{Layers, Raw};
use super::validate::{duration, text, ConfigError};

/// The keys of the `[hooks]` table.
pub(super) const HOOK_KEYS: &[&str] = &[
    "batch_max",
    "batch_delay",
    "retry_horizon",
    "max_queued_per_endpoint",
    "node_queue",
    "request_timeout",
    "max_endpoints_per_app",
    "subscription_count_interval",
];

/// A whole number from `min` (at least 1) to `max`.
fn within(min: u64, max: u64) -> impl Fn(&Raw) -> Result<u64, String> {
    move |raw| {
        let n: u64 = match raw {
            // A negative number is as out of range as 0 (every minimum is at least 1).
            Raw::Toml(toml::Value::Integer(n)) => u64::try_from(*n).unwrap_or(0),
            Raw::Toml(v) => return Err(format!("expected a whole number, found {}", v.type_str())),
            other => text(other)?
                .trim()
                .parse()
                .map_err(|_| "expected a whole number")?,
        };
        if (min..=max).contains(&n) {
            Ok(n)
        } else {
            Err(format!("must be {min} to {max}"))
        }
    }
}

/// A duration from `min` to `max` (`what` says why the bounds are what they are).
fn duration_within(
    min: Duration,
    max: Duration,
    what: &'static str,
) -> impl Fn(&Raw) -> Result<Duration, String> {
    move |raw| {
        let d = duration(raw)?;
        if d >= min && d <= max {
            Ok(d)
        } else {
            Err(format!(
                "must be {} to {}{what}",
                humantime::format_duration(min),
                humantime::format_duration(max)
            ))
        }
    }
}

fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

impl Layers {
    /// The webhook settings, each defaulting to [`HooksConfig::default`]'s.
    pub(super) fn hooks(&self) -> Result<HooksConfig, ConfigError> {
        let d = HooksConfig::default();
        let day = Duration::from_secs(24 * 3600);
        Ok(HooksConfig {
            batch_max: size(self.get("hooks.batch_max", d.batch_max as u64, within(1, 1000))?),
            batch_delay: self.get(
                "hooks.batch_delay",
                d.batch_delay,
                duration_within(Duration::ZERO, Duration::from_secs(60), ""),
            )?,
            horizon: self.get(
                "hooks.retry_horizon",
                d.horizon,
                duration_within(Duration::from_secs(1), 30 * day, ""),
            )?,
            max_queued_per_endpoint: self.get(
                "hooks.max_queued_per_endpoint",
                d.max_queued_per_endpoint,
                within(1, 100_000_000),
            )?,
            node_queue: size(self.get(
                "hooks.node_queue",
                d.node_queue as u64,
                within(1, 16 << 20),
            )?),
            request_timeout: self.get(
                "hooks.request_timeout",
                d.request_timeout,
                duration_within(
                    Duration::from_millis(1),
                    Duration::from_secs(60),
                    " (an endpoint holds its queue while it answers)",
                ),
            )?,
            max_endpoints_per_app: size(self.get(
                "hooks.max_endpoints_per_app",
                d.max_endpoints_per_app as u64,
                within(1, 1000),
            )?),
            subscription_count_interval: self.get(
                "hooks.subscription_count_interval",
                d.subscription_count_interval,
                duration_within(Duration::from_millis(100), Duration::from_secs(3600), ""),
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use herald_server::vocabulary::HooksConfig;

    use super::super::tests::{err, load};
    use super::super::ConfigFlags;

    #[test]
    fn hooks_come_from_the_table_and_the_environment() {
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.hooks, HooksConfig::default());
        assert_eq!(
            (c.hooks.batch_max, c.hooks.max_queued_per_endpoint),
            (100, 1_000_000),
            "the defaults docs/config.md and herald.example.toml state"
        );
        let file = "[hooks]\nbatch_max = 10\nbatch_delay = \"100ms\"\nretry_horizon = \"1h\"\n\
                    max_endpoints_per_app = 3\nsubscription_count_interval = \"2s\"";
        let env = [
            ("HERALD_HOOKS_NODE_QUEUE", "1024"),
            ("HERALD_HOOKS_REQUEST_TIMEOUT", "2s"),
            ("HERALD_HOOKS_MAX_QUEUED_PER_ENDPOINT", "500"),
            ("HERALD_HOOKS_BATCH_MAX", "20"),
        ];
        let c = load(Some(file), &env, ConfigFlags::default()).unwrap();
        assert_eq!(
            c.hooks,
            HooksConfig {
                batch_max: 20,
                batch_delay: Duration::from_millis(100),
                horizon: Duration::from_secs(3600),
                max_queued_per_endpoint: 500,
                node_queue: 1024,
                request_timeout: Duration::from_secs(2),
                max_endpoints_per_app: 3,
                subscription_count_interval: Duration::from_secs(2),
            }
        );
        // What config check prints loads back to the same settings.
        let printed = c.to_toml_redacted();
        assert!(printed.contains("\n[hooks]\n"), "{printed}");
        let again = load(Some(&printed), &[], ConfigFlags::default()).unwrap();
        assert_eq!(again.hooks, c.hooks);
        let debug = format!("{c:?}");
        assert!(debug.contains("batch_delay: 100ms"), "{debug}");
    }

    #[test]
    fn a_bad_hooks_value_is_named_with_its_source() {
        for (env, value, said) in [
            ("HERALD_HOOKS_BATCH_MAX", "0", "1 to 1000"),
            ("HERALD_HOOKS_BATCH_MAX", "-3", "whole number"),
            ("HERALD_HOOKS_BATCH_MAX", "many", "whole number"),
            ("HERALD_HOOKS_BATCH_DELAY", "2m", "0s to 1m"),
            ("HERALD_HOOKS_RETRY_HORIZON", "0s", "1s to 30days"),
            (
                "HERALD_HOOKS_MAX_QUEUED_PER_ENDPOINT",
                "0",
                "1 to 100000000",
            ),
            ("HERALD_HOOKS_NODE_QUEUE", "0", "1 to"),
            ("HERALD_HOOKS_REQUEST_TIMEOUT", "0s", "1ms to 1m"),
            ("HERALD_HOOKS_MAX_ENDPOINTS_PER_APP", "5000", "1 to 1000"),
            (
                "HERALD_HOOKS_SUBSCRIPTION_COUNT_INTERVAL",
                "50ms",
                "100ms to 1h",
            ),
        ] {
            let e = err(None, &[(env, value)], ConfigFlags::default());
            let key = env
                .strip_prefix("HERALD_HOOKS_")
                .unwrap()
                .to_ascii_lowercase();
            assert!(
                e.contains(&format!("hooks.{key}")) && e.contains(env) && e.contains(said),
                "{env}={value}: {e}"
            );
        }
        let e = err(Some("[hooks]\nbatch_max = -1"), &[], ConfigFlags::default());
        assert!(
            e.contains("hooks.batch_max") && e.contains("1 to 1000"),
            "{e}"
        );
        let e = err(
            Some("[hooks]\nbatch_delay = 5"),
            &[],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("hooks.batch_delay") && e.contains("duration"),
            "{e}"
        );
        let e = err(Some("[hooks]\nbatch_mx = 5"), &[], ConfigFlags::default());
        assert!(
            e.contains("hooks.batch_mx") && e.contains("did you mean \"batch_max\""),
            "{e}"
        );
        let e = err(Some("hooks = 3"), &[], ConfigFlags::default());
        assert!(e.contains("hooks") && e.contains("[hooks]"), "{e}");
    }
}
