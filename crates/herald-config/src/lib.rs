//! Herald's configuration: defaults, then a TOML file, then `HERALD_*` environment variables,
//! then command-line flags, each later layer overriding the earlier ones. Every value remembers
//! where it came from, so a validation error names the culprit (`(from HERALD_LISTEN)`,
//! `(from herald.toml: listen)`, `(from --listen)`). The typed result is [`Config`].
//!
//! A library of its own so that every reader of a config reads it the same way: the `herald`
//! binary (its commands, and `herald serve`, which turns a [`Config`] into the server's
//! settings) and the config file's fuzz target (`herald-fuzz`). The settings' types, defaults,
//! TLS certificate checks and secret files are the server library's (`herald-server`).
//!
//! The crate root owns the public face: [`Config`] and its settings types, the shared
//! [`ConfigFlags`], [`Config::load`] and [`read_secret_file`]. The work is done by
//! `layers` (keys, sources, environment and flags), `file` (the TOML file), `deadlines`
//! (the connection deadlines), `limits`, `hooks`, `cluster`, `meteor`, `mqtt`, `pusher`, `providers` and
//! `tls` (their groups of keys), `validate` (typing and checking values, [`ConfigError`]) and `redacted`
//! (printing without secrets).

mod cluster;
mod deadlines;
mod file;
mod hooks;
mod layers;
mod limits;
mod meteor;
mod mqtt;
mod providers;
mod pusher;
mod redacted;
mod tls;
mod validate;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use herald_server::vocabulary::{
    Deadlines, IpNet, NamespaceOptions, Namespaces, RateLimits, Retention, SqliteOptions, SyncMode,
};

use layers::{env_text, Layers};

pub use layers::Source;
pub use tls::TlsConfig;
pub use validate::ConfigError;

pub use herald_server::{read_secret_file, TOKEN_SECRET_FILE};
/// Shortest accepted token secret, in bytes.
pub const MIN_TOKEN_SECRET_BYTES: usize = 16;

/// The configuration flags shared by `herald serve`, `herald config check` and `herald token`.
/// Values are kept as text and parsed by [`Config::load`] so errors name the flag.
// The field docs are `--help` text, where `<placeholder>` is plain text, not HTML.
#[allow(rustdoc::invalid_html_tags)]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigFlags {
    /// TOML config file [env: HERALD_CONFIG] (default: none, only defaults and environment)
    #[arg(long, short = 'c', value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Address to listen on, IP:PORT (port 0 picks a free port) [env: HERALD_LISTEN]
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Data directory (database, generated secrets) [env: HERALD_DATA]
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Publisher API key; generated on first run if unset [env: HERALD_API_KEY]
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
    /// Admin key: creates, lists and deletes apps and their keys; app administration is off
    /// without one [env: HERALD_ADMIN_KEY]
    #[arg(long, value_name = "KEY")]
    pub admin_key: Option<String>,
    /// Secret signing client tokens, at least 16 bytes [env: HERALD_TOKEN_SECRET]
    #[arg(long, value_name = "SECRET")]
    pub token_secret: Option<String>,
    /// Let clients without a token subscribe [env: HERALD_ALLOW_ANONYMOUS]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub allow_anonymous: Option<String>,
    /// How long an admin dashboard login lasts, e.g. "1h" or "30m"
    /// [env: HERALD_ADMIN_SESSION_TTL] (default: 1h)
    #[arg(long, value_name = "DURATION")]
    pub admin_session_ttl: Option<String>,
    /// Mark the admin dashboard's session cookie Secure: browsers reach the server over https
    /// (a TLS-terminating proxy) [env: HERALD_ADMIN_COOKIE_SECURE] (default: false)
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub admin_cookie_secure: Option<String>,
    /// Store durability: always, batch or off [env: HERALD_SYNC]
    #[arg(long, value_name = "MODE")]
    pub sync: Option<String>,
    /// Where the durable state lives: "sqlite" (in the data directory) or a postgres:// URL
    /// shared by every node of a cluster [env: HERALD_STORE] (default: sqlite)
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// How nodes reach each other: "local" (one node) or redis:// URLs, comma-separated
    /// (rediss:// for TLS; several for Redis Cluster) [env: HERALD_BUS] (default: local)
    #[arg(long, value_name = "URLS")]
    pub bus: Option<String>,
    /// Log format: text or json [env: HERALD_LOG_FORMAT]
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<String>,
    /// Log filter, e.g. "info" or "herald=debug,info" [env: HERALD_LOG, RUST_LOG]
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// Serve Meteor's subscriber protocol on IP:PORT (or PORT on 127.0.0.1); off unless given
    /// [env: HERALD_METEOR]
    #[arg(long, value_name = "ADDR")]
    pub meteor: Option<String>,
    /// Serve Meteor's controller protocol on IP:PORT (or PORT on 127.0.0.1); off unless given
    /// [env: HERALD_METEOR_CONTROL]
    #[arg(long, value_name = "ADDR")]
    pub meteor_control: Option<String>,
    /// A Meteor configuration file (meteord.conf) with the modes and templates to serve
    /// [env: HERALD_METEOR_CONF] (default: Meteor's shipped modes)
    #[arg(long, value_name = "PATH")]
    pub meteor_conf: Option<PathBuf>,
    /// Folder served under / on the Meteor subscriber port (meteor.js and its pages)
    /// [env: HERALD_METEOR_DOCUMENT_ROOT]
    #[arg(long, value_name = "DIR")]
    pub meteor_document_root: Option<PathBuf>,
    /// Password a Meteor controller must send first, as "AUTH <password>"
    /// [env: HERALD_METEOR_CONTROL_PASSWORD]
    #[arg(long, value_name = "PASSWORD")]
    pub meteor_control_password: Option<String>,
    /// Key (64 hex digits) sealing provider credentials at rest
    /// [env: HERALD_CREDENTIALS_KEY] (default: generated into <data>/credentials-key)
    #[arg(long, value_name = "HEX")]
    pub credentials_key: Option<String>,
    /// Send APNs pushes to this https:// base URL instead of Apple's (a mock or a proxy)
    /// [env: HERALD_APNS_URL]
    #[arg(long, value_name = "URL")]
    pub apns_url: Option<String>,
    /// Send FCM pushes to this https:// base URL instead of Google's [env: HERALD_FCM_URL]
    #[arg(long, value_name = "URL")]
    pub fcm_url: Option<String>,
    /// Fetch FCM access tokens from this URL instead of the service account's token_uri
    /// [env: HERALD_FCM_TOKEN_URL]
    #[arg(long, value_name = "URL")]
    pub fcm_token_url: Option<String>,
    /// Also trust the PEM certificates in this file for provider connections (a mock's)
    /// [env: HERALD_PROVIDER_CA_FILE]
    #[arg(long, value_name = "PATH")]
    pub provider_ca_file: Option<PathBuf>,
    /// Also let Web Push endpoints, JWKS URLs and webhook endpoints, which tenants give, reach
    /// these address blocks, comma-separated (e.g. 127.0.0.1/32 for a local mock); otherwise
    /// only public addresses are reached [env: HERALD_OUTBOUND_ALLOW] (default: none)
    #[arg(long, value_name = "CIDRS")]
    pub outbound_allow: Option<String>,
    /// Serve HTTPS: the PEM certificate chain (with --tls-key); SIGHUP reloads it
    /// [env: HERALD_TLS_CERT] (default: plain HTTP)
    #[arg(long, value_name = "PATH")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert (PKCS#8, SEC1 or RSA) [env: HERALD_TLS_KEY]
    #[arg(long, value_name = "PATH")]
    pub tls_key: Option<PathBuf>,
    /// Meteor's subscriber and controller ports serve TLS too, with the same certificate
    /// [env: HERALD_METEOR_TLS] (default: false)
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub meteor_tls: Option<String>,
    /// Serve MQTT 3.1.1 and 5.0 on IP:PORT (or PORT on 127.0.0.1; port 0 picks a free port);
    /// off unless given [env: HERALD_MQTT_LISTEN]
    #[arg(long, value_name = "ADDR")]
    pub mqtt: Option<String>,
    /// The MQTT listener serves TLS (MQTT over TLS, usually port 8883) with the server's
    /// certificate [env: HERALD_MQTT_TLS] (default: false)
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub mqtt_tls: Option<String>,
}

/// Provider delivery settings. No `Debug`: it holds the credentials key.
#[derive(Clone, Default)]
pub struct ProvidersConfig {
    /// Seals provider credentials; `None`: generated into the data directory.
    pub credentials_key: Option<String>,
    /// APNs base URL override.
    pub apns_url: Option<String>,
    /// FCM base URL override.
    pub fcm_url: Option<String>,
    /// FCM token URL override.
    pub fcm_token_url: Option<String>,
    /// Extra CA file for provider connections.
    pub ca_file: Option<PathBuf>,
    /// Its certificates, read at load.
    pub ca_pem: Option<Vec<u8>>,
    /// HTTP/2 connections per provider and app.
    pub connections: usize,
    /// Jobs a delivery round leases and sends at once.
    pub batch: usize,
    /// How long a lease lasts.
    pub lease: Duration,
    /// Delivery rounds run at once.
    pub rounds: usize,
}

/// Cluster mode. No `Debug`: the URLs may hold passwords.
#[derive(Clone, Default)]
pub struct ClusterConfig {
    /// A shared PostgreSQL store; `None`: SQLite in the data directory.
    pub postgres: Option<String>,
    /// Redis URLs of the bus; empty: one node.
    pub redis: Vec<String>,
    /// The Redis URLs are nodes of a Redis Cluster.
    pub redis_cluster: bool,
    /// Extra CA file trusted for `rediss://` bus URLs.
    pub redis_ca_file: Option<PathBuf>,
    /// Its certificates, read at load.
    pub redis_ca_pem: Option<Vec<u8>>,
    /// PostgreSQL connections per node.
    pub postgres_pool: usize,
    /// Redis messages the bus's receiver may fall behind by before it re-reads from the log.
    pub redis_receive_queue: usize,
}

/// The Meteor ports' settings. No `Debug`: it holds the controller password.
#[derive(Clone, Default)]
pub struct MeteorConfig {
    /// Subscriber port address; `None` = off.
    pub listen: Option<SocketAddr>,
    /// Controller port address; `None` = off.
    pub control: Option<SocketAddr>,
    /// The meteord.conf read, if any.
    pub conf_file: Option<PathBuf>,
    /// The modes and templates (Meteor's shipped ones without a file).
    pub conf: Option<herald_server::vocabulary::MeteorConf>,
    /// Folder served under `/` of the subscriber port.
    pub document_root: Option<PathBuf>,
    /// Password controllers must send first.
    pub control_password: Option<String>,
    /// Channel patterns the subscriber port may subscribe to; `None`: every channel.
    pub channels: Option<Vec<String>>,
    /// Both ports serve TLS with the server's certificate.
    pub tls: bool,
}

/// History and delivery settings of a namespace (or of the default namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamespaceSettings {
    /// Keep at most this many messages per channel (at least 1).
    pub history_size: u64,
    /// Drop messages older than this; zero means no age limit.
    pub history_age: Duration,
    /// Send a channel's last message to every new subscriber.
    pub last_on_subscribe: bool,
    /// The namespace's channels are presence channels (a `[[namespaces]]` option only).
    pub presence: bool,
    /// Members one presence channel holds at most.
    pub presence_max_members: u32,
    /// The largest member data of a presence channel, in bytes of JSON.
    pub presence_max_data_bytes: u32,
}

impl Default for NamespaceSettings {
    fn default() -> Self {
        NamespaceSettings {
            history_size: 1000,
            history_age: Duration::from_secs(24 * 3600),
            last_on_subscribe: false,
            presence: false,
            presence_max_members: herald_server::vocabulary::DEFAULT_MAX_MEMBERS,
            presence_max_data_bytes: herald_server::vocabulary::DEFAULT_MAX_DATA_BYTES,
        }
    }
}

impl NamespaceSettings {
    /// The core's form of these settings.
    pub fn options(&self) -> NamespaceOptions {
        NamespaceOptions {
            retention: Retention {
                max_messages: self.history_size,
                max_age_ms: u64::try_from(self.history_age.as_millis()).unwrap_or(u64::MAX),
            },
            last_on_subscribe: self.last_on_subscribe,
            presence: self
                .presence
                .then_some(herald_server::vocabulary::PresenceLimits {
                    max_members: self.presence_max_members,
                    max_data_bytes: self.presence_max_data_bytes,
                }),
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl LogFormat {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

/// The validated, effective configuration. `Debug` redacts the secrets.
#[derive(Clone)]
pub struct Config {
    /// The config file that was read, if any.
    pub config_file: Option<PathBuf>,
    /// Address the server listens on.
    pub listen: SocketAddr,
    /// Data directory.
    pub data: PathBuf,
    /// Publisher API key; `None` means the server generates one on first run.
    pub api_key: Option<String>,
    /// Admin key; `None` turns app administration off.
    pub admin_key: Option<String>,
    /// Bearer token `GET /metrics` requires; `None` leaves it open.
    pub metrics_token: Option<String>,
    /// The publisher key configured before `api_key`, kept valid while clients move over.
    pub previous_api_key: Option<String>,
    /// Client token secret; `None` means the server uses (or creates) `<data>/token-secret`.
    pub token_secret: Option<String>,
    /// The default app's token secret before `token_secret`, still verifying tokens while
    /// clients move over.
    pub previous_token_secret: Option<String>,
    /// Whether clients without a token may subscribe.
    pub allow_anonymous: bool,
    /// How long an admin dashboard session lasts.
    pub admin_session_ttl: Duration,
    /// Whether the dashboard's session cookie is marked `Secure`.
    pub admin_cookie_secure: bool,
    /// Store durability policy.
    pub sync: SyncMode,
    /// Whether the SQLite write-ahead log is extended with zeros ahead of its writes.
    pub wal_preallocate: bool,
    /// Largest WebSocket frame / request body accepted from a client, in bytes.
    pub max_frame_bytes: usize,
    /// Per-connection outbound queue limit in bytes; a slower reader is disconnected.
    pub outbox_bytes: usize,
    /// Paged catch-up queued per subscription at a time, in bytes (at most `outbox_bytes`).
    pub catchup_bytes: usize,
    /// Bytes the node keeps of its channels' recent tails for catch-ups to share (0 = off).
    pub tail_cache_bytes: usize,
    /// Most subscriptions one connection may hold.
    pub max_subscriptions: usize,
    /// How often the server pings idle connections.
    pub ping_interval: Duration,
    /// How long a WebSocket connection or SSE stream has nothing to do before it parks (leaves
    /// its task); 0 never parks. 2 s by default.
    pub park_idle_after: Duration,
    /// How long shutdown waits for connections to drain.
    pub shutdown_grace: Duration,
    /// Worker threads of the main runtime (connections, the fan-out's writers, background
    /// work); one per CPU unless set. Read before that runtime starts.
    pub workers: usize,
    /// Worker threads of the runtime that serves HTTP requests; 0 shares the main runtime.
    /// As many as `workers` unless set.
    pub http_workers: usize,
    /// Deliveries that may wait for the fan-out before publishes wait; 0 never.
    pub fanout_backlog: usize,
    /// Least time between two fetches of an app's JWKS caused by unknown key ids.
    pub jwks_min_refetch: Duration,
    /// Longest a JWKS fetch (and a connect waiting for one) may take.
    pub jwks_fetch_timeout: Duration,
    /// Address blocks besides public addresses that tenant-given URLs may reach.
    pub outbound_allow: Vec<IpNet>,
    /// How long audit log entries are kept.
    pub audit_retention: Duration,
    /// How long each state of a connection that is not a stream may last.
    pub deadlines: Deadlines,
    /// Rate limits (the `[limits]` table).
    pub limits: RateLimits,
    /// Webhooks: batching, retries and bounds (the `[hooks]` table).
    pub hooks: herald_server::vocabulary::HooksConfig,
    /// Log line format.
    pub log_format: LogFormat,
    /// Log filter directives (`tracing_subscriber::EnvFilter` syntax).
    pub log_level: String,
    /// Settings of channels outside every `[[namespaces]]` prefix.
    pub history: NamespaceSettings,
    /// Prefixed namespaces, in file order.
    pub namespaces: Vec<(String, NamespaceSettings)>,
    /// Meteor compatibility ports.
    pub meteor: MeteorConfig,
    /// The MQTT listener and its settings (`mqtt_listen`, `mqtt_tls`, the `[mqtt]` table).
    pub mqtt: herald_server::MqttPort,
    /// Pusher's client protocol (the `[pusher]` table).
    pub pusher: herald_server::vocabulary::PusherClientSettings,
    /// Provider delivery.
    pub providers: ProvidersConfig,
    /// Cluster mode (shared PostgreSQL store, Redis bus).
    pub cluster: ClusterConfig,
    /// TLS on the HTTP listener; `None`: plain HTTP.
    pub tls: Option<TlsConfig>,
    sources: BTreeMap<String, Source>,
}

impl Config {
    /// Loads from the process environment and `flags`; see [`Config::load_with_env`].
    pub fn load(flags: &ConfigFlags) -> Result<Config, ConfigError> {
        Config::load_with_env(flags, |name| std::env::var_os(name))
    }

    /// Loads defaults, the config file (`--config`, else `HERALD_CONFIG`, else none), the
    /// environment as `env` reports it (empty variables count as unset), then `flags`, and
    /// validates the result.
    pub fn load_with_env(
        flags: &ConfigFlags,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Config, ConfigError> {
        let config_file = match &flags.config {
            Some(path) => Some(path.clone()),
            None => env_text(&env, "HERALD_CONFIG")?.map(PathBuf::from),
        };
        let mut layers = Layers::default();
        if let Some(path) = &config_file {
            layers.read_file(path)?;
        }
        layers.read_env(&env)?;
        layers.read_flags(flags);
        layers.build(config_file)
    }

    /// Loads `text` as the config file at `path` (which only names it in messages) over the
    /// defaults, with no environment and no flags: what `herald config check --config path`
    /// does with that file in an empty environment, without reading the file itself. The fuzz
    /// target of the config file (`herald-fuzz`) goes through here.
    pub fn from_file_text(path: &std::path::Path, text: &str) -> Result<Config, ConfigError> {
        let mut layers = Layers::default();
        layers.read_file_text(path, text)?;
        layers.build(Some(path.to_owned()))
    }

    /// The namespace table the channel engine uses.
    pub fn namespaces(&self) -> Namespaces {
        let prefixed = self
            .namespaces
            .iter()
            .map(|(p, s)| (p.clone(), s.options()))
            .collect();
        Namespaces::new(self.history.options(), prefixed)
    }

    /// Options for the SQLite store.
    pub fn sqlite_options(&self) -> SqliteOptions {
        SqliteOptions {
            sync: self.sync,
            wal_preallocate: self.wal_preallocate,
            ..SqliteOptions::default()
        }
    }

    /// Where the generated token secret is kept: `<data>/token-secret`.
    pub fn token_secret_file(&self) -> PathBuf {
        self.data.join(TOKEN_SECRET_FILE)
    }

    /// Where `key` (a config key such as `listen` or `history.size`) came from.
    pub fn source(&self, key: &str) -> Source {
        self.sources.get(key).cloned().unwrap_or(Source::Default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Loads with `file` as the config file (if any), `env` as the whole environment and `flags`.
    pub(super) fn load(
        file: Option<&str>,
        env: &[(&str, &str)],
        flags: ConfigFlags,
    ) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let mut flags = flags;
        if let Some(text) = file {
            let path = dir.path().join("herald.toml");
            std::fs::write(&path, text).unwrap();
            flags.config = Some(path);
        }
        let env: HashMap<String, OsString> = env
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Config::load_with_env(&flags, |name| env.get(name).cloned())
    }

    /// The error message of a [`load`] that must fail.
    pub(super) fn err(file: Option<&str>, env: &[(&str, &str)], flags: ConfigFlags) -> String {
        load(file, env, flags).unwrap_err().to_string()
    }

    #[test]
    fn defaults() {
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.listen, "127.0.0.1:7070".parse().unwrap());
        assert_eq!(c.data, PathBuf::from("./herald-data"));
        assert_eq!(
            (c.api_key.as_deref(), c.token_secret.as_deref()),
            (None, None)
        );
        assert!(!c.allow_anonymous);
        assert_eq!(c.sync, SyncMode::Batch);
        assert!(c.wal_preallocate);
        assert_eq!(c.sqlite_options().wal_kept_bytes(), 128 << 20);
        assert_eq!(
            (c.max_frame_bytes, c.outbox_bytes, c.max_subscriptions),
            (65536, 1 << 20, 10_000)
        );
        assert_eq!(c.catchup_bytes, 64 << 10);
        assert_eq!(c.tail_cache_bytes, 64 << 20);
        assert_eq!(
            (c.ping_interval, c.shutdown_grace),
            (Duration::from_secs(25), Duration::from_secs(10))
        );
        assert_eq!(c.deadlines, Deadlines::default());
        assert_eq!(
            (c.log_format, c.log_level.as_str()),
            (LogFormat::Text, "info")
        );
        assert_eq!(c.history, NamespaceSettings::default());
        assert_eq!(
            c.history.options(),
            NamespaceOptions::default(),
            "matches the core's defaults"
        );
        assert!(c.namespaces.is_empty());
        assert_eq!(c.source("listen"), Source::Default);
    }

    #[test]
    fn namespaces_inherit_history_and_build_the_core_table() {
        let file = r#"
            [history]
            size = 50
            age = "0s"
            [[namespaces]]
            prefix = "prices/"
            history_size = 1
            last_on_subscribe = true
            [[namespaces]]
            prefix = "chat/"
            history_age = "1h"
        "#;
        let c = load(Some(file), &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.history.history_age, Duration::ZERO);
        let table = c.namespaces();
        let prices = table.options("prices/EURUSD");
        assert_eq!(
            (prices.retention.max_messages, prices.retention.max_age_ms),
            (1, 0)
        );
        assert!(prices.last_on_subscribe);
        let chat = table.options("chat/1");
        assert_eq!(
            (chat.retention.max_messages, chat.retention.max_age_ms),
            (50, 3_600_000)
        );
        assert!(!chat.last_on_subscribe);
        assert_eq!(table.options("news").retention.max_messages, 50);
        let toml = c.to_toml_redacted();
        assert!(toml.contains("prefix = \"prices/\""), "{toml}");
        assert_eq!(table.options("news").presence, None);
    }

    #[test]
    fn a_presence_namespace_has_its_limits_and_they_need_presence() {
        let file = r#"
            [[namespaces]]
            prefix = "rooms/"
            presence = true
            presence_max_members = 50
            [[namespaces]]
            prefix = "lobby/"
            presence = true
        "#;
        let c = load(Some(file), &[], ConfigFlags::default()).unwrap();
        let table = c.namespaces();
        let rooms = table.options("rooms/1").presence.unwrap();
        assert_eq!((rooms.max_members, rooms.max_data_bytes), (50, 1024));
        let lobby = table.options("lobby/1").presence.unwrap();
        assert_eq!((lobby.max_members, lobby.max_data_bytes), (1000, 1024));
        let toml = c.to_toml_redacted();
        assert!(toml.contains("presence_max_members = 50"), "{toml}");
        let alone = "[[namespaces]]\nprefix = \"a/\"\npresence_max_data_bytes = 10";
        let e = load(Some(alone), &[], ConfigFlags::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("presence = true"), "{e}");
        let zero = "[[namespaces]]\nprefix = \"a/\"\npresence = true\npresence_max_members = 0";
        let e = load(Some(zero), &[], ConfigFlags::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("presence_max_members"), "{e}");
    }
}
