//! The Lua scripts that keep the cluster's lifecycle records in Redis, each run atomically, so
//! that a transition is reported by exactly one call. Every key lives under one hash tag
//! (`PREFIX:{lifecycle}:`, [`crate::names::Names::lifecycle`]): a script may touch any of
//! them, on one Redis Cluster shard.
//!
//! - `nodes`: the set of nodes holding records;
//! - `alive:NODE`: a node's heartbeat, expiring after [`super::TTL`];
//! - `chans:NODE`: the channels the node has subscribers for;
//! - `chan:CHANNEL`: the nodes with subscribers for the channel (occupied while not empty);
//! - `conns:NODE`: the node's live connections, each as a [`super::record`].
//!
//! A node that is not in `nodes` (another node claimed it as lost) is fenced: its changes are
//! refused (`-1`) until it syncs again ([`SYNC`]).

use fred::prelude::{Client, LuaInterface};
use fred::types::Value;

/// Applies a batch of one node's changes. `ARGV`: prefix, node, then triples (kind, name,
/// value): `o` channel occupied here, `v` channel vacated here, `c` connection (id, record),
/// `d` connection gone (id). Answers `-1` if the node is fenced, else one integer per change:
/// 1 where the change crossed the channel's cluster-wide 0/1 line.
const APPLY: &str = r#"
local p, node = ARGV[1], ARGV[2]
if redis.call('SISMEMBER', KEYS[1], node) == 0 then return -1 end
local out = {}
for i = 3, #ARGV, 3 do
  local kind, name, value = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local crossed = 0
  if kind == 'o' then
    redis.call('SADD', p .. 'chans:' .. node, name)
    if redis.call('SADD', p .. 'chan:' .. name, node) == 1
      and redis.call('SCARD', p .. 'chan:' .. name) == 1 then crossed = 1 end
  elseif kind == 'v' then
    redis.call('SREM', p .. 'chans:' .. node, name)
    if redis.call('SREM', p .. 'chan:' .. name, node) == 1
      and redis.call('SCARD', p .. 'chan:' .. name) == 0 then crossed = 1 end
  elseif kind == 'c' then
    redis.call('HSET', p .. 'conns:' .. node, name, value)
  elseif kind == 'd' then
    redis.call('HDEL', p .. 'conns:' .. node, name)
  end
  out[#out + 1] = crossed
end
return out
"#;

/// Makes Redis hold exactly a node's state: joins `nodes`, beats, then the node's channels
/// become `ARGV[5 .. 4+n]` and its connections the (id, record) pairs after them. `ARGV`:
/// prefix, node, ttl in ms, n, channels..., pairs.... Answers {occupied, vacated}: the
/// channels whose cluster-wide count crossed 0/1 by this call.
const SYNC: &str = r#"
local p, node, ttl = ARGV[1], ARGV[2], ARGV[3]
local n = tonumber(ARGV[4])
redis.call('SADD', KEYS[1], node)
redis.call('SET', p .. 'alive:' .. node, '1', 'PX', ttl)
local want = {}
for i = 5, 4 + n do want[ARGV[i]] = true end
local occupied, vacated = {}, {}
for _, ch in ipairs(redis.call('SMEMBERS', p .. 'chans:' .. node)) do
  if not want[ch] then
    redis.call('SREM', p .. 'chans:' .. node, ch)
    if redis.call('SREM', p .. 'chan:' .. ch, node) == 1
      and redis.call('SCARD', p .. 'chan:' .. ch) == 0 then vacated[#vacated + 1] = ch end
  end
end
for ch, _ in pairs(want) do
  redis.call('SADD', p .. 'chans:' .. node, ch)
  if redis.call('SADD', p .. 'chan:' .. ch, node) == 1
    and redis.call('SCARD', p .. 'chan:' .. ch) == 1 then occupied[#occupied + 1] = ch end
end
redis.call('DEL', p .. 'conns:' .. node)
for i = 5 + n, #ARGV - 1, 2 do
  redis.call('HSET', p .. 'conns:' .. node, ARGV[i], ARGV[i + 1])
end
return {occupied, vacated}
"#;

/// Refreshes a node's heartbeat. `ARGV`: prefix, node, ttl in ms. Answers 0 if the node is
/// fenced (nothing refreshed), 1 otherwise.
const BEAT: &str = r#"
if redis.call('SISMEMBER', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('SET', ARGV[1] .. 'alive:' .. ARGV[2], '1', 'PX', ARGV[3])
return 1
"#;

/// Claims every node whose heartbeat expired: removes it from `nodes` and from its channels,
/// deletes its records. `ARGV`: prefix, the claiming node. Answers, per node claimed, the
/// channels it left empty and its connections' records. A node is claimed once: the first
/// call that finds it expired removes it.
const CLAIM: &str = r#"
local p, me = ARGV[1], ARGV[2]
local out = {}
for _, node in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if node ~= me and redis.call('EXISTS', p .. 'alive:' .. node) == 0 then
    redis.call('SREM', KEYS[1], node)
    local vacated = {}
    for _, ch in ipairs(redis.call('SMEMBERS', p .. 'chans:' .. node)) do
      if redis.call('SREM', p .. 'chan:' .. ch, node) == 1
        and redis.call('SCARD', p .. 'chan:' .. ch) == 0 then vacated[#vacated + 1] = ch end
    end
    out[#out + 1] = vacated
    out[#out + 1] = redis.call('HVALS', p .. 'conns:' .. node)
    redis.call('DEL', p .. 'chans:' .. node, p .. 'conns:' .. node)
  end
end
return out
"#;

/// Removes a node that stops: as a claim of itself. `ARGV`: prefix, node. Answers the
/// channels it left empty.
const LEAVE: &str = r#"
local p, node = ARGV[1], ARGV[2]
redis.call('SREM', KEYS[1], node)
local vacated = {}
for _, ch in ipairs(redis.call('SMEMBERS', p .. 'chans:' .. node)) do
  if redis.call('SREM', p .. 'chan:' .. ch, node) == 1
    and redis.call('SCARD', p .. 'chan:' .. ch) == 0 then vacated[#vacated + 1] = ch end
end
redis.call('DEL', p .. 'chans:' .. node, p .. 'conns:' .. node, p .. 'alive:' .. node)
return vacated
"#;

/// One change of a node's state, for [`apply`].
pub(super) enum Change {
    Occupied(String),
    Vacated(String),
    Connected { id: String, record: String },
    Disconnected(String),
}

/// The lifecycle keys of one bus, and the node they are written for.
pub(super) struct Keys {
    /// `PREFIX:{lifecycle}:`.
    pub(super) prefix: String,
    /// This node, as its records name it.
    pub(super) node: String,
}

impl Keys {
    fn nodes(&self) -> String {
        format!("{}nodes", self.prefix)
    }
}

/// What [`apply`] found.
pub(super) enum Applied {
    /// The node is fenced: nothing was applied.
    Fenced,
    /// Per change, whether it crossed its channel's cluster-wide 0/1 line.
    Crossed(Vec<bool>),
}

fn strings(value: Value) -> Vec<String> {
    match value {
        Value::Array(items) => items.into_iter().filter_map(|v| v.into_string()).collect(),
        _ => Vec::new(),
    }
}

fn arrays(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        _ => Vec::new(),
    }
}

pub(super) async fn apply(
    redis: &Client,
    keys: &Keys,
    changes: &[Change],
) -> Result<Applied, fred::error::Error> {
    let mut args = vec![keys.prefix.clone(), keys.node.clone()];
    for change in changes {
        let (kind, name, value) = match change {
            Change::Occupied(ch) => ("o", ch, ""),
            Change::Vacated(ch) => ("v", ch, ""),
            Change::Connected { id, record } => ("c", id, record.as_str()),
            Change::Disconnected(id) => ("d", id, ""),
        };
        args.extend([kind.to_string(), name.clone(), value.to_string()]);
    }
    let answer: Value = redis.eval(APPLY, keys.nodes(), args).await?;
    Ok(match answer {
        Value::Integer(-1) => Applied::Fenced,
        other => Applied::Crossed(
            arrays(other)
                .into_iter()
                .map(|v| v.as_i64() == Some(1))
                .collect(),
        ),
    })
}

/// Channels whose cluster-wide count crossed 0/1: (occupied, vacated).
pub(super) type Crossings = (Vec<String>, Vec<String>);

pub(super) async fn sync(
    redis: &Client,
    keys: &Keys,
    ttl_ms: u64,
    channels: Vec<String>,
    connections: Vec<(String, String)>,
) -> Result<Crossings, fred::error::Error> {
    let mut args = vec![
        keys.prefix.clone(),
        keys.node.clone(),
        ttl_ms.to_string(),
        channels.len().to_string(),
    ];
    args.extend(channels);
    for (id, record) in connections {
        args.extend([id, record]);
    }
    let answer: Value = redis.eval(SYNC, keys.nodes(), args).await?;
    let mut parts = arrays(answer).into_iter();
    let occupied = parts.next().map(strings).unwrap_or_default();
    let vacated = parts.next().map(strings).unwrap_or_default();
    Ok((occupied, vacated))
}

/// Whether the beat was taken (`false`: the node is fenced).
pub(super) async fn beat(
    redis: &Client,
    keys: &Keys,
    ttl_ms: u64,
) -> Result<bool, fred::error::Error> {
    let args = vec![keys.prefix.clone(), keys.node.clone(), ttl_ms.to_string()];
    let answer: Value = redis.eval(BEAT, keys.nodes(), args).await?;
    Ok(answer.as_i64() == Some(1))
}

/// What a claim took over from one lost node: the channels it left empty, its connections'
/// records.
pub(super) struct Claimed {
    pub(super) vacated: Vec<String>,
    pub(super) records: Vec<String>,
}

pub(super) async fn claim(redis: &Client, keys: &Keys) -> Result<Vec<Claimed>, fred::error::Error> {
    let args = vec![keys.prefix.clone(), keys.node.clone()];
    let answer: Value = redis.eval(CLAIM, keys.nodes(), args).await?;
    let mut parts = arrays(answer).into_iter();
    let mut claimed = Vec::new();
    while let (Some(vacated), Some(records)) = (parts.next(), parts.next()) {
        claimed.push(Claimed {
            vacated: strings(vacated),
            records: strings(records),
        });
    }
    Ok(claimed)
}

pub(super) async fn leave(redis: &Client, keys: &Keys) -> Result<Vec<String>, fred::error::Error> {
    let args = vec![keys.prefix.clone(), keys.node.clone()];
    let answer: Value = redis.eval(LEAVE, keys.nodes(), args).await?;
    Ok(strings(answer))
}
