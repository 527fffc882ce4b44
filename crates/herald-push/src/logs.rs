//! The push logs: each app's broadcast log (`$app`) and its devices' own logs (`$dev/DEVICE`,
//! shown to the device as `$device`), what they are named and how long they keep pushes.
//!
//! They are reserved logs of the channel engine (see `herald_core::tenant`): no client or
//! publisher can name them. Their retention is registered with the engine's namespaces once at
//! start-up by [`register`].

use herald_core::log::Retention;
use herald_core::name::ChannelName;
use herald_core::namespace::{NamespaceOptions, Namespaces};
use herald_core::tenant::{scoped_local, AppId, DEVICE_LOG_PREFIX, RESERVED};

pub use herald_core::tenant::{APP_LOG, DEVICE_LOG};

/// How long push logs keep messages unless configured: 30 days, so a push with the longest TTL
/// is still there for a device that comes back.
pub const DEFAULT_RETENTION: Retention = Retention {
    max_messages: 10_000_000,
    max_age_ms: 30 * 24 * 3600 * 1000,
};

/// Registers the push logs with the engine's namespaces: they keep messages for `retention`
/// ([`DEFAULT_RETENTION`] on a server), whatever namespaces are configured, and never send the
/// last message on subscribe (an inbox resumes from its cursor).
pub fn register(namespaces: &mut Namespaces, retention: Retention) {
    let options = NamespaceOptions {
        retention,
        last_on_subscribe: false,
        presence: None,
    };
    namespaces.reserve(APP_LOG, options);
    namespaces.reserve(DEVICE_LOG_PREFIX, options);
}

/// The names of an app's push logs.
pub trait PushLogs {
    /// The app's broadcast log (pushes to the app or to a tag expression).
    fn app_log(&self) -> ChannelName;
    /// A device's own inbox log. `device` must be a validated device id.
    fn device_log(&self, device: &str) -> ChannelName;
}

impl PushLogs for AppId {
    fn app_log(&self) -> ChannelName {
        self.reserved_log(APP_LOG)
    }

    fn device_log(&self, device: &str) -> ChannelName {
        self.reserved_log(&format!("{DEVICE_LOG_PREFIX}{device}"))
    }
}

/// Whether a full channel name is a push log (`$app` or a device inbox) of some app.
pub fn is_push_log(full: &str) -> bool {
    scoped_local(full).is_some_and(|local| local.starts_with(RESERVED))
}

/// Whether a full channel name is an app's broadcast log.
pub fn is_app_log(full: &str) -> bool {
    scoped_local(full).is_some_and(|local| local == APP_LOG)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_logs_are_scoped_and_shown_plain() {
        let shop = AppId::parse("shop").unwrap();
        let def = AppId::default_app();
        assert_eq!(shop.app_log().public(), "$app");
        assert_eq!(shop.device_log("d1").public(), "$device");
        assert!(is_push_log(shop.app_log().as_str()));
        assert!(is_app_log(def.app_log().as_str()));
        assert!(is_push_log(def.device_log("d").as_str()));
        assert!(!is_push_log("news"));
        assert!(!shop.owns_plain_channel(shop.app_log().as_str()));
        assert!(!def.owns_plain_channel(def.app_log().as_str()));
        for log in [shop.app_log(), shop.device_log("d-1"), def.device_log("x")] {
            let full = log.as_str();
            assert_eq!(
                herald_core::tenant::parse_full(full).unwrap().as_str(),
                full
            );
        }
    }

    #[test]
    fn registered_logs_keep_pushes_for_the_push_retention() {
        let short = NamespaceOptions {
            retention: Retention {
                max_messages: 5,
                max_age_ms: 0,
            },
            last_on_subscribe: true,
            presence: None,
        };
        let mut ns = Namespaces::new(short, vec![("shop~".into(), short)]);
        register(&mut ns, DEFAULT_RETENTION);
        let shop = AppId::parse("shop").unwrap();
        for log in [
            shop.app_log(),
            shop.device_log("d"),
            AppId::default_app().app_log(),
        ] {
            let options = ns.options(log.as_str());
            assert_eq!(options.retention, DEFAULT_RETENTION, "{log:?}");
            assert!(!options.last_on_subscribe);
        }
        assert_eq!(ns.options("shop~news"), &short);
    }
}
