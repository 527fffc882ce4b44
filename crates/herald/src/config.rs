//! Herald's configuration: defaults, then a TOML file, then `HERALD_*` environment variables,
//! then command-line flags, each later layer overriding the earlier ones. Every value remembers
//! where it came from, so a validation error names the culprit (`(from HERALD_LISTEN)`,
//! `(from herald.toml: listen)`, `(from --listen)`). The typed result is [`Config`].

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use herald_core::log::Retention;
use herald_core::namespace::{NamespaceOptions, Namespaces};
use herald_store::{SqliteOptions, SyncMode};
use toml::Value;

/// Name of the file in the data directory that holds the generated token secret.
pub const TOKEN_SECRET_FILE: &str = "token-secret";
/// Shortest accepted token secret, in bytes.
pub const MIN_TOKEN_SECRET_BYTES: usize = 16;

/// The configuration flags shared by `herald serve`, `herald config check` and `herald token`.
/// Values are kept as text and parsed by [`Config::load`] so errors name the flag.
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
    /// Secret signing client tokens, at least 16 bytes [env: HERALD_TOKEN_SECRET]
    #[arg(long, value_name = "SECRET")]
    pub token_secret: Option<String>,
    /// Let clients without a token subscribe [env: HERALD_ALLOW_ANONYMOUS]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub allow_anonymous: Option<String>,
    /// Store durability: always, batch or off [env: HERALD_SYNC]
    #[arg(long, value_name = "MODE")]
    pub sync: Option<String>,
    /// Log format: text or json [env: HERALD_LOG_FORMAT]
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<String>,
    /// Log filter, e.g. "info" or "herald=debug,info" [env: HERALD_LOG, RUST_LOG]
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
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
}

impl Default for NamespaceSettings {
    fn default() -> Self {
        NamespaceSettings {
            history_size: 1000,
            history_age: Duration::from_secs(24 * 3600),
            last_on_subscribe: false,
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

/// The validated, effective configuration.
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
    /// Client token secret; `None` means the server uses (or creates) `<data>/token-secret`.
    pub token_secret: Option<String>,
    /// Whether clients without a token may subscribe.
    pub allow_anonymous: bool,
    /// Store durability policy.
    pub sync: SyncMode,
    /// Largest WebSocket frame / request body accepted from a client, in bytes.
    pub max_frame_bytes: usize,
    /// Per-connection outbound queue limit in bytes; a slower reader is disconnected.
    pub outbox_bytes: usize,
    /// Most subscriptions one connection may hold.
    pub max_subscriptions: usize,
    /// How often the server pings idle connections.
    pub ping_interval: Duration,
    /// How long shutdown waits for connections to drain.
    pub shutdown_grace: Duration,
    /// Log line format.
    pub log_format: LogFormat,
    /// Log filter directives (`tracing_subscriber::EnvFilter` syntax).
    pub log_level: String,
    /// Settings of channels outside every `[[namespaces]]` prefix.
    pub history: NamespaceSettings,
    /// Prefixed namespaces, in file order.
    pub namespaces: Vec<(String, NamespaceSettings)>,
    sources: BTreeMap<String, Source>,
}

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

/// A value as a layer supplied it: text (environment, flags) or TOML.
#[derive(Debug, Clone)]
enum Raw {
    Text(String),
    Toml(Value),
}

/// One settable scalar: config key, environment variables (later ones win) and flag.
struct Key {
    name: &'static str,
    env: &'static [&'static str],
    flag: Option<&'static str>,
    secret: bool,
}

const fn key(name: &'static str, env: &'static [&'static str], flag: Option<&'static str>) -> Key {
    Key {
        name,
        env,
        flag,
        secret: false,
    }
}

const KEYS: &[Key] = &[
    key("listen", &["HERALD_LISTEN"], Some("--listen")),
    key("data", &["HERALD_DATA"], Some("--data")),
    Key {
        secret: true,
        ..key("api_key", &["HERALD_API_KEY"], Some("--api-key"))
    },
    Key {
        secret: true,
        ..key(
            "token_secret",
            &["HERALD_TOKEN_SECRET"],
            Some("--token-secret"),
        )
    },
    key(
        "allow_anonymous",
        &["HERALD_ALLOW_ANONYMOUS"],
        Some("--allow-anonymous"),
    ),
    key("sync", &["HERALD_SYNC"], Some("--sync")),
    key("max_frame_bytes", &["HERALD_MAX_FRAME_BYTES"], None),
    key("outbox_bytes", &["HERALD_OUTBOX_BYTES"], None),
    key("max_subscriptions", &["HERALD_MAX_SUBSCRIPTIONS"], None),
    key("ping_interval", &["HERALD_PING_INTERVAL"], None),
    key("shutdown_grace", &["HERALD_SHUTDOWN_GRACE"], None),
    key("log_format", &["HERALD_LOG_FORMAT"], Some("--log-format")),
    key(
        "log_level",
        &["RUST_LOG", "HERALD_LOG"],
        Some("--log-level"),
    ),
    key("history.size", &["HERALD_HISTORY_SIZE"], None),
    key("history.age", &["HERALD_HISTORY_AGE"], None),
    key(
        "history.last_on_subscribe",
        &["HERALD_HISTORY_LAST_ON_SUBSCRIBE"],
        None,
    ),
];

const NAMESPACE_KEYS: &[&str] = &["prefix", "history_size", "history_age", "last_on_subscribe"];

/// The merged layers before typing: the winning raw value of every key.
#[derive(Default)]
struct Layers {
    values: HashMap<&'static str, (Raw, Source)>,
    namespaces: Vec<BTreeMap<String, (Raw, Source)>>,
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
        env: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<Config, ConfigError> {
        let env_text = |name: &'static str| -> Result<Option<String>, ConfigError> {
            match env(name) {
                None => Ok(None),
                Some(v) if v.is_empty() => Ok(None),
                Some(v) => v
                    .into_string()
                    .map(Some)
                    .map_err(|_| ConfigError::NotUnicode(name)),
            }
        };
        let config_file = match &flags.config {
            Some(path) => Some(path.clone()),
            None => env_text("HERALD_CONFIG")?.map(PathBuf::from),
        };
        let mut layers = Layers::default();
        if let Some(path) = &config_file {
            layers.read_file(path)?;
        }
        for k in KEYS {
            for &name in k.env {
                if let Some(text) = env_text(name)? {
                    layers
                        .values
                        .insert(k.name, (Raw::Text(text), Source::Env(name)));
                }
            }
        }
        let flag_values = [
            ("listen", flags.listen.clone()),
            (
                "data",
                flags
                    .data
                    .as_ref()
                    .map(|p| p.to_string_lossy().into_owned()),
            ),
            ("api_key", flags.api_key.clone()),
            ("token_secret", flags.token_secret.clone()),
            ("allow_anonymous", flags.allow_anonymous.clone()),
            ("sync", flags.sync.clone()),
            ("log_format", flags.log_format.clone()),
            ("log_level", flags.log_level.clone()),
        ];
        for (name, value) in flag_values {
            let k = KEYS
                .iter()
                .find(|k| k.name == name)
                .expect("flag keys are in KEYS");
            if let (Some(value), Some(flag)) = (value, k.flag) {
                layers
                    .values
                    .insert(k.name, (Raw::Text(value), Source::Flag(flag)));
            }
        }
        layers.build(config_file)
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

    /// The effective configuration as TOML, secrets replaced by `"<redacted>"`, each value
    /// followed by a comment naming its source.
    pub fn to_toml_redacted(&self) -> String {
        let secret = |s: &Option<String>| s.as_ref().map(|_| Value::from("<redacted>"));
        let dur = |d: Duration| Some(Value::from(humantime::format_duration(d).to_string()));
        let int = |n: u64| Some(Value::Integer(i64::try_from(n).unwrap_or(i64::MAX)));
        let text = |s: &str| Some(Value::from(s));
        let h = &self.history;
        let entries = [
            ("listen", text(&self.listen.to_string()), ""),
            ("data", text(&self.data.to_string_lossy()), ""),
            ("api_key", secret(&self.api_key), "the server generates one"),
            (
                "token_secret",
                secret(&self.token_secret),
                "<data>/token-secret is used",
            ),
            (
                "allow_anonymous",
                Some(Value::from(self.allow_anonymous)),
                "",
            ),
            ("sync", text(self.sync.as_str()), ""),
            ("max_frame_bytes", int(self.max_frame_bytes as u64), ""),
            ("outbox_bytes", int(self.outbox_bytes as u64), ""),
            ("max_subscriptions", int(self.max_subscriptions as u64), ""),
            ("ping_interval", dur(self.ping_interval), ""),
            ("shutdown_grace", dur(self.shutdown_grace), ""),
            ("log_format", text(self.log_format.as_str()), ""),
            ("log_level", text(&self.log_level), ""),
            ("history.size", int(h.history_size), ""),
            ("history.age", dur(h.history_age), ""),
            (
                "history.last_on_subscribe",
                Some(Value::from(h.last_on_subscribe)),
                "",
            ),
        ];
        let mut out = String::new();
        for (key, value, unset) in entries {
            if key == "history.size" {
                out.push_str("\n[history]\n");
            }
            let short = key.rsplit('.').next().unwrap_or(key);
            match value {
                Some(v) => out.push_str(&format!("{short} = {v}  # {}\n", self.source(key))),
                None => out.push_str(&format!("# {short}: not set, {unset}\n")),
            }
        }
        for (i, (prefix, s)) in self.namespaces.iter().enumerate() {
            let source = self.source(&format!("namespaces[{i}].prefix"));
            out.push_str(&format!("\n[[namespaces]]  # {source}\n"));
            out.push_str(&format!("prefix = {}\n", Value::from(prefix.as_str())));
            out.push_str(&format!("history_size = {}\n", s.history_size));
            out.push_str(&format!(
                "history_age = {}\n",
                dur(s.history_age).unwrap_or(Value::from(""))
            ));
            out.push_str(&format!("last_on_subscribe = {}\n", s.last_on_subscribe));
        }
        out
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |s: &Option<String>| s.as_ref().map(|_| "<redacted>");
        f.debug_struct("Config")
            .field("config_file", &self.config_file)
            .field("listen", &self.listen)
            .field("data", &self.data)
            .field("api_key", &redact(&self.api_key))
            .field("token_secret", &redact(&self.token_secret))
            .field("allow_anonymous", &self.allow_anonymous)
            .field("sync", &self.sync)
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("outbox_bytes", &self.outbox_bytes)
            .field("max_subscriptions", &self.max_subscriptions)
            .field("ping_interval", &self.ping_interval)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("log_format", &self.log_format)
            .field("log_level", &self.log_level)
            .field("history", &self.history)
            .field("namespaces", &self.namespaces)
            .finish()
    }
}

/// Reads a secret file written by the server (trimmed); `Ok(None)` if it does not exist.
pub fn read_secret_file(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text.trim().to_owned()).filter(|s| !s.is_empty())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl Layers {
    fn read_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ConfigError::Syntax {
                    path: path.to_owned(),
                    message: e.to_string().trim_end().to_owned(),
                })?;
        let at = |key: String| Source::File {
            path: path.to_owned(),
            key,
        };
        let unknown = |key: String, known: &[&str]| ConfigError::UnknownKey {
            path: path.to_owned(),
            hint: hint(key.rsplit(['.', ']']).next().unwrap_or(&key), known),
            key,
        };
        let top: Vec<&str> = KEYS
            .iter()
            .map(|k| k.name)
            .filter(|n| !n.contains('.'))
            .collect();
        for (name, value) in table {
            if let Some(k) = KEYS.iter().find(|k| k.name == name && !name.contains('.')) {
                self.values.insert(k.name, (Raw::Toml(value), at(name)));
            } else if name == "history" {
                let Value::Table(history) = value else {
                    return Err(wrong_type(
                        &value,
                        "history",
                        at(name),
                        "a table ([history])",
                    ));
                };
                for (sub, value) in history {
                    let dotted = format!("history.{sub}");
                    match KEYS.iter().find(|k| k.name == dotted) {
                        Some(k) => {
                            self.values.insert(k.name, (Raw::Toml(value), at(dotted)));
                        }
                        None => return Err(unknown(dotted, &["size", "age", "last_on_subscribe"])),
                    }
                }
            } else if name == "namespaces" {
                let Value::Array(items) = value else {
                    return Err(wrong_type(
                        &value,
                        "namespaces",
                        at(name),
                        "an array ([[namespaces]])",
                    ));
                };
                for (i, item) in items.into_iter().enumerate() {
                    let Value::Table(item) = item else {
                        let key = format!("namespaces[{i}]");
                        return Err(wrong_type(&item, "namespace", at(key), "a table"));
                    };
                    let mut ns = BTreeMap::new();
                    for (sub, value) in item {
                        let dotted = format!("namespaces[{i}].{sub}");
                        if !NAMESPACE_KEYS.contains(&sub.as_str()) {
                            return Err(unknown(dotted, NAMESPACE_KEYS));
                        }
                        ns.insert(sub, (Raw::Toml(value), at(dotted)));
                    }
                    self.namespaces.push(ns);
                }
            } else {
                let mut known = top.clone();
                known.extend(["history", "namespaces"]);
                return Err(unknown(name, &known));
            }
        }
        Ok(())
    }

    /// The winning value of `key` parsed with `parse`, or `default`.
    fn get<T>(
        &self,
        sources: &mut BTreeMap<String, Source>,
        key: &'static str,
        what: &str,
        default: T,
        parse: impl Fn(&Raw) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        let Some((raw, source)) = self.values.get(key) else {
            return Ok(default);
        };
        sources.insert(key.to_owned(), source.clone());
        let secret = KEYS.iter().any(|k| k.name == key && k.secret);
        check(raw, source, what, secret, parse)
    }

    fn build(self, config_file: Option<PathBuf>) -> Result<Config, ConfigError> {
        let mut src = BTreeMap::new();
        let d = NamespaceSettings::default();
        let s = &mut src;
        let secret = |min: usize| {
            move |r: &Raw| {
                let t = text(r)?;
                match t.len() {
                    0 => Err("must not be empty".to_owned()),
                    n if n < min => Err(format!("must be at least {min} bytes, got {n}")),
                    _ => Ok(Some(t.to_owned())),
                }
            }
        };
        let history = NamespaceSettings {
            history_size: self.get(s, "history.size", "history.size", d.history_size, |r| {
                at_least(uint(r)?, 1)
            })?,
            history_age: self.get(s, "history.age", "history.age", d.history_age, duration)?,
            last_on_subscribe: self.get(
                s,
                "history.last_on_subscribe",
                "history.last_on_subscribe",
                d.last_on_subscribe,
                boolean,
            )?,
        };
        let config = Config {
            listen: self.get(
                s,
                "listen",
                "listen address",
                ([127, 0, 0, 1], 7070).into(),
                |r| {
                    text(r)?
                        .parse()
                        .map_err(|e| format!("{e}; expected IP:PORT such as 127.0.0.1:7070"))
                },
            )?,
            data: self.get(
                s,
                "data",
                "data directory",
                PathBuf::from("./herald-data"),
                |r| {
                    Some(text(r)?)
                        .filter(|t| !t.is_empty())
                        .map(PathBuf::from)
                        .ok_or("must not be empty".into())
                },
            )?,
            api_key: self.get(s, "api_key", "api_key", None, secret(1))?,
            token_secret: self.get(
                s,
                "token_secret",
                "token_secret",
                None,
                secret(MIN_TOKEN_SECRET_BYTES),
            )?,
            allow_anonymous: self.get(s, "allow_anonymous", "allow_anonymous", false, boolean)?,
            sync: self.get(s, "sync", "sync mode", SyncMode::Batch, |r| {
                text(r)?
                    .parse::<SyncMode>()
                    .map_err(|_| "expected \"always\", \"batch\" or \"off\"".into())
            })?,
            max_frame_bytes: self.get(s, "max_frame_bytes", "max_frame_bytes", 65536, |r| {
                at_least(uint(r)?, 1024).map(to_usize)
            })?,
            outbox_bytes: self.get(s, "outbox_bytes", "outbox_bytes", 1 << 20, |r| {
                at_least(uint(r)?, 4096).map(to_usize)
            })?,
            max_subscriptions: self.get(
                s,
                "max_subscriptions",
                "max_subscriptions",
                10_000,
                |r| at_least(uint(r)?, 1).map(to_usize),
            )?,
            ping_interval: self.get(
                s,
                "ping_interval",
                "ping_interval",
                Duration::from_secs(25),
                |r| {
                    Some(duration(r)?)
                        .filter(|d| !d.is_zero())
                        .ok_or("must be longer than 0s".into())
                },
            )?,
            shutdown_grace: self.get(
                s,
                "shutdown_grace",
                "shutdown_grace",
                Duration::from_secs(10),
                duration,
            )?,
            log_format: self.get(
                s,
                "log_format",
                "log_format",
                LogFormat::Text,
                |r| match text(r)? {
                    "text" => Ok(LogFormat::Text),
                    "json" => Ok(LogFormat::Json),
                    _ => Err("expected \"text\" or \"json\"".into()),
                },
            )?,
            log_level: self.get(s, "log_level", "log filter", "info".to_owned(), |r| {
                let t = text(r)?;
                tracing_subscriber::EnvFilter::try_new(t).map_err(|e| e.to_string())?;
                Ok(t.to_owned())
            })?,
            namespaces: self.namespace_list(s, &history)?,
            history,
            config_file,
            sources: BTreeMap::new(),
        };
        Ok(Config {
            sources: src,
            ..config
        })
    }

    fn namespace_list(
        &self,
        sources: &mut BTreeMap<String, Source>,
        defaults: &NamespaceSettings,
    ) -> Result<Vec<(String, NamespaceSettings)>, ConfigError> {
        let mut out: Vec<(String, NamespaceSettings)> = Vec::new();
        for (i, ns) in self.namespaces.iter().enumerate() {
            let field = |name: &str| ns.get(name).map(|(raw, source)| (raw, source.clone()));
            let Some((raw, source)) = field("prefix") else {
                return Err(ConfigError::Invalid {
                    what: format!("namespaces[{i}]"),
                    value: String::new(),
                    origin: namespace_origin(&self.namespaces[i], i),
                    reason: "missing \"prefix\"".into(),
                });
            };
            let prefix = check(raw, &source, "namespace prefix", false, |r| {
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
            sources.insert(format!("namespaces[{i}].prefix"), source);
            let mut settings = *defaults;
            if let Some((raw, source)) = field("history_size") {
                settings.history_size = check(raw, &source, "history_size", false, |r| {
                    at_least(uint(r)?, 1)
                })?;
            }
            if let Some((raw, source)) = field("history_age") {
                settings.history_age = check(raw, &source, "history_age", false, duration)?;
            }
            if let Some((raw, source)) = field("last_on_subscribe") {
                settings.last_on_subscribe =
                    check(raw, &source, "last_on_subscribe", false, boolean)?;
            }
            out.push((prefix, settings));
        }
        Ok(out)
    }
}

fn namespace_origin(ns: &BTreeMap<String, (Raw, Source)>, i: usize) -> Source {
    match ns.values().next() {
        Some((_, Source::File { path, .. })) => Source::File {
            path: path.clone(),
            key: format!("namespaces[{i}]"),
        },
        _ => Source::Default,
    }
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

fn wrong_type(value: &Value, what: &str, origin: Source, expected: &str) -> ConfigError {
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

fn text(raw: &Raw) -> Result<&str, String> {
    match raw {
        Raw::Text(t) => Ok(t),
        Raw::Toml(Value::String(t)) => Ok(t),
        Raw::Toml(v) => Err(format!("expected a string, found {}", v.type_str())),
    }
}

fn boolean(raw: &Raw) -> Result<bool, String> {
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

fn at_least(n: u64, min: u64) -> Result<u64, String> {
    if n < min {
        Err(format!("must be at least {min}"))
    } else {
        Ok(n)
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn duration(raw: &Raw) -> Result<Duration, String> {
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

/// ` (did you mean "x"?)` when a known key is close to `got`.
fn hint(got: &str, known: &[&str]) -> String {
    known
        .iter()
        .map(|k| (edit_distance(got, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min()
        .map(|(_, k)| format!(" (did you mean {k:?}?)"))
        .unwrap_or_default()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn load(
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

    fn err(file: Option<&str>, env: &[(&str, &str)], flags: ConfigFlags) -> String {
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
        assert_eq!(
            (c.max_frame_bytes, c.outbox_bytes, c.max_subscriptions),
            (65536, 1 << 20, 10_000)
        );
        assert_eq!(
            (c.ping_interval, c.shutdown_grace),
            (Duration::from_secs(25), Duration::from_secs(10))
        );
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
        let c = load(None, &[("HERALD_API_KEY", "hk_test")], flags).unwrap();
        assert_eq!(c.token_secret.as_deref(), Some("0123456789abcdef"));
        let shown = format!("{c:?}\n{}", c.to_toml_redacted());
        assert!(
            !shown.contains("0123456789abcdef") && !shown.contains("hk_test"),
            "{shown}"
        );
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = err(Some("listn = \"127.0.0.1:1\""), &[], ConfigFlags::default());
        assert!(
            e.contains("unknown key \"listn\"") && e.contains("did you mean \"listen\""),
            "{e}"
        );
        let e = err(Some("[history]\nsise = 3"), &[], ConfigFlags::default());
        assert!(
            e.contains("unknown key \"history.sise\"") && e.contains("\"size\""),
            "{e}"
        );
        let e = err(
            Some("[[namespaces]]\nprefix = \"a/\"\nbogus = 1"),
            &[],
            ConfigFlags::default(),
        );
        assert!(e.contains("unknown key \"namespaces[0].bogus\""), "{e}");
        let e = err(Some("listen = "), &[], ConfigFlags::default());
        assert!(
            e.contains("is not valid TOML") && e.contains("line 1"),
            "{e}"
        );
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
    fn printed_config_reloads_to_the_same_values() {
        let file = "listen = \"0.0.0.0:0\"\nallow_anonymous = true\n[history]\nage = \"90m\"\n[[namespaces]]\nprefix = \"x:\"";
        let c = load(
            Some(file),
            &[("HERALD_SYNC", "off")],
            ConfigFlags::default(),
        )
        .unwrap();
        let again = load(Some(&c.to_toml_redacted()), &[], ConfigFlags::default()).unwrap();
        assert_eq!(
            (again.listen, again.sync, again.allow_anonymous),
            (c.listen, c.sync, c.allow_anonymous)
        );
        assert_eq!(
            (again.history, &again.namespaces),
            (c.history, &c.namespaces)
        );
    }
}
