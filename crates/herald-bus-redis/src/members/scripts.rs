//! The Lua scripts that keep the cluster's presence members in Redis, each run atomically, so
//! that a member's join and leave are each decided (and published) by exactly one call.
//!
//! A channel's keys share its hash tag with the Redis channel its messages travel on
//! ([`crate::names::Names::channel`]), so a script changes them and publishes the change on
//! that channel (`SPUBLISH`) on one Redis Cluster shard, in the order the changes happened:
//!
//! - `PREFIX:{TAG}:presence:CHANNEL:m`: the members, user → data;
//! - `PREFIX:{TAG}:presence:CHANNEL:o`: the members by the version of their join (the order
//!   they joined);
//! - `PREFIX:{TAG}:presence:CHANNEL:n`: the holds, field `NODE` + user → 1 for each node where
//!   the user has subscriptions, `#` + user → how many nodes hold it, and `v` → the version of
//!   the channel's last change (milliseconds since the epoch, or one more than the last when
//!   changes come faster: increasing, and past any version of an earlier life of the channel).
//!
//! What each node holds is recorded under one hash tag of its own (`PREFIX:{presence}:`), for
//! the node that claims it when it is lost: `nodes` (nodes with records), `alive:NODE` (the
//! heartbeat) and `held:NODE` (its holds, each `LEN:CHANNEL` + user). A node records a hold
//! there before it adds it to the channel and forgets it after removing it, so a claim finds
//! every hold a lost node may have left.

use fred::prelude::{Client, LuaInterface};
use fred::types::Value;

/// The next version of a channel's changes, kept in its holds' `v`.
const VERSION: &str = r#"
local function next_version(holds)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local last = tonumber(redis.call('HGET', holds, 'v') or '0')
  local v = math.max(now, last + 1)
  redis.call('HSET', holds, 'v', string.format('%d', v))
  return string.format('%d', v)
end
"#;

/// Adds node `ARGV[1]`'s hold of user `ARGV[2]` (data `ARGV[3]`) on a channel of at most
/// `ARGV[4]` members, publishing a join on `ARGV[5]` when the user became a member. `KEYS`: the
/// channel's `m`, `o`, `n`. Answers 1 (joined), 0 (a member already, or held by this node
/// already), -2 (refused: the channel is full).
const ADD: &str = r#"
local node, user, data, max, channel = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local hold = node .. user
if redis.call('HEXISTS', KEYS[3], hold) == 1 then return 0 end
local member = redis.call('HEXISTS', KEYS[1], user) == 1
if not member and redis.call('HLEN', KEYS[1]) >= max then return -2 end
redis.call('HSET', KEYS[3], hold, '1')
redis.call('HINCRBY', KEYS[3], '#' .. user, 1)
if member then return 0 end
local v = next_version(KEYS[3])
redis.call('HSET', KEYS[1], user, data)
redis.call('ZADD', KEYS[2], v, user)
redis.call('SPUBLISH', channel, 'p' .. v .. '\nj' .. #user .. ':' .. user .. data)
return 1
"#;

/// Removes node `ARGV[1]`'s hold of user `ARGV[2]`, publishing a leave on `ARGV[3]` when it was
/// the user's last. `KEYS`: the channel's `m`, `o`, `n`. Answers 1 (left), 0 (still held
/// elsewhere, or not held by this node).
const REMOVE: &str = r#"
local node, user, channel = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HDEL', KEYS[3], node .. user) == 0 then return 0 end
if redis.call('HINCRBY', KEYS[3], '#' .. user, -1) > 0 then return 0 end
redis.call('HDEL', KEYS[3], '#' .. user)
redis.call('HDEL', KEYS[1], user)
redis.call('ZREM', KEYS[2], user)
local v = next_version(KEYS[3])
redis.call('SPUBLISH', channel, 'p' .. v .. '\nl' .. #user .. ':' .. user)
return 1
"#;

/// A channel's members in the order they joined, after the version of its last change.
/// `KEYS`: the channel's `m`, `o`, `n`. Answers {version, user, data, user, data...}.
const LIST: &str = r#"
local out = {redis.call('HGET', KEYS[3], 'v') or '0'}
for _, user in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  out[#out + 1] = user
  out[#out + 1] = redis.call('HGET', KEYS[1], user) or '{}'
end
return out
"#;

/// Records holds of node `ARGV[2]` (`ARGV[3..]`) under prefix `ARGV[1]`. `KEYS[1]`: `nodes`.
/// Answers -1 if the node is fenced (claimed as lost: nothing recorded), else 1.
const HOLD: &str = r#"
if redis.call('SISMEMBER', KEYS[1], ARGV[2]) == 0 then return -1 end
for i = 3, #ARGV do redis.call('SADD', ARGV[1] .. 'held:' .. ARGV[2], ARGV[i]) end
return 1
"#;

/// Forgets holds of node `ARGV[2]` (`ARGV[3..]`).
const UNHOLD: &str = r#"
for i = 3, #ARGV do redis.call('SREM', ARGV[1] .. 'held:' .. ARGV[2], ARGV[i]) end
return 1
"#;

/// Joins node `ARGV[2]` (heartbeat of `ARGV[3]` ms) and answers the holds Redis records for it.
const SYNC: &str = r#"
redis.call('SADD', KEYS[1], ARGV[2])
redis.call('SET', ARGV[1] .. 'alive:' .. ARGV[2], '1', 'PX', ARGV[3])
return redis.call('SMEMBERS', ARGV[1] .. 'held:' .. ARGV[2])
"#;

/// Refreshes a node's heartbeat: 0 if it is fenced, 1 otherwise.
const BEAT: &str = r#"
if redis.call('SISMEMBER', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('SET', ARGV[1] .. 'alive:' .. ARGV[2], '1', 'PX', ARGV[3])
return 1
"#;

/// Claims every other node whose heartbeat expired: answers, per node, its id and its holds,
/// and forgets them. The first call that finds a node expired takes it, once.
const CLAIM: &str = r#"
local p, me = ARGV[1], ARGV[2]
local out = {}
for _, node in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if node ~= me and redis.call('EXISTS', p .. 'alive:' .. node) == 0 then
    redis.call('SREM', KEYS[1], node)
    out[#out + 1] = node
    out[#out + 1] = redis.call('SMEMBERS', p .. 'held:' .. node)
    redis.call('DEL', p .. 'held:' .. node)
  end
end
return out
"#;

/// Removes a node that stops (its holds removed from their channels first).
const LEAVE: &str = r#"
redis.call('SREM', KEYS[1], ARGV[2])
redis.call('DEL', ARGV[1] .. 'held:' .. ARGV[2], ARGV[1] .. 'alive:' .. ARGV[2])
return 1
"#;

/// A channel's keys and the Redis channel its changes are published on.
pub(super) struct ChannelKeys {
    /// `m`, `o`, `n`.
    pub(super) keys: [String; 3],
    pub(super) publish: String,
}

/// The node-level keys of one bus, and the node they are written for.
pub(super) struct NodeKeys {
    /// `PREFIX:{presence}:`.
    pub(super) prefix: String,
    /// This node, as its records name it (16 hex digits).
    pub(super) node: String,
}

impl NodeKeys {
    fn nodes(&self) -> String {
        format!("{}nodes", self.prefix)
    }

    fn args(&self, rest: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut args = vec![self.prefix.clone(), self.node.clone()];
        args.extend(rest);
        args
    }
}

/// What [`add`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Added {
    /// The user became a member.
    Joined,
    /// It was one already (or this node held it).
    Already,
    /// The channel is full.
    Full,
}

fn with_version(script: &str) -> String {
    format!("{VERSION}{script}")
}

pub(super) async fn add(
    redis: &Client,
    channel: &ChannelKeys,
    node: &str,
    user: &str,
    data: &str,
    max: u32,
) -> Result<Added, fred::error::Error> {
    let args = vec![
        node.to_owned(),
        user.to_owned(),
        data.to_owned(),
        max.to_string(),
        channel.publish.clone(),
    ];
    let answer: i64 = redis
        .eval(with_version(ADD), channel.keys.to_vec(), args)
        .await?;
    Ok(match answer {
        1 => Added::Joined,
        -2 => Added::Full,
        _ => Added::Already,
    })
}

/// Whether the user left (the hold was its last in the cluster).
pub(super) async fn remove(
    redis: &Client,
    channel: &ChannelKeys,
    node: &str,
    user: &str,
) -> Result<bool, fred::error::Error> {
    let args = vec![node.to_owned(), user.to_owned(), channel.publish.clone()];
    let answer: i64 = redis
        .eval(with_version(REMOVE), channel.keys.to_vec(), args)
        .await?;
    Ok(answer == 1)
}

/// The version of the channel's last change and its members (user, data), in join order.
pub(super) async fn list(
    redis: &Client,
    channel: &ChannelKeys,
) -> Result<(u64, Vec<(String, String)>), fred::error::Error> {
    let answer: Value = redis
        .eval(LIST, channel.keys.to_vec(), Vec::<String>::new())
        .await?;
    let mut items = strings(answer).into_iter();
    let version = items.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut members = Vec::new();
    while let (Some(user), Some(data)) = (items.next(), items.next()) {
        members.push((user, data));
    }
    Ok((version, members))
}

/// Records holds; `false` if the node is fenced.
pub(super) async fn hold(
    redis: &Client,
    keys: &NodeKeys,
    entries: Vec<String>,
) -> Result<bool, fred::error::Error> {
    let answer: i64 = redis.eval(HOLD, keys.nodes(), keys.args(entries)).await?;
    Ok(answer == 1)
}

pub(super) async fn unhold(
    redis: &Client,
    keys: &NodeKeys,
    entries: Vec<String>,
) -> Result<(), fred::error::Error> {
    let _: i64 = redis.eval(UNHOLD, keys.nodes(), keys.args(entries)).await?;
    Ok(())
}

/// The holds Redis records for this node, after joining it.
pub(super) async fn sync(
    redis: &Client,
    keys: &NodeKeys,
    ttl_ms: u64,
) -> Result<Vec<String>, fred::error::Error> {
    let answer: Value = redis
        .eval(SYNC, keys.nodes(), keys.args([ttl_ms.to_string()]))
        .await?;
    Ok(strings(answer))
}

/// Whether the beat was taken (`false`: fenced).
pub(super) async fn beat(
    redis: &Client,
    keys: &NodeKeys,
    ttl_ms: u64,
) -> Result<bool, fred::error::Error> {
    let answer: i64 = redis
        .eval(BEAT, keys.nodes(), keys.args([ttl_ms.to_string()]))
        .await?;
    Ok(answer == 1)
}

/// Per lost node claimed: its id and its holds.
pub(super) async fn claim(
    redis: &Client,
    keys: &NodeKeys,
) -> Result<Vec<(String, Vec<String>)>, fred::error::Error> {
    let answer: Value = redis.eval(CLAIM, keys.nodes(), keys.args([])).await?;
    let mut parts = match answer {
        Value::Array(items) => items.into_iter(),
        _ => Vec::new().into_iter(),
    };
    let mut claimed = Vec::new();
    while let (Some(node), Some(holds)) = (parts.next(), parts.next()) {
        if let Some(node) = node.into_string() {
            claimed.push((node, strings(holds)));
        }
    }
    Ok(claimed)
}

pub(super) async fn leave(redis: &Client, keys: &NodeKeys) -> Result<(), fred::error::Error> {
    let _: i64 = redis.eval(LEAVE, keys.nodes(), keys.args([])).await?;
    Ok(())
}

fn strings(value: Value) -> Vec<String> {
    match value {
        Value::Array(items) => items.into_iter().filter_map(|v| v.into_string()).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::message;
    use super::*;

    #[test]
    fn the_scripts_publish_what_the_receiver_reads() {
        // The join and leave messages the scripts build, decoded as the receiver does.
        let join = message::decode(b"p1700000000123\nj5:alice{\"a\":1}").unwrap();
        assert_eq!(join.0, 1_700_000_000_123);
        let leave = message::decode(b"p7\nl3:bob").unwrap();
        assert_eq!(leave.0, 7);
        assert!(ADD.contains("'\\nj'") && REMOVE.contains("'\\nl'"));
    }
}
