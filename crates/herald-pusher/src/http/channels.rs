//! The HTTP API's queries, as Pusher's HTTP API reference describes them, signed as every
//! request is ([`super::auth`]):
//!
//! - `GET /apps/{app_id}/channels`: the occupied channels, `filter_by_prefix` narrowing them,
//!   `info=user_count` (only with a `presence-` prefix, as Pusher refuses it otherwise) and
//!   `info=subscription_count` adding each one's counts: `{"channels":{"name":{...}}}`;
//! - `GET /apps/{app_id}/channels/{channel_name}`: `{"occupied":..}`, with `user_count` (a
//!   presence channel only) and `subscription_count` when `info` asks;
//! - `GET /apps/{app_id}/channels/{channel_name}/users`: a presence channel's user ids,
//!   `{"users":[{"id":".."}]}` (400 for any other channel, as Pusher answers).
//!
//! **Whose counts.** A channel's `subscription_count` is the cluster's when the bus is Redis
//! (this node's subscriptions now, the other nodes' as they last reported them, at most one
//! presence period old: core's [`Presence`](herald_core::bus::Presence)), else this node's;
//! `user_count` and the users are the cluster's presence members (core's presence registry,
//! through the bus's relay in a cluster); `occupied` is a `subscription_count` above 0.
//!
//! **Whose list.** `GET .../channels` lists the cluster's occupied channels, from the bus
//! ([`Bus::occupied_channels`](herald_core::bus::Bus::occupied_channels): on Redis, every
//! node's presence counts, as stale as the counts; this node's alone when Redis does not
//! answer in time), each with the `subscription_count` that listing counted.
//! `filter_by_prefix` narrows the listing where it is read (to the Herald channels a Pusher
//! name with that prefix can be, `herald_prefixes`); at most [`MAX_LISTED_CHANNELS`] are
//! listed (past that, that many of them: narrow the prefix).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use herald_core::bus::ChannelQuery;
use herald_core::name::topic::encode_levels;
use herald_core::ChannelName;
use serde_json::{json, Map, Value};

use super::auth::{authenticate, SignedRequest};
use super::{Answer, PusherHttp};
use crate::channel_map::{app_channel, pusher_name, ChannelKind};

/// What a query's `info` asked for.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Info {
    pub(crate) subscription_count: bool,
    pub(crate) user_count: bool,
}

impl Info {
    /// Reads `info` (comma-separated attributes); the error is the answer's text.
    pub(crate) fn parse(info: Option<&str>) -> Result<Info, String> {
        let mut asked = Info::default();
        for attribute in info.unwrap_or("").split(',').map(str::trim) {
            match attribute {
                "" => {}
                "subscription_count" => asked.subscription_count = true,
                "user_count" => asked.user_count = true,
                other => {
                    return Err(format!(
                        "Invalid info attribute {other:?}: subscription_count or user_count"
                    ))
                }
            }
        }
        Ok(asked)
    }

    /// Whether anything was asked.
    pub(crate) fn asked(self) -> bool {
        self.subscription_count || self.user_count
    }
}

/// Subscriptions to `channel`: the cluster's when the bus can tell, else this node's.
pub(crate) async fn subscription_count(http: &PusherHttp, channel: &ChannelName) -> u64 {
    if let Some(cluster) = &http.subscribers {
        if let Some(n) = cluster.subscribers(channel).await {
            return n;
        }
    }
    http.publisher.engine().subscriber_count(channel) as u64
}

/// Members of the presence channel `channel` (the cluster's).
pub(crate) async fn user_count(http: &PusherHttp, channel: &ChannelName) -> usize {
    http.publisher
        .engine()
        .presence()
        .listed(channel)
        .await
        .len()
}

/// The counts `info` asked for of `channel`, as the object's fields.
pub(crate) async fn counts(
    http: &PusherHttp,
    channel: &ChannelName,
    info: Info,
) -> Map<String, Value> {
    let mut fields = Map::new();
    if info.user_count {
        fields.insert("user_count".into(), json!(user_count(http, channel).await));
    }
    if info.subscription_count {
        let n = subscription_count(http, channel).await;
        fields.insert("subscription_count".into(), json!(n));
    }
    fields
}

/// The query's parameters (every one, `auth_*` included).
fn params(uri: &Uri) -> Vec<(String, String)> {
    form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

async fn signed(
    http: &PusherHttp,
    app_id: &str,
    method: &Method,
    uri: &Uri,
) -> Result<Arc<crate::credentials::cache::OpenCredentials>, Answer> {
    authenticate(
        &http.credentials,
        &SignedRequest::new(method, uri, app_id, b""),
    )
    .await
}

/// `GET /apps/{app_id}/channels`.
pub async fn list(
    State(http): State<Arc<PusherHttp>>,
    Path(app_id): Path<String>,
    method: Method,
    uri: Uri,
) -> Response {
    answer(list_channels(&http, &app_id, &method, &uri).await)
}

async fn list_channels(
    http: &PusherHttp,
    app_id: &str,
    method: &Method,
    uri: &Uri,
) -> Result<Value, Answer> {
    let credentials = signed(http, app_id, method, uri).await?;
    let params = params(uri);
    let prefix = param(&params, "filter_by_prefix").unwrap_or("");
    let info = Info::parse(param(&params, "info")).map_err(Answer::bad_request)?;
    if info.user_count && !prefix.starts_with(crate::presence::PRESENCE_PREFIX) {
        return Err(Answer::bad_request(
            "Invalid info attribute user_count: it needs filter_by_prefix=presence- (only \
             presence channels have users)",
        ));
    }
    let query = ChannelQuery {
        app: credentials.app.clone(),
        prefixes: herald_prefixes(prefix),
        limit: MAX_LISTED_CHANNELS,
    };
    let listing = http.bus.occupied_channels(query).await;
    let mut occupied: Vec<(String, ChannelName, u64)> = listing
        .channels
        .into_iter()
        .filter_map(|(channel, n)| Some((pusher_name(&channel)?, channel, n)))
        .filter(|(name, _, _)| name.starts_with(prefix))
        .collect();
    occupied.sort_by(|a, b| a.0.cmp(&b.0));
    let mut channels = Map::new();
    for (name, channel, subscriptions) in occupied {
        let mut fields = Map::new();
        if info.user_count {
            fields.insert("user_count".into(), json!(user_count(http, &channel).await));
        }
        if info.subscription_count {
            fields.insert("subscription_count".into(), json!(subscriptions));
        }
        channels.insert(name, Value::Object(fields));
    }
    Ok(json!({ "channels": channels }))
}

/// The most channels `GET /apps/{app_id}/channels` lists.
pub const MAX_LISTED_CHANNELS: usize = 10_000;

/// How the names within an app of the Herald channels whose Pusher name starts with `prefix`
/// begin (none for an empty prefix: every channel). A Pusher name is its channel's topic
/// ([`crate::channel_map`]): the channel is the topic itself, or `=` and the topic escaped byte
/// by byte, so each topic prefix gives both beginnings; a user's channel
/// (`#server-to-user-ID`) is the topic `server-to-user:ID`. The list may hold channels whose
/// Pusher name does not start with `prefix` (the caller checks), never miss one that does.
pub(crate) fn herald_prefixes(prefix: &str) -> Vec<String> {
    if prefix.is_empty() {
        return Vec::new();
    }
    let mut topics = vec![prefix.to_owned()];
    let users = crate::users::SERVER_TO_USER_PREFIX;
    if let Some(id) = prefix.strip_prefix(users) {
        topics.push(format!("{}{id}", crate::users::USER_CHANNEL_PREFIX));
    } else if users.starts_with(prefix) {
        topics.push(crate::users::USER_CHANNEL_PREFIX.to_owned());
    }
    let mut prefixes = Vec::with_capacity(topics.len() * 2);
    for topic in topics {
        if !topic.starts_with(herald_core::name::topic::ENCODED_PREFIX) {
            prefixes.push(topic.clone());
        }
        prefixes.push(encode_levels(&topic));
    }
    prefixes
}

/// `GET /apps/{app_id}/channels/{channel_name}`.
pub async fn one(
    State(http): State<Arc<PusherHttp>>,
    Path((app_id, name)): Path<(String, String)>,
    method: Method,
    uri: Uri,
) -> Response {
    answer(channel(&http, &app_id, &name, &method, &uri).await)
}

async fn channel(
    http: &PusherHttp,
    app_id: &str,
    name: &str,
    method: &Method,
    uri: &Uri,
) -> Result<Value, Answer> {
    let credentials = signed(http, app_id, method, uri).await?;
    let params = params(uri);
    let info = Info::parse(param(&params, "info")).map_err(Answer::bad_request)?;
    if info.user_count && !ChannelKind::of(name).is_presence() {
        return Err(Answer::bad_request(format!(
            "Invalid info attribute user_count: {name:?} is not a presence channel (only \
             presence channels have users)"
        )));
    }
    let channel =
        app_channel(&credentials.app, name).map_err(|e| Answer::bad_request(e.message))?;
    let subscriptions = subscription_count(http, &channel).await;
    let mut fields = Map::new();
    fields.insert("occupied".into(), json!(subscriptions > 0));
    if info.user_count {
        fields.insert("user_count".into(), json!(user_count(http, &channel).await));
    }
    if info.subscription_count {
        fields.insert("subscription_count".into(), json!(subscriptions));
    }
    Ok(Value::Object(fields))
}

/// `GET /apps/{app_id}/channels/{channel_name}/users`.
pub async fn users(
    State(http): State<Arc<PusherHttp>>,
    Path((app_id, name)): Path<(String, String)>,
    method: Method,
    uri: Uri,
) -> Response {
    answer(channel_users(&http, &app_id, &name, &method, &uri).await)
}

async fn channel_users(
    http: &PusherHttp,
    app_id: &str,
    name: &str,
    method: &Method,
    uri: &Uri,
) -> Result<Value, Answer> {
    let credentials = signed(http, app_id, method, uri).await?;
    let channel =
        app_channel(&credentials.app, name).map_err(|e| Answer::bad_request(e.message))?;
    if !ChannelKind::of(name).is_presence() {
        return Err(Answer::bad_request(format!(
            "Invalid channel: {name:?} is not a presence channel (users are only available \
             for presence channels)"
        )));
    }
    let members = http.publisher.engine().presence().listed(&channel).await;
    let users: Vec<Value> = members.iter().map(|m| json!({ "id": m.user })).collect();
    Ok(json!({ "users": users }))
}

fn answer(result: Result<Value, Answer>) -> Response {
    match result {
        Ok(body) => axum::Json(body).into_response(),
        Err(refused) => refused.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_narrows_the_listing_to_every_channel_its_names_can_be() {
        assert!(herald_prefixes("").is_empty());
        let listed = |prefix: &str, name: &str| {
            let channel = crate::channel_map::herald_channel(name).unwrap();
            let prefixes = herald_prefixes(prefix);
            prefixes
                .iter()
                .any(|p| channel.as_str().starts_with(p.as_str()))
        };
        for (prefix, name) in [
            ("presence-", "presence-room"),
            ("presence-", "presence-a,b"),
            ("a,", "a,b"),
            ("=", "=x"),
            ("x.", "x.y"),
            (".", "."),
            ("#", "#server-to-user-ann"),
            ("#server-to-user-a", "#server-to-user-ann"),
            ("#server-to-user-a", "#server-to-user-a;b"),
        ] {
            assert!(listed(prefix, name), "{prefix:?} lists {name:?}");
        }
        assert!(!listed("presence-", "private-x"));
        assert!(!listed("#server-to-user-b", "#server-to-user-ann"));
    }

    #[test]
    fn info_takes_pushers_attributes() {
        assert_eq!(Info::parse(None), Ok(Info::default()));
        let both = Info::parse(Some("user_count, subscription_count")).unwrap();
        assert!(both.user_count && both.subscription_count && both.asked());
        assert!(Info::parse(Some("members"))
            .unwrap_err()
            .contains("Invalid info attribute \"members\""));
    }
}
