//! An MQTT connection's state in the form a parked connection keeps ([`ParkedWire`], stored in
//! `crate::park`'s record): what it must not forget while it waits without a task, and
//! nothing it can rebuild on revival.
//!
//! Next to [`MqttWire`] it keeps the client session in its parked form
//! ([`ParkedSession`]: the client's strings boxed to their length, its live-client
//! registration as two numbers, no command budget, so a connection parks only with a fresh
//! one) and leaves out what is empty whenever a connection parks (the read buffer, the
//! packets decoded and not handled, a decode error, the client's close, a failed answer:
//! [`MqttWire::may_park`] and the driver see to that). The queue of decoded packets in
//! particular is dropped with its capacity: its first packet after CONNECT made room for four
//! (832 bytes) that a connection in a task keeps for its whole life. The client identifier
//! and the `$SYS/` tree are not kept twice: revival takes them from the claim on the
//! identifier and from the listener's sessions. Every other part (the subscriptions, QoS 1 and
//! 2 in flight both ways, the topic aliases, the persistent session, the will, the claim) is
//! kept as it is, its lists shrunk to their length, so a revived connection carries on exactly
//! where it parked.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use bytes::BytesMut;
use herald_core::lifecycle::Transport;
use herald_edge::session::{ClientSession, ParkedSession};

use super::MqttWire;
use crate::access::Rules;
use crate::inflight::{InboundQoS2, Outbound};
use crate::packet::{self, ProtocolVersion, TopicName};
use crate::session::{PersistentSession, Sessions};
use crate::settings::MqttSettings;
use crate::subscriptions::Subscriptions;
use crate::takeover::Claim;

/// A parked MQTT connection's state (see the module docs).
pub(crate) struct ParkedWire {
    pub(crate) session: ParkedSession,
    version: ProtocolVersion,
    problem_information: bool,
    session_expiry_zero: bool,
    client_max_packet: u32,
    settings: Arc<MqttSettings>,
    anonymous: Option<Arc<Rules>>,
    subscriptions: Subscriptions,
    outbound: Outbound,
    persist: Option<Box<PersistentSession>>,
    inbox: Option<Box<crate::inbox::InboxState>>,
    qos2: InboundQoS2,
    aliases: Box<[(u16, TopicName)]>,
    topic_aliases: crate::topic_aliases::TopicAliases,
    keep_alive_ms: u64,
    last_heard_ms: u64,
    claim: Claim,
    will: Option<Box<packet::Will>>,
}

impl MqttWire {
    /// The connection's state in its parked form. Call it only on a connection the driver
    /// let park (nothing read in part, nothing decoded and not handled).
    pub(crate) fn park(self) -> ParkedWire {
        let MqttWire {
            session,
            version,
            settings,
            // The claim holds it too: taken from there on revival.
            client_id: _,
            anonymous,
            problem_information,
            client_max_packet,
            mut subscriptions,
            mut outbound,
            persist,
            inbox,
            qos2,
            aliases,
            topic_aliases,
            // The listener's, which `sessions` holds: taken from there on revival.
            sys: _,
            // Empty when the driver lets a connection park: its capacity is freed with it.
            read_buf: _,
            incoming: _,
            failed: _,
            eof: _,
            keep_alive_ms,
            last_heard_ms,
            // Set again from `last_heard_ms` on revival.
            keep_alive_deadline: _,
            claim,
            session_expiry_zero,
            // False: a connection whose answer failed does not park.
            unsendable: _,
            will,
            // Set only by the goodbye.
            will_due: _,
        } = self;
        subscriptions.shrink_to_fit();
        outbound.shrink_to_fit();
        ParkedWire {
            session: session.park(),
            version,
            problem_information,
            session_expiry_zero,
            client_max_packet,
            settings,
            anonymous,
            subscriptions,
            outbound,
            persist,
            inbox,
            qos2,
            aliases: aliases.into_boxed_slice(),
            topic_aliases,
            keep_alive_ms,
            last_heard_ms,
            claim,
            will,
        }
    }
}

impl ParkedWire {
    /// The connection's state again, as it parked (with a fresh command budget), with the
    /// listener's persistent sessions (`crate::park`'s record keeps them).
    pub(crate) fn revive(self, sessions: &Sessions) -> MqttWire {
        let ParkedWire {
            session,
            version,
            problem_information,
            session_expiry_zero,
            client_max_packet,
            settings,
            anonymous,
            subscriptions,
            outbound,
            persist,
            inbox,
            qos2,
            aliases,
            topic_aliases,
            keep_alive_ms,
            last_heard_ms,
            claim,
            will,
        } = self;
        let mut wire = MqttWire {
            session: ClientSession::revive_for(Transport::Mqtt, session),
            version,
            settings,
            client_id: claim.client_id().into(),
            anonymous,
            problem_information,
            client_max_packet,
            subscriptions,
            outbound,
            persist,
            inbox,
            qos2,
            aliases: aliases.into_vec(),
            topic_aliases,
            sys: sessions.sys.clone(),
            read_buf: BytesMut::new(),
            incoming: VecDeque::new(),
            failed: None,
            eof: false,
            keep_alive_ms,
            last_heard_ms,
            keep_alive_deadline: None,
            claim,
            session_expiry_zero,
            unsendable: AtomicBool::new(false),
            will,
            will_due: false,
        };
        // The deadline as it stands, past or not: a past one fires the driver's timer at once,
        // which closes a client that stayed silent (or sets the next deadline for one that
        // pinged while parked). One set a second ahead would let the revived connection park
        // again first, and the parking revive it again at that second, and so on.
        wire.keep_alive_deadline = super::keep_alive_deadline(last_heard_ms, keep_alive_ms, 0);
        wire
    }

    /// Whether the connection may stay parked: as [`MqttWire::may_stay_parked`].
    pub(crate) fn may_stay_parked(&self) -> bool {
        !self.outbound.has_waiting() && !self.claim.is_taken()
    }

    /// A packet was heard now (a PINGREQ answered while parked, `crate::park`).
    pub(crate) fn heard_now(&mut self) {
        self.last_heard_ms = super::now_ms();
    }

    /// When the parked connection is revived at the latest (Unix seconds): its token's expiry
    /// or its keep-alive deadline, whichever comes first.
    pub(crate) fn expires(&self) -> Option<u64> {
        let keep_alive =
            super::keep_alive_deadline(self.last_heard_ms, self.keep_alive_ms, super::now_ms());
        match (self.session.expires(), keep_alive) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_of_the_parked_parts() {
        // Printed for docs/benchmarks.md (`cargo test -p herald-mqtt --lib sizes_of_the_parked
        // -- --nocapture`): where a parked connection's record goes.
        let parts = [
            ("ParkedWire", size_of::<ParkedWire>()),
            ("MqttWire (in a task)", size_of::<MqttWire>()),
            ("ParkedSession", size_of::<ParkedSession>()),
            ("ClientSession (in a task)", size_of::<ClientSession>()),
            ("Subscriptions", size_of::<Subscriptions>()),
            ("Outbound", size_of::<Outbound>()),
            ("Claim", size_of::<Claim>()),
            ("InboundQoS2", size_of::<InboundQoS2>()),
            (
                "TopicAliases",
                size_of::<crate::topic_aliases::TopicAliases>(),
            ),
            ("inbound aliases", size_of::<Vec<(u16, TopicName)>>()),
            (
                "decoded packets (in a task)",
                size_of::<VecDeque<packet::Packet>>(),
            ),
            ("one decoded packet", size_of::<packet::Packet>()),
        ];
        for (part, size) in parts {
            eprintln!("{part}: {size} B");
        }
    }

    #[test]
    fn the_parked_form_is_smaller_than_the_connection_in_a_task() {
        // The session in its parked form, and no read buffer, decoded packets or decode
        // error: 160 bytes fewer.
        assert!(
            size_of::<ParkedWire>() + 160 <= size_of::<MqttWire>(),
            "{} bytes parked, {} in a task",
            size_of::<ParkedWire>(),
            size_of::<MqttWire>()
        );
    }
}
