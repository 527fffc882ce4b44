//! Each channel's head (its epoch and newest seq) kept in Redis beside its messages, so a node
//! learns where a channel new to it stands without reading the log.
//!
//! - `PREFIX:{TAG}:head:CHANNEL` holds `SEQ:EPOCH`. The sender writes it with the batch that
//!   moves it, in one script ([`PUBLISH`]) that raises the head (never lowers it: another node's
//!   older batch may run later) and publishes the batch on the channel's Redis channel
//!   (`SPUBLISH`, the same hash tag, so one Redis Cluster shard runs both). A head notice owed
//!   after a failed publish raises it the same way.
//! - `PREFIX:heads` says that Redis holds the head of every channel that has a log: it is set
//!   when a node finds the log without any channel ([`vouch_when_log_is_empty`]: a new cluster,
//!   whose every commit will pass through the script). A Redis that lost its data, or a cluster
//!   that ran an older Herald, lacks it, and the heads are read from the log instead.
//!
//! So, when [`read`] answers, a channel without a head key never had a message, and a head is
//! never newer than the log's. Because the head and the publish are one step, a node that reads
//! a head after Redis confirmed its subscription to the channel either sees a message in the
//! head or receives it: that is the repair task's check of a newly followed channel
//! (`crate::repair`). A head read before (the engine's answer to a subscriber) may be older
//! than a publish another node has answered, by that message's transit; the message then
//! arrives live.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fred::prelude::{ClientLike, ClientState, KeysInterface, Value};
use fred::types::{ClusterHash, CustomCommand, SetOptions};
use herald_core::head::Head;
use herald_core::log::ChannelLog;
use herald_core::message::Epoch;
use herald_core::ChannelName;

use crate::bus::Shared;
use crate::names::Names;

/// Raises the head `KEYS[1]` to seq `ARGV[3]` of epoch `ARGV[4]` unless it is there already,
/// then publishes the payload `ARGV[2]` on the Redis channel `ARGV[1]`.
pub(crate) const PUBLISH: &str = r#"
local head = redis.call('GET', KEYS[1])
if not head or tonumber(string.match(head, '^%d+')) < tonumber(ARGV[3]) then
  redis.call('SET', KEYS[1], ARGV[3] .. ':' .. ARGV[4])
end
return redis.call('SPUBLISH', ARGV[1], ARGV[2])
"#;

/// Channels whose heads one `MGET` reads at most.
const KEYS_PER_COMMAND: usize = 1000;
/// How long a read of heads is awaited before the log is read instead.
const READ_WAIT: Duration = Duration::from_secs(1);

/// The command running [`PUBLISH`] for `channel`'s batch `payload`, moving its head to `seq`
/// of `epoch`, with its arguments: `EVAL` (Redis keeps the compiled script by its digest),
/// sent to the shard of the channel's hash tag.
pub(crate) fn publish(
    names: &Names,
    channel: &ChannelName,
    payload: bytes::Bytes,
    seq: u64,
    epoch: &Epoch,
) -> (CustomCommand, Vec<Value>) {
    let head = names.head(channel);
    let command = CustomCommand::new_static("EVAL", ClusterHash::from(head.as_str()), false);
    let args = vec![
        Value::from(PUBLISH),
        Value::from(1),
        Value::from(head),
        Value::from(names.channel(channel)),
        Value::Bytes(payload),
        Value::from(seq.to_string()),
        Value::from(epoch.as_str().to_owned()),
    ];
    (command, args)
}

/// The heads of `channels`, in order, from Redis: `None` if Redis does not vouch for them
/// (no `PREFIX:heads`), is not connected, or does not answer within [`READ_WAIT`]. One
/// `MGET` of the vouch and every head on a single Redis server; on a Redis Cluster, whose
/// `MGET` names keys of one slot, one pipeline: the vouch and an `MGET` per hash tag.
pub(crate) async fn read(shared: &Shared, channels: &[ChannelName]) -> Option<Vec<Head>> {
    // Away: not worth a wait for the read to time out.
    if shared.publisher.state() != ClientState::Connected {
        return None;
    }
    if !shared.publisher.is_clustered() {
        let mut keys = Vec::with_capacity(channels.len() + 1);
        keys.push(shared.names.heads_vouch());
        keys.extend(channels.iter().map(|c| shared.names.head(c)));
        let answer: Value = tokio::time::timeout(READ_WAIT, shared.publisher.mget(keys))
            .await
            .ok()?
            .ok()?;
        let Value::Array(values) = answer else {
            return None;
        };
        if values.len() != channels.len() + 1 {
            return None;
        }
        let mut values = values.into_iter();
        if matches!(values.next()?, Value::Null) {
            return None;
        }
        return values
            .map(|value| parse(&value).map(|head| head.unwrap_or_else(empty)))
            .collect();
    }
    let mut by_tag: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, channel) in channels.iter().enumerate() {
        by_tag.entry(Names::tag(channel)).or_default().push(i);
    }
    let pipeline = shared.publisher.pipeline();
    let _: Result<(), _> = pipeline.get::<(), _>(shared.names.heads_vouch()).await;
    let mut groups: Vec<&[usize]> = Vec::new();
    for positions in by_tag.values() {
        for chunk in positions.chunks(KEYS_PER_COMMAND) {
            let keys: Vec<String> = chunk
                .iter()
                .map(|&i| shared.names.head(&channels[i]))
                .collect();
            let _: Result<(), _> = pipeline.mget::<(), _>(keys).await;
            groups.push(chunk);
        }
    }
    let answers = tokio::time::timeout(READ_WAIT, pipeline.try_all::<Value>())
        .await
        .ok()?;
    if answers.len() != groups.len() + 1 {
        return None;
    }
    let mut answers = answers.into_iter();
    if matches!(answers.next()?.ok()?, Value::Null) {
        return None;
    }
    let mut heads = vec![empty(); channels.len()];
    for (chunk, answer) in groups.into_iter().zip(answers) {
        let Ok(Value::Array(values)) = answer else {
            return None;
        };
        if values.len() != chunk.len() {
            return None;
        }
        for (&i, value) in chunk.iter().zip(values) {
            if let Some(head) = parse(&value)? {
                heads[i] = head;
            }
        }
    }
    Some(heads)
}

/// A head key's value: `Some(None)` if absent, `None` if it does not parse.
fn parse(value: &Value) -> Option<Option<Head>> {
    if matches!(value, Value::Null) {
        return Some(None);
    }
    let text = value.as_str()?;
    let (seq, epoch) = text.split_once(':')?;
    Some(Some(Head {
        epoch: Epoch::new(epoch),
        last_seq: seq.parse().ok()?,
    }))
}

/// The head of a channel that never had a message.
fn empty() -> Head {
    Head {
        epoch: Epoch::default(),
        last_seq: 0,
    }
}

/// Sets `PREFIX:heads` if the log has no channel yet (then every channel's first commit, and
/// every one after, passes through [`PUBLISH`]); retried while Redis or the log do not answer.
/// A log that has channels already (an older Herald ran, or Redis lost its data) leaves it
/// unset: heads are then read from the log, as the log alone knows them.
pub(crate) async fn vouch_when_log_is_empty(shared: &Shared, log: &dyn ChannelLog) {
    let vouch = shared.names.heads_vouch();
    let vouched = || shared.heads_vouched.store(true, Ordering::Relaxed);
    loop {
        let set: Result<Value, _> = shared.publisher.get(&vouch).await;
        match set {
            Ok(Value::Null) => {}
            Ok(_) => return vouched(),
            Err(_) => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        }
        match log.list(None, 1).await {
            Ok(channels) if channels.is_empty() => {}
            Ok(_) => {
                tracing::info!(
                    "the log has channels Redis holds no heads of: the heads of channels new \
                     to this node are read from the log"
                );
                return;
            }
            Err(_) => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        }
        let result: Result<Value, _> = shared
            .publisher
            .set(&vouch, "1", None, Some(SetOptions::NX), false)
            .await;
        if result.is_ok() {
            return vouched();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_parses_back_and_an_absent_one_is_none() {
        let head = parse(&Value::from("42:e1a2")).unwrap().unwrap();
        assert_eq!((head.last_seq, head.epoch.as_str()), (42, "e1a2"));
        assert!(parse(&Value::Null).unwrap().is_none());
        assert!(parse(&Value::from("x:e")).is_none());
        assert!(parse(&Value::from("7")).is_none());
    }
}
