//! User sign-in (`pusher:signin`) and the server-to-user channel (docs/design/pusher.md,
//! "Sign-in"; docs/pusher.md, section 9).
//!
//! A connection signs in with `auth`, `key:HMAC-SHA256(secret, "socket_id::user::user_data")`
//! from the app's backend (the server SDKs' `authenticateUser`), checked in constant time, and
//! `user_data`, a JSON object with a non-empty string `id`, and optionally `user_info` (an
//! object) and `watchlist` (at most [`MAX_WATCHLIST`] user ids, watched as
//! [`crate::watchlist`] says). The connection's client becomes the Herald user `id`
//! ([`herald_edge::session::ClientSession::sign_in`]): lifecycle events and webhooks see
//! that `sub`, and disconnects naming it reach the connection (`terminate_connections`). It
//! is answered `pusher:signin_success` with the `user_data` as sent; a bad signature or bad
//! `user_data` is answered `pusher:error` 4009 and the connection closed with 4009, as
//! Pusher does.
//!
//! **The server-to-user channel** `#server-to-user-{id}` (what the server SDKs' `sendToUser`
//! triggers) is the Herald channel `server-to-user:{id}` ([`user_channel`], through core's
//! topic encoding when the id needs it): `:` is not a Pusher name's character, so no channel a
//! Pusher client can name is it. A signed-in connection is subscribed to its user's channel
//! at sign-in; a client's `pusher:subscribe` of a `#` channel is refused (`InvalidChannel`),
//! except its own user's channel, which it holds already and is answered
//! `subscription_succeeded` (pusher-js sends that subscribe after signing in).

use herald_core::engine::SubscribeRequest;
use herald_core::message::now_millis;
use herald_core::outbox::CloseReason;
use herald_core::{ChannelName, ErrorCode, HeraldError};
use herald_edge::session::PresenceAsk;
use serde_json::Value;

use crate::frame::{self, codes};
use crate::session::{PusherSession, SubscriptionRefused};
use crate::signature::{check_key_signature, signin_string};
use crate::watchlist::{online_channel, Watchlist, MAX_WATCHLIST};

/// The Pusher name of a user's channel, before the user id.
pub const SERVER_TO_USER_PREFIX: &str = "#server-to-user-";

/// The Herald channel of a user's channel, before the user id (topic-style).
pub const USER_CHANNEL_PREFIX: &str = "server-to-user:";

/// The longest user id, in bytes.
pub const MAX_USER_ID_BYTES: usize = 200;

/// A sign-in's `user_data`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserData {
    /// The user id (`id`).
    pub id: String,
    /// `user_info`, compact JSON text of an object, when given.
    pub user_info: Option<Box<str>>,
    /// `watchlist`: the user ids whose online state the user follows.
    pub watchlist: Vec<String>,
}

impl UserData {
    /// Parses `user_data` (JSON text): what is wrong, in words, if it is not Pusher's.
    pub fn parse(text: &str) -> Result<UserData, String> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| format!("Invalid user_data: it is not JSON ({e})"))?;
        let Value::Object(object) = value else {
            return Err("Invalid user_data: it is not a JSON object".into());
        };
        let id = match object.get("id") {
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            _ => return Err("Invalid user_data: id must be a non-empty string".into()),
        };
        user_channel(&id).map_err(|e| format!("Invalid user_data: id {id:?}: {}", e.message))?;
        let user_info = match object.get("user_info") {
            None | Some(Value::Null) => None,
            Some(info @ Value::Object(_)) => Some(info.to_string().into_boxed_str()),
            Some(_) => return Err("Invalid user_data: user_info must be an object".into()),
        };
        let watchlist = match object.get("watchlist") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(ids)) => ids
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or("Invalid user_data: watchlist must be an array of user ids")?,
            Some(_) => return Err("Invalid user_data: watchlist must be an array".into()),
        };
        if watchlist.len() > MAX_WATCHLIST {
            return Err(format!(
                "Invalid user_data: a watchlist has at most {MAX_WATCHLIST} user ids; this one \
                 has {}",
                watchlist.len()
            ));
        }
        Ok(UserData {
            id,
            user_info,
            watchlist,
        })
    }
}

/// Whether `name` is a server-to-user channel's Pusher name.
pub fn is_server_to_user(name: &str) -> bool {
    name.starts_with(SERVER_TO_USER_PREFIX)
}

/// The Herald channel (not scoped to an app) of user `id`'s server-to-user channel:
/// `server-to-user:{id}`, encoded by core's topic encoding when the id has characters a
/// channel name does not (refused: an empty id, one longer than [`MAX_USER_ID_BYTES`], one
/// with `#`, `+` or U+0000).
pub fn user_channel(id: &str) -> Result<ChannelName, HeraldError> {
    let refuse = |why: &str| HeraldError::new(ErrorCode::ChannelInvalid, why.to_owned());
    if id.is_empty() {
        return Err(refuse("a user id is not empty"));
    }
    if id.len() > MAX_USER_ID_BYTES {
        return Err(refuse(&format!(
            "a user id is at most {MAX_USER_ID_BYTES} bytes"
        )));
    }
    ChannelName::from_topic(&format!("{USER_CHANNEL_PREFIX}{id}")).map_err(|e| refuse(&e.message))
}

/// The Herald channel of the Pusher name `#server-to-user-{id}`, if `name` is one.
pub fn server_to_user_channel(name: &str) -> Option<Result<ChannelName, HeraldError>> {
    let id = name.strip_prefix(SERVER_TO_USER_PREFIX)?;
    Some(user_channel(id).map_err(|e| {
        HeraldError::new(
            ErrorCode::ChannelInvalid,
            format!("Invalid channel name {name:?}: {}", e.message),
        )
    }))
}

/// The Pusher name of a channel whose topic-style name is `topic`, if it is a user's channel.
pub fn server_to_user_name(topic: &str) -> Option<String> {
    let id = topic.strip_prefix(USER_CHANNEL_PREFIX)?;
    (!id.is_empty()).then(|| format!("{SERVER_TO_USER_PREFIX}{id}"))
}

impl PusherSession {
    /// `pusher:signin`: checks `auth` over this socket and `user_data`, makes the connection's
    /// client the user, answers `pusher:signin_success` and subscribes the connection to its
    /// user's channel. A bad signature or `user_data` ends the connection with 4009.
    pub(crate) async fn sign_in(&mut self, auth: &str, user_data: &str) {
        let signed = signin_string(&self.socket_id, user_data);
        let secrets = self.credentials.secrets_at(now_millis());
        if !check_key_signature(&self.credentials.key, secrets, &signed, auth) {
            return self.refuse_sign_in(format!(
                "Invalid signature: Expected HMAC SHA256 hex digest of {signed}, but got {auth}"
            ));
        }
        let data = match UserData::parse(user_data) {
            Ok(data) => data,
            Err(message) => return self.refuse_sign_in(message),
        };
        if let Some((user, _)) = &self.user {
            if **user == *data.id {
                return self.send(frame::signin_success(user_data));
            }
            let message = format!("This connection is signed in as {user:?} already");
            return self.send_error(None, &message);
        }
        let channel = match user_channel(&data.id) {
            Ok(channel) => self.credentials.app.channel(&channel),
            Err(e) => return self.refuse_sign_in(e.message),
        };
        if let Err(e) = self.session.sign_in(&data.id, data.user_info.clone()) {
            return self.send_error(None, &e.message);
        }
        self.send(frame::signin_success(user_data));
        // The user's channel, subscribed by the server: no confirmation of its own (the
        // client's own subscribe of it is answered, `subscribe_own_user_channel`), no replay.
        let request = SubscribeRequest {
            since: None,
            last: Some(false),
            replay_retained_if_lost: false,
        };
        let ask = PresenceAsk {
            frames: false,
            member: None,
        };
        let confirm = |_: &_, _: &_| None;
        match self
            .session
            .subscribe_granted(&channel, &request, &ask, None, &confirm)
            .await
        {
            Ok(_) => {}
            Err(e) if e.code == ErrorCode::AlreadySubscribed => {}
            Err(e) => {
                tracing::debug!(error = %e, "a signed-in user's channel was not subscribed");
                self.send_error(
                    None,
                    &format!("The user's channel was not subscribed: {}", e.message),
                );
            }
        }
        self.watch(&data).await;
        self.user = Some((data.id.into_boxed_str(), channel));
    }

    /// Makes the signed-in user online (a member of its online channel) and watches the users
    /// of its watchlist (`crate::watchlist`): each one's members list is queued now, the
    /// first `online` event follows from them. An id no user can have is never online and is
    /// not watched; one that cannot be watched (the per-connection subscription limit) is
    /// said in a `pusher:error` and left out.
    async fn watch(&mut self, data: &UserData) {
        let app = self.credentials.app.clone();
        let mut watched: Vec<Box<str>> = Vec::new();
        let watches_self = data.watchlist.contains(&data.id);
        // Its own channel: watched as a member when the user is on its own watchlist.
        let own = online_channel(&data.id).map(|c| app.channel(&c));
        let joined = match own {
            Ok(channel) => {
                let request = SubscribeRequest {
                    since: None,
                    last: Some(false),
                    replay_retained_if_lost: false,
                };
                let ask = PresenceAsk {
                    frames: watches_self,
                    member: None,
                };
                let confirm = |_: &_, _: &_| None;
                self.session
                    .subscribe_granted(&channel, &request, &ask, Some(&data.id), &confirm)
                    .await
                    .map(|_| ())
            }
            Err(e) => Err(e),
        };
        let online = joined.is_ok();
        if let Err(e) = joined {
            tracing::debug!(error = %e, "a signed-in user was not made online");
            self.send_error(
                None,
                &format!("The user is not online to watchlists: {}", e.message),
            );
        }
        for id in &data.watchlist {
            if watched.iter().any(|w| **w == **id) {
                continue;
            }
            if *id == data.id {
                if online {
                    watched.push(id.as_str().into());
                }
                continue;
            }
            let Ok(channel) = online_channel(id) else {
                continue;
            };
            match self.session.observe_presence(&app.channel(&channel)).await {
                Ok(()) => watched.push(id.as_str().into()),
                Err(e) => self.send_error(
                    None,
                    &format!("The watchlist's user {id:?} is not watched: {}", e.message),
                ),
            }
        }
        if !watched.is_empty() {
            self.watchlist = Some(Box::new(Watchlist::new(watched)));
        }
    }

    /// Ends the connection for a sign-in that is refused: 4009, as Pusher.
    fn refuse_sign_in(&mut self, message: String) {
        self.registered.say(codes::UNAUTHORIZED, message);
        self.outbox().close(CloseReason::Revoked);
    }

    /// A client's subscribe of a `#server-to-user-` channel: its own user's (held since the
    /// sign-in) is answered as subscribed; any other is refused.
    pub(crate) fn subscribe_own_user_channel(
        &mut self,
        name: &str,
    ) -> Result<(), SubscriptionRefused> {
        match &self.user {
            Some((user, _)) if name.strip_prefix(SERVER_TO_USER_PREFIX) == Some(&**user) => {
                self.send(frame::subscription_succeeded(name));
                Ok(())
            }
            _ => Err(SubscriptionRefused::new(
                "InvalidChannel",
                400,
                format!(
                    "Invalid channel name {name:?}: a server-to-user channel is subscribed by the \
                     server when its user signs in, never by a client"
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_is_pushers() {
        let data =
            UserData::parse(r#"{"id":"42","user_info":{"name":"Ann"},"watchlist":["7","8"]}"#)
                .unwrap();
        assert_eq!(data.id, "42");
        assert_eq!(data.user_info.as_deref(), Some(r#"{"name":"Ann"}"#));
        assert_eq!(data.watchlist, ["7", "8"]);
        assert_eq!(UserData::parse(r#"{"id":"u"}"#).unwrap().user_info, None);
        for (bad, says) in [
            ("x", "not JSON"),
            ("[]", "not a JSON object"),
            (r#"{}"#, "id must be"),
            (r#"{"id":42}"#, "id must be"),
            (r#"{"id":""}"#, "id must be"),
            (r#"{"id":"a#b"}"#, "id \"a#b\""),
            (r#"{"id":"u","user_info":1}"#, "user_info must be"),
            (r#"{"id":"u","watchlist":[1]}"#, "watchlist must be"),
        ] {
            let e = UserData::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // Pusher's limit: 100 watched ids.
        let ids = |n: usize| {
            (0..n)
                .map(|i| format!("\"u{i}\""))
                .collect::<Vec<_>>()
                .join(",")
        };
        let hundred = format!(r#"{{"id":"u","watchlist":[{}]}}"#, ids(100));
        assert_eq!(UserData::parse(&hundred).unwrap().watchlist.len(), 100);
        let more = format!(r#"{{"id":"u","watchlist":[{}]}}"#, ids(101));
        let e = UserData::parse(&more).unwrap_err();
        assert!(e.contains("at most 100 user ids; this one has 101"), "{e}");
    }

    #[test]
    fn a_users_channel_is_a_channel_no_pusher_client_can_name() {
        let channel = server_to_user_channel("#server-to-user-42")
            .unwrap()
            .unwrap();
        assert_eq!(channel.as_str(), "server-to-user:42");
        assert_eq!(
            server_to_user_name(&channel.topic()).as_deref(),
            Some("#server-to-user-42")
        );
        // An id with characters a channel name does not have is encoded, and maps back.
        let odd = user_channel("ann smith@x.com").unwrap();
        assert!(odd.as_str().starts_with('='), "{}", odd.as_str());
        assert_eq!(
            server_to_user_name(&odd.topic()).as_deref(),
            Some("#server-to-user-ann smith@x.com")
        );
        assert!(crate::channel_map::check_pusher_name("server-to-user:42").is_err());
        assert!(server_to_user_channel("news").is_none());
        assert!(server_to_user_channel("#server-to-user-").unwrap().is_err());
        assert!(user_channel(&"x".repeat(201)).is_err());
    }
}
