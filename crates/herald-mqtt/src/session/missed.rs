//! What a resumed persistent session's wildcard filters missed while the client was away
//! (docs/design/mqtt.md, "Persistent sessions"; [MQTT-3.1.2-5], MQTT 5.0 4.1): replayed from
//! the channels' logs, not from a queue written per session at publish time.
//!
//! - **Which channels**: on resume, each filter's channels are listed by its prefixes
//!   ([`crate::wildcards::list_matching`]). A channel the session holds a position in (every
//!   channel a filter delivered to it while connected gets one, `connection.rs`) replays from
//!   that position if the channel moved past it; a channel without one replays its messages
//!   stored since the filter was made (or, for a filter stored before that time was kept,
//!   since the connection ended). At most `mqtt.max_offline_channels_per_filter` channels per
//!   filter, in name order, from at most ten times as many listed per prefix; the channels
//!   past it are counted in a warning and get only live messages.
//! - **How**: each such channel gets a subscription of the client session of its own from
//!   its position (core's exact resume and paged catch-up), which the MQTT side does not count
//!   as a subscription of the client: a message goes out through the filters' options, once
//!   (the filter registry leaves a connection holding the channel's subscription to it), in
//!   seq order after the catch-up. It lasts as long as the connection, or until no filter
//!   matches its channel.
//! - **The gate** ([`ResumeGate`]): while the channels are found, the filters' deliveries are
//!   held back (the registry asks the gate, as it asks an anonymous client's deny rules), and
//!   each channel that had a message meanwhile gets its own subscription as well, from before
//!   that message: so a message published during the resume is neither lost nor sent ahead
//!   of what its channel had to replay. Once nothing is held back the gate opens; from then
//!   on it costs a delivery one atomic load.
//!
//! **A filter's retained message is no position** ([`MqttWire::retained_for_filter`]): a
//! channel whose first message through a filter is its retained message, stored before the
//! filter was made, is followed from it in memory only; its position is stored once a message
//! after it moves it. Else a resume would replay, from the retained message on, what the
//! channel had before the SUBSCRIBE (a retained message need not be the newest: RETAIN 0
//! messages may follow it), which the session never subscribed to; with no position the
//! channel replays from the filter's time, as any channel it has no message of.
//!
//! The replay is as deep as each channel's history (`[history]`), as for exact subscriptions.
//! QoS 0 messages replay too (the subscription's and the message's QoS decide, as live).
//!
//! **Cost.** Each listed channel's stored position is one lookup in a map of the positions
//! made once per resume ([`StoredPositions`]), and whether it has a replay subscription
//! already one lookup in a set: linear in the channels listed (up to
//! `mqtt.max_offline_channels_per_filter` per filter), not quadratic.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use herald_core::engine::{Engine, SubscribeRequest};
use herald_core::log::{ChannelState, ReadFrom};
use herald_core::message::{Cursor, SharedMessage, StoredMessage};
use herald_core::name::topic::filter::TopicFilter;
use herald_core::{ChannelName, Epoch};

use super::store::StoredPosition;
use crate::wildcards::list_matching;
use crate::wire::MqttWire;

/// Channels listed per filter prefix, per channel a filter may replay.
const LISTED_PER_REPLAYED: usize = 10;

/// The most messages read at once to find where a channel's messages since a time start.
const LARGEST_TAIL: u64 = 4096;

/// Holds a resuming session's filter deliveries back, noting the channels they were for (see
/// the module doc).
#[derive(Default)]
pub(crate) struct ResumeGate {
    closed: AtomicBool,
    /// The first message held back of each channel: its channel, epoch and seq.
    held: Mutex<Vec<(ChannelName, Epoch, u64)>>,
}

impl ResumeGate {
    /// A closed gate.
    pub(crate) fn closed() -> Arc<ResumeGate> {
        Arc::new(ResumeGate {
            closed: AtomicBool::new(true),
            held: Mutex::new(Vec::new()),
        })
    }

    /// Whether the filters may queue `message` now; if not, its channel is noted.
    pub(crate) fn admit(&self, message: &StoredMessage) -> bool {
        if !self.closed.load(Ordering::Acquire) {
            return true;
        }
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if !self.closed.load(Ordering::Acquire) {
            return true;
        }
        if !held.iter().any(|(c, _, _)| *c == message.channel) {
            held.push((message.channel.clone(), message.epoch.clone(), message.seq));
        }
        false
    }

    /// The channels held back since the last call; none, and the gate open, once none was.
    fn take_or_open(&self) -> Vec<(ChannelName, Epoch, u64)> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.is_empty() {
            self.closed.store(false, Ordering::Release);
        }
        std::mem::take(&mut *held)
    }
}

/// A wildcard filter of the resumed session and when it was made (Unix ms), if known.
type ResumedFilter = (TopicFilter, Option<i64>);

/// A resumed session's stored positions by channel (its name in its app), made once per
/// resume: each subscription and each listed channel finds its own with one lookup.
pub(super) struct StoredPositions<'a>(HashMap<&'a str, &'a StoredPosition>);

impl<'a> StoredPositions<'a> {
    /// `stored` by channel (the store keeps one per channel).
    pub(super) fn index(stored: &'a [StoredPosition]) -> Self {
        StoredPositions(stored.iter().map(|p| (p.channel.as_str(), p)).collect())
    }

    /// The stored position in `channel`, if any.
    pub(super) fn get(&self, channel: &ChannelName) -> Option<&'a StoredPosition> {
        self.0.get(channel.public()).copied()
    }
}

impl MqttWire {
    /// Replays what the resumed session's wildcard filters (registered again, behind their
    /// gate) missed, from `stored` (the positions read at CONNECT), then opens the gate (see
    /// the module doc).
    pub(super) async fn replay_missed(&mut self, stored: &StoredPositions<'_>) {
        let Some(persist) = self.persist.as_ref() else {
            return;
        };
        let Some(gate) = persist.gate.clone() else {
            return;
        };
        let offline_since = persist.offline_since_ms;
        let filters: Vec<ResumedFilter> = persist
            .subscriptions
            .iter()
            .filter(|s| self.subscriptions.filter(&s.filter).is_some())
            .filter_map(|s| Some((TopicFilter::parse(&s.filter).ok()?, s.since_ms)))
            .collect();
        let Ok(app) = self.session.client().map(|c| c.app.clone()) else {
            return;
        };
        let engine = self.session.edge().engine.clone();
        let max = usize::from(self.settings.max_offline_channels_per_filter);
        let mut looked_at: HashSet<ChannelName> = HashSet::new();
        for (filter, since_ms) in &filters {
            let (mut replayed, mut past_bound) = (0, 0);
            let max_listed = max * LISTED_PER_REPLAYED;
            for prefix in filter.prefixes() {
                if max == 0 {
                    break;
                }
                for (name, state) in list_matching(&engine, &app, prefix, max_listed).await {
                    if !filter.matches_local(name.public()) || !looked_at.insert(name.clone()) {
                        continue;
                    }
                    if !self.may_replay(&name) {
                        continue;
                    }
                    let since = since_ms.or(offline_since);
                    let position = stored.get(&name);
                    let Some(from) = missed_from(&engine, &name, state, position, since).await
                    else {
                        continue;
                    };
                    if replayed >= max {
                        past_bound += 1;
                        continue;
                    }
                    if self.replay_channel(&name, from).await {
                        replayed += 1;
                    }
                }
            }
            if past_bound > 0 {
                tracing::warn!(
                    client_id = self.claim.client_id(),
                    filter = filter.as_str(),
                    replayed,
                    not_replayed = past_bound,
                    "MQTT: a resumed wildcard filter missed messages in more channels than \
                     mqtt.max_offline_channels_per_filter; the rest get only live messages"
                );
            }
        }
        // What the filters held back meanwhile: its channels replay from before it.
        loop {
            let held = gate.take_or_open();
            if held.is_empty() {
                break;
            }
            for (name, epoch, seq) in held {
                if !self.may_replay(&name) {
                    continue;
                }
                let from = match stored.get(&name) {
                    Some(p) if p.epoch == epoch.as_str() && p.seq < seq => Cursor {
                        epoch: Epoch::new(&p.epoch),
                        seq: p.seq,
                    },
                    _ => Cursor {
                        epoch,
                        seq: seq.saturating_sub(1),
                    },
                };
                self.replay_channel(&name, from).await;
            }
        }
    }

    /// The retained messages `retained` a SUBSCRIBE of wildcard `filter` is about to be sent:
    /// each one stored before the filter was made, of a channel the session does not follow
    /// yet, has its channel followed from it in memory, not stored (see the module doc), so
    /// neither it nor what the channel had before it moves the stored position.
    pub(crate) fn retained_for_filter<'m>(
        &mut self,
        filter: &str,
        retained: impl Iterator<Item = &'m SharedMessage>,
    ) {
        let Some(persist) = self.persist.as_mut() else {
            return;
        };
        let since_ms = persist
            .subscriptions
            .iter()
            .find(|s| s.filter == filter)
            .and_then(|s| s.since_ms);
        let Some(since_ms) = since_ms else {
            return;
        };
        for message in retained {
            if message.time < since_ms && !persist.positions.follows(&message.channel) {
                persist
                    .positions
                    .follow(&message.channel, &message.epoch, message.seq);
            }
        }
    }

    /// Whether `channel` may get a replay subscription of its own: none yet, no exact
    /// subscription of the client's (that one resumes by itself), and not refused by an
    /// anonymous client's deny rules.
    fn may_replay(&self, channel: &ChannelName) -> bool {
        let held = self
            .persist
            .as_ref()
            .is_some_and(|p| p.filter_catchups.contains(channel));
        let denied = self
            .anonymous
            .as_ref()
            .is_some_and(|rules| !rules.may_receive(&channel.topic()));
        !held && !denied && self.subscriptions.exact(channel).is_none()
    }

    /// Subscribes the client session to `channel` from `from`, for what a filter missed;
    /// whether it did.
    async fn replay_channel(&mut self, channel: &ChannelName, from: Cursor) -> bool {
        let request = SubscribeRequest {
            since: Some(from),
            last: Some(false),
            replay_retained_if_lost: true,
        };
        let subscribed = self.subscribe_quietly(channel, &request).await;
        match subscribed {
            Ok(opened) => {
                if let Some(persist) = self.persist.as_mut() {
                    persist.filter_catchups.insert(channel.clone());
                    persist.follow(channel, &opened.position, true);
                }
                true
            }
            Err(e) => {
                tracing::warn!(
                    client_id = self.claim.client_id(),
                    channel = channel.public(),
                    error = %e.message,
                    "MQTT: what a resumed wildcard filter missed in a channel could not be replayed"
                );
                false
            }
        }
    }

    /// A replay subscription's channel no filter matches any more is let go (its position
    /// with it); so is the position of a channel nothing of the session matches now.
    pub(crate) fn drop_unmatched_replays(&mut self) {
        let Some(persist) = self.persist.as_ref() else {
            return;
        };
        let gone: Vec<ChannelName> = persist
            .filter_catchups
            .iter()
            .filter(|c| !self.subscriptions.filter_matches(c))
            .cloned()
            .collect();
        for channel in &gone {
            let _ = self.session.unsubscribe(channel.public());
        }
        let unfollowed: Vec<ChannelName> = persist
            .positions
            .channels()
            .filter(|c| {
                self.subscriptions.exact(c).is_none() && !self.subscriptions.filter_matches(c)
            })
            .cloned()
            .collect();
        if let Some(persist) = self.persist.as_mut() {
            for channel in &gone {
                persist.filter_catchups.remove(channel);
            }
            for channel in unfollowed {
                persist.unfollow(&channel);
            }
        }
    }
}

/// Where `channel` (listed with `state`, or not read yet) replays from for a filter: the
/// session's stored position in it (`stored`) if the channel moved past it, else, with no
/// position, the first message stored at or after `since_ms`; `None` when nothing was missed.
async fn missed_from(
    engine: &Engine,
    channel: &ChannelName,
    state: Option<ChannelState>,
    stored: Option<&StoredPosition>,
    since_ms: Option<i64>,
) -> Option<Cursor> {
    let state = match state {
        Some(state) => state,
        None => engine.read(channel, ReadFrom::Tail(1), 1).await.ok()?.state,
    };
    if state.last_seq == 0 {
        return None;
    }
    if let Some(p) = stored {
        let behind = p.epoch != state.epoch.as_str() || p.seq < state.last_seq;
        return behind.then(|| Cursor {
            epoch: Epoch::new(&p.epoch),
            seq: p.seq,
        });
    }
    let since_ms = since_ms?;
    let kept = (state.last_seq + 1).saturating_sub(state.first_seq);
    let mut n = 64.min(kept.max(1));
    loop {
        let slice = engine
            .read(channel, ReadFrom::Tail(n), usize::try_from(n).ok()?)
            .await
            .ok()?;
        let messages = slice.messages;
        if messages.last()?.time < since_ms {
            return None;
        }
        let first = messages.iter().position(|m| m.time >= since_ms)?;
        let whole = messages.len() as u64 >= kept || n >= LARGEST_TAIL;
        if first > 0 || whole {
            return Some(Cursor {
                epoch: state.epoch.clone(),
                seq: messages[first].seq - 1,
            });
        }
        n = (n * 8).min(kept).min(LARGEST_TAIL);
    }
}
