//! Presence members across nodes: the [`PresenceRelay`] this bus sets on the hub's presence
//! registry ([`herald_core::presence`]) and the task that keeps the cluster's members in Redis,
//! in the lifecycle relay's way ([`crate::lifecycle`]):
//!
//! - **One member per user in the cluster.** A node's first subscription of a user to a
//!   presence channel adds the node's hold of the user to the channel's records, its last one
//!   removes it (`scripts.rs`, Lua, atomic): the call that adds the user's first hold anywhere
//!   makes it a member, the one that removes its last removes it. That call's node delivers
//!   `presence.member_added` / `member_removed` to its lifecycle listeners (once in the
//!   cluster), and the script publishes the change, with the channel's next version, on the
//!   Redis channel the channel's messages travel on: every node with subscribers of the
//!   channel follows it already, so each delivers the `join` / `leave` frame to its own
//!   watchers ([`herald_core::presence::Presence::deliver_frame`]), in the order the scripts
//!   ran (one shard, one script at a time).
//! - **The limit across nodes.** The add script refuses a user who is no member of a channel
//!   holding `presence_max_members` members (`limit_exceeded`, as on one node), before the
//!   subscribe is answered ([`herald_core::presence::Membership::admitted`]).
//! - **The list.** A watcher's `members` frame and `GET /v1/channels/{name}/presence` read the
//!   channel's members from Redis with the version of its last change; the frames of later
//!   versions follow the list.
//! - **A lost node.** Each node serving presence channels
//!   ([`crate::BusOptions::presence_members`]), and any node once it held a member, refreshes a
//!   heartbeat every [`crate::lifecycle::BEAT_PERIOD`] (expiring after
//!   [`crate::lifecycle::TTL`]) and claims, in one script, the nodes whose heartbeat expired,
//!   then removes their holds: their users
//!   leave (the claiming node's listeners hear `member_removed`, every node's watchers the
//!   `leave`) within [`crate::lifecycle::NODE_LOST_BOUND`] of the lost node's last heartbeat. A
//!   node claimed while alive (cut off from Redis) is fenced until it writes its holds again,
//!   which makes its users members again (a `join` each).
//! - **A node that stops** removes its holds, then itself.
//!
//! Nothing of this runs for other channels: the relay is only called for presence channels,
//! and the task touches Redis only on a node serving them or once it has a member to record.

mod message;
mod scripts;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use fred::prelude::Client;
use herald_core::error::{ErrorCode, HeraldError};
use herald_core::lifecycle::{Lifecycle, LifecycleEvent, Relayed};
use herald_core::presence::{
    Listed, Member, MemberChange, Pending, Presence, PresenceLimits, PresenceRelay,
};
use herald_core::ChannelName;
use tokio::sync::{mpsc, oneshot};

use crate::lifecycle::{BEAT_PERIOD, TTL};
use crate::names::Names;
pub(crate) use message::MARK;
use scripts::{Added, ChannelKeys, NodeKeys};

/// One change of this node's holds, queued for the task in the order the registry made them.
pub(crate) enum Op {
    /// A user new on this node joined: add its hold within `max` members, answer the verdict.
    Join {
        channel: ChannelName,
        user: Box<str>,
        data: Arc<str>,
        max: u32,
        verdict: oneshot::Sender<Result<(), HeraldError>>,
    },
    /// A user's last subscription here ended.
    Leave {
        channel: ChannelName,
        user: Box<str>,
    },
    /// Remove this node's holds and itself, answer.
    Stop(oneshot::Sender<()>),
}

/// The relay set on the hub's presence registry: every change is held (the cluster's are
/// delivered by the task and the receiver), joins are judged by the task.
pub(crate) struct RedisPresence {
    pub(crate) ops: mpsc::UnboundedSender<Op>,
    pub(crate) redis: Client,
    pub(crate) names: Names,
}

impl PresenceRelay for RedisPresence {
    fn relay(&self, channel: &ChannelName, change: &MemberChange) -> Relayed {
        if let MemberChange::Removed { user } = change {
            let _ = self.ops.send(Op::Leave {
                channel: channel.clone(),
                user: user.clone(),
            });
        }
        // A join is queued by `admission`, which the registry calls next.
        Relayed::Held
    }

    fn admission(
        &self,
        channel: &ChannelName,
        user: &str,
        data: &Arc<str>,
        limits: &PresenceLimits,
    ) -> Option<Pending<Result<(), HeraldError>>> {
        let (verdict, answer) = oneshot::channel();
        let op = Op::Join {
            channel: channel.clone(),
            user: user.into(),
            data: data.clone(),
            max: limits.max_members,
            verdict,
        };
        if self.ops.send(op).is_err() {
            return None;
        }
        // A task gone (the bus stopping) admits: nothing is recorded any more.
        Some(Box::pin(async move { answer.await.unwrap_or(Ok(())) }))
    }

    fn members(&self, channel: &ChannelName) -> Option<Pending<Result<Listed, HeraldError>>> {
        let redis = self.redis.clone();
        let keys = channel_keys(&self.names, channel);
        Some(Box::pin(async move {
            let (version, members) = scripts::list(&redis, &keys)
                .await
                .map_err(|e| HeraldError::new(ErrorCode::Internal, crate::error::in_words(&e)))?;
            let members = members
                .into_iter()
                .map(|(user, data)| Member {
                    user: user.into(),
                    data: Arc::from(data),
                })
                .collect();
            Ok(Listed { members, version })
        }))
    }
}

fn channel_keys(names: &Names, channel: &ChannelName) -> ChannelKeys {
    let base = names.members(channel);
    ChannelKeys {
        keys: [
            format!("{base}:m"),
            format!("{base}:o"),
            format!("{base}:n"),
        ],
        publish: names.channel(channel),
    }
}

/// A hold as `held:NODE` records it: `LEN:CHANNEL` + user.
fn entry(channel: &ChannelName, user: &str) -> String {
    format!("{}:{}{user}", channel.as_str().len(), channel.as_str())
}

fn parse_entry(entry: &str) -> Option<(ChannelName, Box<str>)> {
    let (len, rest) = entry.split_once(':')?;
    let len: usize = len.parse().ok()?;
    let channel = herald_core::tenant::parse_full(rest.get(..len)?).ok()?;
    Some((channel, rest[len..].into()))
}

/// A presence change published on `redis_channel` (its first byte is [`MARK`]): delivered to
/// this node's watchers of the channel.
pub(crate) fn on_message(names: &Names, presence: &Presence, redis_channel: &str, payload: &[u8]) {
    let Some(name) = names.parse_channel(redis_channel) else {
        return;
    };
    let (Ok(channel), Some((version, change))) = (
        herald_core::tenant::parse_full(name),
        message::decode(payload),
    ) else {
        tracing::debug!("undecodable presence change on the Redis bus");
        return;
    };
    presence.deliver_frame(&channel, &change, version);
}

/// The task's view of this node's holds and of Redis.
struct State {
    lifecycle: Arc<Lifecycle>,
    redis: Client,
    names: Names,
    keys: NodeKeys,
    /// This node's holds: (channel, user) → data.
    held: HashMap<(ChannelName, Box<str>), Arc<str>>,
    /// Whether Redis holds this node's holds as of the last change (else the next beat writes
    /// them).
    synced: bool,
    /// Whether this node ever wrote a hold (and so beats, claims and removes itself).
    joined: bool,
}

/// Runs the presence task of node `node`; `from_start`: it beats and claims lost nodes from
/// the start (a node serving presence channels), else once it wrote a hold.
pub(crate) async fn run(
    redis: Client,
    names: Names,
    node: u64,
    from_start: bool,
    lifecycle: Arc<Lifecycle>,
    mut ops: mpsc::UnboundedReceiver<Op>,
) {
    let mut state = State {
        lifecycle,
        redis,
        keys: NodeKeys {
            prefix: names.presence_nodes(),
            node: format!("{node:016x}"),
        },
        names,
        held: HashMap::new(),
        synced: false,
        joined: false,
    };
    let mut tick = tokio::time::interval(BEAT_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            op = ops.recv() => match op {
                None => return,
                Some(Op::Stop(stopped)) => {
                    state.leave().await;
                    let _ = stopped.send(());
                    return;
                }
                Some(op) => state.apply(op).await,
            },
            _ = tick.tick() => {
                if state.joined || from_start {
                    state.beat().await;
                }
            }
        }
    }
}

impl State {
    fn deliver(&self, channel: &ChannelName, change: MemberChange) {
        let event = match change {
            MemberChange::Added { user, data } => LifecycleEvent::MemberAdded {
                channel: channel.clone(),
                user,
                data,
            },
            MemberChange::Removed { user } => LifecycleEvent::MemberRemoved {
                channel: channel.clone(),
                user,
            },
        };
        self.lifecycle.deliver(&event);
    }

    fn lost(&mut self, error: &fred::error::Error) {
        let error = crate::error::in_words(error);
        tracing::debug!(%error, "presence changes not written to Redis yet");
        self.synced = false;
    }

    async fn apply(&mut self, op: Op) {
        match op {
            Op::Join {
                channel,
                user,
                data,
                max,
                verdict,
            } => {
                let key = (channel, user);
                self.held.insert(key.clone(), data.clone());
                let (channel, user) = key;
                let answer = self.join(&channel, &user, &data, max).await;
                if answer.is_err() {
                    self.held.remove(&(channel, user));
                }
                let _ = verdict.send(answer);
            }
            Op::Leave { channel, user } => {
                self.held.remove(&(channel.clone(), user.clone()));
                if self.synced {
                    self.remove(&channel, &user).await;
                }
            }
            Op::Stop(_) => {}
        }
    }

    /// Adds this node's hold (recorded first); a full channel refuses it. While Redis does not
    /// answer, admitted: the next beat writes it.
    async fn join(
        &mut self,
        channel: &ChannelName,
        user: &str,
        data: &Arc<str>,
        max: u32,
    ) -> Result<(), HeraldError> {
        if !self.synced {
            // Writes every hold, this one included.
            self.sync().await;
            return Ok(());
        }
        let held = entry(channel, user);
        match scripts::hold(&self.redis, &self.keys, vec![held.clone()]).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(
                    "another node took this node for lost; writing its presence holds again"
                );
                self.synced = false;
                self.sync().await;
                return Ok(());
            }
            Err(error) => {
                self.lost(&error);
                return Ok(());
            }
        }
        let keys = channel_keys(&self.names, channel);
        match scripts::add(&self.redis, &keys, &self.keys.node, user, data, max).await {
            Ok(Added::Joined) => {
                let change = MemberChange::Added {
                    user: user.into(),
                    data: data.clone(),
                };
                self.deliver(channel, change);
                Ok(())
            }
            Ok(Added::Already) => Ok(()),
            Ok(Added::Full) => {
                if let Err(error) = scripts::unhold(&self.redis, &self.keys, vec![held]).await {
                    self.lost(&error);
                }
                Err(HeraldError::new(
                    ErrorCode::LimitExceeded,
                    format!(
                        "the presence channel {:?} is full: it has its {max} members \
                         (presence_max_members)",
                        channel.public(),
                    ),
                ))
            }
            Err(error) => {
                self.lost(&error);
                Ok(())
            }
        }
    }

    /// Removes `node`'s hold of `user` from `channel` (then forgets it), delivering the leave's
    /// event if it was the user's last hold.
    async fn remove_of(&mut self, node: &str, channel: &ChannelName, user: &str) -> bool {
        let keys = channel_keys(&self.names, channel);
        match scripts::remove(&self.redis, &keys, node, user).await {
            Ok(left) => {
                if left {
                    self.deliver(channel, MemberChange::Removed { user: user.into() });
                }
                true
            }
            Err(error) => {
                self.lost(&error);
                false
            }
        }
    }

    async fn remove(&mut self, channel: &ChannelName, user: &str) {
        let node = self.keys.node.clone();
        if self.remove_of(&node, channel, user).await {
            let gone = vec![entry(channel, user)];
            if let Err(error) = scripts::unhold(&self.redis, &self.keys, gone).await {
                self.lost(&error);
            }
        }
    }

    /// Makes Redis hold exactly this node's holds (joining, or after a fence or an error),
    /// delivering the transitions that makes.
    async fn sync(&mut self) {
        let ttl = TTL.as_millis() as u64;
        let recorded = match scripts::sync(&self.redis, &self.keys, ttl).await {
            Ok(recorded) => recorded,
            Err(error) => return self.lost(&error),
        };
        self.joined = true;
        self.synced = true;
        let mine: HashSet<String> = self.held.keys().map(|(c, u)| entry(c, u)).collect();
        for stale in recorded.iter().filter(|e| !mine.contains(*e)) {
            if let Some((channel, user)) = parse_entry(stale) {
                self.remove(&channel, &user).await;
            }
        }
        if mine.is_empty() {
            return;
        }
        match scripts::hold(&self.redis, &self.keys, mine.into_iter().collect()).await {
            Ok(true) => {}
            Ok(false) => return self.synced = false,
            Err(error) => return self.lost(&error),
        }
        let holds: Vec<_> = self
            .held
            .iter()
            .map(|(k, d)| (k.clone(), d.clone()))
            .collect();
        for ((channel, user), data) in holds {
            let keys = channel_keys(&self.names, &channel);
            // Admitted already: written whatever the limit.
            match scripts::add(&self.redis, &keys, &self.keys.node, &user, &data, u32::MAX).await {
                Ok(Added::Joined) => self.deliver(&channel, MemberChange::Added { user, data }),
                Ok(_) => {}
                Err(error) => return self.lost(&error),
            }
        }
    }

    /// The heartbeat, then the claim of the nodes whose heartbeat expired.
    async fn beat(&mut self) {
        if !self.synced {
            self.sync().await;
        } else {
            match scripts::beat(&self.redis, &self.keys, TTL.as_millis() as u64).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(
                        "another node took this node for lost; writing its presence holds again"
                    );
                    self.synced = false;
                    self.sync().await;
                }
                Err(error) => self.lost(&error),
            }
        }
        if !self.synced {
            return;
        }
        let claimed = match scripts::claim(&self.redis, &self.keys).await {
            Ok(claimed) => claimed,
            Err(error) => return self.lost(&error),
        };
        for (node, holds) in claimed {
            for hold in holds {
                if let Some((channel, user)) = parse_entry(&hold) {
                    self.remove_of(&node, &channel, &user).await;
                }
            }
        }
    }

    /// Removes this node's holds and itself as it stops (if it ever joined).
    async fn leave(&mut self) {
        if !self.joined {
            return;
        }
        let holds: Vec<_> = self.held.drain().map(|(k, _)| k).collect();
        for (channel, user) in holds {
            if !self.synced {
                break;
            }
            let node = self.keys.node.clone();
            self.remove_of(&node, &channel, &user).await;
        }
        // Unsure what Redis holds: left to expire, and to the node that claims it.
        if self.synced {
            if let Err(error) = scripts::leave(&self.redis, &self.keys).await {
                self.lost(&error);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_reads_back_whatever_its_user_holds() {
        let channel = herald_core::tenant::parse_full("shop~rooms/1").unwrap();
        for user in ["alice", "a:b\n7", ""] {
            let back = parse_entry(&entry(&channel, user));
            assert_eq!(back, Some((channel.clone(), user.into())));
        }
        assert_eq!(parse_entry("99:shop~rooms/1alice"), None);
    }
}
