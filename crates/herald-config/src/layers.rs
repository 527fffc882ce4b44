//! The layering of configuration sources: the table of settable keys ([`KEYS`]: config key,
//! environment variables, how errors name it), where a value came from ([`Source`]), and
//! [`Layers`], which collects the winning raw value of every key as the config file, the
//! `HERALD_*` environment and the flags are applied in turn (later layers override earlier
//! ones). Reading the file is in [`super::file`]; typing the values in [`super::validate`].

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use toml::Value;

use super::{ConfigError, ConfigFlags};

/// Where a configuration value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The built-in default.
    Default,
    /// A key of the config file.
    File {
        /// The file, as given.
        path: PathBuf,
        /// Dotted key, e.g. `history.size` or `namespaces[0].prefix`.
        key: String,
    },
    /// An environment variable.
    Env(&'static str),
    /// A command-line flag.
    Flag(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File { path, key } => write!(f, "{}: {key}", path.display()),
            Source::Env(name) => f.write_str(name),
            Source::Flag(name) => f.write_str(name),
        }
    }
}

/// A value as a layer supplied it: text (environment, flags) or TOML.
#[derive(Debug, Clone)]
pub(super) enum Raw {
    Text(String),
    Toml(Value),
}

/// One settable scalar: its config key, environment variables (later ones win), how error
/// messages name it and whether its value must never be echoed.
pub(super) struct Key {
    pub(super) name: &'static str,
    pub(super) env: &'static [&'static str],
    pub(super) what: &'static str,
    pub(super) secret: bool,
}

/// A non-secret key that error messages call by its name.
const fn key(name: &'static str, env: &'static [&'static str]) -> Key {
    Key {
        name,
        env,
        what: name,
        secret: false,
    }
}

impl Key {
    /// The same key, called `what` in error messages.
    const fn what(self, what: &'static str) -> Key {
        Key { what, ..self }
    }

    /// The same key, its value never shown.
    const fn secret(self) -> Key {
        Key {
            secret: true,
            ..self
        }
    }
}

/// Every scalar key.
pub(super) const KEYS: &[Key] = &[
    key("listen", &["HERALD_LISTEN"]).what("listen address"),
    key("data", &["HERALD_DATA"]).what("data directory"),
    key("api_key", &["HERALD_API_KEY"]).secret(),
    key("admin_key", &["HERALD_ADMIN_KEY"]).secret(),
    key("metrics_token", &["HERALD_METRICS_TOKEN"]).secret(),
    key("previous_api_key", &["HERALD_PREVIOUS_API_KEY"]).secret(),
    key("token_secret", &["HERALD_TOKEN_SECRET"]).secret(),
    key("previous_token_secret", &["HERALD_PREVIOUS_TOKEN_SECRET"]).secret(),
    key("allow_anonymous", &["HERALD_ALLOW_ANONYMOUS"]),
    key("admin_session_ttl", &["HERALD_ADMIN_SESSION_TTL"]),
    key("admin_cookie_secure", &["HERALD_ADMIN_COOKIE_SECURE"]),
    key("sync", &["HERALD_SYNC"]).what("sync mode"),
    key("wal_preallocate", &["HERALD_WAL_PREALLOCATE"]),
    key("max_frame_bytes", &["HERALD_MAX_FRAME_BYTES"]),
    key("outbox_bytes", &["HERALD_OUTBOX_BYTES"]),
    key("catchup_bytes", &["HERALD_CATCHUP_BYTES"]),
    key("tail_cache_bytes", &["HERALD_TAIL_CACHE_BYTES"]),
    key("max_subscriptions", &["HERALD_MAX_SUBSCRIPTIONS"]),
    key("ping_interval", &["HERALD_PING_INTERVAL"]),
    key("park_idle_after", &["HERALD_PARK_IDLE_AFTER"]),
    key("shutdown_grace", &["HERALD_SHUTDOWN_GRACE"]),
    key("workers", &["HERALD_WORKERS"]),
    key("http_workers", &["HERALD_HTTP_WORKERS"]),
    key("fanout_backlog", &["HERALD_FANOUT_BACKLOG"]),
    key("jwks_min_refetch", &["HERALD_JWKS_MIN_REFETCH"]),
    key("jwks_fetch_timeout", &["HERALD_JWKS_FETCH_TIMEOUT"]),
    key("outbound_allow", &["HERALD_OUTBOUND_ALLOW"]),
    key("audit_retention", &["HERALD_AUDIT_RETENTION"]),
    key("first_byte_timeout", &["HERALD_FIRST_BYTE_TIMEOUT"]),
    key("head_timeout", &["HERALD_HEAD_TIMEOUT"]),
    key("body_timeout", &["HERALD_BODY_TIMEOUT"]),
    key("keepalive_timeout", &["HERALD_KEEPALIVE_TIMEOUT"]),
    key(
        "meteor_control_idle_timeout",
        &["HERALD_METEOR_CONTROL_IDLE_TIMEOUT"],
    ),
    key("log_format", &["HERALD_LOG_FORMAT"]),
    key("log_level", &["RUST_LOG", "HERALD_LOG"]).what("log filter"),
    key("history.size", &["HERALD_HISTORY_SIZE"]),
    key("history.age", &["HERALD_HISTORY_AGE"]),
    key(
        "history.last_on_subscribe",
        &["HERALD_HISTORY_LAST_ON_SUBSCRIBE"],
    ),
    key("meteor", &["HERALD_METEOR"]).what("meteor address"),
    key("meteor_control", &["HERALD_METEOR_CONTROL"]).what("meteor_control address"),
    key("meteor_conf", &["HERALD_METEOR_CONF"]),
    key("meteor_document_root", &["HERALD_METEOR_DOCUMENT_ROOT"]),
    key("meteor_channels", &["HERALD_METEOR_CHANNELS"]),
    key(
        "meteor_control_password",
        &["HERALD_METEOR_CONTROL_PASSWORD"],
    )
    .secret(),
    key("credentials_key", &["HERALD_CREDENTIALS_KEY"]).secret(),
    key("apns_url", &["HERALD_APNS_URL"]),
    key("fcm_url", &["HERALD_FCM_URL"]),
    key("fcm_token_url", &["HERALD_FCM_TOKEN_URL"]),
    key("provider_ca_file", &["HERALD_PROVIDER_CA_FILE"]),
    key("tls_cert", &["HERALD_TLS_CERT"]),
    key("tls_key", &["HERALD_TLS_KEY"]),
    key("meteor_tls", &["HERALD_METEOR_TLS"]),
    key("mqtt_listen", &["HERALD_MQTT_LISTEN"]).what("mqtt_listen address"),
    key("mqtt_tls", &["HERALD_MQTT_TLS"]),
    key("mqtt.websocket", &["HERALD_MQTT_WEBSOCKET"]),
    key("mqtt.max_keep_alive", &["HERALD_MQTT_MAX_KEEP_ALIVE"]),
    key("mqtt.max_packet_size", &["HERALD_MQTT_MAX_PACKET_SIZE"]),
    key("mqtt.receive_maximum", &["HERALD_MQTT_RECEIVE_MAXIMUM"]),
    key("mqtt.max_inflight_out", &["HERALD_MQTT_MAX_INFLIGHT_OUT"]),
    key("mqtt.max_topic_aliases", &["HERALD_MQTT_MAX_TOPIC_ALIASES"]),
    key(
        "mqtt.max_topic_aliases_out",
        &["HERALD_MQTT_MAX_TOPIC_ALIASES_OUT"],
    ),
    key(
        "mqtt.max_session_expiry",
        &["HERALD_MQTT_MAX_SESSION_EXPIRY"],
    ),
    key(
        "mqtt.max_retained_per_filter",
        &["HERALD_MQTT_MAX_RETAINED_PER_FILTER"],
    ),
    key(
        "mqtt.max_offline_channels_per_filter",
        &["HERALD_MQTT_MAX_OFFLINE_CHANNELS_PER_FILTER"],
    ),
    key("mqtt.sys_interval", &["HERALD_MQTT_SYS_INTERVAL"]),
    key("mqtt.allow_anonymous", &["HERALD_MQTT_ALLOW_ANONYMOUS"]),
    key(
        "mqtt.anonymous_ignores_unknown_passwords",
        &["HERALD_MQTT_ANONYMOUS_IGNORES_UNKNOWN_PASSWORDS"],
    ),
    key("mqtt.anonymous_app", &["HERALD_MQTT_ANONYMOUS_APP"]),
    key("mqtt.anonymous_rules", &["HERALD_MQTT_ANONYMOUS_RULES"]),
    key(
        "pusher.activity_timeout",
        &["HERALD_PUSHER_ACTIVITY_TIMEOUT"],
    ),
    key("pusher.pong_timeout", &["HERALD_PUSHER_PONG_TIMEOUT"]),
    key(
        "pusher.client_events_per_second",
        &["HERALD_PUSHER_CLIENT_EVENTS_PER_SECOND"],
    ),
    key(
        "pusher.presence_max_members",
        &["HERALD_PUSHER_PRESENCE_MAX_MEMBERS"],
    ),
    key("provider_connections", &["HERALD_PROVIDER_CONNECTIONS"]),
    key("provider_batch", &["HERALD_PROVIDER_BATCH"]),
    key("provider_lease", &["HERALD_PROVIDER_LEASE"]),
    key("provider_rounds", &["HERALD_PROVIDER_ROUNDS"]),
    // URLs may carry passwords: errors never echo them (config check prints them redacted).
    key("store", &["HERALD_STORE"]).secret(),
    key("bus", &["HERALD_BUS"]).secret(),
    key("redis_cluster", &["HERALD_REDIS_CLUSTER"]),
    key("redis_ca_file", &["HERALD_REDIS_CA_FILE"]),
    key("postgres_pool", &["HERALD_POSTGRES_POOL"]),
    key("redis_receive_queue", &["HERALD_REDIS_RECEIVE_QUEUE"]),
    key("limits.publish", &["HERALD_LIMITS_PUBLISH"]),
    key("limits.push", &["HERALD_LIMITS_PUSH"]),
    key("limits.registration", &["HERALD_LIMITS_REGISTRATION"]),
    key("limits.key_publish", &["HERALD_LIMITS_KEY_PUBLISH"]),
    key("limits.key_push", &["HERALD_LIMITS_KEY_PUSH"]),
    key(
        "limits.key_registration",
        &["HERALD_LIMITS_KEY_REGISTRATION"],
    ),
    key("limits.command", &["HERALD_LIMITS_COMMAND"]),
    key("limits.connection", &["HERALD_LIMITS_CONNECTION"]),
    key("limits.login", &["HERALD_LIMITS_LOGIN"]),
    key("limits.exempt", &["HERALD_LIMITS_EXEMPT"]),
    key("hooks.batch_max", &["HERALD_HOOKS_BATCH_MAX"]),
    key("hooks.batch_delay", &["HERALD_HOOKS_BATCH_DELAY"]),
    key("hooks.retry_horizon", &["HERALD_HOOKS_RETRY_HORIZON"]),
    key(
        "hooks.max_queued_per_endpoint",
        &["HERALD_HOOKS_MAX_QUEUED_PER_ENDPOINT"],
    ),
    key("hooks.node_queue", &["HERALD_HOOKS_NODE_QUEUE"]),
    key("hooks.request_timeout", &["HERALD_HOOKS_REQUEST_TIMEOUT"]),
    key(
        "hooks.max_endpoints_per_app",
        &["HERALD_HOOKS_MAX_ENDPOINTS_PER_APP"],
    ),
    key(
        "hooks.subscription_count_interval",
        &["HERALD_HOOKS_SUBSCRIPTION_COUNT_INTERVAL"],
    ),
];

/// The keys of one `[[namespaces]]` entry.
pub(super) const NAMESPACE_KEYS: &[&str] = &[
    "prefix",
    "history_size",
    "history_age",
    "last_on_subscribe",
    "presence",
    "presence_max_members",
    "presence_max_data_bytes",
];

/// The raw fields of one `[[namespaces]]` entry, by key.
pub(super) type RawNamespace = BTreeMap<String, (Raw, Source)>;

/// The merged layers before typing: the winning raw value of every key.
#[derive(Default)]
pub(super) struct Layers {
    pub(super) values: HashMap<&'static str, (Raw, Source)>,
    pub(super) namespaces: Vec<RawNamespace>,
}

/// `env`'s value of `name` as text; an empty variable counts as unset.
pub(super) fn env_text(
    env: &impl Fn(&str) -> Option<OsString>,
    name: &'static str,
) -> Result<Option<String>, ConfigError> {
    match env(name) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => v
            .into_string()
            .map(Some)
            .map_err(|_| ConfigError::NotUnicode(name)),
    }
}

impl Layers {
    /// Applies the environment variables of every key, as `env` reports them.
    pub(super) fn read_env(
        &mut self,
        env: &impl Fn(&str) -> Option<OsString>,
    ) -> Result<(), ConfigError> {
        for k in KEYS {
            for &name in k.env {
                if let Some(text) = env_text(env, name)? {
                    self.values
                        .insert(k.name, (Raw::Text(text), Source::Env(name)));
                }
            }
        }
        Ok(())
    }

    /// Applies the command-line flags that were given.
    pub(super) fn read_flags(&mut self, flags: &ConfigFlags) {
        let data = flags
            .data
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned());
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
        let flag_values = [
            ("listen", "--listen", flags.listen.clone()),
            ("data", "--data", data),
            ("api_key", "--api-key", flags.api_key.clone()),
            ("admin_key", "--admin-key", flags.admin_key.clone()),
            ("token_secret", "--token-secret", flags.token_secret.clone()),
            (
                "allow_anonymous",
                "--allow-anonymous",
                flags.allow_anonymous.clone(),
            ),
            (
                "admin_session_ttl",
                "--admin-session-ttl",
                flags.admin_session_ttl.clone(),
            ),
            (
                "admin_cookie_secure",
                "--admin-cookie-secure",
                flags.admin_cookie_secure.clone(),
            ),
            ("sync", "--sync", flags.sync.clone()),
            ("store", "--store", flags.store.clone()),
            ("bus", "--bus", flags.bus.clone()),
            ("log_format", "--log-format", flags.log_format.clone()),
            ("log_level", "--log-level", flags.log_level.clone()),
            ("meteor", "--meteor", flags.meteor.clone()),
            (
                "meteor_control",
                "--meteor-control",
                flags.meteor_control.clone(),
            ),
            ("meteor_conf", "--meteor-conf", path(&flags.meteor_conf)),
            (
                "meteor_document_root",
                "--meteor-document-root",
                path(&flags.meteor_document_root),
            ),
            (
                "meteor_control_password",
                "--meteor-control-password",
                flags.meteor_control_password.clone(),
            ),
            (
                "credentials_key",
                "--credentials-key",
                flags.credentials_key.clone(),
            ),
            ("apns_url", "--apns-url", flags.apns_url.clone()),
            ("fcm_url", "--fcm-url", flags.fcm_url.clone()),
            (
                "fcm_token_url",
                "--fcm-token-url",
                flags.fcm_token_url.clone(),
            ),
            (
                "provider_ca_file",
                "--provider-ca-file",
                path(&flags.provider_ca_file),
            ),
            (
                "outbound_allow",
                "--outbound-allow",
                flags.outbound_allow.clone(),
            ),
            ("tls_cert", "--tls-cert", path(&flags.tls_cert)),
            ("tls_key", "--tls-key", path(&flags.tls_key)),
            ("meteor_tls", "--meteor-tls", flags.meteor_tls.clone()),
            ("mqtt_listen", "--mqtt", flags.mqtt.clone()),
            ("mqtt_tls", "--mqtt-tls", flags.mqtt_tls.clone()),
        ];
        for (key, flag, value) in flag_values {
            if let Some(value) = value {
                self.values
                    .insert(key, (Raw::Text(value), Source::Flag(flag)));
            }
        }
    }

    /// Where each value that some layer set came from, including namespace prefixes.
    pub(super) fn sources(&self) -> BTreeMap<String, Source> {
        let scalars = self
            .values
            .iter()
            .map(|(key, (_, source))| ((*key).to_owned(), source.clone()));
        let prefixes = self.namespaces.iter().enumerate().filter_map(|(i, ns)| {
            let (_, source) = ns.get("prefix")?;
            Some((format!("namespaces[{i}].prefix"), source.clone()))
        });
        scalars.chain(prefixes).collect()
    }

    /// Where the `i`th namespace as a whole came from (for errors about a missing field).
    pub(super) fn namespace_origin(&self, i: usize) -> Source {
        match self.namespaces[i].values().next() {
            Some((_, Source::File { path, .. })) => Source::File {
                path: path.clone(),
                key: format!("namespaces[{i}]"),
            },
            _ => Source::Default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::load;
    use super::super::ConfigFlags;
    use super::Source;
    use herald_server::vocabulary::SyncMode;

    #[test]
    fn precedence_file_env_flag() {
        let file = "listen = \"127.0.0.1:1\"\nsync = \"off\"\nmax_frame_bytes = 2048\n";
        let env = [("HERALD_LISTEN", "127.0.0.1:2"), ("HERALD_SYNC", "always")];
        let c = load(Some(file), &env, ConfigFlags::default()).unwrap();
        assert_eq!(c.listen.port(), 2);
        assert_eq!(c.sync, SyncMode::Always);
        assert_eq!(c.max_frame_bytes, 2048);
        assert_eq!(c.source("listen"), Source::Env("HERALD_LISTEN"));
        assert!(
            matches!(c.source("max_frame_bytes"), Source::File { key, .. } if key == "max_frame_bytes")
        );

        let flags = ConfigFlags {
            listen: Some("127.0.0.1:3".into()),
            ..Default::default()
        };
        let c = load(Some(file), &env, flags).unwrap();
        assert_eq!(c.listen.port(), 3);
        assert_eq!(c.source("listen"), Source::Flag("--listen"));
        assert_eq!(c.sync, SyncMode::Always);
    }

    #[test]
    fn herald_log_beats_rust_log_and_empty_env_is_unset() {
        let c = load(
            None,
            &[("RUST_LOG", "warn"), ("HERALD_LOG", "debug")],
            ConfigFlags::default(),
        )
        .unwrap();
        assert_eq!(c.log_level, "debug");
        let c = load(None, &[("RUST_LOG", "warn")], ConfigFlags::default()).unwrap();
        assert_eq!(
            (c.log_level.as_str(), c.source("log_level")),
            ("warn", Source::Env("RUST_LOG"))
        );
        let c = load(
            Some("listen = \"127.0.0.1:9\""),
            &[("HERALD_LISTEN", "")],
            ConfigFlags::default(),
        )
        .unwrap();
        assert_eq!(c.listen.port(), 9);
    }

    #[test]
    fn allow_anonymous_flag_can_turn_env_off() {
        let env = [("HERALD_ALLOW_ANONYMOUS", "yes")];
        assert!(
            load(None, &env, ConfigFlags::default())
                .unwrap()
                .allow_anonymous
        );
        let flags = ConfigFlags {
            allow_anonymous: Some("false".into()),
            ..Default::default()
        };
        assert!(!load(None, &env, flags).unwrap().allow_anonymous);
    }

    #[test]
    fn admin_session_settings_layer_and_are_checked() {
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.admin_session_ttl, std::time::Duration::from_secs(3600));
        assert!(!c.admin_cookie_secure);
        let file = "admin_session_ttl = \"2h\"\nadmin_cookie_secure = true\n";
        let env = [("HERALD_ADMIN_SESSION_TTL", "30m")];
        let c = load(Some(file), &env, ConfigFlags::default()).unwrap();
        assert_eq!(c.admin_session_ttl, std::time::Duration::from_secs(1800));
        assert!(c.admin_cookie_secure);
        let flags = ConfigFlags {
            admin_session_ttl: Some("45s".into()),
            admin_cookie_secure: Some("false".into()),
            ..Default::default()
        };
        let c = load(Some(file), &env, flags).unwrap();
        assert_eq!(c.admin_session_ttl, std::time::Duration::from_secs(45));
        assert!(!c.admin_cookie_secure);
        let flags = ConfigFlags {
            admin_session_ttl: Some("0s".into()),
            ..Default::default()
        };
        let e = super::super::tests::err(None, &[], flags);
        assert!(
            e.contains("admin_session_ttl") && e.contains("--admin-session-ttl"),
            "{e}"
        );
    }
}
