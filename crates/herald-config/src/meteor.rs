//! The Meteor keys: the two listen addresses (`IP:PORT`, or a bare port on 127.0.0.1), the
//! meteord.conf (read and checked at load, so `herald config check` reports a bad line), the
//! document root, the controller password and `meteor_channels` (the channel patterns the
//! subscriber port may subscribe to, checked like a token's). A meteord.conf's `MaxMessagesPerChannel` and
//! `MaxMessageAge` become the default history size and age unless Herald's own settings set
//! them, so a deployment keeps the retention it had.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use herald_server::vocabulary::MeteorConf;

use super::layers::{Layers, Raw, Source};
use super::validate::{secret, text, ConfigError};
use super::{MeteorConfig, NamespaceSettings};
use herald_proto::token::check_pattern;

/// `IP:PORT`, or `PORT` alone for the loopback address.
pub(super) fn address(raw: &Raw) -> Result<Option<SocketAddr>, String> {
    let t = text(raw)?.trim();
    if let Ok(port) = t.parse::<u16>() {
        return Ok(Some(SocketAddr::from(([127, 0, 0, 1], port))));
    }
    t.parse()
        .map(Some)
        .map_err(|e| format!("{e}; expected IP:PORT such as 127.0.0.1:4670, or a port"))
}

fn folder(raw: &Raw) -> Result<Option<PathBuf>, String> {
    let t = text(raw)?;
    if t.is_empty() {
        return Err("must not be empty".into());
    }
    Ok(Some(PathBuf::from(t)))
}

/// Channel patterns, as a TOML array of strings or comma-separated text; at least one.
fn patterns(raw: &Raw) -> Result<Option<Vec<String>>, String> {
    let items: Vec<String> = match raw {
        Raw::Toml(toml::Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or("expected strings"))
            .collect::<Result<_, _>>()?,
        other => text(other)?
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect(),
    };
    if items.is_empty() {
        return Err("expected at least one channel pattern such as \"public/*\"".into());
    }
    for p in &items {
        check_pattern(p).map_err(|e| e.message)?;
    }
    Ok(Some(items))
}

impl Layers {
    /// The Meteor settings; may lower `history`'s defaults to the meteord.conf's retention.
    pub(super) fn meteor(
        &self,
        history: &mut NamespaceSettings,
        sources: &mut std::collections::BTreeMap<String, Source>,
    ) -> Result<MeteorConfig, ConfigError> {
        let loaded = self.get("meteor_conf", None, |r| {
            let path = text(r)?;
            let body = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
            let conf = MeteorConf::from_file_text(&body).map_err(|e| e.to_string())?;
            Ok(Some((PathBuf::from(path), conf)))
        })?;
        let (conf_file, conf) = match loaded {
            Some((path, conf)) => (Some(path), conf),
            None => (None, MeteorConf::builtin()),
        };
        if let Some(path) = &conf_file {
            let from = |key: &str| Source::File {
                path: path.clone(),
                key: key.to_owned(),
            };
            if let Some(n) = conf.max_messages_per_channel {
                if !self.values.contains_key("history.size") {
                    history.history_size = n.max(1);
                    sources.insert("history.size".into(), from("MaxMessagesPerChannel"));
                }
            }
            if let Some(secs) = conf.max_message_age {
                if !self.values.contains_key("history.age") {
                    history.history_age = Duration::from_secs(secs);
                    sources.insert("history.age".into(), from("MaxMessageAge"));
                }
            }
        }
        Ok(MeteorConfig {
            listen: self.get("meteor", None, address)?,
            control: self.get("meteor_control", None, address)?,
            conf_file,
            conf: Some(conf),
            document_root: self.get("meteor_document_root", None, folder)?,
            control_password: self.get("meteor_control_password", None, secret(1))?,
            channels: self.get("meteor_channels", None, patterns)?,
            tls: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{err, load};
    use super::super::{ConfigFlags, Source};
    use std::time::Duration;

    #[test]
    fn off_by_default_and_layered() {
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert_eq!((c.meteor.listen, c.meteor.control), (None, None));
        assert!(c.meteor.conf.as_ref().unwrap().mode("longpoll").is_some());
        let env = [
            ("HERALD_METEOR", "4670"),
            ("HERALD_METEOR_CONTROL", "0.0.0.0:1"),
        ];
        let flags = ConfigFlags {
            meteor_control: Some("127.0.0.1:4671".into()),
            ..Default::default()
        };
        let c = load(Some("meteor = \"127.0.0.2:9\""), &env, flags).unwrap();
        assert_eq!(c.meteor.listen, Some("127.0.0.1:4670".parse().unwrap()));
        assert_eq!(c.meteor.control, Some("127.0.0.1:4671".parse().unwrap()));
        assert_eq!(c.source("meteor"), Source::Env("HERALD_METEOR"));
        let e = err(
            None,
            &[("HERALD_METEOR", "nowhere")],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("invalid meteor address \"nowhere\" (from HERALD_METEOR)"),
            "{e}"
        );
    }

    #[test]
    fn meteor_channels_are_checked_patterns() {
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert_eq!(c.meteor.channels, None, "unset: every channel, as Meteor");
        let c = load(
            Some("meteor_channels = [\"public/*\", \"news\"]"),
            &[],
            ConfigFlags::default(),
        )
        .unwrap();
        assert_eq!(
            c.meteor.channels,
            Some(vec!["public/*".into(), "news".into()])
        );
        let env = [("HERALD_METEOR_CHANNELS", "a/**, b")];
        let c = load(None, &env, ConfigFlags::default()).unwrap();
        assert_eq!(c.meteor.channels, Some(vec!["a/**".into(), "b".into()]));
        let e = err(
            Some("meteor_channels = [\"ok\", \"bad pattern\"]"),
            &[],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("meteor_channels") && e.contains("invalid channel pattern"),
            "{e}"
        );
        let e = err(Some("meteor_channels = []"), &[], ConfigFlags::default());
        assert!(e.contains("at least one channel pattern"), "{e}");
    }

    #[test]
    fn meteord_conf_is_read_checked_and_sets_retention() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("meteord.conf");
        std::fs::write(
            &good,
            "MaxMessagesPerChannel 25\nMaxMessageAge 60\n[longpoll]\nPersist 1\n",
        )
        .unwrap();
        let flags = ConfigFlags {
            meteor_conf: Some(good.clone()),
            ..Default::default()
        };
        let c = load(None, &[], flags.clone()).unwrap();
        assert_eq!(c.history.history_size, 25);
        assert_eq!(c.history.history_age, Duration::from_secs(60));
        assert!(c.meteor.conf.as_ref().unwrap().mode("stream").is_none());
        let c = load(Some("[history]\nsize = 7"), &[], flags).unwrap();
        assert_eq!(c.history.history_size, 7, "Herald's own setting wins");

        let bad = dir.path().join("bad.conf");
        std::fs::write(&bad, "PingInterval 3\nBogusKey 1\n").unwrap();
        let flags = ConfigFlags {
            meteor_conf: Some(bad),
            ..Default::default()
        };
        let e = err(None, &[], flags);
        assert!(
            e.contains("(from --meteor-conf): line 2: unknown Meteor configuration key"),
            "{e}"
        );
    }
}
