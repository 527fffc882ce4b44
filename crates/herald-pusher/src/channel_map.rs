//! Pusher channel names ↔ Herald channels, and the kind of a name.
//!
//! A Pusher name is 1 to [`MAX_CHANNEL_NAME_LEN`] characters of `A-Z a-z 0-9 _ - = @ , . ;`
//! (Pusher's rule). It maps to a Herald channel through core's topic-style encoding
//! ([`ChannelName::from_topic`], as MQTT's topics do, docs/design/mqtt.md): a name that is a
//! valid Herald channel name and does not begin with `=` is that channel; any other (one with
//! `,` or `;`, one beginning with `=`, a lone `.`) is its lossless `=` encoding (`a,b` is
//! `=a=2Cb`). So every Pusher name is exactly one channel and back ([`pusher_name`]). A Herald
//! channel whose name a Pusher client cannot write (`/` or `:` in it) has no Pusher name.
//!
//! The kind comes from the prefix, as in Pusher ([`ChannelKind::of`]).

use herald_core::tenant::AppId;
use herald_core::{ChannelName, ErrorCode, HeraldError};

/// The longest Pusher channel name, in characters (Pusher's documented limit).
pub const MAX_CHANNEL_NAME_LEN: usize = 164;

/// What a channel's name makes it, by its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// No prefix: anyone may subscribe.
    Public,
    /// `private-`: a subscription needs the app's signature.
    Private,
    /// `presence-`: signed, with the member's `channel_data`.
    Presence,
    /// `private-encrypted-`: signed; the server relays ciphertext as it is.
    PrivateEncrypted,
    /// `cache-`: public, the last event sent on subscribe.
    Cache,
    /// `private-cache-`: private, the last event sent on subscribe.
    PrivateCache,
    /// `presence-cache-`: presence, the last event sent on subscribe.
    PresenceCache,
}

impl ChannelKind {
    /// The kind of the Pusher channel `name`.
    pub fn of(name: &str) -> ChannelKind {
        // Longest prefixes first: `private-encrypted-` and `private-cache-` are `private-` too.
        const PREFIXES: [(&str, ChannelKind); 6] = [
            ("private-encrypted-", ChannelKind::PrivateEncrypted),
            ("private-cache-", ChannelKind::PrivateCache),
            ("presence-cache-", ChannelKind::PresenceCache),
            ("private-", ChannelKind::Private),
            ("presence-", ChannelKind::Presence),
            ("cache-", ChannelKind::Cache),
        ];
        PREFIXES
            .iter()
            .find(|(prefix, _)| name.starts_with(prefix))
            .map_or(ChannelKind::Public, |(_, kind)| *kind)
    }

    /// Whether a subscription needs the app's signature.
    pub fn needs_auth(self) -> bool {
        !matches!(self, ChannelKind::Public | ChannelKind::Cache)
    }

    /// Whether it is a presence channel (members, `channel_data`).
    pub fn is_presence(self) -> bool {
        matches!(self, ChannelKind::Presence | ChannelKind::PresenceCache)
    }

    /// Whether its last event is sent on subscribe.
    pub fn is_cache(self) -> bool {
        matches!(
            self,
            ChannelKind::Cache | ChannelKind::PrivateCache | ChannelKind::PresenceCache
        )
    }
}

/// Whether `c` may be in a Pusher channel name.
fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '=' | '@' | ',' | '.' | ';')
}

/// Checks `name` against Pusher's rule: 1 to [`MAX_CHANNEL_NAME_LEN`] characters of
/// `A-Z a-z 0-9 _ - = @ , . ;`. The error says what is wrong, as Pusher's answers do.
pub fn check_pusher_name(name: &str) -> Result<(), HeraldError> {
    let refuse = |why: String| HeraldError::new(ErrorCode::ChannelInvalid, why);
    if name.is_empty() {
        return Err(refuse("Invalid channel name: it is empty".into()));
    }
    let len = name.chars().count();
    if len > MAX_CHANNEL_NAME_LEN {
        return Err(refuse(format!(
            "Invalid channel name: it is {len} characters; the limit is {MAX_CHANNEL_NAME_LEN}"
        )));
    }
    if let Some(c) = name.chars().find(|c| !allowed(*c)) {
        return Err(refuse(format!(
            "Invalid channel name {name:?}: {c:?} is not allowed (only A-Z a-z 0-9 and _ - = @ , . ;)"
        )));
    }
    Ok(())
}

/// The Herald channel (not scoped to an app) of the Pusher channel `name`, after
/// [`check_pusher_name`]; a server-to-user channel `#server-to-user-{id}` (which only the HTTP
/// API names: clients are refused it) is the user's channel ([`crate::users::user_channel`]).
pub fn herald_channel(name: &str) -> Result<ChannelName, HeraldError> {
    if let Some(user) = crate::users::server_to_user_channel(name) {
        return user;
    }
    check_pusher_name(name)?;
    ChannelName::from_topic(name).map_err(|e| {
        HeraldError::new(
            ErrorCode::ChannelInvalid,
            format!("Invalid channel name {name:?}: {}", e.message),
        )
    })
}

/// The full Herald channel of `app` that the Pusher channel `name` is.
pub fn app_channel(app: &AppId, name: &str) -> Result<ChannelName, HeraldError> {
    Ok(app.channel(&herald_channel(name)?))
}

/// The Pusher name of `channel` (an app's channel, full or not), if a Pusher client can name
/// it: its topic-style name, when that is a valid Pusher name; a user's channel's
/// `#server-to-user-{id}`.
pub fn pusher_name(channel: &ChannelName) -> Option<String> {
    let topic = channel.topic();
    if let Some(name) = crate::users::server_to_user_name(&topic) {
        return Some(name);
    }
    check_pusher_name(&topic).ok().map(|()| topic.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_prefix() {
        for (name, kind) in [
            ("news", ChannelKind::Public),
            ("private-chat", ChannelKind::Private),
            ("presence-room", ChannelKind::Presence),
            ("private-encrypted-x", ChannelKind::PrivateEncrypted),
            ("cache-prices", ChannelKind::Cache),
            ("private-cache-x", ChannelKind::PrivateCache),
            ("presence-cache-x", ChannelKind::PresenceCache),
            ("privatex", ChannelKind::Public),
        ] {
            assert_eq!(ChannelKind::of(name), kind, "{name}");
        }
        assert!(ChannelKind::PrivateCache.needs_auth() && ChannelKind::PrivateCache.is_cache());
        assert!(!ChannelKind::Cache.needs_auth());
        assert!(ChannelKind::PresenceCache.is_presence());
    }

    #[test]
    fn names_map_through_the_topic_encoding_both_ways() {
        for (pusher, herald) in [
            ("news", "news"),
            ("private-chat.42", "private-chat.42"),
            ("a,b", "=a=2Cb"),
            ("x;y", "=x=3By"),
            ("=lead", "==3Dlead"),
            ("user@example.com", "user@example.com"),
        ] {
            let channel = herald_channel(pusher).unwrap();
            assert_eq!(channel.as_str(), herald, "{pusher}");
            assert_eq!(pusher_name(&channel).as_deref(), Some(pusher), "{herald}");
        }
    }

    #[test]
    fn app_channels_are_scoped_and_map_back() {
        let shop = AppId::parse("shop").unwrap();
        let channel = app_channel(&shop, "a,b").unwrap();
        assert_eq!(pusher_name(&channel).as_deref(), Some("a,b"));
    }

    #[test]
    fn pushers_rule_is_checked_first() {
        assert!(herald_channel("").is_err());
        assert!(herald_channel("a/b").unwrap_err().message.contains("'/'"));
        assert!(herald_channel("a b").is_err());
        assert!(herald_channel("#other").is_err());
        // The server-to-user channel is the user's channel (the HTTP API's name for it).
        assert_eq!(
            herald_channel("#server-to-user-1").unwrap().as_str(),
            "server-to-user:1"
        );
        assert!(herald_channel(&"x".repeat(164)).is_ok());
        let long = herald_channel(&"x".repeat(165)).unwrap_err();
        assert!(long.message.contains("165 characters"), "{}", long.message);
        assert_eq!(long.code, ErrorCode::ChannelInvalid);
        // A Herald name a Pusher client cannot write has no Pusher name.
        let slashed = ChannelName::parse("chat/room-1").unwrap();
        assert_eq!(pusher_name(&slashed), None);
    }
}
