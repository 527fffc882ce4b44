//! The `[limits]` table: rate limits per app and publisher key (`publish`, `push`,
//! `registration`, `key_publish`, `key_push`, `key_registration`), per WebSocket connection
//! (`command`), per source address (`connection`, `login`), and the address blocks exempt
//! from the per-address limits (`exempt`). A rate is `"off"`, `0`, a number per second, or
//! text such as `"100/s burst 200"` (docs/config.md, "Rate limits").

use herald_server::vocabulary::{Cidr, Rate, RateLimits};
use toml::Value;

use super::layers::{Layers, Raw};
use super::validate::ConfigError;

/// The keys of the `[limits]` table.
pub(super) const LIMIT_KEYS: &[&str] = &[
    "publish",
    "push",
    "registration",
    "key_publish",
    "key_push",
    "key_registration",
    "command",
    "connection",
    "login",
    "exempt",
];

/// A rate: a number per second (0 is off) or the text form.
fn rate(raw: &Raw) -> Result<Rate, String> {
    match raw {
        Raw::Toml(Value::Integer(n)) => u32::try_from(*n)
            .map(|n| Rate::per_second(n, n))
            .map_err(|_| format!("{n} is not a rate: use 0 (off) to {}", u32::MAX)),
        Raw::Toml(Value::String(t)) | Raw::Text(t) => t.parse().map_err(|e| format!("{e}")),
        Raw::Toml(v) => Err(format!(
            "expected a rate such as \"100/s burst 200\" or \"off\", found {}",
            v.type_str()
        )),
    }
}

/// CIDR blocks: a TOML array of strings, or comma-separated text.
fn cidrs(raw: &Raw) -> Result<Vec<Cidr>, String> {
    address_blocks(raw)?
        .iter()
        .map(|s| s.parse::<Cidr>().map_err(|e| e.to_string()))
        .collect()
}

/// The items of a list of address blocks: a TOML array of strings, or comma-separated text.
pub(super) fn address_blocks(raw: &Raw) -> Result<Vec<String>, String> {
    Ok(match raw {
        Raw::Toml(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!(
                    "expected address blocks as strings, found {}",
                    other.type_str()
                )),
            })
            .collect::<Result<_, _>>()?,
        Raw::Toml(Value::String(t)) | Raw::Text(t) => t
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        Raw::Toml(v) => {
            return Err(format!(
                "expected an array of address blocks such as [\"10.0.0.0/8\"], found {}",
                v.type_str()
            ))
        }
    })
}

impl Layers {
    /// The rate limits, each defaulting to [`RateLimits::default`]'s.
    pub(super) fn limits(&self) -> Result<RateLimits, ConfigError> {
        let d = RateLimits::default();
        Ok(RateLimits {
            publish: self.get("limits.publish", d.publish, rate)?,
            push: self.get("limits.push", d.push, rate)?,
            registration: self.get("limits.registration", d.registration, rate)?,
            key_publish: self.get("limits.key_publish", d.key_publish, rate)?,
            key_push: self.get("limits.key_push", d.key_push, rate)?,
            key_registration: self.get("limits.key_registration", d.key_registration, rate)?,
            command: self.get("limits.command", d.command, rate)?,
            connection: self.get("limits.connection", d.connection, rate)?,
            login: self.get("limits.login", d.login, rate)?,
            exempt: self.get("limits.exempt", d.exempt, cidrs)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use herald_server::vocabulary::{Rate, RateLimits};

    use super::super::tests::{err, load};
    use super::super::ConfigFlags;

    #[test]
    fn limits_come_from_the_table_and_the_environment() {
        let file = "[limits]\npublish = \"5/s burst 10\"\ncommand = 0\nconnection = 300\n\
                    exempt = [\"10.0.0.0/8\", \"fd00::/8\"]";
        let env = [
            ("HERALD_LIMITS_LOGIN", "3/min"),
            ("HERALD_LIMITS_KEY_PUSH", "off"),
        ];
        let c = load(Some(file), &env, ConfigFlags::default()).unwrap();
        let l = &c.limits;
        assert_eq!(l.publish, Rate::per_second(5, 10));
        assert_eq!(l.command, Rate::OFF);
        assert_eq!(l.connection, Rate::per_second(300, 300));
        assert_eq!(l.login, Rate::new(3, 60, 3));
        assert_eq!(l.key_push, Rate::OFF);
        assert_eq!(l.push, RateLimits::default().push);
        assert_eq!(l.exempt.len(), 2);
        // What config check prints loads back to the same limits.
        let again = load(Some(&c.to_toml_redacted()), &[], ConfigFlags::default()).unwrap();
        assert_eq!(again.limits, c.limits);
    }

    #[test]
    fn a_bad_limit_is_named_with_its_source() {
        let e = err(
            None,
            &[("HERALD_LIMITS_PUBLISH", "lots")],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("limits.publish") && e.contains("HERALD_LIMITS_PUBLISH"),
            "{e}"
        );
        let e = err(
            Some("[limits]\nexempt = [\"10.0.0.0/40\"]"),
            &[],
            ConfigFlags::default(),
        );
        assert!(e.contains("limits.exempt"), "{e}");
        let e = err(Some("[limits]\npublsh = 3"), &[], ConfigFlags::default());
        assert!(e.contains("limits.publsh") && e.contains("publish"), "{e}");
    }
}
