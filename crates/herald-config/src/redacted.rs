//! Showing a [`Config`] without its secrets: [`Config::to_toml_redacted`] (what
//! `herald config check` prints, a file that loads back to the same values) and `Debug`.

use std::fmt;
use std::time::Duration;

use toml::Value;

use herald_server::settings::redact_url;
use herald_server::vocabulary::{MqttAction, MqttEffect, MqttRule};

use super::Config;

/// What secrets are shown as.
const REDACTED: &str = "<redacted>";

impl Config {
    /// The effective configuration as TOML, secrets replaced by `"<redacted>"`, each value
    /// followed by a comment naming its source.
    pub fn to_toml_redacted(&self) -> String {
        let secret = |s: &Option<String>| s.as_ref().map(|_| Value::from(REDACTED));
        let dur = |d: Duration| Some(Value::from(humantime::format_duration(d).to_string()));
        let int = |n: u64| Some(Value::Integer(i64::try_from(n).unwrap_or(i64::MAX)));
        let text = |s: &str| Some(Value::from(s));
        let h = &self.history;
        let l = &self.limits;
        let hk = &self.hooks;
        let mq = &self.mqtt.settings;
        let pu = &self.pusher;
        let rate = |r: herald_server::vocabulary::Rate| Some(Value::from(r.to_string()));
        let m = &self.meteor;
        let addr = |a: Option<std::net::SocketAddr>| a.map(|a| Value::from(a.to_string()));
        let path = |p: &Option<std::path::PathBuf>| {
            p.as_ref()
                .map(|p| Value::from(p.to_string_lossy().into_owned()))
        };
        let entries = [
            ("listen", text(&self.listen.to_string()), ""),
            ("data", text(&self.data.to_string_lossy()), ""),
            ("api_key", secret(&self.api_key), "the server generates one"),
            (
                "admin_key",
                secret(&self.admin_key),
                "app administration is off",
            ),
            (
                "metrics_token",
                secret(&self.metrics_token),
                "/metrics is open",
            ),
            (
                "previous_api_key",
                secret(&self.previous_api_key),
                "only api_key is valid",
            ),
            (
                "token_secret",
                secret(&self.token_secret),
                "<data>/token-secret is used",
            ),
            (
                "previous_token_secret",
                secret(&self.previous_token_secret),
                "only token_secret verifies tokens",
            ),
            (
                "allow_anonymous",
                Some(Value::from(self.allow_anonymous)),
                "",
            ),
            ("admin_session_ttl", dur(self.admin_session_ttl), ""),
            (
                "admin_cookie_secure",
                Some(Value::from(self.admin_cookie_secure)),
                "",
            ),
            ("sync", text(self.sync.as_str()), ""),
            (
                "wal_preallocate",
                Some(Value::from(self.wal_preallocate)),
                "",
            ),
            ("max_frame_bytes", int(self.max_frame_bytes as u64), ""),
            ("outbox_bytes", int(self.outbox_bytes as u64), ""),
            ("catchup_bytes", int(self.catchup_bytes as u64), ""),
            ("tail_cache_bytes", int(self.tail_cache_bytes as u64), ""),
            ("max_subscriptions", int(self.max_subscriptions as u64), ""),
            ("ping_interval", dur(self.ping_interval), ""),
            ("park_idle_after", dur(self.park_idle_after), ""),
            ("shutdown_grace", dur(self.shutdown_grace), ""),
            ("workers", int(self.workers as u64), ""),
            ("http_workers", int(self.http_workers as u64), ""),
            ("fanout_backlog", int(self.fanout_backlog as u64), ""),
            ("jwks_min_refetch", dur(self.jwks_min_refetch), ""),
            ("jwks_fetch_timeout", dur(self.jwks_fetch_timeout), ""),
            (
                "outbound_allow",
                Some(Value::Array(
                    self.outbound_allow
                        .iter()
                        .map(|n| Value::from(n.to_string()))
                        .collect(),
                )),
                "",
            ),
            ("audit_retention", dur(self.audit_retention), ""),
            ("first_byte_timeout", dur(self.deadlines.first_byte), ""),
            ("head_timeout", dur(self.deadlines.head), ""),
            ("body_timeout", dur(self.deadlines.body), ""),
            ("keepalive_timeout", dur(self.deadlines.keepalive), ""),
            (
                "meteor_control_idle_timeout",
                dur(self.deadlines.meteor_control_idle),
                "",
            ),
            ("log_format", text(self.log_format.as_str()), ""),
            ("log_level", text(&self.log_level), ""),
            (
                "meteor",
                addr(m.listen),
                "the Meteor subscriber port is off",
            ),
            (
                "meteor_control",
                addr(m.control),
                "the Meteor controller port is off",
            ),
            (
                "meteor_conf",
                path(&m.conf_file),
                "Meteor's shipped modes are used",
            ),
            (
                "meteor_document_root",
                path(&m.document_root),
                "no files are served (unless the meteor_conf sets SubscriberDocumentRoot)",
            ),
            (
                "meteor_channels",
                m.channels
                    .as_ref()
                    .map(|c| Value::Array(c.iter().map(|p| Value::from(p.as_str())).collect())),
                "the Meteor subscriber port may subscribe to every default-app channel",
            ),
            (
                "meteor_control_password",
                secret(&m.control_password),
                "controllers need no password",
            ),
            (
                "credentials_key",
                secret(&self.providers.credentials_key),
                "generated into <data>/credentials-key",
            ),
            (
                "apns_url",
                self.providers.apns_url.as_deref().and_then(text),
                "Apple's production or sandbox host, as each app's credentials say",
            ),
            (
                "fcm_url",
                self.providers.fcm_url.as_deref().and_then(text),
                "https://fcm.googleapis.com",
            ),
            (
                "fcm_token_url",
                self.providers.fcm_token_url.as_deref().and_then(text),
                "the service account's token_uri",
            ),
            (
                "provider_ca_file",
                path(&self.providers.ca_file),
                "only the public web roots are trusted",
            ),
            (
                "tls_cert",
                path(&self.tls.as_ref().map(|t| t.files.cert.clone())),
                "plain HTTP",
            ),
            (
                "tls_key",
                path(&self.tls.as_ref().map(|t| t.files.key.clone())),
                "plain HTTP",
            ),
            ("meteor_tls", Some(Value::from(m.tls)), ""),
            (
                "mqtt_listen",
                addr(self.mqtt.listen),
                "the MQTT listener is off",
            ),
            ("mqtt_tls", Some(Value::from(self.mqtt.tls)), ""),
            (
                "provider_connections",
                int(self.providers.connections as u64),
                "",
            ),
            ("provider_batch", int(self.providers.batch as u64), ""),
            ("provider_lease", dur(self.providers.lease), ""),
            ("provider_rounds", int(self.providers.rounds as u64), ""),
            (
                "store",
                self.cluster
                    .postgres
                    .as_deref()
                    .map(|u| Value::from(redact_url(u))),
                "SQLite in the data directory",
            ),
            (
                "bus",
                (!self.cluster.redis.is_empty()).then(|| {
                    Value::from(
                        self.cluster
                            .redis
                            .iter()
                            .map(|u| redact_url(u))
                            .collect::<Vec<_>>()
                            .join(","),
                    )
                }),
                "one node, no bus",
            ),
            (
                "redis_cluster",
                Some(Value::from(self.cluster.redis_cluster)),
                "",
            ),
            (
                "redis_ca_file",
                path(&self.cluster.redis_ca_file),
                "only the public web roots are trusted",
            ),
            ("postgres_pool", int(self.cluster.postgres_pool as u64), ""),
            (
                "redis_receive_queue",
                int(self.cluster.redis_receive_queue as u64),
                "",
            ),
            ("history.size", int(h.history_size), ""),
            ("history.age", dur(h.history_age), ""),
            (
                "history.last_on_subscribe",
                Some(Value::from(h.last_on_subscribe)),
                "",
            ),
            ("limits.publish", rate(l.publish), ""),
            ("limits.push", rate(l.push), ""),
            ("limits.registration", rate(l.registration), ""),
            ("limits.key_publish", rate(l.key_publish), ""),
            ("limits.key_push", rate(l.key_push), ""),
            ("limits.key_registration", rate(l.key_registration), ""),
            ("limits.command", rate(l.command), ""),
            ("limits.connection", rate(l.connection), ""),
            ("limits.login", rate(l.login), ""),
            (
                "limits.exempt",
                Some(Value::Array(
                    l.exempt
                        .iter()
                        .map(|c| Value::from(c.to_string()))
                        .collect(),
                )),
                "",
            ),
            ("hooks.batch_max", int(hk.batch_max as u64), ""),
            ("hooks.batch_delay", dur(hk.batch_delay), ""),
            ("hooks.retry_horizon", dur(hk.horizon), ""),
            (
                "hooks.max_queued_per_endpoint",
                int(hk.max_queued_per_endpoint),
                "",
            ),
            ("hooks.node_queue", int(hk.node_queue as u64), ""),
            ("hooks.request_timeout", dur(hk.request_timeout), ""),
            (
                "hooks.max_endpoints_per_app",
                int(hk.max_endpoints_per_app as u64),
                "",
            ),
            (
                "hooks.subscription_count_interval",
                dur(hk.subscription_count_interval),
                "",
            ),
            ("mqtt.max_keep_alive", int(mq.max_keep_alive.into()), ""),
            ("mqtt.websocket", Some(Value::from(self.mqtt.websocket)), ""),
            ("mqtt.max_packet_size", int(mq.max_packet_size.into()), ""),
            ("mqtt.receive_maximum", int(mq.receive_maximum.into()), ""),
            ("mqtt.max_inflight_out", int(mq.max_inflight_out.into()), ""),
            (
                "mqtt.max_topic_aliases",
                int(mq.max_topic_aliases.into()),
                "",
            ),
            (
                "mqtt.max_topic_aliases_out",
                int(mq.max_topic_aliases_out.into()),
                "",
            ),
            (
                "mqtt.max_session_expiry",
                int(mq.max_session_expiry.into()),
                "",
            ),
            (
                "mqtt.max_retained_per_filter",
                int(mq.max_retained_per_filter.into()),
                "",
            ),
            (
                "mqtt.max_offline_channels_per_filter",
                int(mq.max_offline_channels_per_filter.into()),
                "",
            ),
            ("mqtt.sys_interval", int(mq.sys_interval.into()), ""),
            (
                "mqtt.allow_anonymous",
                Some(Value::from(mq.allow_anonymous)),
                "",
            ),
            (
                "mqtt.anonymous_ignores_unknown_passwords",
                Some(Value::from(mq.anonymous_ignores_unknown_passwords)),
                "",
            ),
            ("mqtt.anonymous_app", text(&mq.anonymous_app), ""),
            (
                "mqtt.anonymous_rules",
                Some(Value::Array(
                    mq.anonymous_rules.iter().map(rule_value).collect(),
                )),
                "",
            ),
            (
                "pusher.activity_timeout",
                int(pu.activity_timeout.as_secs()),
                "",
            ),
            ("pusher.pong_timeout", int(pu.pong_timeout.as_secs()), ""),
            (
                "pusher.client_events_per_second",
                int(pu.client_events_per_second.into()),
                "",
            ),
            (
                "pusher.presence_max_members",
                int(pu.presence_max_members.into()),
                "",
            ),
        ];
        let mut out = String::new();
        for (key, value, unset) in entries {
            if key == "history.size" {
                out.push_str("\n[history]\n");
            }
            if key == "limits.publish" {
                out.push_str("\n[limits]\n");
            }
            if key == "hooks.batch_max" {
                out.push_str("\n[hooks]\n");
            }
            if key == "mqtt.max_keep_alive" {
                out.push_str("\n[mqtt]\n");
            }
            if key == "pusher.activity_timeout" {
                out.push_str("\n[pusher]\n");
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
            if s.presence {
                out.push_str("presence = true\n");
                out.push_str(&format!(
                    "presence_max_members = {}\n",
                    s.presence_max_members
                ));
                out.push_str(&format!(
                    "presence_max_data_bytes = {}\n",
                    s.presence_max_data_bytes
                ));
            }
        }
        out
    }
}

/// An anonymous MQTT rule as its config-file table: `{ allow = "#", action = "subscribe" }`.
fn rule_value(rule: &MqttRule) -> Value {
    let mut table = toml::Table::new();
    let effect = match rule.effect {
        MqttEffect::Allow => "allow",
        MqttEffect::Deny => "deny",
    };
    table.insert(effect.into(), Value::from(rule.filter.as_str()));
    let action = match rule.action {
        MqttAction::Publish => "publish",
        MqttAction::Subscribe => "subscribe",
        MqttAction::Both => "both",
    };
    table.insert("action".into(), Value::from(action));
    Value::Table(table)
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |s: &Option<String>| s.as_ref().map(|_| REDACTED);
        f.debug_struct("Config")
            .field("config_file", &self.config_file)
            .field("listen", &self.listen)
            .field("data", &self.data)
            .field("api_key", &redact(&self.api_key))
            .field("admin_key", &redact(&self.admin_key))
            .field("metrics_token", &redact(&self.metrics_token))
            .field("previous_api_key", &redact(&self.previous_api_key))
            .field("token_secret", &redact(&self.token_secret))
            .field(
                "previous_token_secret",
                &redact(&self.previous_token_secret),
            )
            .field("allow_anonymous", &self.allow_anonymous)
            .field("admin_session_ttl", &self.admin_session_ttl)
            .field("admin_cookie_secure", &self.admin_cookie_secure)
            .field("sync", &self.sync)
            .field("wal_preallocate", &self.wal_preallocate)
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("outbox_bytes", &self.outbox_bytes)
            .field("catchup_bytes", &self.catchup_bytes)
            .field("tail_cache_bytes", &self.tail_cache_bytes)
            .field("max_subscriptions", &self.max_subscriptions)
            .field("ping_interval", &self.ping_interval)
            .field("park_idle_after", &self.park_idle_after)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("workers", &self.workers)
            .field("http_workers", &self.http_workers)
            .field("fanout_backlog", &self.fanout_backlog)
            .field("jwks_min_refetch", &self.jwks_min_refetch)
            .field("jwks_fetch_timeout", &self.jwks_fetch_timeout)
            .field("outbound_allow", &self.outbound_allow)
            .field("audit_retention", &self.audit_retention)
            .field("deadlines", &self.deadlines)
            .field("limits", &self.limits)
            .field("hooks", &self.hooks)
            .field("hooks", &self.hooks)
            .field("log_format", &self.log_format)
            .field("log_level", &self.log_level)
            .field("history", &self.history)
            .field("namespaces", &self.namespaces)
            .field("meteor", &self.meteor.listen)
            .field("meteor_control", &self.meteor.control)
            .field("meteor_conf", &self.meteor.conf_file)
            .field("meteor_document_root", &self.meteor.document_root)
            .field("meteor_tls", &self.meteor.tls)
            .field("mqtt", &self.mqtt)
            .field("pusher", &self.pusher)
            .field("tls", &self.tls.as_ref().map(|t| &t.files))
            .field(
                "meteor_control_password",
                &redact(&self.meteor.control_password),
            )
            .field("credentials_key", &redact(&self.providers.credentials_key))
            .field("apns_url", &self.providers.apns_url)
            .field("fcm_url", &self.providers.fcm_url)
            .field("fcm_token_url", &self.providers.fcm_token_url)
            .field("provider_ca_file", &self.providers.ca_file)
            .field("provider_connections", &self.providers.connections)
            .field("provider_batch", &self.providers.batch)
            .field("provider_lease", &self.providers.lease)
            .field("provider_rounds", &self.providers.rounds)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::load;
    use super::super::ConfigFlags;

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
