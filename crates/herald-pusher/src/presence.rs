//! Pusher presence channels (`presence-`, `presence-cache-`) as Herald presence channels
//! (docs/design/pusher.md, "Channel names" and "Authorisation"): no second mechanism.
//!
//! - [`register`] makes every app's channels whose name starts with `presence-` Herald
//!   presence channels at start (core's [`Namespaces::presence_in_every_app`]), with the
//!   `[pusher]` member limit (Pusher's 100 by default) and Pusher's 1 KB of user data (and
//!   the users' online channels of [`crate::watchlist`]).
//! - [`ChannelData::parse`] reads a subscription's signed `channel_data`: the `user_id` (a
//!   string, or a number as Laravel sends it, kept as its decimal text: Pusher's member ids
//!   are strings) becomes the Herald member's user id, its `user_info` (an object, optional)
//!   the member's data. So Herald's presence API (`GET /v1/channels/{name}/presence`), its
//!   webhooks and its own clients see the same members, one per user id however many
//!   connections it holds, across the cluster when the bus is Redis.
//! - [`pusher_frame`] turns the `presence` frames core sends a watching subscription into
//!   Pusher's: the `members` list into `pusher_internal:subscription_succeeded` with
//!   `{"presence":{"ids","hash","count"}}`, a `join` into `pusher_internal:member_added`, a
//!   `leave` into `pusher_internal:member_removed`. Core sends a join or leave to the other
//!   members' subscriptions only, and only when a user's first connection joins or its last
//!   leaves.
//!
//! [`Namespaces::presence_in_every_app`]: herald_core::namespace::Namespaces::presence_in_every_app

use bytes::Bytes;
use herald_core::namespace::Namespaces;
use herald_core::presence::{Member, PresenceLimits};
use herald_core::ChannelName;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::channel_map::pusher_name;

/// The prefix of every Pusher presence channel (`presence-cache-` included).
pub const PRESENCE_PREFIX: &str = "presence-";

/// Members one presence channel holds at most unless `[pusher] presence_max_members` says
/// otherwise (Pusher's documented limit).
pub const DEFAULT_MAX_MEMBERS: u32 = 100;

/// The largest `user_info`, in bytes of JSON without whitespace (Pusher's 1 KB).
pub const MAX_USER_INFO_BYTES: u32 = 1024;

/// Makes every app's `presence-` channels Herald presence channels of at most `max_members`
/// members (their Herald names: `presence-...`, and `=presence-...` for a name core's topic
/// encoding keeps, one with `,` or `;`).
pub fn register(namespaces: &mut Namespaces, max_members: u32) {
    let limits = PresenceLimits {
        max_members,
        max_data_bytes: MAX_USER_INFO_BYTES,
    };
    namespaces.presence_in_every_app(PRESENCE_PREFIX, limits);
    namespaces.presence_in_every_app(&format!("={PRESENCE_PREFIX}"), limits);
    // The users' online channels watchlists watch are presence channels too.
    crate::watchlist::register(namespaces);
}

/// A presence subscription's `channel_data`, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelData {
    /// The user id, as text.
    pub user_id: String,
    /// The `user_info` object's JSON text, if there is one.
    pub user_info: Option<String>,
}

impl ChannelData {
    /// Reads `channel_data` (JSON text): `user_id` is required, a non-empty string or a
    /// number; `user_info` is optional, an object (or `null`). The error says what is wrong.
    pub fn parse(text: &str) -> Result<ChannelData, String> {
        #[derive(Deserialize)]
        struct Raw<'a> {
            #[serde(default)]
            user_id: Option<Value>,
            #[serde(default, borrow)]
            user_info: Option<&'a RawValue>,
        }
        let not_object = |why: String| format!("Invalid channel_data: not a JSON object ({why})");
        if !text.trim_start().starts_with('{') {
            return Err(not_object("it does not start with {".into()));
        }
        let raw: Raw = serde_json::from_str(text).map_err(|e| not_object(e.to_string()))?;
        let user_id = match raw.user_id {
            Some(Value::String(id)) if !id.is_empty() => id,
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::String(_)) => return Err("Invalid channel_data: user_id is empty".into()),
            None | Some(Value::Null) => {
                return Err("Invalid channel_data: a presence channel needs a user_id".into())
            }
            Some(_) => {
                return Err("Invalid channel_data: user_id must be a string or a number".into())
            }
        };
        let user_info = match raw.user_info.map(RawValue::get) {
            None | Some("null") => None,
            Some(info) if info.trim_start().starts_with('{') => Some(info.to_owned()),
            Some(_) => return Err("Invalid channel_data: user_info must be an object".into()),
        };
        Ok(ChannelData { user_id, user_info })
    }
}

/// `pusher_internal:subscription_succeeded` of a presence channel, with its members.
pub fn subscription_succeeded(channel: &str, members: &[Member]) -> Bytes {
    let mut ids = Vec::with_capacity(members.len());
    let mut hash = Map::new();
    for member in members {
        ids.push(Value::String(member.user.to_string()));
        hash.insert(member.user.to_string(), info_value(&member.data));
    }
    let data = json!({ "presence": { "ids": ids, "hash": hash, "count": members.len() } });
    frame("pusher_internal:subscription_succeeded", channel, &data)
}

/// A member's data as the JSON value Pusher clients get (`{}` if it is not JSON, which core
/// never stores).
fn info_value(data: &str) -> Value {
    serde_json::from_str(data).unwrap_or_else(|_| json!({}))
}

fn frame(event: &str, channel: &str, data: &Value) -> Bytes {
    Bytes::from(json!({ "event": event, "channel": channel, "data": data.to_string() }).to_string())
}

/// The Pusher frame of a `presence` frame core sent (`{"presence":{"channel","event",...}}`):
/// `members` → `subscription_succeeded`, `join` → `member_added`, `leave` →
/// `member_removed`; `None` for anything else, or a channel a Pusher client cannot name.
pub fn pusher_frame(herald: &[u8]) -> Option<Bytes> {
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
        #[serde(default, borrow)]
        data: Option<&'a RawValue>,
        #[serde(default, borrow)]
        members: Option<Vec<RawMember<'a>>>,
    }
    #[derive(Deserialize)]
    struct RawMember<'a> {
        user: String,
        #[serde(borrow)]
        data: &'a RawValue,
    }
    let Outer { presence } = serde_json::from_slice(herald).ok()?;
    let channel = pusher_name(&ChannelName::parse(&presence.channel).ok()?)?;
    match presence.event {
        "members" => {
            let members: Vec<Member> = presence
                .members?
                .into_iter()
                .map(|m| Member {
                    user: m.user.into_boxed_str(),
                    data: m.data.get().into(),
                })
                .collect();
            Some(subscription_succeeded(&channel, &members))
        }
        "join" => {
            let info = presence.data.map_or(json!({}), |d| info_value(d.get()));
            let data = json!({ "user_id": presence.user?, "user_info": info });
            Some(frame("pusher_internal:member_added", &channel, &data))
        }
        "leave" => {
            let data = json!({ "user_id": presence.user? });
            Some(frame("pusher_internal:member_removed", &channel, &data))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn parsed(frame: &Bytes) -> (Value, Value) {
        let outer: Value = serde_json::from_slice(frame).unwrap();
        let data: Value = serde_json::from_str(outer["data"].as_str().unwrap()).unwrap();
        (outer, data)
    }

    #[test]
    fn channel_data_takes_string_and_number_user_ids() {
        assert_eq!(
            ChannelData::parse(r#"{"user_id":"u1","user_info":{"name":"Ann"}}"#),
            Ok(ChannelData {
                user_id: "u1".into(),
                user_info: Some(r#"{"name":"Ann"}"#.into()),
            })
        );
        assert_eq!(
            ChannelData::parse(r#"{"user_id":42}"#),
            Ok(ChannelData {
                user_id: "42".into(),
                user_info: None,
            })
        );
        for (text, says) in [
            ("{}", "needs a user_id"),
            (r#"{"user_id":""}"#, "empty"),
            (r#"{"user_id":true}"#, "string or a number"),
            (r#"{"user_id":"a","user_info":"x"}"#, "must be an object"),
            ("[1]", "not a JSON object"),
        ] {
            let e = ChannelData::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn members_become_pushers_presence_hash() {
        let members = [
            Member {
                user: "1".into(),
                data: Arc::from(r#"{"name":"Ann"}"#),
            },
            Member {
                user: "b".into(),
                data: Arc::from("{}"),
            },
        ];
        let (outer, data) = parsed(&subscription_succeeded("presence-room", &members));
        assert_eq!(outer["event"], "pusher_internal:subscription_succeeded");
        assert_eq!(outer["channel"], "presence-room");
        assert_eq!(
            data,
            json!({"presence":{"ids":["1","b"],"hash":{"1":{"name":"Ann"},"b":{}},"count":2}})
        );
    }

    #[test]
    fn cores_presence_frames_become_pushers() {
        let channel = ChannelName::parse("presence-room").unwrap();
        let members = [Member {
            user: "7".into(),
            data: Arc::from(r#"{"a":1}"#),
        }];
        let list = herald_core::presence::members_frame(&channel, &members);
        let (outer, data) = parsed(&pusher_frame(&list).unwrap());
        assert_eq!(outer["event"], "pusher_internal:subscription_succeeded");
        assert_eq!(data["presence"]["hash"]["7"], json!({"a":1}));
        let join =
            br#"{"presence":{"channel":"presence-room","event":"join","user":"8","data":{"b":2}}}"#;
        let (outer, data) = parsed(&pusher_frame(join).unwrap());
        assert_eq!(outer["event"], "pusher_internal:member_added");
        assert_eq!(data, json!({"user_id":"8","user_info":{"b":2}}));
        let leave = br#"{"presence":{"channel":"presence-room","event":"leave","user":"8"}}"#;
        let (outer, data) = parsed(&pusher_frame(leave).unwrap());
        assert_eq!(outer["event"], "pusher_internal:member_removed");
        assert_eq!(data, json!({"user_id":"8"}));
        // Another app's channel is named without its scope; an encoded name is Pusher's.
        let encoded = br#"{"presence":{"channel":"=presence-a=2Cb","event":"leave","user":"8"}}"#;
        let (outer, _) = parsed(&pusher_frame(encoded).unwrap());
        assert_eq!(outer["channel"], "presence-a,b");
        assert_eq!(pusher_frame(b"{}"), None);
    }

    #[test]
    fn registered_presence_covers_every_apps_presence_channels() {
        let mut namespaces = Namespaces::default();
        register(&mut namespaces, 3);
        let limits = namespaces.presence("shop~presence-cache-x").unwrap();
        assert_eq!(limits.max_members, 3);
        assert_eq!(limits.max_data_bytes, MAX_USER_INFO_BYTES);
        assert!(namespaces.presence("private-x").is_none());
        let encoded = crate::channel_map::herald_channel("presence-a,b").unwrap();
        assert!(namespaces.presence(encoded.as_str()).is_some());
    }
}
