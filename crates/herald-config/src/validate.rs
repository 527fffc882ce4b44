//! Typing and checking the merged [`Layers`] into a [`Config`]: each key's default and rule,
//! the `[[namespaces]]` entries, the small parsers they share (text, booleans, whole numbers,
//! durations, secrets) and [`ConfigError`], whose messages name the value, where it came from
//! and what is wrong with it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use herald_server::settings::{default_http_workers, DEFAULT_FANOUT_BACKLOG};
use herald_server::vocabulary::{IpNet, SyncMode, DEFAULT_PARK_IDLE_AFTER};
use toml::Value;

use super::layers::{Layers, Raw, RawNamespace, Source, KEYS};
use super::{Config, LogFormat, NamespaceSettings, MIN_TOKEN_SECRET_BYTES};

/// How long audit log entries are kept unless `audit_retention` says otherwise: 90 days.
const DEFAULT_AUDIT_RETENTION: Duration = Duration::from_secs(90 * 24 * 3600);

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The config file is not valid TOML.
    #[error("config file {} is not valid TOML: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message (with line and column).
        message: String,
    },
    /// The config file has a key Herald does not know.
    #[error("unknown key {key:?} in config file {}{hint}", path.display())]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// Dotted key.
        key: String,
        /// ` (did you mean ...?)` or empty.
        hint: String,
    },
    /// A value is of the wrong type or out of range.
    #[error("invalid {what}{value} (from {origin}): {reason}")]
    Invalid {
        /// What the value is, e.g. `listen address`.
        what: String,
        /// ` "the value"` as given, or empty for secrets.
        value: String,
        /// Where it came from.
        origin: Source,
        /// What is wrong with it.
        reason: String,
    },
    /// An environment variable is not valid UTF-8.
    #[error("environment variable {0} is not valid UTF-8")]
    NotUnicode(&'static str),
}

impl Layers {
    /// Types and checks every value (the `[history]` ones first), then the namespaces.
    pub(super) fn build(self, config_file: Option<PathBuf>) -> Result<Config, ConfigError> {
        let d = NamespaceSettings::default();
        let history = NamespaceSettings {
            history_size: self.get("history.size", d.history_size, uint_at_least(1))?,
            history_age: self.get("history.age", d.history_age, duration)?,
            last_on_subscribe: self.get(
                "history.last_on_subscribe",
                d.last_on_subscribe,
                boolean,
            )?,
            // Presence is a `[[namespaces]]` option only.
            ..d
        };
        let default_listen: SocketAddr = ([127, 0, 0, 1], 7070).into();
        let mut history = history;
        let mut sources = self.sources();
        let meteor = self.meteor(&mut history, &mut sources)?;
        let providers = self.providers()?;
        let cluster = self.cluster()?;
        let (tls, meteor_tls) = self.tls()?;
        let meteor = super::MeteorConfig {
            tls: meteor_tls,
            ..meteor
        };
        let mqtt = self.mqtt(tls.is_some())?;
        let pusher = self.pusher()?;
        let workers = self.get("workers", default_http_workers(), threads_at_least(1))?;
        let config = Config {
            listen: self.get("listen", default_listen, |r| {
                text(r)?
                    .parse()
                    .map_err(|e| format!("{e}; expected IP:PORT such as 127.0.0.1:7070"))
            })?,
            data: self.get("data", PathBuf::from("./herald-data"), |r| {
                Some(text(r)?)
                    .filter(|t| !t.is_empty())
                    .map(PathBuf::from)
                    .ok_or("must not be empty".into())
            })?,
            api_key: self.get("api_key", None, secret(16))?,
            admin_key: self.get("admin_key", None, secret(16))?,
            metrics_token: self.get("metrics_token", None, secret(16))?,
            previous_api_key: self.get("previous_api_key", None, secret(16))?,
            token_secret: self.get("token_secret", None, secret(MIN_TOKEN_SECRET_BYTES))?,
            previous_token_secret: self.get(
                "previous_token_secret",
                None,
                secret(MIN_TOKEN_SECRET_BYTES),
            )?,
            allow_anonymous: self.get("allow_anonymous", false, boolean)?,
            admin_session_ttl: self.get("admin_session_ttl", Duration::from_secs(3600), |r| {
                Some(duration(r)?)
                    .filter(|d| d.as_secs() >= 1)
                    .ok_or("must be at least 1s".into())
            })?,
            admin_cookie_secure: self.get("admin_cookie_secure", false, boolean)?,
            sync: self.get("sync", SyncMode::Batch, |r| {
                text(r)?
                    .parse::<SyncMode>()
                    .map_err(|_| "expected \"always\", \"batch\" or \"off\"".into())
            })?,
            wal_preallocate: self.get("wal_preallocate", true, boolean)?,
            max_frame_bytes: self.get("max_frame_bytes", 65536, usize_at_least(1024))?,
            outbox_bytes: self.get("outbox_bytes", 1 << 20, usize_at_least(4096))?,
            catchup_bytes: self.get("catchup_bytes", 64 << 10, usize_at_least(1024))?,
            tail_cache_bytes: self.get("tail_cache_bytes", 64 << 20, usize_at_least(0))?,
            max_subscriptions: self.get("max_subscriptions", 10_000, usize_at_least(1))?,
            ping_interval: self.get("ping_interval", Duration::from_secs(25), |r| {
                Some(duration(r)?)
                    .filter(|d| !d.is_zero())
                    .ok_or("must be longer than 0s".into())
            })?,
            park_idle_after: self.get("park_idle_after", DEFAULT_PARK_IDLE_AFTER, duration)?,
            shutdown_grace: self.get("shutdown_grace", Duration::from_secs(10), duration)?,
            workers,
            http_workers: self.get("http_workers", workers, threads_at_least(0))?,
            fanout_backlog: self.get(
                "fanout_backlog",
                DEFAULT_FANOUT_BACKLOG,
                usize_at_least(0),
            )?,
            jwks_min_refetch: self.get("jwks_min_refetch", Duration::from_secs(10), duration)?,
            jwks_fetch_timeout: self.get("jwks_fetch_timeout", Duration::from_secs(5), |r| {
                Some(duration(r)?)
                    .filter(|d| !d.is_zero() && *d <= Duration::from_secs(60))
                    .ok_or("must be longer than 0s and at most 60s".into())
            })?,
            outbound_allow: self.get("outbound_allow", Vec::new(), ip_nets)?,
            audit_retention: self.get("audit_retention", DEFAULT_AUDIT_RETENTION, |r| {
                Some(duration(r)?)
                    .filter(|d| *d >= Duration::from_secs(1))
                    .ok_or("must be at least 1s".into())
            })?,
            deadlines: self.deadlines()?,
            limits: self.limits()?,
            hooks: self.hooks()?,
            log_format: self.get("log_format", LogFormat::Text, |r| match text(r)? {
                "text" => Ok(LogFormat::Text),
                "json" => Ok(LogFormat::Json),
                _ => Err("expected \"text\" or \"json\"".into()),
            })?,
            log_level: self.get("log_level", "info".to_owned(), |r| {
                let t = text(r)?;
                check_log_filter(t)?;
                Ok(t.to_owned())
            })?,
            namespaces: self.namespace_list(&history)?,
            history,
            meteor,
            mqtt,
            pusher,
            providers,
            cluster,
            tls,
            config_file,
            sources,
        };
        Ok(config)
    }

    /// The winning value of `key` (one of [`KEYS`]) parsed with `parse`, or `default`.
    pub(super) fn get<T>(
        &self,
        key: &str,
        default: T,
        parse: impl Fn(&Raw) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        let Some((raw, source)) = self.values.get(key) else {
            return Ok(default);
        };
        let k = KEYS
            .iter()
            .find(|k| k.name == key)
            .expect("values only holds keys of KEYS");
        check(raw, source, k.what, k.secret, parse)
    }

    /// The `[[namespaces]]` entries, each inheriting what it does not set from `defaults`.
    fn namespace_list(
        &self,
        defaults: &NamespaceSettings,
    ) -> Result<Vec<(String, NamespaceSettings)>, ConfigError> {
        let mut out: Vec<(String, NamespaceSettings)> = Vec::new();
        for (i, ns) in self.namespaces.iter().enumerate() {
            let Some((raw, source)) = ns.get("prefix") else {
                return Err(ConfigError::Invalid {
                    what: format!("namespaces[{i}]"),
                    value: String::new(),
                    origin: self.namespace_origin(i),
                    reason: "missing \"prefix\"".into(),
                });
            };
            let prefix = check(raw, source, "namespace prefix", false, |r| {
                let t = text(r)?;
                if t.is_empty() {
                    return Err("must not be empty".into());
                }
                if !t
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.:@=/".contains(&b))
                {
                    return Err(
                        "only A-Z a-z 0-9 and _ - . : @ = / are allowed in channel names".into(),
                    );
                }
                if out.iter().any(|(p, _)| p == t) {
                    return Err("another namespace has the same prefix".into());
                }
                Ok(t.to_owned())
            })?;
            let settings = NamespaceSettings {
                history_size: field(ns, "history_size", uint_at_least(1))?
                    .unwrap_or(defaults.history_size),
                history_age: field(ns, "history_age", duration)?.unwrap_or(defaults.history_age),
                last_on_subscribe: field(ns, "last_on_subscribe", boolean)?
                    .unwrap_or(defaults.last_on_subscribe),
                presence: field(ns, "presence", boolean)?.unwrap_or(false),
                presence_max_members: field(ns, "presence_max_members", u32_in(1, 1_000_000))?
                    .unwrap_or(defaults.presence_max_members),
                presence_max_data_bytes: field(ns, "presence_max_data_bytes", u32_in(2, 65_536))?
                    .unwrap_or(defaults.presence_max_data_bytes),
            };
            let limit_set = ["presence_max_members", "presence_max_data_bytes"]
                .into_iter()
                .find(|key| ns.contains_key(*key));
            if let (Some(key), false) = (limit_set, settings.presence) {
                let (raw, source) = &ns[key];
                return Err(ConfigError::Invalid {
                    what: format!("namespaces[{i}].{key}"),
                    value: format!(" {}", show(raw)),
                    origin: source.clone(),
                    reason: "a presence limit needs presence = true in the same namespace".into(),
                });
            }
            out.push((prefix, settings));
        }
        Ok(out)
    }
}

/// The namespace field `name` parsed with `parse`, if the entry sets it.
fn field<T>(
    ns: &RawNamespace,
    name: &str,
    parse: impl Fn(&Raw) -> Result<T, String>,
) -> Result<Option<T>, ConfigError> {
    ns.get(name)
        .map(|(raw, source)| check(raw, source, name, false, parse))
        .transpose()
}

/// Parses `raw` with `parse`, wrapping a failure in [`ConfigError::Invalid`].
fn check<T>(
    raw: &Raw,
    source: &Source,
    what: &str,
    secret: bool,
    parse: impl Fn(&Raw) -> Result<T, String>,
) -> Result<T, ConfigError> {
    parse(raw).map_err(|reason| ConfigError::Invalid {
        what: what.to_owned(),
        value: if secret {
            String::new()
        } else {
            format!(" {}", show(raw))
        },
        origin: source.clone(),
        reason,
    })
}

/// A TOML value of the wrong type where `what` was expected.
pub(super) fn wrong_type(value: &Value, what: &str, origin: Source, expected: &str) -> ConfigError {
    ConfigError::Invalid {
        what: what.to_owned(),
        value: String::new(),
        origin,
        reason: format!("expected {expected}, found {}", value.type_str()),
    }
}

/// The value as the user wrote it, shortened.
fn show(raw: &Raw) -> String {
    let s = match raw {
        Raw::Text(t) => format!("{t:?}"),
        Raw::Toml(v) => v.to_string(),
    };
    if s.chars().count() > 80 {
        format!("{}...", s.chars().take(77).collect::<String>())
    } else {
        s
    }
}

pub(super) fn text(raw: &Raw) -> Result<&str, String> {
    match raw {
        Raw::Text(t) => Ok(t),
        Raw::Toml(Value::String(t)) => Ok(t),
        Raw::Toml(v) => Err(format!("expected a string, found {}", v.type_str())),
    }
}

/// A secret of at least `min` bytes.
pub(super) fn secret(min: usize) -> impl Fn(&Raw) -> Result<Option<String>, String> {
    move |r| {
        let t = text(r)?;
        match t.len() {
            0 => Err("must not be empty".to_owned()),
            n if n < min => Err(format!("must be at least {min} bytes, got {n}")),
            _ => Ok(Some(t.to_owned())),
        }
    }
}

pub(super) fn boolean(raw: &Raw) -> Result<bool, String> {
    match raw {
        Raw::Toml(Value::Boolean(b)) => Ok(*b),
        Raw::Toml(v) => Err(format!("expected true or false, found {}", v.type_str())),
        Raw::Text(t) => match t.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err("expected true or false".into()),
        },
    }
}

fn uint(raw: &Raw) -> Result<u64, String> {
    match raw {
        Raw::Toml(Value::Integer(n)) => {
            u64::try_from(*n).map_err(|_| "must not be negative".into())
        }
        Raw::Toml(v) => Err(format!("expected a whole number, found {}", v.type_str())),
        Raw::Text(t) => t
            .trim()
            .parse()
            .map_err(|_| "expected a whole number".into()),
    }
}

/// A whole number of at least `min`.
fn uint_at_least(min: u64) -> impl Fn(&Raw) -> Result<u64, String> {
    move |r| {
        let n = uint(r)?;
        if n < min {
            Err(format!("must be at least {min}"))
        } else {
            Ok(n)
        }
    }
}

/// A whole number from `min` to `max`.
fn u32_in(min: u32, max: u32) -> impl Fn(&Raw) -> Result<u32, String> {
    move |r| {
        let n = uint(r)?;
        match u32::try_from(n) {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(format!("must be {min} to {max}")),
        }
    }
}

/// A whole number of at least `min`, as a size (saturating where `usize` is narrower).
/// A runtime's worker threads: at least `min`, at most 256.
fn threads_at_least(min: u64) -> impl Fn(&Raw) -> Result<usize, String> {
    let parse = usize_at_least(min);
    move |r| {
        Some(parse(r)?)
            .filter(|n| *n <= 256)
            .ok_or("must be at most 256".into())
    }
}

fn usize_at_least(min: u64) -> impl Fn(&Raw) -> Result<usize, String> {
    let parse = uint_at_least(min);
    move |r| parse(r).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

pub(super) fn duration(raw: &Raw) -> Result<Duration, String> {
    let t = match raw {
        Raw::Toml(Value::String(t)) | Raw::Text(t) => t,
        Raw::Toml(v) => {
            return Err(format!(
                "expected a duration string such as \"25s\", found {}",
                v.type_str()
            ))
        }
    };
    humantime::parse_duration(t.trim())
        .map_err(|e| format!("{e}; expected a duration such as \"25s\", \"5m\" or \"24h\""))
}

impl Config {
    /// What `serve` needs beyond each value being valid, so `herald config check` refuses
    /// what `serve` would: a PostgreSQL store needs the secrets every node shares set in the
    /// configuration (they are never kept in the database). `herald migrate` needs neither.
    pub fn check_serve(&self) -> Result<(), ConfigError> {
        if self.cluster.postgres.is_none() {
            return Ok(());
        }
        let missing: Vec<&str> = [
            (self.token_secret.is_none(), "token_secret"),
            (self.providers.credentials_key.is_none(), "credentials_key"),
        ]
        .into_iter()
        .filter_map(|(missing, key)| missing.then_some(key))
        .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(ConfigError::Invalid {
            what: "store".into(),
            value: String::new(),
            origin: self.source("store"),
            reason: format!(
                "a postgres:// store needs {} set too, the same on every node (they are not \
                 kept in the database)",
                missing.join(" and ")
            ),
        })
    }
}

/// A log filter: levels (`info`) and `target=level` directives, comma-separated. A bare word
/// that is not a level (`loud`) would be read as a target name and silence every other line.
fn check_log_filter(filter: &str) -> Result<(), String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    tracing_subscriber::EnvFilter::try_new(filter).map_err(|e| e.to_string())?;
    for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let bare = !directive.contains(['=', '[', ':']);
        if bare && !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(directive)) {
            return Err(format!(
                "{directive:?} is not a level: use off, error, warn, info, debug or trace, or \
                 target=level (herald_edge=debug)"
            ));
        }
    }
    Ok(())
}

/// Address blocks (`10.0.0.0/8`, or one address: `127.0.0.1`, `::1`) that outbound requests to
/// tenant-given URLs may reach besides public addresses.
fn ip_nets(raw: &Raw) -> Result<Vec<IpNet>, String> {
    super::limits::address_blocks(raw)?
        .iter()
        .map(|s| {
            s.parse::<IpNet>()
                .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| format!("{s:?} is not an address block such as 10.0.0.0/8 or ::1"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{err, load};
    use super::super::ConfigFlags;

    #[test]
    fn the_http_runtime_has_as_many_workers_as_the_main_one_unless_told() {
        let cpus = herald_server::settings::default_http_workers();
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert_eq!((c.workers, c.http_workers), (cpus, cpus));
        let c = load(None, &[("HERALD_WORKERS", "1")], ConfigFlags::default()).unwrap();
        assert_eq!((c.workers, c.http_workers), (1, 1));
        let c = load(
            Some("workers = 3\nhttp_workers = 0"),
            &[],
            ConfigFlags::default(),
        )
        .unwrap();
        assert_eq!((c.workers, c.http_workers), (3, 0));
        let e = err(None, &[("HERALD_WORKERS", "0")], ConfigFlags::default());
        assert!(
            e.contains("invalid workers \"0\" (from HERALD_WORKERS): must be at least 1"),
            "{e}"
        );
        let e = err(Some("workers = 257"), &[], ConfigFlags::default());
        assert!(e.contains("must be at most 256"), "{e}");
    }

    #[test]
    fn errors_name_value_and_source() {
        let e = err(None, &[("HERALD_LISTEN", "foo:x")], ConfigFlags::default());
        assert!(
            e.starts_with("invalid listen address \"foo:x\" (from HERALD_LISTEN): "),
            "{e}"
        );
        let e = err(Some("listen = \"foo:x\""), &[], ConfigFlags::default());
        assert!(
            e.contains("\"foo:x\" (from ") && e.contains("herald.toml: listen)"),
            "{e}"
        );
        let flags = ConfigFlags {
            listen: Some("nope".into()),
            ..Default::default()
        };
        assert!(err(None, &[], flags).contains("\"nope\" (from --listen)"));
        let e = err(Some("[history]\nsize = 0"), &[], ConfigFlags::default());
        assert!(
            e.contains("history.size 0 (from ") && e.contains("must be at least 1"),
            "{e}"
        );
        let e = err(
            Some("max_frame_bytes = \"big\""),
            &[],
            ConfigFlags::default(),
        );
        assert!(e.contains("expected a whole number, found string"), "{e}");
        let e = err(
            None,
            &[("HERALD_PING_INTERVAL", "0s")],
            ConfigFlags::default(),
        );
        assert!(e.contains("(from HERALD_PING_INTERVAL)"), "{e}");
        let e = err(None, &[("HERALD_SYNC", "fast")], ConfigFlags::default());
        assert!(
            e.contains("invalid sync mode \"fast\" (from HERALD_SYNC)"),
            "{e}"
        );
        let e = err(
            None,
            &[("HERALD_OUTBOX_BYTES", "100")],
            ConfigFlags::default(),
        );
        assert!(e.contains("must be at least 4096"), "{e}");
        let e = err(Some("log_format = \"xml\""), &[], ConfigFlags::default());
        assert!(e.contains("expected \"text\" or \"json\""), "{e}");
        let e = err(
            Some("[history]\nage = \"forever\""),
            &[],
            ConfigFlags::default(),
        );
        assert!(e.contains("history.age"), "{e}");
    }

    #[test]
    fn secrets_are_checked_but_never_echoed() {
        let flags = ConfigFlags {
            token_secret: Some("short-secret".into()),
            ..Default::default()
        };
        let e = err(None, &[], flags);
        assert_eq!(
            e,
            "invalid token_secret (from --token-secret): must be at least 16 bytes, got 12"
        );
        let flags = ConfigFlags {
            token_secret: Some("0123456789abcdef".into()),
            ..Default::default()
        };
        let env = [
            ("HERALD_API_KEY", "hk_test_key_do_not_show"),
            ("HERALD_METRICS_TOKEN", "metrics_token_do_not_show"),
        ];
        let c = load(None, &env, flags).unwrap();
        assert_eq!(c.token_secret.as_deref(), Some("0123456789abcdef"));
        let shown = format!("{c:?}\n{}", c.to_toml_redacted());
        assert!(
            !shown.contains("0123456789abcdef")
                && !shown.contains("hk_test_key")
                && !shown.contains("metrics_token_do"),
            "{shown}"
        );
    }

    #[test]
    fn bad_namespaces() {
        let dup = "[[namespaces]]\nprefix = \"a/\"\n[[namespaces]]\nprefix = \"a/\"";
        let e = err(Some(dup), &[], ConfigFlags::default());
        assert!(
            e.contains("namespaces[1].prefix") && e.contains("same prefix"),
            "{e}"
        );
        let e = err(
            Some("[[namespaces]]\nprefix = \"\""),
            &[],
            ConfigFlags::default(),
        );
        assert!(e.contains("must not be empty"), "{e}");
        let e = err(
            Some("[[namespaces]]\nhistory_size = 3"),
            &[],
            ConfigFlags::default(),
        );
        assert!(e.contains("missing \"prefix\""), "{e}");
    }

    #[test]
    fn what_serve_refuses_config_check_refuses_too() {
        // A PostgreSQL store without the secrets every node shares.
        let store = [("HERALD_STORE", "postgres://herald@127.0.0.1:5432/herald")];
        let c = load(None, &store, ConfigFlags::default()).unwrap();
        let e = c.check_serve().unwrap_err().to_string();
        assert!(
            e.contains("(from HERALD_STORE)")
                && e.contains("needs token_secret and credentials_key set too"),
            "{e}"
        );
        let secrets = [
            store[0],
            ("HERALD_TOKEN_SECRET", "0123456789abcdef0123"),
            (
                "HERALD_CREDENTIALS_KEY",
                "00000000000000000000000000000000000000000000000000000000000000ab",
            ),
        ];
        let c = load(None, &secrets, ConfigFlags::default()).unwrap();
        assert!(c.check_serve().is_ok());
        // A log filter that is not a level.
        let e = err(Some("log_level = \"loud\""), &[], ConfigFlags::default());
        assert!(e.contains("\"loud\" is not a level"), "{e}");
        for good in ["info", "WARN", "herald_edge=debug,info", "off"] {
            let c = load(None, &[("HERALD_LOG", good)], ConfigFlags::default()).unwrap();
            assert_eq!(c.log_level, good);
        }
    }

    #[test]
    fn outbound_allow_takes_blocks_and_single_addresses() {
        let c = load(
            Some("outbound_allow = [\"127.0.0.1\", \"10.20.0.0/16\", \"::1\"]"),
            &[],
            ConfigFlags::default(),
        )
        .unwrap();
        let shown: Vec<String> = c.outbound_allow.iter().map(|n| n.to_string()).collect();
        assert_eq!(shown, ["127.0.0.1/32", "10.20.0.0/16", "::1/128"]);
        let e = err(
            None,
            &[("HERALD_OUTBOUND_ALLOW", "10.0.0.0/40")],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("outbound_allow") && e.contains("HERALD_OUTBOUND_ALLOW"),
            "{e}"
        );
    }
}
