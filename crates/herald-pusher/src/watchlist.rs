//! Watchlists (Pusher's "watchlist online status"; docs/pusher.md, section 10): a signed-in
//! user's `user_data.watchlist` names up to [`MAX_WATCHLIST`] user ids, and the connection is
//! told `pusher_internal:watchlist_events` (pusher-js: `pusher.user.watchlist.bind('online' |
//! 'offline', ...)`) as they come online and go offline.
//!
//! **Online is a presence channel of core's**, so there is no second mechanism and a cluster
//! needs nothing more: user `id` is online while it is a member of the Herald presence channel
//! `pusher-online:{id}` ([`online_channel`], registered as a presence channel in every app by
//! [`register`]). A connection signing in as `id` subscribes to that channel as the member
//! `id`, so the user is online from its first signed-in connection anywhere in the cluster to
//! its last (core's presence keeps one member per user across nodes, through the bus's
//! relay). A connection with a watchlist watches each watched user's channel without being a
//! member of it (edge's `observe_presence`): core queues the channel's members list (the
//! cluster's), then its joins and leaves, each in order, to this connection's outbox, and
//! the connection's watchlist (`Watchlist::on_presence`) turns them into Pusher's events as
//! it writes them: one `online` event with the watched users online when the sign-in's lists
//! are all in (none when nobody is), then `online` as a watched user joins and `offline` as it
//! leaves.
//!
//! `:` is not a Pusher name's character, so no Pusher client can name these channels, and
//! their messages never reach a Pusher connection.

use bytes::Bytes;
use herald_core::namespace::Namespaces;
use herald_core::presence::PresenceLimits;
use herald_core::{ChannelName, ErrorCode, HeraldError};
use serde::Deserialize;
use serde_json::json;

use crate::users::MAX_USER_ID_BYTES;

/// The most user ids a watchlist may name (Pusher's limit); a sign-in with more is refused.
pub const MAX_WATCHLIST: usize = 100;

/// The Herald channel whose members say a user is online, before the user id (topic-style).
pub const ONLINE_PREFIX: &str = "pusher-online:";

/// Makes every app's `pusher-online:` channels Herald presence channels (their Herald names:
/// `pusher-online:...`, and `=pusher-online:...` for an id core's topic encoding keeps). Only
/// the user itself joins its channel; the limit is core's default.
pub fn register(namespaces: &mut Namespaces) {
    let limits = PresenceLimits::default();
    namespaces.presence_in_every_app(ONLINE_PREFIX, limits);
    namespaces.presence_in_every_app(&format!("={ONLINE_PREFIX}"), limits);
}

/// The Herald channel (not scoped to an app) whose members say user `id` is online:
/// `pusher-online:{id}`, through core's topic encoding when the id needs it (refused: an id
/// no user can have, as [`crate::users::user_channel`] refuses it).
pub fn online_channel(id: &str) -> Result<ChannelName, HeraldError> {
    let refuse = |why: &str| HeraldError::new(ErrorCode::ChannelInvalid, why.to_owned());
    if id.is_empty() {
        return Err(refuse("a user id is not empty"));
    }
    if id.len() > MAX_USER_ID_BYTES {
        return Err(refuse(&format!(
            "a user id is at most {MAX_USER_ID_BYTES} bytes"
        )));
    }
    ChannelName::from_topic(&format!("{ONLINE_PREFIX}{id}")).map_err(|e| refuse(&e.message))
}

/// The user whose online channel `public` (an app's name for a channel) is, if it is one.
fn user_of(public: &str) -> Option<String> {
    let channel = ChannelName::parse(public).ok()?;
    let topic = channel.topic();
    let id = topic.strip_prefix(ONLINE_PREFIX)?;
    (!id.is_empty()).then(|| id.to_owned())
}

/// `pusher_internal:watchlist_events` with one event, `name` (`online` or `offline`), of
/// `user_ids`.
pub fn watchlist_events(name: &str, user_ids: &[&str]) -> Bytes {
    let data = json!({ "events": [{ "name": name, "user_ids": user_ids }] });
    let frame = json!({ "event": "pusher_internal:watchlist_events", "data": data.to_string() });
    Bytes::from(frame.to_string())
}

/// One watched user.
#[derive(Debug)]
struct Watched {
    id: Box<str>,
    /// Whether it is online as far as this connection was told.
    online: bool,
    /// Whether its channel's members list came.
    listed: bool,
}

/// A signed-in connection's watchlist: what it was told of each watched user.
#[derive(Debug)]
pub(crate) struct Watchlist {
    watched: Vec<Watched>,
    /// Members lists still to come before the first `online` event.
    awaited: usize,
}

impl Watchlist {
    /// The watchlist of `ids` (distinct), each watched already (its members list queued or on
    /// its way).
    pub(crate) fn new(ids: Vec<Box<str>>) -> Watchlist {
        let watched: Vec<Watched> = ids
            .into_iter()
            .map(|id| Watched {
                id,
                online: false,
                listed: false,
            })
            .collect();
        Watchlist {
            awaited: watched.len(),
            watched,
        }
    }

    /// A `presence` frame core queued to the connection: `None` if it is not about a watched
    /// user's online channel (the caller writes it as a presence channel's frame); else the
    /// watchlist event to write, if there is one.
    pub(crate) fn on_presence(&mut self, herald: &[u8]) -> Option<Option<Bytes>> {
        #[derive(Deserialize)]
        struct Outer<'a> {
            #[serde(borrow)]
            presence: Inner<'a>,
        }
        #[derive(Deserialize)]
        struct Inner<'a> {
            channel: String,
            event: &'a str,
            #[serde(default)]
            user: Option<String>,
            #[serde(default)]
            members: Option<Vec<Member>>,
        }
        #[derive(Deserialize)]
        struct Member {
            user: String,
        }
        let Outer { presence } = serde_json::from_slice(herald).ok()?;
        let id = user_of(&presence.channel)?;
        let at = self.watched.iter().position(|w| *w.id == *id)?;
        let online = match presence.event {
            "members" => presence.members?.iter().any(|m| m.user == id),
            "join" if presence.user.as_deref() == Some(&id) => true,
            "leave" if presence.user.as_deref() == Some(&id) => false,
            // Another user's join or leave of the channel (a Herald client of its own).
            _ => return Some(None),
        };
        let watched = &mut self.watched[at];
        let was = watched.online;
        watched.online = online;
        if !watched.listed {
            watched.listed = true;
            self.awaited = self.awaited.saturating_sub(1);
            return Some(self.first_event());
        }
        if self.awaited > 0 || was == online {
            return Some(None);
        }
        let name = if online { "online" } else { "offline" };
        Some(Some(watchlist_events(name, &[&id])))
    }

    /// Once every members list came: the `online` event of the watched users online, if any.
    fn first_event(&self) -> Option<Bytes> {
        if self.awaited > 0 {
            return None;
        }
        let online: Vec<&str> = self
            .watched
            .iter()
            .filter(|w| w.online)
            .map(|w| &*w.id)
            .collect();
        (!online.is_empty()).then(|| watchlist_events("online", &online))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::presence::{members_frame, Member};
    use serde_json::Value;
    use std::sync::Arc;

    fn members(id: &str, users: &[&str]) -> Bytes {
        let members: Vec<Member> = users
            .iter()
            .map(|u| Member {
                user: (*u).into(),
                data: Arc::from("{}"),
            })
            .collect();
        members_frame(&online_channel(id).unwrap(), &members)
    }

    fn change(id: &str, event: &str, user: &str) -> Vec<u8> {
        let channel = online_channel(id).unwrap();
        json!({"presence": {"channel": channel.public(), "event": event, "user": user, "data": {}}})
            .to_string()
            .into_bytes()
    }

    /// The events of a watchlist frame, as (name, user ids).
    fn told(frame: Option<Option<Bytes>>) -> Option<Vec<(String, Vec<String>)>> {
        let frame = frame.expect("a watchlist frame")?;
        let outer: Value = serde_json::from_slice(&frame).unwrap();
        assert_eq!(outer["event"], "pusher_internal:watchlist_events");
        let data: Value = serde_json::from_str(outer["data"].as_str().unwrap()).unwrap();
        let events = data["events"].as_array().unwrap();
        Some(
            events
                .iter()
                .map(|e| {
                    let ids = e["user_ids"].as_array().unwrap();
                    let ids = ids.iter().map(|i| i.as_str().unwrap().to_owned()).collect();
                    (e["name"].as_str().unwrap().to_owned(), ids)
                })
                .collect(),
        )
    }

    fn event(name: &str, ids: &[&str]) -> Option<Vec<(String, Vec<String>)>> {
        Some(vec![(
            name.to_owned(),
            ids.iter().map(|s| (*s).to_owned()).collect(),
        )])
    }

    #[test]
    fn the_first_event_waits_for_every_list_then_changes_are_told_once() {
        let mut list = Watchlist::new(vec!["b".into(), "c".into(), "ann smith".into()]);
        assert_eq!(told(list.on_presence(&members("b", &[]))), None);
        // A change of a listed user before the other lists came is kept, not told.
        assert_eq!(told(list.on_presence(&change("b", "join", "b"))), None);
        assert_eq!(told(list.on_presence(&members("c", &["c"]))), None);
        assert_eq!(
            told(list.on_presence(&members("ann smith", &[]))),
            event("online", &["b", "c"])
        );
        assert_eq!(
            told(list.on_presence(&change("ann smith", "join", "ann smith"))),
            event("online", &["ann smith"])
        );
        assert_eq!(
            told(list.on_presence(&change("c", "leave", "c"))),
            event("offline", &["c"])
        );
        // Told already, and another user's join of the channel: nothing.
        assert_eq!(told(list.on_presence(&change("c", "leave", "c"))), None);
        assert_eq!(told(list.on_presence(&change("c", "join", "x"))), None);
        // Not a watched user's channel, or not an online channel: the caller's.
        assert!(list.on_presence(&members("zed", &["zed"])).is_none());
        let room = ChannelName::parse("presence-room").unwrap();
        assert!(list.on_presence(&members_frame(&room, &[])).is_none());
    }

    #[test]
    fn nobody_online_at_first_is_no_event() {
        let mut list = Watchlist::new(vec!["b".into()]);
        assert_eq!(told(list.on_presence(&members("b", &[]))), None);
        assert_eq!(
            told(list.on_presence(&change("b", "join", "b"))),
            event("online", &["b"])
        );
    }

    #[test]
    fn online_channels_are_presence_channels_no_pusher_client_can_name() {
        let mut namespaces = Namespaces::default();
        register(&mut namespaces);
        for id in ["42", "ann smith@x.com"] {
            let channel = online_channel(id).unwrap();
            assert_eq!(user_of(channel.public()).as_deref(), Some(id));
            let scoped = herald_core::tenant::AppId::parse("shop")
                .unwrap()
                .channel(&channel);
            assert!(namespaces.presence(scoped.as_str()).is_some(), "{id}");
            assert_eq!(crate::channel_map::pusher_name(&channel), None, "{id}");
        }
        assert!(online_channel("").is_err());
        assert!(online_channel("a#b").is_err());
        assert!(online_channel(&"x".repeat(201)).is_err());
        assert_eq!(user_of("server-to-user:42"), None);
    }
}
