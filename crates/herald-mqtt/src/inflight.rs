//! Packet identifiers and the QoS state of one connection, both ways, in memory (clean sessions:
//! phase 1 keeps nothing across connections).
//!
//! - **Out** ([`Outbound`]): the packet ids of QoS 1 PUBLISH packets sent and not yet
//!   acknowledged, at most the client's Receive Maximum of them [MQTT-3.3.4-7]; messages that
//!   find the window full wait here, in order, until a PUBACK frees an id. Their bytes are
//!   counted, so a client that never acknowledges is closed as a slow consumer rather than
//!   holding an unbounded queue.
//! - **In** ([`InboundQoS2`]): the packet ids of QoS 2 PUBLISH packets stored and answered with
//!   PUBREC whose PUBREL has not come yet. A PUBLISH that reuses a held id is the same message
//!   sent again [MQTT-4.3.3-9]: it is not stored twice. Each held id keeps the idempotency key
//!   its message was stored with, `mqtt:{client id}:{packet id}:{n}`, `n` counted per
//!   connection from the connection's start time, so a packet id reused for a new message after
//!   PUBCOMP is a new key (packet ids are reused; the key must not be).

use std::collections::VecDeque;
use std::num::NonZeroU16;

use herald_core::message::SharedMessage;

/// A QoS 1 message waiting for a free packet id: the message and whether it goes with RETAIN
/// set (the retained message sent on subscribe).
pub(crate) struct Waiting {
    /// The message.
    pub(crate) message: SharedMessage,
    /// It is sent with RETAIN set.
    pub(crate) retain: bool,
}

/// Outbound QoS 1: packet ids awaiting PUBACK and the messages waiting for one.
pub(crate) struct Outbound {
    /// The client's Receive Maximum: most QoS 1 and 2 PUBLISH packets unacknowledged at once.
    window: u16,
    /// The next packet id to try.
    next: u16,
    /// Packet ids sent and not acknowledged, in the order sent.
    awaiting: Vec<u16>,
    /// Messages waiting for a free id, oldest first.
    waiting: VecDeque<Waiting>,
    /// Bytes of message data waiting.
    waiting_bytes: usize,
}

impl Outbound {
    /// No packet in flight; at most `window` at once (0 is read as 65,535, the default).
    pub(crate) fn new(window: u16) -> Self {
        Outbound {
            window: if window == 0 { u16::MAX } else { window },
            next: 1,
            awaiting: Vec::new(),
            waiting: VecDeque::new(),
            waiting_bytes: 0,
        }
    }

    /// Whether a message may be sent now: the window has room and nothing older waits.
    pub(crate) fn has_room(&self) -> bool {
        self.waiting.is_empty() && self.awaiting.len() < usize::from(self.window)
    }

    /// Takes a free packet id for a message sent now, if the window has room.
    pub(crate) fn take_id(&mut self) -> Option<NonZeroU16> {
        if self.awaiting.len() >= usize::from(self.window) {
            return None;
        }
        // At most 65,535 are in flight, so a free id exists; the loop ends within that many.
        loop {
            let id = self.next;
            self.next = self.next.checked_add(1).unwrap_or(1);
            if !self.awaiting.contains(&id) {
                self.awaiting.push(id);
                return NonZeroU16::new(id);
            }
        }
    }

    /// A PUBACK for `id`: frees it. False when no message was in flight with that id.
    pub(crate) fn acknowledge(&mut self, id: NonZeroU16) -> bool {
        match self.awaiting.iter().position(|&held| held == id.get()) {
            Some(at) => {
                self.awaiting.remove(at);
                true
            }
            None => false,
        }
    }

    /// Queues a message that found the window full (or older ones waiting).
    pub(crate) fn wait(&mut self, waiting: Waiting) {
        self.waiting_bytes += waiting.message.data.len() + 64;
        self.waiting.push_back(waiting);
    }

    /// The oldest waiting message, if the window has room for it now.
    pub(crate) fn next_ready(&mut self) -> Option<Waiting> {
        if self.awaiting.len() >= usize::from(self.window) {
            return None;
        }
        let waiting = self.waiting.pop_front()?;
        self.waiting_bytes = self
            .waiting_bytes
            .saturating_sub(waiting.message.data.len() + 64);
        Some(waiting)
    }

    /// Whether messages wait for the window.
    pub(crate) fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Bytes of the messages waiting for the window.
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
    /// Held ids with the `n` of their idempotency key, in arrival order.
    held: Vec<(u16, u64)>,
    /// The `n` of the next new message's key.
    next: u64,
}

/// What a QoS 2 PUBLISH is, given the ids held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// A new message: store it with this `n` in its key, then [`InboundQoS2::hold`] it.
    New(u64),
    /// Its id is held: the same message again, answered with PUBREC and not stored again.
    Held,
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

    /// What a PUBLISH with packet id `id` is.
    pub(crate) fn arrival(&mut self, id: NonZeroU16) -> Arrival {
        if self.held.iter().any(|&(held, _)| held == id.get()) {
            return Arrival::Held;
        }
        let n = self.next;
        self.next += 1;
        Arrival::New(n)
    }

    /// Holds `id` until its PUBREL (after its message was stored and PUBREC is sent).
    pub(crate) fn hold(&mut self, id: NonZeroU16, n: u64) {
        if !self.held.iter().any(|&(held, _)| held == id.get()) {
            self.held.push((id.get(), n));
        }
    }

    /// A PUBREL for `id`: releases it. False when it was not held (PUBCOMP then says Packet
    /// Identifier not found in v5).
    pub(crate) fn release(&mut self, id: NonZeroU16) -> bool {
        match self.held.iter().position(|&(held, _)| held == id.get()) {
            Some(at) => {
                self.held.remove(at);
                true
            }
            None => false,
        }
    }

    /// How many ids are held.
    pub(crate) fn len(&self) -> usize {
        self.held.len()
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

    fn waiting(seq: u64) -> Waiting {
        let channel = ChannelName::parse("news").expect("a channel name");
        let message = StoredMessage::new(channel, Epoch::new("e"), seq, None, 0, Bytes::new());
        Waiting {
            message: Arc::new(message),
            retain: false,
        }
    }

    #[test]
    fn the_window_bounds_what_is_in_flight_and_a_puback_frees_an_id() {
        let mut out = Outbound::new(2);
        assert_eq!(out.take_id(), Some(id(1)));
        assert_eq!(out.take_id(), Some(id(2)));
        assert_eq!(out.take_id(), None, "the window is full");
        assert!(!out.has_room());
        out.wait(waiting(3));
        assert!(out.next_ready().is_none(), "still full");
        assert!(!out.acknowledge(id(7)), "never sent");
        assert!(out.acknowledge(id(1)));
        let ready = out.next_ready().expect("room for the waiting message");
        assert_eq!(ready.message.seq, 3);
        assert_eq!(out.take_id(), Some(id(3)));
        assert_eq!(out.in_flight(), 2);
        assert_eq!(out.waiting_bytes(), 0);
    }

    #[test]
    fn ids_wrap_past_65535_and_skip_those_in_flight() {
        let mut out = Outbound::new(0);
        out.next = u16::MAX;
        assert_eq!(out.take_id(), Some(id(u16::MAX)));
        assert_eq!(out.take_id(), Some(id(1)));
        out.next = u16::MAX;
        assert_eq!(out.take_id(), Some(id(2)), "65535 and 1 are in flight");
    }

    #[test]
    fn a_held_qos2_id_is_the_same_message_until_its_pubrel() {
        let mut held = InboundQoS2::new(1000);
        assert_eq!(held.arrival(id(5)), Arrival::New(1000));
        held.hold(id(5), 1000);
        assert_eq!(held.arrival(id(5)), Arrival::Held, "a DUP resend");
        assert!(held.release(id(5)));
        assert!(!held.release(id(5)), "released once");
        // The id reused for a new message gets a new key.
        assert_eq!(held.arrival(id(5)), Arrival::New(1001));
        assert_eq!(held.len(), 0);
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
