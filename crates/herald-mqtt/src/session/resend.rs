//! What a resumed persistent session sends again ahead of its replay: the QoS 1 and 2 PUBLISH
//! packets in flight when its last connection ended that the replay does not bring again
//! (MQTT 5.0 [MQTT-4.4.0-1], 3.1.1 section 4.4: unacknowledged PUBLISH packets go again with
//! their original packet identifiers and DUP set when a session resumes).
//!
//! A resumed session's in-flight messages (`Sent`: kept in memory by its last connection in
//! this process, and stored, `session/store.rs`) mostly lie in its replay: above the position
//! their channel resumes from (`connection.rs`, `missed.rs`), so the replay brings them again
//! and each takes its old packet id with DUP (`Outbound::resend_of`). Some do not:
//! - a **retained message sent at SUBSCRIBE**: an exact subscription's channel resumes from
//!   the head the subscription started at, which is at or past it; a wildcard filter's
//!   retained message stored before the filter was made starts no stored position, and its
//!   channel replays from the filter's time (`missed.rs`);
//! - a message of a channel no subscription of the session replays now (unsubscribed while it
//!   was in flight, a subscription the client's permissions no longer allow, a channel past
//!   `mqtt.max_offline_channels_per_filter`), or one granted QoS 0 now;
//! - a message the channel's history trimmed below where its replay starts;
//! - a message the replay was to bring whose channel the client **unsubscribed** (or
//!   subscribed again at QoS 0) before the replay reached it: after each SUBSCRIBE and
//!   UNSUBSCRIBE the reserved ids are looked at again ([`MqttWire::resend_no_longer_replayed`])
//!   and those the replay no longer covers go as below; an UNSUBSCRIBE does not stop a QoS 1
//!   or 2 delivery already started ([MQTT-3.10.4-3]).
//!
//! Those ([`MqttWire::resend_unreplayed`]) are read again by what the entry records (channel,
//! epoch, seq): from the channel's log, else from the retained store (a retained message the
//! history trimmed). Found, each goes **before the replay and the live messages**, in the
//! order first sent, with its packet id, DUP 1 and RETAIN as first sent: the outbound queue of
//! waiting messages takes them (`Outbound::resend_now`), which every batch writes first and
//! which holds everything after it back, within the client's Receive Maximum. **Gone** (trimmed
//! and no longer the channel's retained message, its log reset to a new epoch) or **expired**
//! (its Message Expiry Interval passed: not sent, [MQTT-3.3.2-5]), its packet id is released:
//! forgotten, and its stored row deleted, so no id stays taken for the session's life (which
//! also kept its connections from parking). A read that fails leaves the row for the session's
//! next connection. A replay that passes over a reserved id (its message trimmed after the
//! resume looked) releases it too ([`MqttWire::release_passed_over`]).
//!
//! **RETAIN** of a resend is the first send's (the same packet again): a retained message sent
//! at SUBSCRIBE carries RETAIN 1 ([MQTT-3.3.1-8]; MQTT 5.0 3.3.1.3), a message sent through an
//! established subscription RETAIN 0 or, with Retain As Published, as published
//! ([MQTT-3.3.1-9], [MQTT-3.3.1-12], [MQTT-3.3.1-13]). The store keeps it with the packet id
//! (`StoredInflight::retain`, written where the id is: before a QoS 2 PUBLISH goes, once a
//! QoS 1 one went), as does the connection before in this process (`Sent::retain`). Only for
//! a row written before the store kept it (SQLite migration 17, PostgreSQL 15: NULL) is it
//! worked out as before: one the replay does not cover whose channel a subscription of the
//! session (exact or wildcard, not shared) matches went as the retained message at SUBSCRIBE
//! (a message below where its subscription's replay starts is in flight only so, except after
//! a SUBSCRIBE repeated while a live one was in flight, which this guess gets wrong), RETAIN 1;
//! one no such subscription matches, RETAIN 0.
//!
//! **Order**: the order first sent: the store's entries in packet identifier order read on
//! from the widest gap between the ids (ids are taken in turn and wrap after 65,535). The
//! store is the list: a connection's end commits its packet ids before the session can resume,
//! so an entry only in memory was acknowledged since, on a node the session went to and came
//! back from ([`in_sent_order`]).

use std::num::NonZeroU16;

use herald_core::engine::Engine;
use herald_core::log::ReadFrom;
use herald_core::message::SharedMessage;
use herald_core::HeraldError;

use crate::inflight::Sent;
use crate::outbound;
use crate::packet::QoS;
use crate::wire::{now_ms, MqttWire};

impl MqttWire {
    /// Sends again now, ahead of the replay, the messages of `resend` (a resumed session's
    /// in-flight messages, in the order first sent) that the replay set up by
    /// [`MqttWire::resume_session`] does not bring again, and releases the ids of those gone
    /// (see the module doc); returns the rest, for the replay to send again (and the QoS 2
    /// ones released, whose PUBREL goes again).
    pub(super) async fn resend_unreplayed(&mut self, resend: Vec<Sent>) -> Vec<Sent> {
        let mut for_replay = Vec::with_capacity(resend.len());
        let mut resent = 0usize;
        let engine = self.session.edge().engine.clone();
        for sent in resend {
            if sent.released || self.replay_covers(&sent) {
                for_replay.push(sent);
                continue;
            }
            match find_sent(&engine, &sent).await {
                Ok(Some(message)) if !expired(&message) => {
                    let retain = sent.retain.unwrap_or_else(|| self.subscribed(&sent));
                    self.outbound.resend_now(&sent, message, retain);
                    resent += 1;
                }
                Ok(_) => self.release_unsent(&sent),
                Err(e) => tracing::warn!(
                    client_id = self.claim.client_id(),
                    channel = sent.channel.public(),
                    seq = sent.seq,
                    error = %e.message,
                    "MQTT: a resumed session's unacknowledged message could not be read to be \
                     sent again; its packet identifier is left to the session's next connection"
                ),
            }
        }
        if resent > 0 {
            // Nothing else may be queued to wake the writer: the resends go at once.
            self.session.outbox().request_ping();
        }
        for_replay
    }

    /// After a SUBSCRIBE or UNSUBSCRIBE of a resumed session: the reserved ids whose message
    /// the replay was to bring and no longer will (its channel unsubscribed before the replay
    /// reached it, or granted QoS 0 now) are sent now as [`MqttWire::resend_unreplayed`]
    /// sends those at the resume, in the order first sent; the others stay reserved for the
    /// replay. An UNSUBSCRIBE does not stop a QoS 1 or 2 delivery already started: it
    /// completes ([MQTT-3.10.4-3]; MQTT 3.1.1 3.10.4).
    pub(crate) async fn resend_no_longer_replayed(&mut self) {
        let reserved = self.outbound.take_reserved();
        if reserved.is_empty() {
            return;
        }
        let (covered, unreplayed): (Vec<Sent>, Vec<Sent>) =
            reserved.into_iter().partition(|s| self.replay_covers(s));
        for sent in covered {
            self.outbound.reserve(sent);
        }
        for sent in self.resend_unreplayed(unreplayed).await {
            // Not reached: none of them is covered any more, nor released.
            self.outbound.reserve(sent);
        }
    }

    /// Whether the replay brings `sent`'s message again: a subscription of the connection
    /// replays its channel (an exact one, or one made for what a wildcard filter missed) from
    /// below it in its epoch, at QoS 1 or 2.
    fn replay_covers(&self, sent: &Sent) -> bool {
        let Some(persist) = self.persist.as_ref() else {
            return false;
        };
        let replays = self.subscriptions.exact(&sent.channel).is_some()
            || persist.filter_catchups.contains(&sent.channel);
        let at_qos =
            (self.subscriptions.get(&sent.channel)).is_some_and(|g| g.qos != QoS::AtMostOnce);
        let from = persist.positions.at(&sent.channel);
        replays && at_qos && from.is_some_and(|(epoch, seq)| *epoch == sent.epoch && seq < sent.seq)
    }

    /// Whether a subscription of the session (exact or wildcard, not shared) matches `sent`'s
    /// channel: an entry read from the store that the replay does not cover went as the
    /// retained message at SUBSCRIBE then (see the module doc).
    fn subscribed(&self, sent: &Sent) -> bool {
        self.subscriptions.exact(&sent.channel).is_some()
            || self.subscriptions.filter_matches(&sent.channel)
    }

    /// Forgets `sent`, whose message will not be sent again: its stored packet id is deleted.
    fn release_unsent(&mut self, sent: &Sent) {
        tracing::debug!(
            client_id = self.claim.client_id(),
            channel = sent.channel.public(),
            seq = sent.seq,
            packet_id = sent.id.get(),
            "MQTT: a resumed session's unacknowledged message is gone or expired; its packet \
             identifier is released"
        );
        self.qos1_acknowledged(sent);
    }

    /// `message` comes in its channel's replay: the ids reserved for messages of the channel
    /// it passed over (gone from the log when the replay read it) are released.
    pub(crate) fn release_passed_over(&mut self, message: &SharedMessage) {
        for sent in self.outbound.passed_over(message) {
            self.release_unsent(&sent);
        }
    }
}

/// `sent`'s message, by its channel, epoch and seq: from the channel's log, else from its
/// retained store; `None` when neither has it any more.
async fn find_sent(engine: &Engine, sent: &Sent) -> Result<Option<SharedMessage>, HeraldError> {
    let is_it = |m: &SharedMessage| m.seq == sent.seq && m.epoch == sent.epoch;
    let slice = engine
        .read(
            &sent.channel,
            ReadFrom::After(sent.seq.saturating_sub(1)),
            1,
        )
        .await?;
    if let Some(message) = slice.messages.into_iter().next().filter(is_it) {
        return Ok(Some(message));
    }
    Ok(engine.retained(&sent.channel).await?.filter(is_it))
}

/// Whether `message`'s Message Expiry Interval has passed.
fn expired(message: &SharedMessage) -> bool {
    outbound::outgoing(message)
        .props
        .expiry_at_ms
        .is_some_and(|at| at <= now_ms())
}

/// A resumed session's in-flight messages in the order first sent: `stored` (the session's
/// store's) by packet id read on from the widest gap between the ids, each with what
/// `carried` (its last connection's in this process, in the order sent) knows of it. One
/// only `carried` has is not taken: a connection's end commits its packet ids before the
/// session can be resumed, so one missing from the store was acknowledged since (the session
/// went to another node and back) or its write failed.
pub(super) fn in_sent_order(carried: Vec<Sent>, mut stored: Vec<Sent>) -> Vec<Sent> {
    stored.sort_by_key(|s| s.id);
    if let Some(start) = after_widest_gap(stored.iter().map(|s| s.id)) {
        stored.rotate_left(start);
    }
    for sent in &mut stored {
        let same = |c: &&Sent| c.id == sent.id && c.channel == sent.channel && c.seq == sent.seq;
        if let Some(known) = carried.iter().find(same) {
            sent.retain = known.retain;
        }
    }
    stored
}

/// Where packet ids `ids` (ascending) start in the order they were taken: after the widest
/// gap between two of them, the gap from the last round to the first included.
fn after_widest_gap(ids: impl ExactSizeIterator<Item = NonZeroU16>) -> Option<usize> {
    let ids: Vec<u32> = ids.map(|id| u32::from(id.get())).collect();
    let (first, last) = (*ids.first()?, *ids.last()?);
    let mut widest = (first + u32::from(u16::MAX) - last, 0);
    for (at, pair) in ids.windows(2).enumerate() {
        let gap = pair[1] - pair[0];
        if gap > widest.0 {
            widest = (gap, at + 1);
        }
    }
    Some(widest.1)
}

#[cfg(test)]
mod tests {
    use herald_core::{ChannelName, Epoch};

    use super::*;

    fn sent(id: u16, seq: u64, retain: Option<bool>) -> Sent {
        Sent {
            id: NonZeroU16::new(id).unwrap(),
            channel: ChannelName::parse("t/r").unwrap(),
            epoch: Epoch::new("e"),
            seq,
            retain,
            qos: QoS::AtLeastOnce,
            released: false,
        }
    }

    fn ids(list: &[Sent]) -> Vec<u16> {
        list.iter().map(|s| s.id.get()).collect()
    }

    #[test]
    fn stored_ids_are_read_in_the_order_taken_across_the_wrap() {
        let stored = vec![sent(2, 4, None), sent(65535, 2, None), sent(1, 3, None)];
        let stored = vec![sent(65534, 1, None)]
            .into_iter()
            .chain(stored)
            .collect();
        assert_eq!(
            ids(&in_sent_order(Vec::new(), stored)),
            [65534, 65535, 1, 2]
        );
        let plain = vec![sent(9, 3, None), sent(7, 1, None), sent(8, 2, None)];
        assert_eq!(ids(&in_sent_order(Vec::new(), plain)), [7, 8, 9]);
        assert!(in_sent_order(Vec::new(), Vec::new()).is_empty());
    }

    #[test]
    fn what_memory_knows_of_a_stored_id_is_kept_and_what_only_it_has_is_stale() {
        let carried = vec![sent(5, 1, Some(true)), sent(6, 2, Some(false))];
        let stored = vec![sent(5, 1, None)];
        let order = in_sent_order(carried, stored);
        assert_eq!(ids(&order), [5], "6 was acknowledged elsewhere");
        assert_eq!(order[0].retain, Some(true), "known from memory");
        // A stored row of another message under the id wins, with nothing known of it.
        let order = in_sent_order(vec![sent(5, 1, Some(true))], vec![sent(5, 9, None)]);
        assert_eq!((order.len(), order[0].seq, order[0].retain), (1, 9, None));
    }
}
