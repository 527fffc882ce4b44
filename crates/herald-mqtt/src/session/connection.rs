//! A persistent session as one connection holds it ([`PersistentSession`]), and what the
//! connection does with it: resuming the stored subscriptions from their positions
//! ([`MqttWire::resume_session`]), moving positions as messages are handled and acknowledged,
//! storing a QoS 2 message's packet identifier before its PUBLISH is sent and a QoS 1
//! message's once it is sent, recording its
//! subscriptions as they change, and the session's end when the connection ends
//! ([`MqttWire::end_session`]).

use std::collections::HashSet;
use std::future::Future;
use std::num::{NonZeroU16, NonZeroU32};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use herald_core::engine::SubscribeRequest;
use herald_core::log::StoreError;
use herald_core::message::{Cursor, SharedMessage};
use herald_core::outbox::CloseReason;
use herald_core::{ChannelName, Epoch, HeldPacket, SessionHold};

use super::flusher::Done;
use super::missed::{ResumeGate, StoredPositions};
use super::positions::Positions;
use super::store::{
    SessionKey, SessionWrite, StoredHeldQoS2, StoredInflight, StoredPosition, StoredSession,
    StoredSubscription,
};
use super::{now_ms, Carried, Sessions};
use crate::inflight::{HeldQoS2, Sent};
use crate::packet::{Packet, PubRel, QoS, RetainHandling, SubscriptionOptions};
use crate::subscriptions::Granted;
use crate::topic_map::{self, FilterTarget};
use crate::wire::MqttWire;

/// The session a connection holds when it outlives the connection (or resumed a stored one).
pub(crate) struct PersistentSession {
    sessions: Arc<Sessions>,
    key: SessionKey,
    /// Its Session Expiry Interval, ms (a v5 DISCONNECT may change it).
    expiry_ms: i64,
    /// Its subscriptions, as stored.
    pub(super) subscriptions: Vec<StoredSubscription>,
    /// Whether `subscriptions` changed since they were last handed to the flusher: the list is
    /// written once the packets of a read are handled ([`MqttWire::store_changed_subscriptions`]),
    /// so a thousand SUBSCRIBEs in one read copy it once, not once each.
    subscriptions_changed: bool,
    pub(super) positions: Positions,
    /// Channels resumed from a stored position: what their subscription replays is what the
    /// client missed, not a retained message (a set: a replayed message asks, and a resume
    /// adds up to a thousand channels per filter).
    pub(super) catching_up: HashSet<ChannelName>,
    /// A SUBSCRIBE's retained messages of channels in `catching_up`, queued and not written
    /// yet, each a copy of its own: told from the channels' replay by identity
    /// (`retained_apart.rs`).
    pub(super) retained_at_subscribe: Vec<SharedMessage>,
    /// When the connection before ended (Unix ms), for a resumed session.
    pub(super) offline_since_ms: Option<i64>,
    /// Channels subscribed to replay what a wildcard filter missed (`missed.rs`): not the
    /// client's subscriptions, let go once no filter matches them.
    pub(super) filter_catchups: HashSet<ChannelName>,
    /// While the session resumes with wildcard filters: the gate their deliveries wait
    /// behind (`missed.rs`).
    pub(super) gate: Option<Arc<ResumeGate>>,
    /// The stored positions, read at CONNECT, until the subscriptions resumed from them.
    stored_positions: Vec<StoredPosition>,
    /// Messages in flight before (QoS 1 in memory and from the store, QoS 2 from the store),
    /// in the order first sent, for the outbound state once the connection starts.
    resend: Vec<Sent>,
    /// The inbound QoS 2 packet ids awaiting PUBREL, from the store, for the inbound state
    /// once the connection starts.
    held_qos2: Vec<HeldQoS2>,
    /// Whether releases of its inbound QoS 2 holds wait in the flusher for its next append
    /// (`flusher.rs`): only then does an append look for them (atomic: an append's future
    /// holds the connection shared).
    releases_deferred: AtomicBool,
}

impl PersistentSession {
    /// A new session, nothing stored yet.
    pub(super) fn fresh(sessions: Arc<Sessions>, key: SessionKey, expiry_ms: i64) -> Self {
        PersistentSession {
            sessions,
            key,
            expiry_ms,
            subscriptions: Vec::new(),
            subscriptions_changed: false,
            positions: Positions::default(),
            catching_up: HashSet::new(),
            retained_at_subscribe: Vec::new(),
            offline_since_ms: None,
            filter_catchups: HashSet::new(),
            gate: None,
            stored_positions: Vec::new(),
            resend: Vec::new(),
            held_qos2: Vec::new(),
            releases_deferred: AtomicBool::new(false),
        }
    }

    /// The stored session `stored` resumed, with what its last connection in this process
    /// left (the QoS 1 messages unacknowledged), the QoS 1 and 2 messages stored in flight and
    /// the inbound QoS 2 ids stored awaiting PUBREL.
    pub(super) fn new(
        sessions: Arc<Sessions>,
        key: SessionKey,
        expiry_ms: i64,
        stored: &StoredSession,
        carried: Carried,
    ) -> Self {
        let mut in_store = Vec::with_capacity(stored.inflight.len());
        for inflight in &stored.inflight {
            let (Ok(channel), Some(id)) = (
                key.app.parse_channel(&inflight.channel),
                std::num::NonZeroU16::new(inflight.packet_id),
            ) else {
                continue;
            };
            let qos = if inflight.qos == 1 {
                QoS::AtLeastOnce
            } else {
                QoS::ExactlyOnce
            };
            in_store.push(Sent {
                id,
                channel,
                epoch: Epoch::new(&inflight.epoch),
                seq: inflight.seq,
                retain: inflight.retain,
                qos,
                released: inflight.released && qos == QoS::ExactlyOnce,
            });
        }
        PersistentSession {
            subscriptions: stored.subscriptions.clone(),
            stored_positions: stored.positions.clone(),
            offline_since_ms: stored.disconnected_ms,
            resend: super::resend::in_sent_order(carried.unacked, in_store),
            held_qos2: held_qos2_of(stored),
            ..PersistentSession::fresh(sessions, key, expiry_ms)
        }
    }

    fn push(&self, write: SessionWrite) {
        self.sessions.flusher.push(write);
    }

    /// Defers the release of inbound QoS 2 hold `held` to the session's next append or the
    /// flusher's next batch.
    fn defer_release(&self, held: HeldPacket) {
        self.releases_deferred.store(true, Ordering::Relaxed);
        self.sessions.flusher.defer_release(self.key(), held);
    }

    fn key(&self) -> SessionKey {
        self.key.clone()
    }

    /// The gate a resuming session's filter deliveries wait behind, while it resumes.
    pub(crate) fn resume_gate(&self) -> Option<Arc<ResumeGate>> {
        self.gate.clone()
    }

    /// Stops following `channel`: its position is forgotten, stored too.
    pub(super) fn unfollow(&mut self, channel: &ChannelName) {
        self.positions.unfollow(channel);
        self.catching_up.remove(channel);
        self.push(SessionWrite::Unfollowed {
            key: self.key(),
            channel: channel.public().to_owned(),
        });
    }

    /// Follows `channel` from `position`, stored at once (so what is published while the
    /// client is away is sent when it comes back).
    pub(super) fn follow(&mut self, channel: &ChannelName, position: &Cursor, catching_up: bool) {
        self.positions
            .follow(channel, &position.epoch, position.seq);
        if catching_up {
            self.catching_up.insert(channel.clone());
        } else {
            self.catching_up.remove(channel);
        }
        self.write_position(channel, &position.epoch, position.seq);
    }

    fn write_position(&self, channel: &ChannelName, epoch: &Epoch, seq: u64) {
        self.push(SessionWrite::Position {
            key: self.key(),
            position: StoredPosition {
                channel: channel.public().to_owned(),
                epoch: epoch.as_str().to_owned(),
                seq,
            },
        });
    }

    /// Notes that the subscriptions changed: written by [`Self::changed_subscriptions`].
    fn mark_subscriptions_changed(&mut self) {
        self.subscriptions_changed = true;
    }

    /// The write of the subscriptions, if they changed since the last one.
    fn changed_subscriptions(&mut self) -> Option<SessionWrite> {
        std::mem::take(&mut self.subscriptions_changed).then(|| SessionWrite::Subscriptions {
            key: self.key(),
            subscriptions: self.subscriptions.clone(),
        })
    }
}

/// The inbound QoS 2 ids a resumed session holds: those of its store (each written by its
/// message's append, deleted after its PUBREL, on whichever node), all taken on
/// ([`HeldQoS2::adopted`]): a release queued before a crash may not have committed.
fn held_qos2_of(stored: &StoredSession) -> Vec<HeldQoS2> {
    stored
        .held_qos2
        .iter()
        .map(|h| HeldQoS2 {
            id: h.packet_id,
            n: h.n,
            adopted: true,
        })
        .collect()
}

/// The write releasing the session `key`'s hold of inbound QoS 2 packet id `id` for key number
/// `n` (a later message's hold of the same id stays).
fn qos2_release(key: SessionKey, id: NonZeroU16, n: u64) -> SessionWrite {
    SessionWrite::ReleasedQoS2 {
        key,
        held: StoredHeldQoS2 {
            packet_id: id.get(),
            n,
        },
    }
}

/// What a stored subscription was granted.
fn granted_of(sub: &StoredSubscription) -> Granted {
    Granted {
        qos: QoS::from_u8(sub.qos).unwrap_or(QoS::AtMostOnce),
        retain_as_published: sub.retain_as_published,
        no_local: sub.no_local,
        identifier: sub.subscription_identifier.and_then(NonZeroU32::new),
    }
}

impl MqttWire {
    /// Makes the stored subscriptions of a resumed session again, each from its channel's
    /// stored position (what the client missed and had not acknowledged is replayed, as far
    /// back as the channel's history keeps; a position the history no longer reaches replays
    /// what is left), within the client's permissions now (a subscription they no longer
    /// allow is dropped from the session); sends PUBREL again for QoS 2 messages that were
    /// released, keeps the packet ids of the messages in flight before for their resends, and
    /// holds the inbound QoS 2 ids the connection before left awaiting PUBREL.
    pub(crate) async fn resume_session(&mut self) {
        let Some(persist) = self.persist.as_mut() else {
            return;
        };
        let subscriptions = persist.subscriptions.clone();
        let stored = std::mem::take(&mut persist.stored_positions);
        let stored = StoredPositions::index(&stored);
        let resend = std::mem::take(&mut persist.resend);
        self.qos2.adopt(std::mem::take(&mut persist.held_qos2));
        let Ok(app) = self.session.client().map(|c| c.app.clone()) else {
            return;
        };
        let has_filters = subscriptions.iter().any(|s| {
            matches!(
                topic_map::parse_filter(&app, &s.filter),
                Ok(FilterTarget::Wildcard(_))
            )
        });
        if has_filters {
            // Their deliveries wait while what they missed is found (`missed.rs`).
            persist.gate = Some(ResumeGate::closed());
        }
        let mut dropped = Vec::new();
        let mut counting = Vec::new();
        for sub in &subscriptions {
            if sub.filter.starts_with("$share/") {
                // Its group joined again; no position (`crate::shared`).
                if !crate::shared::resume(self, &sub.filter, granted_of(sub), &mut counting) {
                    dropped.push(sub.filter.clone());
                }
                continue;
            }
            let channel = match topic_map::parse_filter(&app, &sub.filter) {
                Ok(FilterTarget::Exact(channel)) => channel,
                // Registered again; what matched them while away is replayed below.
                Ok(FilterTarget::Wildcard(_)) => {
                    if !crate::wildcards::resume(self, &sub.filter, granted_of(sub)) {
                        dropped.push(sub.filter.clone());
                    }
                    continue;
                }
                Err(_) => {
                    dropped.push(sub.filter.clone());
                    continue;
                }
            };
            let denied = self
                .anonymous
                .as_ref()
                .is_some_and(|rules| rules.may_subscribe(&sub.filter).refusal_code().is_some());
            if denied {
                dropped.push(sub.filter.clone());
                continue;
            }
            let since = stored.get(&channel).map(|p| Cursor {
                epoch: Epoch::new(&p.epoch),
                seq: p.seq,
            });
            let request = SubscribeRequest {
                since,
                last: Some(false),
                replay_retained_if_lost: true,
            };
            self.subscriptions.insert(channel.clone(), granted_of(sub));
            let subscribed = self.subscribe_quietly(&channel, &request).await;
            match subscribed {
                Ok(opened) => {
                    if let Some(persist) = self.persist.as_mut() {
                        persist.follow(&channel, &opened.position, true);
                    }
                    if crate::sys::is_sys_topic(&sub.filter) {
                        self.follow_sys(&sub.filter, None);
                    }
                }
                Err(e) => {
                    tracing::debug!(
                        client_id = self.claim.client_id(),
                        filter = %sub.filter,
                        error = %e.message,
                        "MQTT: a stored subscription could not be resumed; dropped"
                    );
                    self.subscriptions.remove(&channel);
                    dropped.push(sub.filter.clone());
                }
            }
        }
        if let Some(persist) = self.persist.as_mut() {
            if !dropped.is_empty() {
                persist
                    .subscriptions
                    .retain(|s| !dropped.contains(&s.filter));
                persist.mark_subscriptions_changed();
            }
        }
        self.store_changed_subscriptions();
        if has_filters
            || subscriptions
                .iter()
                .any(|s| s.filter.starts_with("$share/"))
        {
            // In a cluster, once every node sends the app's messages to this node's filters
            // and this node counts itself among its shared groups' holders (as a SUBSCRIBE of
            // either is answered): what is published before that is in the logs the replay
            // lists, what after reaches the filters, behind the gate, and the groups. Without
            // it a message published on another node right after the CONNACK could miss both
            // (at once on one node).
            let registry = self.session.edge().engine.filters().clone();
            registry.feed_ready(&app).await;
            crate::shared::until_counted(&counting).await;
        }
        self.replay_missed(&stored).await;
        if let Some(persist) = self.persist.as_mut() {
            // Open now; the filters' admission keeps its own reference.
            persist.gate = None;
        }
        // What the replay does not bring again goes first (`resend.rs`).
        let resend = self.resend_unreplayed(resend).await;
        for sent in resend {
            if sent.released {
                self.send(&Packet::PubRel(PubRel::new(sent.id)));
            }
            self.outbound.reserve(sent);
        }
    }

    /// Records a subscription made (or its options replaced) by SUBSCRIBE: `filter` with
    /// `options` and what was granted (its QoS and Subscription Identifier), on `channel`
    /// from `position` (where its subscription started, `None` when it was not made again).
    pub(crate) fn session_subscribed(
        &mut self,
        filter: &str,
        options: &SubscriptionOptions,
        granted: Granted,
        channel: &ChannelName,
        position: Option<&Cursor>,
    ) {
        self.session_subscribed_filter(filter, options, granted);
        if let (Some(persist), Some(position)) = (self.persist.as_mut(), position) {
            persist.follow(channel, position, false);
        }
    }

    /// Records a subscription to `filter` with `options` and what was granted (its QoS and
    /// Subscription Identifier), made (or its options replaced) by SUBSCRIBE, without a
    /// channel to follow (a wildcard filter's, `crate::wildcards`).
    pub(crate) fn session_subscribed_filter(
        &mut self,
        filter: &str,
        options: &SubscriptionOptions,
        granted: Granted,
    ) {
        let Some(persist) = self.persist.as_mut() else {
            return;
        };
        let stored = StoredSubscription {
            filter: filter.to_owned(),
            qos: granted.qos.as_u8(),
            no_local: options.no_local,
            retain_as_published: options.retain_as_published,
            retain_handling: match options.retain_handling {
                RetainHandling::SendAtSubscribe => 0,
                RetainHandling::SendAtSubscribeIfNew => 1,
                RetainHandling::DoNotSend => 2,
            },
            subscription_identifier: granted.identifier.map(NonZeroU32::get),
            // A wildcard filter's: when it was made (kept when its options are replaced).
            since_ms: None,
        };
        let wildcard = filter.contains(['+', '#']);
        match persist
            .subscriptions
            .iter_mut()
            .find(|s| s.filter == filter)
        {
            Some(existing) => {
                let since_ms = existing.since_ms;
                *existing = StoredSubscription { since_ms, ..stored };
            }
            None => persist.subscriptions.push(StoredSubscription {
                since_ms: wildcard.then(now_ms),
                ..stored
            }),
        }
        persist.mark_subscriptions_changed();
    }

    /// Records the end of the subscription to wildcard `filter` by UNSUBSCRIBE; what only it
    /// followed is let go (`missed.rs`).
    pub(crate) fn session_unsubscribed_filter(&mut self, filter: &str) {
        if let Some(persist) = self.persist.as_mut() {
            persist.subscriptions.retain(|s| s.filter != filter);
            persist.mark_subscriptions_changed();
            self.drop_unmatched_replays();
        }
    }

    /// Whether `channel` is subscribed only to replay what a resumed wildcard filter missed
    /// (`missed.rs`); an exact SUBSCRIBE to it takes that subscription over.
    pub(crate) fn replaying_for_filter(&self, channel: &ChannelName) -> bool {
        self.persist
            .as_ref()
            .is_some_and(|p| p.filter_catchups.contains(channel))
    }

    /// An exact SUBSCRIBE took `channel`'s replay subscription over: it is the client's now.
    pub(crate) fn replay_taken_over(&mut self, channel: &ChannelName) {
        if let Some(persist) = self.persist.as_mut() {
            persist.filter_catchups.remove(channel);
        }
    }

    /// Hands the session's subscriptions to the flusher if they changed (SUBSCRIBE,
    /// UNSUBSCRIBE, a resume that dropped some): called once the packets of a read are handled,
    /// after a resume and at the session's end.
    pub(crate) fn store_changed_subscriptions(&mut self) {
        if let Some(persist) = self.persist.as_mut() {
            if let Some(write) = persist.changed_subscriptions() {
                persist.push(write);
            }
        }
    }

    /// Records the end of the subscription to `filter` (on `channel`) by UNSUBSCRIBE.
    pub(crate) fn session_unsubscribed(&mut self, filter: &str, channel: &ChannelName) {
        let Some(persist) = self.persist.as_mut() else {
            return;
        };
        persist.subscriptions.retain(|s| s.filter != filter);
        persist.mark_subscriptions_changed();
        persist.unfollow(channel);
    }

    /// Whether `channel` is catching up on what a resumed session missed (its subscription
    /// is not made again by a SUBSCRIBE that repeats it, which would lose what it has yet to
    /// replay [MQTT-3.8.4-3]).
    pub(crate) fn catching_up(&self, channel: &ChannelName) -> bool {
        self.persist
            .as_ref()
            .is_some_and(|p| p.catching_up.contains(channel))
    }

    /// `message` was handled (sent, skipped, or waiting); `awaits_ack` when it is sent at
    /// QoS 1 or 2.
    pub(crate) fn position_handled(&mut self, message: &SharedMessage, awaits_ack: bool) {
        let Some(persist) = self.persist.as_mut() else {
            return;
        };
        if !persist.positions.follows(&message.channel)
            && self.subscriptions.filter_matches(&message.channel)
        {
            // A wildcard filter's channel: followed from its first message, so what the
            // filter misses while the client is away replays from here (`missed.rs`).
            let before = Cursor {
                epoch: message.epoch.clone(),
                seq: message.seq.saturating_sub(1),
            };
            persist.follow(&message.channel, &before, false);
        }
        if let Some((epoch, seq)) =
            persist
                .positions
                .handled(&message.channel, &message.epoch, message.seq, awaits_ack)
        {
            persist.write_position(&message.channel, &epoch, seq);
        }
    }

    /// `message`, just handled awaiting an acknowledgement ([`Self::position_handled`]), awaits
    /// one more: it went out as several copies (v5, one per subscription).
    pub(crate) fn position_awaits_another(&mut self, message: &SharedMessage) {
        if let Some(persist) = self.persist.as_mut() {
            persist
                .positions
                .awaits_another(&message.channel, message.seq);
        }
    }

    /// The message `seq` of `channel` was acknowledged (PUBACK, PUBREC) or dropped.
    pub(crate) fn position_acknowledged(&mut self, channel: &ChannelName, seq: u64) {
        let Some(persist) = self.persist.as_mut() else {
            return;
        };
        if let Some((epoch, seq)) = persist.positions.acknowledged(channel, seq) {
            persist.write_position(channel, &epoch, seq);
        }
    }

    /// Stores packet id `id` of the QoS 2 `message` about to be sent with RETAIN as `retain`;
    /// returns the write's number for [`crate::inflight::Outbound::next_ready`]. When it
    /// committed the connection is woken to send it; if it failed the connection closes (the
    /// store is unavailable).
    pub(crate) fn persist_qos2(
        &mut self,
        message: &SharedMessage,
        id: std::num::NonZeroU16,
        retain: bool,
    ) -> u64 {
        let (n, persisted) = self.outbound.persisting();
        let Some(persist) = self.persist.as_ref() else {
            persisted.fetch_max(n, Ordering::Release);
            return n;
        };
        let outbox = self.session.outbox().clone();
        let done: Done = Box::new(move |result| {
            match result {
                Ok(()) => {
                    persisted.fetch_max(n, Ordering::Release);
                }
                Err(_) => {
                    outbox.close(CloseReason::StoreUnavailable);
                }
            }
            outbox.request_ping();
        });
        let write = SessionWrite::Inflight {
            key: persist.key(),
            inflight: StoredInflight {
                packet_id: id.get(),
                channel: message.channel.public().to_owned(),
                epoch: message.epoch.as_str().to_owned(),
                seq: message.seq,
                released: false,
                qos: 2,
                retain: Some(retain),
            },
        };
        persist.sessions.flusher.push_all(vec![write], Some(done));
        n
    }

    /// Stores packet id `id` of the QoS 1 `message` just sent for the first time with RETAIN
    /// as `retain` (group-committed, nothing waits for it; the write is cancelled in memory if
    /// its PUBACK comes before its batch goes), so the session resumed after a restart or on
    /// another node sends it again with the same id and RETAIN.
    pub(crate) fn persist_qos1(
        &self,
        message: &SharedMessage,
        id: std::num::NonZeroU16,
        retain: bool,
    ) {
        if let Some(persist) = self.persist.as_ref() {
            persist.push(SessionWrite::Inflight {
                key: persist.key(),
                inflight: StoredInflight {
                    packet_id: id.get(),
                    channel: message.channel.public().to_owned(),
                    epoch: message.epoch.as_str().to_owned(),
                    seq: message.seq,
                    released: false,
                    qos: 1,
                    retain: Some(retain),
                },
            });
        }
    }

    /// A QoS 1 message was acknowledged (PUBACK): its stored id is forgotten.
    pub(crate) fn qos1_acknowledged(&self, sent: &Sent) {
        if let Some(persist) = self.persist.as_ref() {
            persist.push(SessionWrite::Completed {
                key: persist.key(),
                packet_id: sent.id.get(),
            });
        }
    }

    /// A QoS 2 message was received by the client (its first PUBREC): its position moves and
    /// the stored id is marked released (a reconnect sends PUBREL, not the message, again).
    pub(crate) fn qos2_received(&mut self, sent: &Sent) {
        self.position_acknowledged(&sent.channel, sent.seq);
        if let Some(persist) = self.persist.as_ref() {
            persist.push(SessionWrite::Inflight {
                key: persist.key(),
                inflight: StoredInflight {
                    packet_id: sent.id.get(),
                    channel: sent.channel.public().to_owned(),
                    epoch: String::new(),
                    seq: sent.seq,
                    released: true,
                    qos: 2,
                    retain: sent.retain,
                },
            });
        }
    }

    /// A QoS 2 message was completed (PUBCOMP): its stored id is forgotten.
    pub(crate) fn qos2_completed(&mut self, sent: &Sent) {
        if let Some(persist) = self.persist.as_ref() {
            persist.push(SessionWrite::Completed {
                key: persist.key(),
                packet_id: sent.id.get(),
            });
        }
    }

    /// For a persistent session, what its next append writes of its inbound QoS 2 exchanges in
    /// its own transaction (core's `SessionHold`): the hold of packet id `id` whose message is
    /// stored with the key numbered `n`, when the append is that message's (so the PUBREC waits
    /// for that one commit), and the releases deferred since its last append (taken back from
    /// the flusher, so they cost no commit of their own). `None` for a clean session (its ids
    /// are held in memory only) and when there is nothing to write. Releases the append does
    /// not write go back with [`MqttWire::qos2_releases_unwritten`].
    pub(crate) fn qos2_session_write(
        &self,
        held: Option<(NonZeroU16, u64)>,
    ) -> Option<SessionHold> {
        let persist = self.persist.as_ref()?;
        let released = match persist.releases_deferred.swap(false, Ordering::Relaxed) {
            true => persist.sessions.flusher.take_releases(&persist.key),
            false => Vec::new(),
        };
        if held.is_none() && released.is_empty() {
            return None;
        }
        Some(SessionHold {
            app: persist.key.app.clone(),
            client_id: persist.key.client_id.clone(),
            held: held.map(|(id, n)| HeldPacket {
                packet_id: id.get(),
                n,
            }),
            released,
        })
    }

    /// For a persistent session, defers again the releases an append took
    /// ([`MqttWire::qos2_session_write`]) and did not write (it was refused or failed).
    pub(crate) fn qos2_releases_unwritten(&self, released: Vec<HeldPacket>) {
        if let Some(persist) = self.persist.as_ref() {
            for held in released {
                persist.defer_release(held);
            }
        }
    }

    /// For a persistent session, defers the release of inbound QoS 2 packet id `id`, held for
    /// the message with key number `n` (its PUBREL came) to a commit that happens anyway: the
    /// session's next append carries it, or the flusher's next batch, which goes within
    /// `flusher::RELEASE_WAITS_AT_MOST`; nothing waits for it. A crash can lose it after the
    /// PUBCOMP went: the hold left is then taken on by the session's next connection, where a
    /// PUBLISH without DUP on its id is a new message
    /// ([`crate::inflight::InboundQoS2::arrival`]).
    pub(crate) fn qos2_release_queued(&self, id: NonZeroU16, n: u64) {
        if let Some(persist) = self.persist.as_ref() {
            persist.defer_release(HeldPacket {
                packet_id: id.get(),
                n,
            });
        }
    }

    /// For a persistent session, the store write releasing inbound QoS 2 packet id `id` held
    /// for key number `n`, for an answer that must wait for it (a refusal of a held id's
    /// message: the client may reuse the id at once); `None` for a clean session.
    pub(crate) fn qos2_release_write(
        &self,
        id: NonZeroU16,
        n: u64,
    ) -> Option<impl Future<Output = Result<(), StoreError>> + 'static> {
        let persist = self.persist.as_ref()?;
        let flusher = persist.sessions.flusher.clone();
        let write = qos2_release(persist.key(), id, n);
        Some(async move { flusher.write(vec![write]).await })
    }

    /// A v5 DISCONNECT's Session Expiry Interval, held to the maximum.
    pub(crate) fn set_session_expiry(&mut self, secs: u32) {
        if let Some(persist) = self.persist.as_mut() {
            persist.expiry_ms = i64::from(persist.sessions.granted_expiry(secs)) * 1000;
        }
    }

    /// The connection ended: its will published, left waiting or discarded, its session's last
    /// positions and its end are written (or the session deleted, with an expiry interval of
    /// 0), and its unacknowledged QoS 1 messages' packet ids kept in memory for its next
    /// connection. Returns once written.
    pub(crate) async fn end_session(&mut self) {
        // What its shared subscriptions gave it and it did not acknowledge goes to another
        // member first (`crate::shared`).
        self.leave_shared_groups();
        // The will first: published now, or waiting for its delay with the session. A
        // persistent session's is stored with it (`crate::will`): published by whoever takes
        // it from the store, discarded there when it is not due.
        let had_will = self.will.is_some();
        let due = self.due_will();
        if self.is_fenced() && self.persist.is_some() {
            // Fenced (`crate::cluster`): the node that claims this one ends the session and
            // publishes its stored will, once; only what the session changed is written here.
            self.end_fenced_session().await;
            return;
        }
        let mut discarded = None;
        match (due, self.persist.as_deref()) {
            (Some(due), Some(persist)) => {
                let delay_ms = u64::from(due.will.properties.will_delay_interval) * 1000;
                if delay_ms > 0 && persist.expiry_ms > 0 {
                    // The delay, or the session's end if sooner [MQTT-3.1.3-9].
                    let expiry_ms = u64::try_from(persist.expiry_ms).unwrap_or(u64::MAX);
                    let wait = std::time::Duration::from_millis(delay_ms.min(expiry_ms));
                    persist.sessions.wills.wait(persist.key(), due, wait);
                } else {
                    persist.sessions.wills.publish_once(&persist.key, due).await;
                }
            }
            (Some(due), None) => crate::will::publish(due).await,
            (None, Some(persist)) if had_will => {
                discarded = Some(SessionWrite::WillDiscarded { key: persist.key() });
            }
            (None, _) => {}
        }
        let Some(mut persist) = self.persist.take() else {
            return;
        };
        let subscriptions = persist.changed_subscriptions();
        let unacked = self
            .outbound
            .unacknowledged()
            .filter(|s| s.qos == QoS::AtLeastOnce)
            .cloned()
            .collect();
        let key = persist.key();
        let write = if persist.expiry_ms == 0 {
            SessionWrite::Delete { key: key.clone() }
        } else {
            let carried = Carried { unacked };
            persist.sessions.keep_carried(key.clone(), carried);
            SessionWrite::Ended {
                key,
                at_ms: now_ms(),
                expiry_ms: persist.expiry_ms,
            }
        };
        let writes = subscriptions
            .into_iter()
            .chain(discarded)
            .chain([write])
            .collect();
        if let Err(e) = persist.sessions.flusher.write(writes).await {
            tracing::warn!(
                client_id = self.claim.client_id(),
                error = %e,
                "MQTT: the end of a persistent session could not be stored"
            );
        }
    }

    /// The end of a persistent session's connection on a fenced node: its changed
    /// subscriptions written (its positions went as they were acknowledged), nothing that
    /// ends it (no `Ended`, no will taken or discarded, no QoS 1 packet ids kept): the
    /// session stays the fenced node's in the store until the node that claims it ends it
    /// from when it was last seen and publishes its stored will.
    async fn end_fenced_session(&mut self) {
        let Some(mut persist) = self.persist.take() else {
            return;
        };
        let writes: Vec<SessionWrite> = persist.changed_subscriptions().into_iter().collect();
        if writes.is_empty() {
            return;
        }
        if let Err(e) = persist.sessions.flusher.write(writes).await {
            tracing::warn!(
                client_id = persist.key.client_id.as_str(),
                error = %e,
                "MQTT: a fenced session's subscriptions could not be stored"
            );
        }
    }
}
