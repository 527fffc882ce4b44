//! The MQTT keys: `mqtt_listen` (the listener's address, `IP:PORT` or a bare port on
//! 127.0.0.1; off unless set), `mqtt_tls` (it serves TLS with the server's certificate) and the
//! `[mqtt]` table ([`MQTT_KEYS`]): `websocket` (MQTT over WebSocket at `/mqtt` on the HTTP
//! listener, off unless set, independent of `mqtt_listen`), the limits a connection announces in
//! its CONNACK and the anonymous mode, whose `anonymous_rules` are an array of tables, each
//! `allow` or `deny` a topic filter for an `action` (docs/config.md, "`[mqtt]`: the MQTT
//! listener"):
//!
//! ```toml
//! [[mqtt.anonymous_rules]]
//! allow = "sensors/#"
//! action = "subscribe"
//! [[mqtt.anonymous_rules]]
//! deny = "sensors/secret"
//! ```
//!
//! `HERALD_MQTT_ANONYMOUS_RULES` takes the same rules as a TOML inline array
//! (`[{ allow = "#", action = "subscribe" }, { deny = "secret/x" }]`).

use herald_server::vocabulary::{MqttAction, MqttEffect, MqttRule, MqttRules, MqttSettings};
use herald_server::MqttPort;
use toml::Value;

use super::layers::{Layers, Raw, Source};
use super::meteor::address;
use super::validate::{boolean, duration, text, ConfigError};

/// The keys of the `[mqtt]` table.
pub(super) const MQTT_KEYS: &[&str] = &[
    "websocket",
    "max_keep_alive",
    "max_packet_size",
    "receive_maximum",
    "max_inflight_out",
    "max_topic_aliases",
    "max_topic_aliases_out",
    "max_session_expiry",
    "max_retained_per_filter",
    "max_offline_channels_per_filter",
    "sys_interval",
    "allow_anonymous",
    "anonymous_ignores_unknown_passwords",
    "anonymous_app",
    "anonymous_rules",
];

/// The keys of one anonymous rule.
const RULE_KEYS: &[&str] = &["allow", "deny", "action"];

/// A whole number from `min` to `max`.
fn number(min: u64, max: u64) -> impl Fn(&Raw) -> Result<u64, String> {
    move |raw| {
        let n: u64 = match raw {
            Raw::Toml(Value::Integer(n)) => {
                u64::try_from(*n).map_err(|_| format!("must be {min} to {max}"))?
            }
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

/// A keep-alive bound: a whole number of seconds or a duration ("5m"), 1 s to 65,535 s
/// (MQTT's Keep Alive is two bytes of seconds).
fn keep_alive(raw: &Raw) -> Result<u16, String> {
    let secs = match raw {
        Raw::Toml(Value::Integer(_)) => number(0, u64::MAX)(raw)?,
        Raw::Text(t) | Raw::Toml(Value::String(t))
            if !t.trim().is_empty() && t.trim().bytes().all(|b| b.is_ascii_digit()) =>
        {
            number(0, u64::MAX)(&Raw::Text(t.clone()))?
        }
        _ => {
            let d = duration(raw)?;
            if d.subsec_nanos() != 0 {
                return Err("must be whole seconds".into());
            }
            d.as_secs()
        }
    };
    u16::try_from(secs)
        .ok()
        .filter(|s| *s >= 1)
        .ok_or_else(|| "must be 1s to 65535s (18h12m15s)".into())
}

/// A session expiry bound: a whole number of seconds or a duration ("7d"), 0 to 4,294,967,295
/// s (MQTT's Session Expiry Interval is four bytes of seconds).
fn session_expiry(raw: &Raw) -> Result<u32, String> {
    let secs = match raw {
        Raw::Toml(Value::Integer(_)) => number(0, u64::MAX)(raw)?,
        Raw::Text(t) | Raw::Toml(Value::String(t))
            if !t.trim().is_empty() && t.trim().bytes().all(|b| b.is_ascii_digit()) =>
        {
            number(0, u64::MAX)(&Raw::Text(t.clone()))?
        }
        _ => {
            let d = duration(raw)?;
            if d.subsec_nanos() != 0 {
                return Err("must be whole seconds".into());
            }
            d.as_secs()
        }
    };
    u32::try_from(secs).map_err(|_| "must be 0s to 4294967295s".into())
}

fn app_id(raw: &Raw) -> Result<String, String> {
    let t = text(raw)?;
    herald_server::vocabulary::AppId::parse(t).map_err(|e| e.message)?;
    Ok(t.to_owned())
}

fn u16_of(n: u64) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

impl Layers {
    /// The MQTT listener's settings. `server_tls`: whether the server has a certificate
    /// (`mqtt_tls` needs it).
    pub(super) fn mqtt(&self, server_tls: bool) -> Result<MqttPort, ConfigError> {
        let d = MqttSettings::default();
        let tls = self.get("mqtt_tls", false, boolean)?;
        if tls && !server_tls {
            return Err(ConfigError::Invalid {
                what: "mqtt_tls".into(),
                value: " true".into(),
                origin: self.origin("mqtt_tls"),
                reason: "needs tls_cert and tls_key (the MQTT listener uses the server's \
                         certificate)"
                    .into(),
            });
        }
        let largest = u64::from(herald_server::vocabulary::MQTT_LARGEST_PACKET);
        let settings = MqttSettings {
            max_keep_alive: self.get("mqtt.max_keep_alive", d.max_keep_alive, keep_alive)?,
            max_packet_size: self.get("mqtt.max_packet_size", d.max_packet_size, |r| {
                number(1024, largest)(r).map(|n| u32::try_from(n).unwrap_or(u32::MAX))
            })?,
            receive_maximum: self.get("mqtt.receive_maximum", d.receive_maximum, |r| {
                number(1, 65535)(r).map(u16_of)
            })?,
            max_inflight_out: self.get("mqtt.max_inflight_out", d.max_inflight_out, |r| {
                number(1, 65535)(r).map(u16_of)
            })?,
            max_topic_aliases: self.get("mqtt.max_topic_aliases", d.max_topic_aliases, |r| {
                number(0, 65535)(r).map(u16_of)
            })?,
            max_topic_aliases_out: self.get(
                "mqtt.max_topic_aliases_out",
                d.max_topic_aliases_out,
                |r| number(0, 65535)(r).map(u16_of),
            )?,
            max_session_expiry: self.get(
                "mqtt.max_session_expiry",
                d.max_session_expiry,
                session_expiry,
            )?,
            max_retained_per_filter: self.get(
                "mqtt.max_retained_per_filter",
                d.max_retained_per_filter,
                |r| number(0, 65535)(r).map(u16_of),
            )?,
            max_offline_channels_per_filter: self.get(
                "mqtt.max_offline_channels_per_filter",
                d.max_offline_channels_per_filter,
                |r| number(0, 65535)(r).map(u16_of),
            )?,
            // Whole seconds, as the session expiry's (`10`, `"10s"`, `"1m"`); 0: off.
            sys_interval: self.get("mqtt.sys_interval", d.sys_interval, session_expiry)?,
            allow_anonymous: self.get("mqtt.allow_anonymous", d.allow_anonymous, boolean)?,
            anonymous_ignores_unknown_passwords: self.get(
                "mqtt.anonymous_ignores_unknown_passwords",
                d.anonymous_ignores_unknown_passwords,
                boolean,
            )?,
            anonymous_app: self.get("mqtt.anonymous_app", d.anonymous_app, app_id)?,
            anonymous_rules: self.anonymous_rules()?,
        };
        if settings.anonymous_ignores_unknown_passwords && !settings.allow_anonymous {
            let what = "mqtt.anonymous_ignores_unknown_passwords";
            return Err(ConfigError::Invalid {
                what: what.into(),
                value: " true".into(),
                origin: self.origin(what),
                reason: "needs mqtt.allow_anonymous (it lets a password that is no Herald \
                         credential connect anonymously)"
                    .into(),
            });
        }
        Ok(MqttPort {
            listen: self.get("mqtt_listen", None, address)?,
            tls,
            websocket: self.get("mqtt.websocket", false, boolean)?,
            settings,
        })
    }

    /// Where `key`'s value came from.
    fn origin(&self, key: &str) -> Source {
        self.values
            .get(key)
            .map(|(_, s)| s.clone())
            .unwrap_or(Source::Default)
    }

    /// `mqtt.anonymous_rules`, each checked: errors name the rule (`mqtt.anonymous_rules[1]`),
    /// the field and where the rules came from.
    fn anonymous_rules(&self) -> Result<Vec<MqttRule>, ConfigError> {
        let Some((raw, source)) = self.values.get("mqtt.anonymous_rules") else {
            return Ok(Vec::new());
        };
        const KEY: &str = "mqtt.anonymous_rules";
        let invalid = |what: String, value: String, reason: String| ConfigError::Invalid {
            origin: match source {
                Source::File { path, .. } => Source::File {
                    path: path.clone(),
                    key: what.clone(),
                },
                other => other.clone(),
            },
            what,
            value,
            reason,
        };
        let items = match raw {
            Raw::Toml(Value::Array(items)) => items.clone(),
            Raw::Toml(v) => {
                return Err(invalid(
                    KEY.into(),
                    String::new(),
                    format!(
                        "expected an array of tables ([[mqtt.anonymous_rules]]), found {}",
                        v.type_str()
                    ),
                ))
            }
            Raw::Text(t) => match format!("rules = {t}").parse::<toml::Table>() {
                Ok(mut table) => match table.remove("rules") {
                    Some(Value::Array(items)) => items,
                    _ => {
                        return Err(invalid(
                            KEY.into(),
                            String::new(),
                            "expected a TOML array such as [{ allow = \"#\" }]".into(),
                        ))
                    }
                },
                Err(e) => {
                    return Err(invalid(
                        KEY.into(),
                        String::new(),
                        format!(
                            "expected a TOML array such as [{{ allow = \"#\" }}]: {}",
                            e.message()
                        ),
                    ))
                }
            },
        };
        let mut rules = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let at = format!("{KEY}[{i}]");
            let Value::Table(fields) = item else {
                return Err(invalid(
                    at,
                    String::new(),
                    format!(
                        "expected a table such as {{ allow = \"#\" }}, found {}",
                        item.type_str()
                    ),
                ));
            };
            if let Some(unknown) = fields.keys().find(|k| !RULE_KEYS.contains(&k.as_str())) {
                return Err(invalid(
                    format!("{at}.{unknown}"),
                    String::new(),
                    "unknown key: a rule has allow or deny (a topic filter) and action".into(),
                ));
            }
            let (effect, filter) = match (fields.get("allow"), fields.get("deny")) {
                (Some(f), None) => (MqttEffect::Allow, ("allow", f)),
                (None, Some(f)) => (MqttEffect::Deny, ("deny", f)),
                (Some(_), Some(_)) => {
                    return Err(invalid(
                        at,
                        String::new(),
                        "has both allow and deny: give each its own rule".into(),
                    ))
                }
                (None, None) => {
                    return Err(invalid(
                        at,
                        String::new(),
                        "needs allow = \"<topic filter>\" or deny = \"<topic filter>\"".into(),
                    ))
                }
            };
            let (field, value) = filter;
            let Value::String(filter) = value else {
                return Err(invalid(
                    format!("{at}.{field}"),
                    String::new(),
                    format!("expected a topic filter string, found {}", value.type_str()),
                ));
            };
            let action = match fields.get("action") {
                None => MqttAction::Both,
                Some(Value::String(a)) => match a.as_str() {
                    "publish" => MqttAction::Publish,
                    "subscribe" => MqttAction::Subscribe,
                    "both" => MqttAction::Both,
                    _ => {
                        return Err(invalid(
                            format!("{at}.action"),
                            format!(" {a:?}"),
                            "expected \"publish\", \"subscribe\" or \"both\"".into(),
                        ))
                    }
                },
                Some(v) => {
                    return Err(invalid(
                        format!("{at}.action"),
                        String::new(),
                        format!(
                            "expected \"publish\", \"subscribe\" or \"both\", found {}",
                            v.type_str()
                        ),
                    ))
                }
            };
            let rule = MqttRule {
                effect,
                action,
                filter: filter.clone(),
            };
            // The access module's own check (a topic filter, no `$share/`), named here.
            MqttRules::new(vec![rule.clone()])
                .map_err(|e| invalid(format!("{at}.{field}"), format!(" {filter:?}"), e.why))?;
            rules.push(rule);
        }
        Ok(rules)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{err, load};
    use super::super::{ConfigFlags, Source};
    use herald_server::vocabulary::{MqttAction, MqttEffect, MqttRule, MqttSettings};

    #[test]
    fn off_by_default_and_the_address_layers() {
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.mqtt.listen, None);
        assert!(!c.mqtt.tls);
        assert!(!c.mqtt.websocket);
        assert_eq!(c.mqtt.settings, MqttSettings::default());
        let file = "mqtt_listen = \"127.0.0.1:1883\"";
        let c = load(Some(file), &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.mqtt.listen, Some("127.0.0.1:1883".parse().unwrap()));
        let env = [("HERALD_MQTT_LISTEN", "1884")];
        let c = load(Some(file), &env, ConfigFlags::default()).unwrap();
        assert_eq!(c.mqtt.listen, Some("127.0.0.1:1884".parse().unwrap()));
        assert_eq!(c.source("mqtt_listen"), Source::Env("HERALD_MQTT_LISTEN"));
        let flags = ConfigFlags {
            mqtt: Some("127.0.0.1:0".into()),
            ..Default::default()
        };
        let c = load(Some(file), &env, flags).unwrap();
        assert_eq!(c.mqtt.listen, Some("127.0.0.1:0".parse().unwrap()));
        assert_eq!(c.source("mqtt_listen"), Source::Flag("--mqtt"));
        let flags = ConfigFlags {
            mqtt: Some("nowhere".into()),
            ..Default::default()
        };
        let e = err(None, &[], flags);
        assert!(
            e.contains("invalid mqtt_listen address \"nowhere\" (from --mqtt)"),
            "{e}"
        );
    }

    #[test]
    fn mqtt_over_websocket_is_its_own_switch() {
        let file = "[mqtt]\nwebsocket = true\n";
        let c = load(Some(file), &[], ConfigFlags::default()).unwrap();
        assert!(c.mqtt.websocket);
        assert_eq!(c.mqtt.listen, None, "no TCP listener needed");
        let env = [("HERALD_MQTT_WEBSOCKET", "false")];
        let c = load(Some(file), &env, ConfigFlags::default()).unwrap();
        assert!(!c.mqtt.websocket);
        assert_eq!(
            c.source("mqtt.websocket"),
            Source::Env("HERALD_MQTT_WEBSOCKET")
        );
        let e = err(
            None,
            &[("HERALD_MQTT_WEBSOCKET", "maybe")],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("mqtt.websocket") && e.contains("HERALD_MQTT_WEBSOCKET"),
            "{e}"
        );
        // What config check prints loads back the same.
        let c = load(Some(file), &[], ConfigFlags::default()).unwrap();
        let printed = c.to_toml_redacted();
        let again = load(Some(&printed), &[], ConfigFlags::default()).unwrap();
        assert!(again.mqtt.websocket, "{printed}");
    }

    #[test]
    fn mqtt_tls_needs_the_servers_certificate() {
        let e = err(None, &[("HERALD_MQTT_TLS", "true")], ConfigFlags::default());
        assert!(
            e.contains("invalid mqtt_tls true (from HERALD_MQTT_TLS)")
                && e.contains("needs tls_cert and tls_key"),
            "{e}"
        );
        let flags = ConfigFlags {
            mqtt_tls: Some("false".into()),
            ..Default::default()
        };
        let c = load(None, &[("HERALD_MQTT_TLS", "true")], flags).unwrap();
        assert!(!c.mqtt.tls, "the flag turns the environment's off");
    }

    #[test]
    fn anonymous_ignores_unknown_passwords_needs_the_anonymous_mode() {
        let file = "[mqtt]\nallow_anonymous = true\nanonymous_ignores_unknown_passwords = true\n";
        let c = load(Some(file), &[], ConfigFlags::default()).unwrap();
        assert!(c.mqtt.settings.anonymous_ignores_unknown_passwords);
        let env = [("HERALD_MQTT_ANONYMOUS_IGNORES_UNKNOWN_PASSWORDS", "no")];
        let c = load(Some(file), &env, ConfigFlags::default()).unwrap();
        assert!(!c.mqtt.settings.anonymous_ignores_unknown_passwords);
        let env = [("HERALD_MQTT_ANONYMOUS_IGNORES_UNKNOWN_PASSWORDS", "true")];
        let e = err(None, &env, ConfigFlags::default());
        assert!(
            e.contains("mqtt.anonymous_ignores_unknown_passwords")
                && e.contains("HERALD_MQTT_ANONYMOUS_IGNORES_UNKNOWN_PASSWORDS")
                && e.contains("needs mqtt.allow_anonymous"),
            "{e}"
        );
    }

    #[test]
    fn the_mqtt_table_and_its_environment() {
        let file = "[mqtt]\nmax_keep_alive = \"2m\"\nmax_packet_size = 65536\n\
                    receive_maximum = 20\nmax_inflight_out = 5\nmax_topic_aliases = 0\n\
                    allow_anonymous = true\nanonymous_app = \"lab\"\n";
        let c = load(Some(file), &[], ConfigFlags::default()).unwrap();
        let s = &c.mqtt.settings;
        assert_eq!(
            (
                s.max_keep_alive,
                s.max_packet_size,
                s.receive_maximum,
                s.max_inflight_out,
                s.max_topic_aliases
            ),
            (120, 65536, 20, 5, 0)
        );
        assert!(s.allow_anonymous);
        assert_eq!(s.anonymous_app, "lab");
        let env = [
            ("HERALD_MQTT_MAX_KEEP_ALIVE", "60"),
            ("HERALD_MQTT_ALLOW_ANONYMOUS", "no"),
        ];
        let c = load(Some(file), &env, ConfigFlags::default()).unwrap();
        assert_eq!(c.mqtt.settings.max_keep_alive, 60);
        assert!(!c.mqtt.settings.allow_anonymous);
        assert_eq!(
            c.source("mqtt.max_keep_alive"),
            Source::Env("HERALD_MQTT_MAX_KEEP_ALIVE")
        );
        let file = "[mqtt]\nmax_session_expiry = \"2d\"\n";
        let c = load(Some(file), &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.mqtt.settings.max_session_expiry, 172_800);
        let env = [("HERALD_MQTT_MAX_SESSION_EXPIRY", "0")];
        let c = load(Some(file), &env, ConfigFlags::default()).unwrap();
        assert_eq!(c.mqtt.settings.max_session_expiry, 0, "none kept");
        let file = "[mqtt]\nmax_retained_per_filter = 0\n";
        let c = load(Some(file), &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.mqtt.settings.max_retained_per_filter, 0, "none sent");
        let env = [("HERALD_MQTT_MAX_RETAINED_PER_FILTER", "7")];
        let c = load(None, &env, ConfigFlags::default()).unwrap();
        assert_eq!(c.mqtt.settings.max_retained_per_filter, 7);
        let bad = load(
            Some("[mqtt]\nmax_retained_per_filter = 70000\n"),
            &[],
            ConfigFlags::default(),
        );
        assert!(bad.is_err(), "at most 65535");
        let env = [("HERALD_MQTT_MAX_OFFLINE_CHANNELS_PER_FILTER", "0")];
        let c = load(None, &env, ConfigFlags::default()).unwrap();
        assert_eq!(c.mqtt.settings.max_offline_channels_per_filter, 0);
        let file = "[mqtt]\nmax_topic_aliases_out = 0\n";
        let c = load(Some(file), &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.mqtt.settings.max_topic_aliases_out, 0, "none set");
        let env = [("HERALD_MQTT_MAX_TOPIC_ALIASES_OUT", "3")];
        let c = load(None, &env, ConfigFlags::default()).unwrap();
        assert_eq!(c.mqtt.settings.max_topic_aliases_out, 3);
        let c = load(
            Some("[mqtt]\nsys_interval = \"1m\"\n"),
            &[],
            ConfigFlags::default(),
        );
        assert_eq!(c.unwrap().mqtt.settings.sys_interval, 60);
        let env = [("HERALD_MQTT_SYS_INTERVAL", "0")];
        let c = load(None, &env, ConfigFlags::default()).unwrap();
        assert_eq!(c.mqtt.settings.sys_interval, 0, "off");
    }

    #[test]
    fn a_bad_mqtt_value_is_named_with_its_source() {
        for (env, value, said) in [
            ("HERALD_MQTT_MAX_KEEP_ALIVE", "0", "1s to 65535s"),
            ("HERALD_MQTT_MAX_KEEP_ALIVE", "65536", "1s to 65535s"),
            ("HERALD_MQTT_MAX_KEEP_ALIVE", "1.5s", "whole seconds"),
            ("HERALD_MQTT_MAX_PACKET_SIZE", "100", "1024 to 268435460"),
            (
                "HERALD_MQTT_MAX_PACKET_SIZE",
                "268435461",
                "1024 to 268435460",
            ),
            ("HERALD_MQTT_RECEIVE_MAXIMUM", "0", "1 to 65535"),
            ("HERALD_MQTT_MAX_INFLIGHT_OUT", "70000", "1 to 65535"),
            ("HERALD_MQTT_MAX_TOPIC_ALIASES", "-1", "whole number"),
            (
                "HERALD_MQTT_MAX_SESSION_EXPIRY",
                "4294967296",
                "0s to 4294967295s",
            ),
            ("HERALD_MQTT_ANONYMOUS_APP", "Not An App", "invalid app id"),
        ] {
            let e = err(None, &[(env, value)], ConfigFlags::default());
            let key = env
                .strip_prefix("HERALD_MQTT_")
                .unwrap()
                .to_ascii_lowercase();
            assert!(
                e.contains(&format!("mqtt.{key}")) && e.contains(env) && e.contains(said),
                "{env}={value}: {e}"
            );
        }
        let e = err(
            Some("[mqtt]\nreceive_maximum = 0"),
            &[],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("mqtt.receive_maximum 0 (from ")
                && e.contains("herald.toml: mqtt.receive_maximum)"),
            "{e}"
        );
        let e = err(
            Some("[mqtt]\nmax_keepalive = 10"),
            &[],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("unknown key \"mqtt.max_keepalive\"")
                && e.contains("did you mean \"max_keep_alive\""),
            "{e}"
        );
    }

    #[test]
    fn anonymous_rules_are_read_in_order_and_checked() {
        let file = r##"
            [mqtt]
            allow_anonymous = true
            [[mqtt.anonymous_rules]]
            allow = "#"
            action = "subscribe"
            [[mqtt.anonymous_rules]]
            allow = "sensors/+/temp"
            action = "publish"
            [[mqtt.anonymous_rules]]
            deny = "sensors/secret/#"
        "##;
        let c = load(Some(file), &[], ConfigFlags::default()).unwrap();
        let rule = |effect, action, filter: &str| MqttRule {
            effect,
            action,
            filter: filter.to_owned(),
        };
        assert_eq!(
            c.mqtt.settings.anonymous_rules,
            [
                rule(MqttEffect::Allow, MqttAction::Subscribe, "#"),
                rule(MqttEffect::Allow, MqttAction::Publish, "sensors/+/temp"),
                rule(MqttEffect::Deny, MqttAction::Both, "sensors/secret/#"),
            ]
        );
        // What config check prints loads back to the same rules.
        let printed = c.to_toml_redacted();
        assert!(printed.contains("\n[mqtt]\n"), "{printed}");
        let again = load(Some(&printed), &[], ConfigFlags::default()).unwrap();
        assert_eq!(again.mqtt, c.mqtt);
        // The environment takes them as a TOML inline array.
        let env = [(
            "HERALD_MQTT_ANONYMOUS_RULES",
            r##"[{ allow = "#", action = "subscribe" }, { deny = "secret/x" }]"##,
        )];
        let c = load(None, &env, ConfigFlags::default()).unwrap();
        let rules = &c.mqtt.settings.anonymous_rules;
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[1].effect, MqttEffect::Deny);
    }

    #[test]
    fn a_bad_anonymous_rule_is_named_by_its_place_and_source() {
        let rule = |body: &str| {
            format!("[[mqtt.anonymous_rules]]\nallow = \"#\"\n[[mqtt.anonymous_rules]]\n{body}")
        };
        for (body, at, said) in [
            (
                "deny = \"a/#/b\"",
                "mqtt.anonymous_rules[1].deny \"a/#/b\" (from ",
                "# must be the last character",
            ),
            (
                "allow = \"a+\"",
                "mqtt.anonymous_rules[1].allow \"a+\"",
                "+ must occupy an entire level",
            ),
            (
                "allow = \"\"",
                "mqtt.anonymous_rules[1].allow",
                "at least one character",
            ),
            (
                "allow = \"a\"\ndeny = \"b\"",
                "mqtt.anonymous_rules[1] (from ",
                "both allow and deny",
            ),
            (
                "action = \"both\"",
                "mqtt.anonymous_rules[1] (from ",
                "needs allow",
            ),
            (
                "allow = \"a\"\naction = \"read\"",
                "mqtt.anonymous_rules[1].action \"read\"",
                "\"publish\", \"subscribe\" or \"both\"",
            ),
            (
                "allow = 3",
                "mqtt.anonymous_rules[1].allow",
                "found integer",
            ),
            (
                "allow = \"$share/g/a\"",
                "mqtt.anonymous_rules[1].allow \"$share/g/a\"",
                "shared subscription",
            ),
            (
                "alow = \"a\"",
                "mqtt.anonymous_rules[1].alow",
                "unknown key",
            ),
        ] {
            let e = err(Some(&rule(body)), &[], ConfigFlags::default());
            assert!(
                e.contains(at)
                    && e.contains(said)
                    && e.contains("herald.toml: mqtt.anonymous_rules[1]"),
                "{body}: {e}"
            );
        }
        let e = err(
            Some("[mqtt]\nanonymous_rules = \"#\""),
            &[],
            ConfigFlags::default(),
        );
        assert!(e.contains("expected an array of tables"), "{e}");
        let env = [("HERALD_MQTT_ANONYMOUS_RULES", "[{ deny = \"x/#/y\" }]")];
        let e = err(None, &env, ConfigFlags::default());
        assert!(
            e.contains("mqtt.anonymous_rules[0].deny \"x/#/y\" (from HERALD_MQTT_ANONYMOUS_RULES)"),
            "{e}"
        );
        let env = [("HERALD_MQTT_ANONYMOUS_RULES", "allow #")];
        let e = err(None, &env, ConfigFlags::default());
        assert!(
            e.contains("(from HERALD_MQTT_ANONYMOUS_RULES)") && e.contains("TOML array"),
            "{e}"
        );
    }
}
