//! The provider keys: the key that seals provider credentials at rest, where APNs and FCM
//! connections go (Apple's and Google's hosts unless a URL is given: a mock or a proxy), an
//! extra CA file trusted for provider connections (read and checked at load, so
//! `herald config check` reports a bad one), the connections per provider and app, and the
//! delivery worker's batch (sends run at once) and lease (how long a job a stopped worker held
//! stays unsent before another takes it).

use std::path::PathBuf;
use std::time::Duration;

use super::layers::{Layers, Raw};
use super::validate::{duration, text, ConfigError};
use super::ProvidersConfig;

/// An `https://host[:port]` base URL, without a trailing slash.
fn base_url(raw: &Raw) -> Result<Option<String>, String> {
    let t = text(raw)?.trim().trim_end_matches('/');
    let rest = t
        .strip_prefix("https://")
        .ok_or("must be an https:// URL (providers are reached over TLS and HTTP/2)")?;
    if rest.is_empty() || rest.contains('/') {
        return Err("must be https://host or https://host:port, with no path".into());
    }
    Ok(Some(t.to_owned()))
}

/// 64 hex digits.
fn hex_key(raw: &Raw) -> Result<Option<String>, String> {
    let t = text(raw)?.trim();
    if t.len() != 64 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("must be 64 hex digits (32 bytes); `openssl rand -hex 32` makes one".into());
    }
    Ok(Some(t.to_owned()))
}

fn file(raw: &Raw) -> Result<Option<PathBuf>, String> {
    let t = text(raw)?;
    if t.is_empty() {
        return Err("must not be empty".into());
    }
    Ok(Some(PathBuf::from(t)))
}

fn connections_like(raw: &Raw) -> Result<usize, String> {
    Ok(match raw {
        Raw::Toml(toml::Value::Integer(n)) => {
            usize::try_from(*n).map_err(|_| "must not be negative")?
        }
        other => text(other)?
            .trim()
            .parse()
            .map_err(|_| "expected a whole number")?,
    })
}

fn connections(raw: &Raw) -> Result<usize, String> {
    let n: usize = match raw {
        Raw::Toml(toml::Value::Integer(n)) => usize::try_from(*n).map_err(|_| "must be 1 to 64")?,
        other => text(other)?
            .trim()
            .parse()
            .map_err(|_| "expected a whole number")?,
    };
    if (1..=64).contains(&n) {
        Ok(n)
    } else {
        Err("must be 1 to 64".into())
    }
}

impl Layers {
    /// The provider settings.
    pub(super) fn providers(&self) -> Result<ProvidersConfig, ConfigError> {
        let ca_file = self.get("provider_ca_file", None, file)?;
        let ca_pem = match &ca_file {
            None => None,
            Some(path) => Some(self.get("provider_ca_file", None, |_| {
                let pem = std::fs::read(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                    return Err(format!("{} holds no PEM certificate", path.display()));
                }
                Ok(Some(pem))
            })?)
            .flatten(),
        };
        Ok(ProvidersConfig {
            credentials_key: self.get("credentials_key", None, hex_key)?,
            apns_url: self.get("apns_url", None, base_url)?,
            fcm_url: self.get("fcm_url", None, base_url)?,
            fcm_token_url: self.get("fcm_token_url", None, |r| {
                let t = text(r)?.trim();
                if t.starts_with("https://") {
                    Ok(Some(t.to_owned()))
                } else {
                    Err("must be an https:// URL".into())
                }
            })?,
            ca_file,
            ca_pem,
            connections: self.get("provider_connections", 4, connections)?,
            batch: self.get("provider_batch", 1000, |r| {
                let n = connections_like(r)?;
                if (1..=10_000).contains(&n) {
                    Ok(n)
                } else {
                    Err("must be 1 to 10000".into())
                }
            })?,
            rounds: self.get("provider_rounds", 2, |r| {
                let n = connections_like(r)?;
                if (1..=16).contains(&n) {
                    Ok(n)
                } else {
                    Err("must be 1 to 16".into())
                }
            })?,
            lease: self.get("provider_lease", Duration::from_secs(60), |r| {
                let d = duration(r)?;
                if d >= Duration::from_secs(1) {
                    Ok(d)
                } else {
                    Err("must be at least 1s".into())
                }
            })?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{err, load};
    use super::super::ConfigFlags;

    #[test]
    fn defaults_and_checks() {
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.providers.apns_url, None);
        assert_eq!(c.providers.connections, 4);
        let c = load(
            None,
            &[
                ("HERALD_APNS_URL", "https://127.0.0.1:8443/"),
                ("HERALD_PROVIDER_CONNECTIONS", "4"),
            ],
            ConfigFlags::default(),
        )
        .unwrap();
        assert_eq!(
            c.providers.apns_url.as_deref(),
            Some("https://127.0.0.1:8443")
        );
        assert_eq!(c.providers.connections, 4);
        let e = err(
            None,
            &[("HERALD_APNS_URL", "http://x")],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("HERALD_APNS_URL") && e.contains("https://"),
            "{e}"
        );
        let e = err(
            None,
            &[("HERALD_CREDENTIALS_KEY", "abc")],
            ConfigFlags::default(),
        );
        assert!(e.contains("64 hex digits"), "{e}");
        let e = err(
            None,
            &[("HERALD_PROVIDER_CA_FILE", "/nonexistent/ca.pem")],
            ConfigFlags::default(),
        );
        assert!(e.contains("cannot read"), "{e}");
        let e = err(
            None,
            &[("HERALD_PROVIDER_CONNECTIONS", "0")],
            ConfigFlags::default(),
        );
        assert!(e.contains("1 to 64"), "{e}");
    }
}
