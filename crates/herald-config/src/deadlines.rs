//! The connection deadline keys: `first_byte_timeout`, `head_timeout`, `body_timeout`,
//! `keepalive_timeout` and `meteor_control_idle_timeout`, each a duration longer than 0s (see
//! docs/operations.md, "Deadlines").

use std::time::Duration;

use herald_server::vocabulary::Deadlines;

use super::layers::{Layers, Raw};
use super::validate::{duration, ConfigError};

/// A duration longer than zero: every state of a connection has a deadline.
fn positive(raw: &Raw) -> Result<Duration, String> {
    Some(duration(raw)?)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| "must be longer than 0s: every connection state has a deadline".into())
}

impl Layers {
    /// The deadlines, each defaulting to [`Deadlines::default`]'s.
    pub(super) fn deadlines(&self) -> Result<Deadlines, ConfigError> {
        let d = Deadlines::default();
        Ok(Deadlines {
            first_byte: self.get("first_byte_timeout", d.first_byte, positive)?,
            head: self.get("head_timeout", d.head, positive)?,
            body: self.get("body_timeout", d.body, positive)?,
            keepalive: self.get("keepalive_timeout", d.keepalive, positive)?,
            meteor_control_idle: self.get(
                "meteor_control_idle_timeout",
                d.meteor_control_idle,
                positive,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::tests::{err, load};
    use super::super::ConfigFlags;

    #[test]
    fn deadlines_come_from_the_file_and_the_environment() {
        let file = "head_timeout = \"5s\"\nbody_timeout = \"2m\"";
        let env = [
            ("HERALD_FIRST_BYTE_TIMEOUT", "3s"),
            ("HERALD_KEEPALIVE_TIMEOUT", "90s"),
            ("HERALD_METEOR_CONTROL_IDLE_TIMEOUT", "1h"),
        ];
        let c = load(Some(file), &env, ConfigFlags::default()).unwrap();
        let d = c.deadlines;
        assert_eq!(
            (
                d.first_byte,
                d.head,
                d.body,
                d.keepalive,
                d.meteor_control_idle
            ),
            (
                Duration::from_secs(3),
                Duration::from_secs(5),
                Duration::from_secs(120),
                Duration::from_secs(90),
                Duration::from_secs(3600)
            )
        );
    }

    #[test]
    fn a_deadline_must_be_a_positive_duration() {
        let e = err(
            None,
            &[("HERALD_BODY_TIMEOUT", "0s")],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("body_timeout") && e.contains("HERALD_BODY_TIMEOUT") && e.contains("0s"),
            "{e}"
        );
        let e = err(Some("keepalive_timeout = 30"), &[], ConfigFlags::default());
        assert!(
            e.contains("keepalive_timeout") && e.contains("duration"),
            "{e}"
        );
        let e = err(Some("head_timeout = \"soon\""), &[], ConfigFlags::default());
        assert!(e.contains("head_timeout"), "{e}");
    }
}
