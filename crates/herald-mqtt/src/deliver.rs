//! Writing a channel message to one MQTT connection: which subscriptions it came through and
//! what each was granted (QoS, Retain As Published, No Local; a v5 connection sends one copy
//! per matching subscription, a 3.1.1 connection one delivery: `crate::subscriptions`; each
//! copy awaiting its acknowledgement holds the session's position), whether it is sent
//! at all (a retained clear is no retained message, an expired message is not sent
//! [MQTT-3.3.2-5], a packet over the client's Maximum Packet Size is dropped [MQTT-3.1.2-24]),
//! and at QoS 1 or 2 a packet identifier within the client's Receive Maximum, or a wait for one
//! ([`crate::inflight`]). A persistent session's position moves as messages are handled
//! (`crate::session`), and its QoS 2 messages wait until their packet identifier is stored. The
//! bytes come from the message's shared encoding ([`crate::outbound`]), or, for a v5 message
//! with a Message Expiry Interval, from an encoding of this delivery's own; a v5 connection adds
//! the copy's Subscription Identifier (or the one delivery's, every matching subscription's) and
//! its Topic Alias (`topic_aliases.rs`) to either. A resumed session's copy goes again with the
//! packet id it was sent with before (one sent at its QoS first), and a QoS 2 copy the client
//! had received (PUBREC) is not sent again.

use std::num::NonZeroU16;

use bytes::BytesMut;
use herald_core::message::SharedMessage;

use crate::inflight::Waiting;
use crate::origin;
use crate::outbound::{self, Delivery, Extras};
use crate::packet::{self, Packet, ProtocolVersion, QoS, TopicName};
use crate::subscriptions::{Granted, Via};
use crate::topic_aliases::Alias;
use crate::wire::{now_ms, MqttWire};

/// Whether `message`, a channel's last one, is sent as its retained message on subscribe:
/// one published over MQTT (a PUBLISH or a will) only if it had RETAIN set; a message of any
/// other transport, which has no RETAIN flag, always (a channel's last message is sent on
/// subscribe, docs/mqtt.md "Retained messages"). A retained clear is one too, and is then not
/// sent (`write_message`).
fn is_retained_message(message: &SharedMessage) -> bool {
    origin::of(message).client_id.is_none() || outbound::outgoing(message).retain
}

/// How a message is to go out at QoS 1 or 2: its QoS, its packet id if it has one already,
/// DUP.
type Send = (QoS, Option<NonZeroU16>, bool);

/// What one copy of a message (one per subscription on v5, else the one delivery) does.
enum Copy {
    /// It is not sent (its own message under No Local, a QoS 0 message a resumed filter
    /// missed, a retained clear, expired, or a QoS 2 copy the client received before).
    Skipped,
    /// It goes out with RETAIN as `retain`, at QoS 0 (`send` is `None`) or as `send` says,
    /// carrying the Subscription Identifiers `via` says.
    Publish {
        retain: bool,
        send: Option<Send>,
        via: Via,
    },
}

impl Copy {
    fn awaits_ack(&self) -> bool {
        matches!(self, Copy::Publish { send: Some(_), .. })
    }
}

/// What every copy of one message shares, worked out once.
struct Facts {
    /// Sent on subscribe as the channel's retained message.
    retained: bool,
    /// Replayed to a resumed session (what it missed), not as a retained message.
    resuming: bool,
    /// Replayed for a resumed session's wildcard filter (`crate::session`).
    for_filter: bool,
    /// Not sent through any subscription: a retained clear, or expired.
    dropped: bool,
    /// Published by this client (No Local; only looked at when a subscription has No Local).
    own: bool,
    /// Published with RETAIN set (Retain As Published).
    published_retain: bool,
    /// The QoS it was published with.
    published_qos: QoS,
}

impl MqttWire {
    /// Appends a message as PUBLISH packets to `out` (or keeps them waiting for the window, or
    /// for their packet ids to be stored): one per matching subscription on v5, else one
    /// (`crate::subscriptions`); returns the bytes appended.
    pub(crate) fn write_message(
        &mut self,
        out: &mut Vec<u8>,
        message: &SharedMessage,
        replayed: bool,
    ) -> usize {
        // A SUBSCRIBE's retained message of a channel a resumed session is catching up on,
        // told from the channel's replay (`crate::session`'s `retained_apart.rs`).
        let at_subscribe = replayed && self.retained_at_subscribe(message);
        let Some(granted) = self.subscriptions.get(&message.channel) else {
            return 0;
        };
        // Replayed on subscribe is the retained message, unless a resumed session is catching
        // up on what it missed.
        // An inbox's catch-up is never retained: it is what the device has not acknowledged.
        let retained = replayed
            && (at_subscribe || !self.catching_up(&message.channel))
            && !crate::inbox::is_inbox_log(&message.channel);
        // A retained message sent at SUBSCRIBE to a channel being caught up on is apart from
        // its replay: it moves no position (the replay's messages below it are still to come).
        let moves_position = !at_subscribe;
        if replayed && !retained {
            // A resumed session's replay: ids reserved for messages of the channel it passed
            // over (gone from the log) are released (`crate::session`'s `resend.rs`).
            self.release_passed_over(message);
        }
        // A retained message answers its SUBSCRIBE: one delivery (`crate::subscriptions`).
        let copies = match self.version {
            ProtocolVersion::V5 if !retained => self.subscriptions.copies(&message.channel),
            _ => None,
        };
        if crate::sys::is_sys(message) {
            // The `$SYS/` tree's: at QoS 0, retained when sent on subscribe, no position.
            let Some(copies) = copies else {
                return self.write_publish(out, message, replayed, None, Via::AllMatching);
            };
            return (copies.iter())
                .map(|g| self.write_publish(out, message, replayed, None, Via::One(g.identifier)))
                .sum();
        }
        if retained && !is_retained_message(message) {
            // A channel's last message published over MQTT with RETAIN 0 is no retained message
            // [MQTT-3.3.1-12] (MQTT 5.0 3.3.1.3); nor is a will with Will Retain 0
            // [MQTT-3.1.2-16] (v5: [MQTT-3.1.2-14]).
            if moves_position {
                self.position_handled(message, false);
            }
            return 0;
        }
        // A wildcard SUBSCRIBE's retained message and a live copy of it go out once, in order
        // (`retained_window.rs`); a resumed session's replay is no live copy: it goes whole.
        let replay = replayed && !retained;
        if !replay && !self.subscriptions.window_passes(message, retained) {
            return 0;
        }
        let outgoing = outbound::outgoing(message);
        let origin = origin::of(message);
        // Whose message it is matters only to a subscription with No Local.
        let no_local = match &copies {
            Some(copies) => copies.iter().any(|g| g.no_local),
            None => granted.no_local,
        };
        let facts = Facts {
            retained,
            resuming: replayed && !retained,
            for_filter: replayed && self.replaying_for_filter(&message.channel),
            dropped: (retained && outgoing.clear)
                || outgoing.props.expiry_at_ms.is_some_and(|at| at <= now_ms()),
            own: no_local && origin.is_client(self.claim.client_id()),
            published_retain: outgoing.retain,
            published_qos: origin.qos,
        };
        drop(outgoing);
        let Some(copies) = copies else {
            // One delivery (the common case: one subscription, or 3.1.1).
            let copy = self.copy_of(message, &facts, granted, Via::AllMatching);
            if moves_position {
                self.position_handled(message, copy.awaits_ack());
            }
            return self.write_copy(out, message, copy);
        };
        let copies: Vec<Copy> = (copies.into_iter())
            .map(|g| self.copy_of(message, &facts, g, Via::One(g.identifier)))
            .collect();
        let awaiting = copies.iter().filter(|c| c.awaits_ack()).count();
        if moves_position {
            self.position_handled(message, awaiting > 0);
            for _ in 1..awaiting {
                self.position_awaits_another(message);
            }
        }
        (copies.into_iter())
            .map(|copy| self.write_copy(out, message, copy))
            .sum()
    }

    /// What the copy of `message` through a subscription granted `granted` does.
    fn copy_of(
        &mut self,
        message: &SharedMessage,
        facts: &Facts,
        granted: Granted,
        via: Via,
    ) -> Copy {
        // What a resumed wildcard filter missed is replayed at QoS 1 and 2 only (QoS 0 is not
        // kept for an offline session, as Mosquitto's default): `crate::session`.
        let missed_qos0 =
            facts.for_filter && granted.qos.min(facts.published_qos) == QoS::AtMostOnce;
        let skipped = (granted.no_local && facts.own) || missed_qos0 || facts.dropped;
        let retain = facts.retained || (granted.retain_as_published && facts.published_retain);
        // A retained message sent at SUBSCRIBE is a new delivery: an id reserved for the
        // message is its replay's.
        let resend = match granted.qos {
            QoS::AtMostOnce => None,
            _ if facts.retained => None,
            qos => self.outbound.resend_of(message, qos),
        };
        if skipped {
            return Copy::Skipped;
        }
        let send = match resend {
            Some((id, qos)) => (qos, Some(id), true),
            // The lower of the QoS it was published with and the granted one [MQTT-3.8.4-8].
            None => (granted.qos.min(facts.published_qos), None, false),
        };
        if send.0 == QoS::ExactlyOnce
            && send.1.is_none()
            && facts.resuming
            && self.outbound.received_before(message)
        {
            // Its PUBREC came before the session resumed: its PUBREL goes again instead.
            return Copy::Skipped;
        }
        Copy::Publish {
            retain,
            send: (send.0 != QoS::AtMostOnce).then_some(send),
            via,
        }
    }

    /// Writes one copy of `message` whose position was handled (or keeps it waiting).
    fn write_copy(&mut self, out: &mut Vec<u8>, message: &SharedMessage, copy: Copy) -> usize {
        let Copy::Publish { retain, send, via } = copy else {
            return 0;
        };
        let Some((qos, id, dup)) = send else {
            return self.write_publish(out, message, retain, None, via);
        };
        // Handed to another member of its group should the connection end unacknowledged.
        self.subscriptions.shared.track(message);
        if qos == QoS::ExactlyOnce && id.is_none() && self.persist.is_some() {
            // Its packet id is stored before the PUBLISH goes, so a restart resends it with
            // the same id: it waits for the write.
            let id = self.outbound.free_id();
            let persist = self.persist_qos2(message, id, retain);
            self.outbound.wait(Waiting {
                message: message.clone(),
                retain,
                qos,
                id: Some(id),
                dup: false,
                persist,
                via,
            });
            return 0;
        }
        if !self.outbound.has_room() {
            self.outbound.wait(Waiting {
                message: message.clone(),
                retain,
                qos,
                id,
                dup,
                persist: 0,
                via,
            });
            return 0;
        }
        self.write_publish(out, message, retain, Some((qos, id, dup)), via)
    }

    /// Sends what waited (for the window, or for its packet id to be stored) as far as it may
    /// go now, in order; returns the packets' ends in `out`.
    pub(crate) fn write_waiting(&mut self, out: &mut Vec<u8>, cuts: &mut Vec<usize>) {
        while let Some(w) = self.outbound.next_ready() {
            let send = (w.qos, w.id, w.dup);
            if self.write_publish(out, &w.message, w.retain, Some(send), w.via) > 0 {
                cuts.push(out.len());
            }
        }
    }

    /// Appends the PUBLISH of `message` to `out`, at QoS 0 (`send` is `None`) or as `send`
    /// says, with the Subscription Identifiers `via` says, recording it in flight; returns its
    /// length. A message that cannot be sent (over the client's Maximum Packet Size) is dropped
    /// and counts as acknowledged.
    pub(crate) fn write_publish(
        &mut self,
        out: &mut Vec<u8>,
        message: &SharedMessage,
        retain: bool,
        send: Option<Send>,
        via: Via,
    ) -> usize {
        let expiry = outbound::outgoing(message).props.expiry_at_ms;
        let extras = self.extras(message, via);
        let written = if let (ProtocolVersion::V5, Some(at)) = (self.version, expiry) {
            self.write_expiring(out, message, retain, send, at, extras)
        } else {
            self.write_shared(out, message, retain, send, extras)
        };
        if written == 0 && send.is_some() {
            self.subscriptions
                .shared
                .settled(&message.channel, message.seq);
            self.position_acknowledged(&message.channel, message.seq);
        }
        written
    }

    /// Records `message` sent with packet id `id` at `qos` (1 or 2) and RETAIN as `retain`,
    /// awaiting its acknowledgement; a persistent session's QoS 1 id is stored when it is sent
    /// the first time (a QoS 2 one was stored before it was sent; a resend's is stored already).
    fn record_sent(
        &mut self,
        id: NonZeroU16,
        message: &SharedMessage,
        (qos, dup): (QoS, bool),
        retain: bool,
    ) {
        self.outbound.sent(id, message, qos, retain);
        if qos == QoS::AtLeastOnce && !dup {
            self.persist_qos1(message, id, retain);
        }
    }

    /// What this connection adds to `message`'s PUBLISH (v5): the Subscription Identifiers
    /// `via` says (the Topic Alias is set as it is written, [`Self::alias_for`]).
    fn extras(&self, message: &SharedMessage, via: Via) -> Extras {
        if self.version != ProtocolVersion::V5 {
            return Extras::default();
        }
        let identifiers = match via {
            Via::AllMatching => self.subscriptions.identifiers(&message.channel),
            Via::One(identifier) => identifier.into_iter().collect(),
        };
        Extras {
            alias: None,
            identifiers,
        }
    }

    /// Sets `extras`' Topic Alias for a PUBLISH of `topic` (v5, when the client takes aliases);
    /// true when the alias is a new one, to be assigned once the PUBLISH is sure to go.
    fn alias_for(&self, topic: &[u8], extras: &mut Extras) -> bool {
        if self.version != ProtocolVersion::V5 {
            return false;
        }
        match self.topic_aliases.lookup(topic) {
            Alias::None => false,
            Alias::Known(alias) => {
                extras.alias = Some((alias, true));
                false
            }
            Alias::New(alias) => {
                extras.alias = Some((alias, false));
                true
            }
        }
    }

    fn write_shared(
        &mut self,
        out: &mut Vec<u8>,
        message: &SharedMessage,
        retain: bool,
        send: Option<Send>,
        extras: Extras,
    ) -> usize {
        let shared = outbound::shared(message, self.version);
        if shared.is_empty() {
            return 0;
        }
        let mut extras = extras;
        let topic = outbound::topic_of(shared);
        let alias = self.alias_for(topic, &mut extras);
        let len = match send {
            _ if !extras.is_empty() => outbound::len_v5(shared, send.is_some(), &extras),
            None => shared.len(),
            Some(_) => outbound::len_at_qos1(shared),
        };
        // Never more than the client said it takes [MQTT-3.1.2-24]: the message is dropped.
        if len > self.client_max_packet as usize {
            return 0;
        }
        if alias {
            self.topic_aliases.assign(topic);
        }
        let delivery = send.map(|(qos, id, dup)| Delivery {
            id: id.unwrap_or_else(|| self.outbound.free_id()),
            qos,
            dup,
        });
        if let Some(d) = delivery {
            self.record_sent(d.id, message, (d.qos, d.dup), retain);
        }
        if !extras.is_empty() {
            return outbound::write_v5(out, shared, retain, delivery, &extras);
        }
        outbound::write(out, shared, retain, delivery)
    }

    /// A message with a Message Expiry Interval, encoded for this delivery with the time left
    /// (v5 only: 3.1.1 has no properties, and takes the shared encoding).
    fn write_expiring(
        &mut self,
        out: &mut Vec<u8>,
        message: &SharedMessage,
        retain: bool,
        send: Option<Send>,
        expires_at_ms: u64,
        extras: Extras,
    ) -> usize {
        let left_ms = expires_at_ms.saturating_sub(now_ms());
        let Some(mut publish) = outbound::publish_packet(message) else {
            return 0;
        };
        publish.retain = retain;
        let mut extras = extras;
        let topic = publish.topic.clone();
        let new_alias = self.alias_for(topic.as_str().as_bytes(), &mut extras);
        publish.properties.subscription_identifiers = extras.identifiers;
        if let Some((alias, left_out)) = extras.alias {
            publish.properties.topic_alias = Some(alias);
            if left_out {
                publish.topic = TopicName::default();
            }
        }
        publish.properties.message_expiry_interval = Some(
            u32::try_from(left_ms.div_ceil(1000))
                .unwrap_or(u32::MAX)
                .max(1),
        );
        if let Some((qos, _, dup)) = send {
            publish.qos = qos;
            publish.dup = dup;
            // A placeholder for the length; the real id is taken once it fits.
            publish.packet_id = NonZeroU16::new(1);
        }
        let mut publish = Packet::Publish(publish);
        if packet::encoded_len(&publish, self.version) > self.client_max_packet as usize {
            return 0;
        }
        if new_alias {
            self.topic_aliases.assign(topic.as_str().as_bytes());
        }
        if let (Packet::Publish(p), Some((qos, id, dup))) = (&mut publish, send) {
            let id = id.unwrap_or_else(|| self.outbound.free_id());
            p.packet_id = Some(id);
            self.record_sent(id, message, (qos, dup), retain);
        }
        let mut bytes = BytesMut::new();
        match packet::encode(&publish, self.version, &mut bytes) {
            Ok(()) => {
                out.extend_from_slice(&bytes);
                bytes.len()
            }
            Err(_) => 0,
        }
    }
}
