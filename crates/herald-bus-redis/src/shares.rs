//! Shared subscription groups balanced across the cluster (core's `shared::holders`;
//! docs/design/mqtt.md, "Shared subscriptions"): each message of a group to one member in the
//! whole cluster, with no coordination per message.
//!
//! - **Who holds a group**: a node with members of a group follows its app's feed (a group is
//!   a filter: `crate::feeds`), so every node with members hears each of the group's messages
//!   there, in the same order. It announces its first member (`On`) and its last leaving
//!   (`Off`) **on the app's feed**, so every node, itself included, changes its view of the
//!   group's holders at the same point of that one stream: a message before the point is
//!   owned as the old holders decide, one after as the new. A node counts itself only when
//!   its own `On` comes back; a subscribe is answered then (core's
//!   [`GroupHolders::until_counted`]).
//! - **Leaving without losing**: a node whose last member left keeps its view, itself in it,
//!   until its own `Off` comes back (the feed's messages before it were sent to it before it
//!   stops following the feed), and sends each message it owns meanwhile to the holder that
//!   owns it without it (`Forward`, on the feed too), which gives it to one of its members. The
//!   messages a leaving member had not acknowledged go the same way when no member is left on
//!   its node ([`RedisShares::hand_over`]).
//! - **The set**: a sorted set `PREFIX:shares` of `NODE\0APP\0SHARE\0FILTER` members, scored
//!   with deadlines and refreshed with the feeds' flag (`crate::feeds::REFRESH`,
//!   `crate::feeds::HOLD_TTL`). A joining node reads it for the holders before it; each
//!   refresh reads it again, and a holder found (or missing) in two reads in a row is added
//!   (or removed): so a crashed node's share goes to the others once its member lapsed, and a
//!   view that missed an announcement is mended, but a read never moves a holder ahead of its
//!   announcement on the stream.
//! - **What a change can lose or double**: with one Redis, nothing while every node follows
//!   the feed; a crashed node's share of the messages is lost until its member lapses (10 to
//!   14 s); a `Forward` lost with Redis is lost. A view mended by a read differs from the
//!   others' for moments. A Redis Cluster carries the feed of one app on one shard, so the
//!   order holds there too.
//!
//! ```text
//! u8 's', u8 kind, u64 from node, u64 to node, str16 app, str16 share name, str16 filter
//!   kind 1 on, 2 off (to 0), 3 forward: followed by the message as a batch (`crate::codec`)
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use fred::prelude::{LuaInterface, PubsubInterface};
use fred::types::Value;
use herald_core::hub::filters::shared::{GroupHolders, ShareCluster};
use herald_core::message::SharedMessage;
use herald_core::name::topic::filter::TopicFilter;
use herald_core::tenant::split_app;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::bus::Shared;
use crate::codec::{decode_batch, encode_batch, put_str16, Reader};
use crate::error::DecodeError;
use crate::feeds::Op;

/// The first byte of a shares message on an app's feed.
pub(crate) const MARK: u8 = b's';

/// How long a node whose last member left keeps the group: its view of the other holders,
/// for the messages its member had not acknowledged, and itself among them should its own
/// `Off` not come back.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

// The groups' sorted set is held and dropped from as the feeds' is (the same scripts).
use crate::feeds::{DROP, HOLD};

/// One group: app, share name, filter (its text).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct GroupKey {
    app: Box<str>,
    share: Box<str>,
    filter: Box<str>,
}

impl GroupKey {
    fn member(&self, node: u64) -> String {
        format!("{node:016x}\0{}\0{}\0{}", self.app, self.share, self.filter)
    }

    /// The node and group of a member of the set.
    fn parse_member(member: &str) -> Option<(u64, GroupKey)> {
        let mut parts = member.splitn(4, '\0');
        let node = u64::from_str_radix(parts.next()?, 16).ok()?;
        let key = GroupKey {
            app: parts.next()?.into(),
            share: parts.next()?.into(),
            filter: parts.next()?.into(),
        };
        Some((node, key))
    }
}

/// This node's view of one group it has (or just had) members of.
struct Held {
    holders: Arc<GroupHolders>,
    filter: Arc<TopicFilter>,
    /// Members here (the core group exists).
    local: bool,
    /// The other holders the last refresh read in the set.
    last_read: Option<HashSet<u64>>,
    /// Refreshes in a row that read this node's own member while it did not count itself
    /// (its `On` lost with a Redis reconnect): at two, it counts itself.
    own_reads: u8,
    /// How many times the group's last member here left: the timer that forgets the group
    /// acts only if no member came and left since it started.
    leavings: u64,
}

/// This node's side of the share groups (see the module doc).
pub(crate) struct ShareState {
    groups: Mutex<HashMap<GroupKey, Held>>,
    /// Groups whose last member here left and whose `Off` has not come back.
    draining: AtomicUsize,
    ops: mpsc::UnboundedSender<Op>,
}

impl ShareState {
    pub(crate) fn new(ops: mpsc::UnboundedSender<Op>) -> ShareState {
        ShareState {
            groups: Mutex::default(),
            draining: AtomicUsize::new(0),
            ops,
        }
    }
}

/// The filter registry's [`ShareCluster`]: notes the changes for the feeds task.
pub(crate) struct RedisShares(pub(crate) Weak<Shared>);

impl ShareCluster for RedisShares {
    fn joined(&self, app: &str, share: &str, filter: &Arc<TopicFilter>) -> Arc<GroupHolders> {
        let Some(shared) = self.0.upgrade() else {
            return GroupHolders::new(0);
        };
        let key = GroupKey {
            app: app.into(),
            share: share.into(),
            filter: filter.as_str().into(),
        };
        let mut groups = shared.shares.groups.lock();
        let held = groups.entry(key.clone()).or_insert_with(|| Held {
            holders: GroupHolders::new(shared.node),
            filter: filter.clone(),
            local: false,
            last_read: None,
            own_reads: 0,
            leavings: 0,
        });
        if !held.local && held.holders.is_counted() {
            shared.shares.draining.fetch_sub(1, Ordering::Relaxed);
        }
        held.local = true;
        let holders = held.holders.clone();
        let _ = shared.shares.ops.send(Op::ShareGained(key));
        holders
    }

    fn left(&self, app: &str, share: &str, filter: &Arc<TopicFilter>) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        let key = GroupKey {
            app: app.into(),
            share: share.into(),
            filter: filter.as_str().into(),
        };
        if let Some(held) = shared.shares.groups.lock().get_mut(&key) {
            held.local = false;
            held.leavings += 1;
            if held.holders.is_counted() {
                shared.shares.draining.fetch_add(1, Ordering::Relaxed);
            }
        }
        let _ = shared.shares.ops.send(Op::ShareLost(key));
    }

    fn hand_over(
        &self,
        app: &str,
        share: &str,
        filter: &TopicFilter,
        message: &SharedMessage,
    ) -> bool {
        let Some(shared) = self.0.upgrade() else {
            return false;
        };
        let key = GroupKey {
            app: app.into(),
            share: share.into(),
            filter: filter.as_str().into(),
        };
        let to = shared
            .shares
            .groups
            .lock()
            .get(&key)
            .and_then(|held| held.holders.owner_besides(message, shared.node));
        match to {
            Some(to) => {
                forward(&shared, &key, to, message);
                true
            }
            None => false,
        }
    }
}

/// A shares message (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
enum ShareMessage {
    On,
    Off,
    /// A message for a member of the group on node `to`, as a batch.
    Forward(Bytes),
}

fn encode(kind: &ShareMessage, from: u64, to: u64, key: &GroupKey) -> Bytes {
    let (code, rest) = match kind {
        ShareMessage::On => (1, &[][..]),
        ShareMessage::Off => (2, &[][..]),
        ShareMessage::Forward(batch) => (3, &batch[..]),
    };
    let mut out = BytesMut::with_capacity(32 + key.app.len() + key.filter.len() + rest.len());
    out.put_u8(MARK);
    out.put_u8(code);
    out.put_u64(from);
    out.put_u64(to);
    put_str16(&mut out, &key.app);
    put_str16(&mut out, &key.share);
    put_str16(&mut out, &key.filter);
    out.put_slice(rest);
    out.freeze()
}

fn decode(payload: &Bytes) -> Result<(ShareMessage, u64, u64, GroupKey), DecodeError> {
    let mut r = Reader(payload.clone());
    if r.u8()? != MARK {
        return Err(DecodeError::Malformed("not a shares message"));
    }
    let code = r.u8()?;
    let (from, to) = (r.u64()?, r.u64()?);
    let key = GroupKey {
        app: r.str16()?.into(),
        share: r.str16()?.into(),
        filter: r.str16()?.into(),
    };
    let kind = match code {
        1 => ShareMessage::On,
        2 => ShareMessage::Off,
        3 => ShareMessage::Forward(r.0),
        _ => return Err(DecodeError::Malformed("an unknown shares message")),
    };
    Ok((kind, from, to, key))
}

/// Sends `message` to a member of group `key` on node `to` (spawned: never waits).
fn forward(shared: &Arc<Shared>, key: &GroupKey, to: u64, message: &SharedMessage) {
    let batch = encode_batch(
        shared.node,
        &message.channel,
        0,
        std::slice::from_ref(message),
    );
    let payload = encode(&ShareMessage::Forward(batch), shared.node, to, key);
    let channel = shared.names.feed(&key.app);
    let shared = shared.clone();
    tokio::spawn(async move {
        let _ = bounded(
            shared
                .publisher
                .spublish::<(), _, _>(channel, Value::Bytes(payload)),
        )
        .await;
    });
}

/// Handles a shares message from an app's feed (the receiver task, in the feed's order).
pub(crate) fn on_message(shared: &Arc<Shared>, payload: &Bytes) {
    let Ok((kind, from, to, key)) = decode(payload) else {
        shared
            .counters
            .decode_errors
            .fetch_add(1, Ordering::Relaxed);
        return;
    };
    let me = shared.node;
    match kind {
        ShareMessage::On | ShareMessage::Off => {
            let mut groups = shared.shares.groups.lock();
            let Some(held) = groups.get_mut(&key) else {
                return;
            };
            match (kind, from == me) {
                (ShareMessage::On, true) if held.local => held.holders.count_me(),
                (ShareMessage::On, true) => {}
                (ShareMessage::On, false) => held.holders.add(from),
                (_, true) => {
                    // Kept (not counting itself) until the timer `lost` started forgets it:
                    // the messages its last member had not acknowledged are still being
                    // handed over with the others' view.
                    if !held.local && held.holders.is_counted() {
                        shared.shares.draining.fetch_sub(1, Ordering::Relaxed);
                    }
                    held.holders.remove(me);
                }
                (_, false) => {
                    held.holders.remove(from);
                }
            }
        }
        ShareMessage::Forward(batch) if to == me => {
            let Ok(batch) = decode_batch(&batch) else {
                return;
            };
            let filters = shared.fan_out.hub().filters();
            for message in &batch.messages {
                if !filters.give_to_group(&key.app, &key.share, &key.filter, message) {
                    tracing::debug!(
                        app = &*key.app,
                        "a shared subscription message handed to this node found no member"
                    );
                }
            }
        }
        ShareMessage::Forward(_) => {}
    }
}

/// A batch of the app's feed reached this node: the messages of groups whose last member here
/// left, and which this node still owns until its `Off` comes back, go to their new owners.
pub(crate) fn drain(shared: &Arc<Shared>, messages: &[SharedMessage]) {
    if shared.shares.draining.load(Ordering::Relaxed) == 0 {
        return;
    }
    let Some(first) = messages.first() else {
        return;
    };
    let (app, local) = split_app(first.channel.as_str());
    let mut sends = Vec::new();
    for (key, held) in shared.shares.groups.lock().iter() {
        if held.local || !held.holders.is_counted() || &*key.app != app {
            continue;
        }
        if !held.filter.matches_local(local) {
            continue;
        }
        for message in messages {
            if held.holders.owns(message) {
                if let Some(to) = held.holders.owner_besides(message, shared.node) {
                    sends.push((key.clone(), to, message.clone()));
                }
            }
        }
    }
    for (key, to, message) in sends {
        forward(shared, &key, to, &message);
    }
}

async fn bounded<T, E>(f: impl std::future::Future<Output = Result<T, E>>) -> Option<T> {
    tokio::time::timeout(Duration::from_secs(2), f)
        .await
        .ok()?
        .ok()
}

/// Holds `members` of this node, drops lapsed ones, and reads the set.
async fn hold(shared: &Shared, members: Vec<String>) -> Option<Vec<String>> {
    let now = crate::feeds::now_millis();
    let mut args = vec![
        now.to_string(),
        (now + crate::feeds::HOLD_TTL.as_millis() as i64).to_string(),
    ];
    args.extend(members);
    bounded(
        shared
            .publisher
            .eval::<Vec<String>, _, _, _>(HOLD, shared.names.shares(), args),
    )
    .await
}

/// The group's first member here (the feeds task, after the app's feed is followed): reads the
/// holders before it, adds this node to the set, and announces it on the feed.
pub(crate) async fn gained(shared: &Arc<Shared>, key: GroupKey) {
    let holders = match shared.shares.groups.lock().get(&key) {
        Some(held) if held.local => held.holders.clone(),
        _ => return, // left again meanwhile
    };
    if let Some(members) = hold(shared, vec![key.member(shared.node)]).await {
        for (node, of) in members.iter().filter_map(|m| GroupKey::parse_member(m)) {
            if of == key && node != shared.node {
                holders.add(node);
            }
        }
    }
    let on = encode(&ShareMessage::On, shared.node, 0, &key);
    let sent = bounded(
        shared
            .publisher
            .spublish::<(), _, _>(shared.names.feed(&key.app), Value::Bytes(on)),
    )
    .await;
    if sent.is_none() && !holders.is_counted() {
        // Redis away: nothing reaches the feed either; count this node for when it is back.
        holders.count_me();
    }
}

/// The group's last member here left: announces it on the feed and leaves the set.
pub(crate) async fn lost(shared: &Arc<Shared>, key: GroupKey) {
    let leavings = match shared.shares.groups.lock().get(&key) {
        Some(held) if !held.local => held.leavings,
        _ => return, // joined again meanwhile: nothing changes for the others
    };
    let off = encode(&ShareMessage::Off, shared.node, 0, &key);
    let _ = bounded(
        shared
            .publisher
            .spublish::<(), _, _>(shared.names.feed(&key.app), Value::Bytes(off)),
    )
    .await;
    let _ = bounded(shared.publisher.eval::<i64, _, _, _>(
        DROP,
        shared.names.shares(),
        key.member(shared.node),
    ))
    .await;
    // The group is forgotten after a while (at once would lose what a leaving member's
    // connection still hands over), and so it is should the `Off` not come back.
    let shared = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(DRAIN_LIMIT).await;
        let mut groups = shared.shares.groups.lock();
        let same = |held: &&Held| !held.local && held.leavings == leavings;
        if let Some(held) = groups.get(&key).filter(same) {
            if held.holders.is_counted() {
                shared.shares.draining.fetch_sub(1, Ordering::Relaxed);
            }
            held.holders.remove(shared.node);
            groups.remove(&key);
        }
    });
}

/// Keeps this node's members in the set and mends the views from it (the feeds task, every
/// refresh): a holder read in two reads in a row and not counted is added, one missing from
/// two reads in a row is removed; this node counts itself after two reads of its own member
/// should its `On` never have come back.
pub(crate) async fn refresh(shared: &Shared) {
    let own: Vec<String> = shared
        .shares
        .groups
        .lock()
        .iter()
        .filter(|(_, held)| held.local)
        .map(|(key, _)| key.member(shared.node))
        .collect();
    if own.is_empty() {
        return;
    }
    let Some(members) = hold(shared, own).await else {
        return; // Redis away: keep the views
    };
    let mut read: HashMap<GroupKey, HashSet<u64>> = HashMap::new();
    let mut own: HashSet<GroupKey> = HashSet::new();
    for (node, key) in members.iter().filter_map(|m| GroupKey::parse_member(m)) {
        if node != shared.node {
            read.entry(key).or_default().insert(node);
        } else {
            own.insert(key);
        }
    }
    let mut groups = shared.shares.groups.lock();
    for (key, held) in groups.iter_mut().filter(|(_, held)| held.local) {
        if held.holders.is_counted() || !own.contains(key) {
            held.own_reads = 0;
        } else {
            held.own_reads += 1;
            if held.own_reads >= 2 {
                held.holders.count_me();
            }
        }
        let now = read.remove(key).unwrap_or_default();
        if let Some(before) = held.last_read.take() {
            for node in now.intersection(&before) {
                held.holders.add(*node);
            }
            for node in held.holders.nodes() {
                if node != shared.node && !now.contains(&node) && !before.contains(&node) {
                    held.holders.remove(node);
                }
            }
        }
        held.last_read = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_messages_and_members_round_trip() {
        let key = GroupKey {
            app: "shop".into(),
            share: "g".into(),
            filter: "jobs/+".into(),
        };
        for kind in [
            ShareMessage::On,
            ShareMessage::Off,
            ShareMessage::Forward(Bytes::from_static(b"\x01batch")),
        ] {
            let (back, from, to, of) = decode(&encode(&kind, 7, 9, &key)).unwrap();
            assert_eq!((back, from, to, of), (kind, 7, 9, key.clone()));
        }
        assert_eq!(
            GroupKey::parse_member(&key.member(0xab)),
            Some((0xab, key.clone()))
        );
        assert!(decode(&Bytes::from_static(b"s")).is_err());
    }
}
