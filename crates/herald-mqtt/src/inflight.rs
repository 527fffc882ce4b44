//! Packet identifiers and the QoS state of one connection, both ways.
//!
//! - **Out** ([`Outbound`]): the QoS 1 and 2 PUBLISH packets sent and not yet acknowledged
//!   (PUBACK; PUBREC then PUBCOMP), each with its channel and seq (a persistent session's
//!   position moves on their acknowledgement), at most the client's Receive Maximum of them
//!   [MQTT-3.3.4-7]; messages that find the window full wait here, in order, until an
//!   acknowledgement frees room. Their bytes are counted, so a client that never acknowledges
//!   is closed as a slow consumer rather than holding an unbounded queue. A persistent
//!   session's QoS 2 message is given its packet id when it is handled and waits until that id
//!   is stored (`crate::session`): the PUBLISH is never sent before a restart could resend it
//!   with the same id. Messages of a resumed session that were in flight before keep their ids
//!   ([`Outbound::reserve`]) and go again with DUP set [MQTT-4.4.0-1].
//! - **In** ([`InboundQoS2`]): the packet ids of QoS 2 PUBLISH packets stored and answered with
//!   PUBREC whose PUBREL has not come yet. A PUBLISH that reuses a held id is the same message
//!   sent again [MQTT-4.3.3-9]: it is not stored twice. Each held id keeps the idempotency key
//!   its message was stored with, `mqtt:{client id}:{packet id}:{n}`, `n` counted per
//!   connection from the connection's start time, so a packet id reused for a new message after
//!   PUBCOMP is a new key (packet ids are reused; the key must not be). A persistent session
//!   also stores its held ids, each in its message's append (`crate::inbound`,
//!   `crate::session`), so they hold after a restart and on another node; a held id taken on
//!   from the store is the same message only when it comes with DUP ([`InboundQoS2::arrival`]).

use std::collections::VecDeque;
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use herald_core::message::SharedMessage;
use herald_core::{ChannelName, Epoch};

use crate::packet::QoS;
use crate::subscriptions::Via;

/// A message waiting to be sent: for room in the window, or for its packet id to be stored.
pub(crate) struct Waiting {
    /// The message.
    pub(crate) message: SharedMessage,
    /// It is sent with RETAIN set.
    pub(crate) retain: bool,
    /// The QoS it goes out with (1 or 2).
    pub(crate) qos: QoS,
    /// Its packet id, when it has one already (a resend's, or a stored QoS 2 id).
    pub(crate) id: Option<NonZeroU16>,
    /// It is sent again: DUP set.
    pub(crate) dup: bool,
    /// The store write of its packet id it waits for (0: none).
    pub(crate) persist: u64,
    /// The Subscription Identifiers it carries (v5): its subscription's, or every matching one's.
    pub(crate) via: Via,
}

/// A QoS 1 or 2 PUBLISH sent (or about to be sent again) and not yet acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sent {
    /// Its packet id.
    pub(crate) id: NonZeroU16,
    /// Its channel.
    pub(crate) channel: ChannelName,
    /// Its channel's epoch (a resumed session reads the message again by it,
    /// `crate::session`'s `resend.rs`).
    pub(crate) epoch: Epoch,
    /// Its seq.
    pub(crate) seq: u64,
    /// Whether it went with RETAIN set (a retained message sent on SUBSCRIBE, or Retain As
    /// Published); `None` when read from a session's store row written before the store kept
    /// it.
    pub(crate) retain: Option<bool>,
    /// QoS 1 or 2.
    pub(crate) qos: QoS,
    /// QoS 2: PUBREC came and PUBREL was sent; PUBCOMP is awaited.
    pub(crate) released: bool,
}

/// Outbound QoS 1 and 2: packet ids awaiting acknowledgement and the messages waiting.
pub(crate) struct Outbound {
    /// The client's Receive Maximum: most QoS 1 and 2 PUBLISH packets unacknowledged at once.
    window: u16,
    /// The next packet id to try.
    next: u16,
    /// Packets sent and not acknowledged, in the order sent.
    awaiting: Vec<Sent>,
    /// Ids a resumed session's messages were sent with before, kept for them.
    reserved: Vec<Sent>,
    /// Messages waiting, oldest first.
    waiting: VecDeque<Waiting>,
    /// Bytes of message data waiting.
    waiting_bytes: usize,
    /// The last store write of a packet id that committed (shared with its callback); made
    /// with the first such write, so a connection that never stores one (QoS 0, a clean
    /// session's QoS 1) allocates none.
    persisted: Option<Arc<AtomicU64>>,
    /// The last store write of a packet id asked for.
    persisting: u64,
}

impl Outbound {
    /// No packet in flight; at most `window` at once (0 is read as 65,535, the default).
    pub(crate) fn new(window: u16) -> Self {
        Outbound {
            window: if window == 0 { u16::MAX } else { window },
            next: 1,
            awaiting: Vec::new(),
            reserved: Vec::new(),
            waiting: VecDeque::new(),
            waiting_bytes: 0,
            persisted: None,
            persisting: 0,
        }
    }

    /// Its window and next packet id if nothing is in flight, reserved or waiting and no store
    /// write of a packet id is pending: all a parked connection keeps of it then
    /// ([`Outbound::from_idle`]); `None` otherwise.
    pub(crate) fn idle(&self) -> Option<(u16, u16)> {
        let idle = self.awaiting.is_empty()
            && self.reserved.is_empty()
            && self.waiting.is_empty()
            // No callback of a store write holds the flag.
            && (self.persisted.as_ref()).is_none_or(|p| Arc::strong_count(p) == 1);
        idle.then_some((self.window, self.next))
    }

    /// The state [`Outbound::idle`] gave.
    pub(crate) fn from_idle((window, next): (u16, u16)) -> Self {
        Outbound {
            next,
            ..Outbound::new(window)
        }
    }

    /// Whether a message may be sent now: the window has room and nothing older waits.
    pub(crate) fn has_room(&self) -> bool {
        self.waiting.is_empty() && self.awaiting.len() < usize::from(self.window)
    }

    fn in_use(&self, id: u16) -> bool {
        self.awaiting.iter().any(|s| s.id.get() == id)
            || self.reserved.iter().any(|s| s.id.get() == id)
            || self
                .waiting
                .iter()
                .any(|w| w.id.is_some_and(|i| i.get() == id))
    }

    /// A packet id no message holds.
    pub(crate) fn free_id(&mut self) -> NonZeroU16 {
        // At most 65,535 are held (the outbox bounds what waits), so the loop ends.
        loop {
            let id = self.next;
            self.next = self.next.checked_add(1).unwrap_or(1);
            if !self.in_use(id) {
                if let Some(id) = NonZeroU16::new(id) {
                    return id;
                }
            }
        }
    }

    /// Records `message` sent now at `qos` with packet id `id` (taken with
    /// [`Outbound::free_id`], or the message's own), with RETAIN as `retain`.
    pub(crate) fn sent(&mut self, id: NonZeroU16, message: &SharedMessage, qos: QoS, retain: bool) {
        self.awaiting.push(Sent {
            id,
            channel: message.channel.clone(),
            epoch: message.epoch.clone(),
            seq: message.seq,
            retain: Some(retain),
            qos,
            released: false,
        });
    }

    /// Whether the window has room for one more packet.
    pub(crate) fn window_open(&self) -> bool {
        self.awaiting.len() < usize::from(self.window)
    }

    /// A PUBACK for `id`: frees it; the QoS 1 message it acknowledged, if one was in flight
    /// with that id.
    pub(crate) fn acknowledge(&mut self, id: NonZeroU16) -> Option<Sent> {
        let at = self
            .awaiting
            .iter()
            .position(|s| s.id == id && s.qos == QoS::AtLeastOnce)?;
        Some(self.awaiting.remove(at))
    }

    /// A PUBREC for `id`: the QoS 2 message is received, PUBREL goes and PUBCOMP is awaited.
    /// `Some((message, first))`: the message, and whether this is its first PUBREC; `None`:
    /// no QoS 2 message with that id.
    pub(crate) fn received(&mut self, id: NonZeroU16) -> Option<(Sent, bool)> {
        let sent = self
            .awaiting
            .iter_mut()
            .find(|s| s.id == id && s.qos == QoS::ExactlyOnce)?;
        let first = !sent.released;
        sent.released = true;
        Some((sent.clone(), first))
    }

    /// A PUBCOMP for `id`: frees it; the QoS 2 message it completed.
    pub(crate) fn complete(&mut self, id: NonZeroU16) -> Option<Sent> {
        let at = self
            .awaiting
            .iter()
            .position(|s| s.id == id && s.released)?;
        Some(self.awaiting.remove(at))
    }

    /// Keeps `sent`'s id for its message, sent again later with DUP (a resumed session's);
    /// one already released is awaiting its PUBCOMP at once (its PUBREL is sent again).
    pub(crate) fn reserve(&mut self, sent: Sent) {
        if sent.released {
            self.awaiting.push(sent);
        } else {
            self.reserved.push(sent);
        }
    }

    /// Takes out every reserved id, in the order reserved (first sent), to be looked at again
    /// (those whose replay no longer comes are sent now, the rest [`Outbound::reserve`]d
    /// again).
    pub(crate) fn take_reserved(&mut self) -> Vec<Sent> {
        std::mem::take(&mut self.reserved)
    }

    /// The id `message` was sent with before, if it is a resumed session's message sent
    /// again: taken out of the reserved ids, with its QoS. A message sent as several copies
    /// (one per subscription, v5) has an id per copy: a copy at `qos` takes one sent at that
    /// QoS first, else any.
    pub(crate) fn resend_of(
        &mut self,
        message: &SharedMessage,
        qos: QoS,
    ) -> Option<(NonZeroU16, QoS)> {
        if self.reserved.is_empty() {
            return None;
        }
        let of_message = |s: &Sent| s.seq == message.seq && s.channel == message.channel;
        let at = (self.reserved.iter())
            .position(|s| of_message(s) && s.qos == qos)
            .or_else(|| self.reserved.iter().position(of_message))?;
        let sent = self.reserved.remove(at);
        Some((sent.id, sent.qos))
    }

    /// Sends `sent`'s message, `message`, again now, ahead of anything else waiting or to come:
    /// with its packet id, DUP set and RETAIN as `retain` (a resumed session's message its
    /// replay does not bring again, `crate::session`'s `resend.rs`). It waits for room in the
    /// window as any message does, in the order these calls come.
    pub(crate) fn resend_now(&mut self, sent: &Sent, message: SharedMessage, retain: bool) {
        self.wait(Waiting {
            message,
            retain,
            qos: sent.qos,
            id: Some(sent.id),
            dup: true,
            persist: 0,
            via: Via::AllMatching,
        });
    }

    /// The reserved ids a resumed session's replay passed over: those of `message`'s channel
    /// below it, or of another epoch of the channel, taken out (their messages were gone from
    /// the log when the replay read it). `message` is a message of the channel's replay.
    pub(crate) fn passed_over(&mut self, message: &SharedMessage) -> Vec<Sent> {
        if self.reserved.is_empty() {
            return Vec::new();
        }
        let passed = |s: &Sent| {
            s.channel == message.channel && (s.epoch != message.epoch || s.seq < message.seq)
        };
        if !self.reserved.iter().any(passed) {
            return Vec::new();
        }
        let (gone, kept) = std::mem::take(&mut self.reserved)
            .into_iter()
            .partition(passed);
        self.reserved = kept;
        gone
    }

    /// Forgets the QoS 1 packets of `message` in flight (handed to another member of a shared
    /// subscription's group, `crate::shared`): they are not this connection's to complete.
    pub(crate) fn forget(&mut self, message: &SharedMessage) -> Vec<Sent> {
        let of_message = |s: &Sent| {
            s.qos == QoS::AtLeastOnce && s.seq == message.seq && s.channel == message.channel
        };
        if !self.awaiting.iter().any(of_message) {
            return Vec::new();
        }
        let (gone, kept) = std::mem::take(&mut self.awaiting)
            .into_iter()
            .partition(of_message);
        self.awaiting = kept;
        gone
    }

    /// Whether the client received `message` at QoS 2 already (PUBREC came; its PUBREL is
    /// awaiting PUBCOMP): a resumed session's copy of it that finds no id reserved
    /// ([`Outbound::resend_of`]) is that copy, and is not sent again [MQTT-4.3.3-1].
    pub(crate) fn received_before(&self, message: &SharedMessage) -> bool {
        self.awaiting
            .iter()
            .any(|s| s.released && s.seq == message.seq && s.channel == message.channel)
    }

    /// Every packet in flight and reserved (for a persistent session that ends).
    pub(crate) fn unacknowledged(&self) -> impl Iterator<Item = &Sent> {
        self.awaiting.iter().chain(&self.reserved)
    }

    /// Queues a message that must wait.
    pub(crate) fn wait(&mut self, waiting: Waiting) {
        self.waiting_bytes += waiting.message.data.len() + 64;
        self.waiting.push_back(waiting);
    }

    /// A new store write of a packet id: its number, and the flag its callback sets once it
    /// committed ([`Outbound::persisted`]).
    pub(crate) fn persisting(&mut self) -> (u64, Arc<AtomicU64>) {
        self.persisting += 1;
        let persisted = self.persisted.get_or_insert_with(Arc::default);
        (self.persisting, persisted.clone())
    }

    /// The oldest waiting message, if it may be sent now: its packet id stored (if it waited
    /// for that) and room in the window.
    pub(crate) fn next_ready(&mut self) -> Option<Waiting> {
        let head = self.waiting.front()?;
        let persisted = (self.persisted.as_ref()).map_or(0, |p| p.load(Ordering::Acquire));
        if head.persist > persisted || !self.window_open() {
            return None;
        }
        let waiting = self.waiting.pop_front()?;
        self.waiting_bytes = self
            .waiting_bytes
            .saturating_sub(waiting.message.data.len() + 64);
        Some(waiting)
    }

    /// Frees the room its lists keep beyond their length (a parked connection's, which keeps
    /// them as long as it is idle).
    pub(crate) fn shrink_to_fit(&mut self) {
        self.awaiting.shrink_to_fit();
        self.reserved.shrink_to_fit();
        self.waiting.shrink_to_fit();
    }

    /// Whether messages wait.
    pub(crate) fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Bytes of the messages waiting.
    pub(crate) fn waiting_bytes(&self) -> usize {
        self.waiting_bytes
    }

    /// How many packets are in flight.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.awaiting.len()
    }
}

/// Inbound QoS 2: packet ids stored and answered with PUBREC, awaiting PUBREL.
pub(crate) struct InboundQoS2 {
    /// Held ids, in arrival order.
    held: Vec<HeldQoS2>,
    /// The `n` of the next new message's key.
    next: u64,
}

/// An inbound QoS 2 packet id held until its PUBREL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeldQoS2 {
    /// The packet id.
    pub(crate) id: u16,
    /// The `n` of its message's idempotency key.
    pub(crate) n: u64,
    /// Taken on from the session's store when the connection started, not held by this
    /// connection's own PUBREC: its release may have been lost (a PUBCOMP goes once the
    /// release is queued, not committed), so a PUBLISH with its id and DUP 0 is a new message
    /// ([`InboundQoS2::arrival`]).
    pub(crate) adopted: bool,
}

/// What a QoS 2 PUBLISH is, given the ids held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// A new message: store it with this `n` in its key, then [`InboundQoS2::hold`] it.
    New(u64),
    /// Its id is held by this connection: the same message again, answered with PUBREC and
    /// not stored again.
    Held,
    /// Its id is held from the session's store and it came with DUP: the same message again,
    /// stored again with this `n` in its key (the log keeps one copy), then
    /// [`InboundQoS2::hold`] it.
    Recovered(u64),
}

impl InboundQoS2 {
    /// Nothing held; keys numbered from `start` (the connection's start time in microseconds,
    /// so a later connection of the same client id does not reuse a key).
    pub(crate) fn new(start: u64) -> Self {
        InboundQoS2 {
            held: Vec::new(),
            next: start,
        }
    }

    /// Whether no id is held: then a parked connection keeps nothing of it, and its revival
    /// numbers keys anew from the time it is revived ([`InboundQoS2::new`]), as a new
    /// connection of the client does: later than every key it numbered before, unless it had
    /// stored more than one QoS 2 message a microsecond.
    pub(crate) fn is_idle(&self) -> bool {
        self.held.is_empty()
    }

    /// What a PUBLISH with packet id `id` and DUP flag `dup` is. An id this connection holds
    /// makes it the same message whatever its DUP [MQTT-4.3.3-10]. An id taken on from the
    /// store makes it the same message only with DUP set: a client sets DUP on every resend
    /// [MQTT-3.3.1-1], so one without DUP is a new message that reuses the id after a PUBCOMP
    /// whose release a crash lost (docs/design/mqtt.md, "Inbound QoS 2 of a persistent
    /// session").
    pub(crate) fn arrival(&mut self, id: NonZeroU16, dup: bool) -> Arrival {
        match self.held.iter().find(|h| h.id == id.get()) {
            Some(held) if !held.adopted => Arrival::Held,
            Some(held) if dup => Arrival::Recovered(held.n),
            _ => Arrival::New(self.next_n()),
        }
    }

    /// The `n` of a key of another kind (`crate::origin::key`: a QoS 0 or 1 PUBLISH, a will),
    /// from the same count, so no two keys of a connection share it.
    pub(crate) fn next_n(&mut self) -> u64 {
        let n = self.next;
        self.next += 1;
        n
    }

    /// Holds `id` for the message stored with key number `n` until its PUBREL (after the
    /// message was stored, before PUBREC is sent), replacing a hold of the same id.
    pub(crate) fn hold(&mut self, id: NonZeroU16, n: u64) {
        let held = HeldQoS2 {
            id: id.get(),
            n,
            adopted: false,
        };
        match self.held.iter_mut().find(|h| h.id == id.get()) {
            Some(earlier) => *earlier = held,
            None => self.held.push(held),
        }
    }

    /// A PUBREL for `id` (or a refusal that frees it): releases it. The `n` of the message it
    /// held; `None` when it was not held (PUBCOMP then says Packet Identifier not found in v5).
    pub(crate) fn release(&mut self, id: NonZeroU16) -> Option<u64> {
        let at = self.held.iter().position(|h| h.id == id.get())?;
        Some(self.held.remove(at).n)
    }

    /// How many ids are held.
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }

    /// Takes on the ids a persistent session's store holds (`held`, each `adopted`): a PUBLISH
    /// the client sends again with one of them after reconnecting is still the same message,
    /// not stored twice [MQTT-4.3.3-10] (3.1.1 [MQTT-4.3.3-2]), and its PUBREL is completed as
    /// found.
    pub(crate) fn adopt(&mut self, held: Vec<HeldQoS2>) {
        for h in held {
            if !self.held.iter().any(|mine| mine.id == h.id) {
                self.held.push(h);
            }
        }
    }
}

/// The idempotency key of a QoS 2 message (see the module docs), within the 256 bytes a message
/// id may have: a client id long enough to pass that is cut (a few clients with the same long
/// prefix then share keys only if their `n` and packet ids also match).
pub(crate) fn qos2_key(client_id: &str, id: NonZeroU16, n: u64) -> String {
    let tail = format!(":{}:{n}", id.get());
    let room = herald_core::engine::MAX_MESSAGE_ID_LEN - "mqtt:".len() - tail.len();
    let mut cut = client_id.len().min(room);
    while !client_id.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("mqtt:{}{tail}", &client_id[..cut])
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use herald_core::message::StoredMessage;
    use herald_core::{ChannelName, Epoch};

    use super::*;

    fn id(n: u16) -> NonZeroU16 {
        NonZeroU16::new(n).expect("non-zero")
    }

    fn message(seq: u64) -> SharedMessage {
        let channel = ChannelName::parse("news").expect("a channel name");
        Arc::new(StoredMessage::new(
            channel,
            Epoch::new("e"),
            seq,
            None,
            0,
            Bytes::new(),
        ))
    }

    fn waiting(seq: u64) -> Waiting {
        Waiting {
            message: message(seq),
            retain: false,
            qos: QoS::AtLeastOnce,
            id: None,
            dup: false,
            persist: 0,
            via: Via::AllMatching,
        }
    }

    fn reserved(n: u16, seq: u64) -> Sent {
        Sent {
            id: id(n),
            channel: ChannelName::parse("news").unwrap(),
            epoch: Epoch::new("e"),
            seq,
            retain: None,
            qos: QoS::AtLeastOnce,
            released: false,
        }
    }

    fn send(out: &mut Outbound, seq: u64, qos: QoS) -> NonZeroU16 {
        let id = out.free_id();
        out.sent(id, &message(seq), qos, false);
        id
    }

    #[test]
    fn the_window_bounds_what_is_in_flight_and_a_puback_frees_an_id() {
        let mut out = Outbound::new(2);
        assert_eq!(send(&mut out, 1, QoS::AtLeastOnce), id(1));
        assert_eq!(send(&mut out, 2, QoS::AtLeastOnce), id(2));
        assert!(!out.window_open(), "the window is full");
        assert!(!out.has_room());
        out.wait(waiting(3));
        assert!(out.next_ready().is_none(), "still full");
        assert!(out.acknowledge(id(7)).is_none(), "never sent");
        let acked = out.acknowledge(id(1)).expect("in flight");
        assert_eq!((acked.seq, acked.channel.as_str()), (1, "news"));
        let ready = out.next_ready().expect("room for the waiting message");
        assert_eq!(ready.message.seq, 3);
        assert_eq!(send(&mut out, 3, QoS::AtLeastOnce), id(3));
        assert_eq!(out.in_flight(), 2);
        assert_eq!(out.waiting_bytes(), 0);
    }

    #[test]
    fn ids_wrap_past_65535_and_skip_those_held() {
        let mut out = Outbound::new(0);
        out.next = u16::MAX;
        assert_eq!(send(&mut out, 1, QoS::AtLeastOnce), id(u16::MAX));
        assert_eq!(send(&mut out, 2, QoS::AtLeastOnce), id(1));
        out.reserve(reserved(2, 9));
        out.next = u16::MAX;
        assert_eq!(out.free_id(), id(3), "65535 and 1 in flight, 2 reserved");
        assert_eq!(
            out.resend_of(&message(9), QoS::AtLeastOnce),
            Some((id(2), QoS::AtLeastOnce))
        );
        assert_eq!(
            out.resend_of(&message(9), QoS::AtLeastOnce),
            None,
            "taken once"
        );
    }

    #[test]
    fn a_resend_goes_first_with_its_id_and_dup_and_a_replay_frees_the_ids_it_passed() {
        let mut out = Outbound::new(1);
        out.resend_now(&reserved(7, 3), message(3), true);
        assert!(!out.has_room(), "nothing goes ahead of a resend");
        assert_ne!(out.free_id(), id(7), "its id stays held");
        let first = out.next_ready().expect("ready");
        assert_eq!(
            (first.id, first.dup, first.retain, first.message.seq),
            (Some(id(7)), true, true, 3)
        );
        // The replay of the channel reaches seq 6: 4 and 5 were not in its log any more.
        out.reserve(reserved(8, 4));
        out.reserve(reserved(9, 5));
        out.reserve(reserved(10, 6));
        let gone: Vec<u64> = out.passed_over(&message(6)).iter().map(|s| s.seq).collect();
        assert_eq!(gone, [4, 5]);
        assert!(out.passed_over(&message(6)).is_empty(), "taken once");
        assert_eq!(
            out.resend_of(&message(6), QoS::AtLeastOnce),
            Some((id(10), QoS::AtLeastOnce))
        );
        assert!(out.idle().is_some(), "nothing reserved or waiting is left");
    }

    #[test]
    fn qos2_goes_pubrec_then_pubcomp_and_a_stored_id_waits_for_its_write() {
        let mut out = Outbound::new(10);
        let sent = send(&mut out, 5, QoS::ExactlyOnce);
        assert!(
            out.acknowledge(sent).is_none(),
            "a PUBACK is not QoS 2's answer"
        );
        assert!(out.complete(sent).is_none(), "not released yet");
        let (message, first) = out.received(sent).expect("in flight");
        assert!(first && message.seq == 5);
        assert!(
            !out.received(sent).expect("still in flight").1,
            "a second PUBREC"
        );
        assert_eq!(out.complete(sent).map(|s| s.seq), Some(5));
        assert_eq!(out.in_flight(), 0);
        // A message waiting for its id to be stored is not ready before the write committed.
        let (n, persisted) = out.persisting();
        let id = out.free_id();
        out.wait(Waiting {
            id: Some(id),
            qos: QoS::ExactlyOnce,
            persist: n,
            ..waiting(6)
        });
        assert_ne!(out.free_id(), id, "its id is held");
        assert!(out.next_ready().is_none());
        persisted.store(n, Ordering::Release);
        assert_eq!(out.next_ready().map(|w| w.id), Some(Some(id)));
    }

    #[test]
    fn a_held_qos2_id_is_the_same_message_until_its_pubrel() {
        let mut held = InboundQoS2::new(1000);
        assert_eq!(held.arrival(id(5), false), Arrival::New(1000));
        held.hold(id(5), 1000);
        assert_eq!(held.arrival(id(5), true), Arrival::Held, "a DUP resend");
        assert_eq!(
            held.arrival(id(5), false),
            Arrival::Held,
            "held by this connection: the same message, DUP or not [MQTT-4.3.3-10]"
        );
        assert_eq!(held.release(id(5)), Some(1000));
        assert_eq!(held.release(id(5)), None, "released once");
        // The id reused for a new message gets a new key.
        assert_eq!(held.arrival(id(5), false), Arrival::New(1001));
        assert_eq!(held.len(), 0);
    }

    #[test]
    fn an_id_held_from_the_store_is_the_same_message_only_with_dup() {
        let adopted = HeldQoS2 {
            id: 5,
            n: 1000,
            adopted: true,
        };
        let mut held = InboundQoS2::new(5000);
        held.adopt(vec![adopted]);
        assert_eq!(
            held.arrival(id(5), true),
            Arrival::Recovered(1000),
            "a resend: stored again with its key's n"
        );
        held.hold(id(5), 1000);
        assert_eq!(
            held.arrival(id(5), true),
            Arrival::Held,
            "stored again once"
        );
        assert_eq!(held.len(), 1);
        assert_eq!(held.release(id(5)), Some(1000));
        assert_eq!(
            held.arrival(id(5), false),
            Arrival::New(5000),
            "a new message"
        );

        // Without DUP, the id's release was lost: a new message, which replaces the hold.
        let mut held = InboundQoS2::new(5000);
        held.adopt(vec![adopted]);
        assert_eq!(held.arrival(id(5), false), Arrival::New(5000));
        held.hold(id(5), 5000);
        assert_eq!(held.len(), 1);
        assert_eq!(
            held.arrival(id(5), false),
            Arrival::Held,
            "now this connection's"
        );
        assert_eq!(held.release(id(5)), Some(5000));
    }

    #[test]
    fn keys_fit_a_message_id() {
        assert_eq!(qos2_key("dev-1", id(7), 42), "mqtt:dev-1:7:42");
        let long = "é".repeat(200);
        let key = qos2_key(&long, id(65535), u64::MAX);
        assert!(key.len() <= herald_core::engine::MAX_MESSAGE_ID_LEN);
        assert!(key.ends_with(&format!(":65535:{}", u64::MAX)));
    }
}
