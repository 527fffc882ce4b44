//! Apps (tenants) and how their channels are kept apart.
//!
//! Every channel, device and key belongs to one app. The log and the hub key channels by one
//! flat name, so a channel of app `shop` named `news` is stored as `shop~news`; `~` is not part of
//! the channel grammar, so no client or publisher can name another app's channel. The default
//! app (the single app of a one-app server) keeps plain names, so nothing changes for it.
//!
//! Each app also has logs no client can name directly:
//! - `APP~$app`: pushes to the whole app or to a tag expression, stored once; every device of
//!   the app reads it through its cursor and keeps what its audience admits.
//! - `APP~$dev/DEVICE`: pushes addressed to one device (or to its user).
//!
//! Clients see these as `$app` and `$device`. Core knows only their names; `herald-push` keeps
//! pushes in them and registers their retention with [`crate::namespace::Namespaces`].

use std::fmt;
use std::sync::Arc;

use crate::error::{ErrorCode, HeraldError};
use crate::name::ChannelName;

/// The app every server has; a one-app server uses only this one.
pub const DEFAULT_APP: &str = herald_proto::token::DEFAULT_APP;

/// Longest app id, in bytes.
pub const MAX_APP_ID_LEN: usize = 32;

/// What clients see as the name of an app's broadcast log.
pub const APP_LOG: &str = "$app";

/// What a device sees as the name of its own inbox log.
pub const DEVICE_LOG: &str = "$device";

/// What a device's own log is named within its app, before the device id.
pub const DEVICE_LOG_PREFIX: &str = "$dev/";

/// The first character of every reserved log's name within its app.
pub const RESERVED: char = '$';

const SCOPE: char = '~';

/// A validated app id: 1 to 32 bytes of `a-z 0-9 -`, starting with a letter or digit.
///
/// One pointer (8 bytes): the text is boxed inside the shared allocation, so every record that
/// keeps an app id (a parked connection's client among them, one per idle connection) keeps
/// one word, not the two of an `Arc<str>`. Clones share the allocation; ids are made when a
/// token, key or request names an app, not per message, so the second allocation is rare.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppId(Arc<Box<str>>);

impl AppId {
    /// Validates an app id.
    pub fn parse(id: &str) -> Result<Self, HeraldError> {
        let ok = !id.is_empty()
            && id.len() <= MAX_APP_ID_LEN
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !id.starts_with('-');
        if ok {
            Ok(AppId(Arc::new(Box::from(id))))
        } else {
            Err(HeraldError::new(
                ErrorCode::BadRequest,
                format!(
                    "invalid app id {:?}: use 1 to {MAX_APP_ID_LEN} of a-z 0-9 and '-', not \
                     starting with '-'",
                    id.chars().take(40).collect::<String>()
                ),
            ))
        }
    }

    /// The default app. One shared string: every default-app client and name refers to it.
    pub fn default_app() -> Self {
        static DEFAULT: std::sync::LazyLock<AppId> =
            std::sync::LazyLock::new(|| AppId(Arc::new(Box::from(DEFAULT_APP))));
        DEFAULT.clone()
    }

    /// Whether this is the default app.
    pub fn is_default(&self) -> bool {
        self.as_str() == DEFAULT_APP
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0[..]
    }

    /// The full name of this app's channel `name` (see the module doc).
    pub fn channel(&self, name: &ChannelName) -> ChannelName {
        if self.is_default() {
            name.clone()
        } else {
            ChannelName::from_trusted(format!("{}{SCOPE}{}", self.0, name.as_str()))
        }
    }

    /// Parses a channel name a client or publisher of this app gave and scopes it.
    pub fn parse_channel(&self, name: &str) -> Result<ChannelName, HeraldError> {
        Ok(self.channel(&ChannelName::parse(name)?))
    }

    /// The full name of one of this app's reserved logs, `local` being its name within the app
    /// (`$app`, `$dev/DEVICE`): logs no client or publisher can name, which `herald-push`
    /// keeps pushes in. `local` must be one [`parse_full`] accepts after the scope.
    pub fn reserved_log(&self, local: &str) -> ChannelName {
        debug_assert!(local.starts_with(RESERVED));
        ChannelName::from_trusted(format!("{}{SCOPE}{local}", self.0))
    }

    /// Whether `channel` (a full name) belongs to this app and is one clients can name, i.e.
    /// not one of the app's push logs.
    pub fn owns_plain_channel(&self, channel: &str) -> bool {
        match channel.split_once(SCOPE) {
            None => self.is_default(),
            Some((app, local)) => app == self.as_str() && !local.starts_with(RESERVED),
        }
    }

    /// The prefix every full name of this app's scoped channels starts with (empty for the
    /// default app, whose plain channels are unscoped).
    pub fn scope_prefix(&self) -> String {
        if self.is_default() {
            String::new()
        } else {
            format!("{}{SCOPE}", self.0)
        }
    }
}

/// Looks an app up by its id's text (the hash and order are the text's).
impl std::borrow::Borrow<str> for AppId {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl serde::Serialize for AppId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Parses a full channel name as the log stores it: a plain name (default app), `app~name`, or
/// one of an app's push logs (`app~$app`, `app~$dev/DEVICE`).
pub fn parse_full(full: &str) -> Result<ChannelName, HeraldError> {
    let Some((app, local)) = full.split_once(SCOPE) else {
        return ChannelName::parse(full);
    };
    AppId::parse(app)?;
    let ok = if local == APP_LOG {
        true
    } else if let Some(device) = local.strip_prefix(DEVICE_LOG_PREFIX) {
        crate::device_id::check_device_id(device).is_ok()
    } else {
        !local.starts_with(RESERVED) && ChannelName::parse(local).is_ok()
    };
    if ok {
        Ok(ChannelName::from_trusted(full.to_string()))
    } else {
        Err(HeraldError::new(
            ErrorCode::ChannelInvalid,
            format!(
                "invalid scoped channel name {:?}",
                full.chars().take(80).collect::<String>()
            ),
        ))
    }
}

/// The name of a full channel name as its app's clients see it.
pub(crate) fn public_name(full: &str) -> &str {
    let local = full.split_once(SCOPE).map_or(full, |(_, local)| local);
    if local.starts_with(DEVICE_LOG_PREFIX) {
        DEVICE_LOG
    } else {
        local
    }
}

/// The app id and the name within that app of a full channel name: `("shop", "news")` for
/// `shop~news`, `("shop", "$app")` for `shop~$app`, `("default", "news")` for the default app's
/// `news`.
pub fn split_app(full: &str) -> (&str, &str) {
    // A byte search: every lifecycle event a webhook listener looks at asks this, and the
    // scope is ASCII, so the split falls on a character boundary.
    match full.bytes().position(|b| b == SCOPE as u8) {
        Some(at) => (&full[..at], &full[at + 1..]),
        None => (DEFAULT_APP, full),
    }
}

/// The name within its app of a full channel name of an app other than the default one
/// (`news` for `shop~news`, `$app` for `shop~$app`); `None` for a default-app channel.
pub fn scoped_local(full: &str) -> Option<&str> {
    full.split_once(SCOPE).map(|(_, local)| local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_ids() {
        for ok in ["default", "shop", "a", "my-app-2"] {
            assert!(AppId::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Shop", "-x", "a~b", "a/b", &"a".repeat(33)] {
            assert_eq!(
                AppId::parse(bad).unwrap_err().code,
                ErrorCode::BadRequest,
                "{bad}"
            );
        }
    }

    #[test]
    fn channels_are_scoped_and_shown_plain() {
        let shop = AppId::parse("shop").unwrap();
        let def = AppId::default_app();
        let news = ChannelName::parse("news").unwrap();
        assert_eq!(shop.channel(&news).as_str(), "shop~news");
        assert_eq!(shop.channel(&news).public(), "news");
        assert_eq!(shop.channel(&news).to_string(), "news");
        assert_eq!(def.channel(&news).as_str(), "news");
        assert_eq!(shop.reserved_log(APP_LOG).public(), "$app");
        assert_eq!(shop.reserved_log("$dev/d1").public(), "$device");
        assert_eq!(def.reserved_log(APP_LOG).as_str(), "default~$app");
        assert_eq!(scoped_local("shop~$app"), Some("$app"));
        assert_eq!(scoped_local("news"), None);
        assert!(shop.owns_plain_channel("shop~news"));
        assert!(!shop.owns_plain_channel("news"));
        assert!(!shop.owns_plain_channel("shopx~news"));
        assert!(!shop.owns_plain_channel("shop~$app"));
        assert!(def.owns_plain_channel("news"));
        assert!(!def.owns_plain_channel("shop~news"));
        assert!(!def.owns_plain_channel("default~$app"));
        for full in [
            "news",
            "shop~news",
            "shop~$app",
            "shop~$dev/d-1",
            "default~$dev/x",
        ] {
            assert_eq!(parse_full(full).unwrap().as_str(), full);
        }
        for bad in [
            "shop~",
            "Shop~news",
            "shop~$other",
            "shop~$dev/",
            "shop~a//b",
            "x~y~z",
        ] {
            assert!(parse_full(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_app_id_is_one_word_and_keeps_its_text() {
        // One pointer (an `Arc<str>` was two words): every parked connection's client keeps
        // one, and the parked MQTT record needs the word for jemalloc's 128-byte class.
        assert_eq!(size_of::<AppId>(), size_of::<usize>());
        let shop = AppId::parse("shop-2").unwrap();
        assert_eq!(shop.as_str(), "shop-2");
        assert_eq!(shop.to_string(), "shop-2");
        assert_eq!(format!("{shop:?}"), "\"shop-2\"");
        assert_eq!(shop, AppId::parse("shop-2").unwrap());
        assert!(AppId::default_app().is_default() && !shop.is_default());
        let mut apps = std::collections::HashSet::new();
        apps.insert(shop.clone());
        assert!(apps.contains("shop-2"), "found by its text (Borrow<str>)");
    }
}
