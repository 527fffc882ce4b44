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
//! particular is dropped with its capacity (a connection in a task frees it too once the
//! packets read were handled). The `$SYS/` tree is not kept twice: revival takes it from the
//! listener's sessions. The client identifier is the claim's alone, parked or in a task
//! ([`Claim::client_id`]).
//!
//! **Lean or full.** Most idle connections hold one subscription (or none) and nothing else:
//! no wildcard or shared subscription, no Subscription Identifier, no QoS 1 or 2 packet in
//! flight either way, no topic alias set, no persistent session, device inbox, will or
//! anonymous rules, no Maximum Packet Size of the client's and no Receive Maximum below the
//! listener's `max_inflight_out`. Such a connection's record keeps its lone subscription's
//! options in a byte, its next outbound packet id and its alias maximum inline (`lone`,
//! `next_id`, `alias_max`; its outbound window is the listener's, and the inbound QoS 2 keys
//! are numbered anew from the revival's time, [`InboundQoS2::is_idle`]). Any other
//! connection keeps every one of those parts as it is, its lists shrunk to their length, in
//! one box (`full`), so a revived connection carries on exactly where it parked either way.
//! Either keeps the version and its two flags in a byte and the keep-alive and the last
//! packet heard in whole seconds, so the record fits jemalloc's 128-byte class (160 until the
//! parked client session's app id became one word and its rare claims and grants one pointer,
//! the claim one pointer and the listener's sessions were reached through the edge; 192 until
//! the parked client session left its token's stamp to the live-client registry).

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use bytes::BytesMut;
use herald_core::lifecycle::Transport;
use herald_core::ChannelName;
use herald_edge::driver::Marks;
use herald_edge::session::{ClientSession, ParkedSession};

use super::MqttWire;
use crate::access::Rules;
use crate::inbox::InboxState;
use crate::inflight::{InboundQoS2, Outbound};
use crate::packet::{self, ProtocolVersion, QoS, TopicName};
use crate::park::Over;
use crate::session::{PersistentSession, Sessions};
use crate::settings::MqttSettings;
use crate::subscriptions::{Granted, Subscriptions};
use crate::takeover::Claim;
use crate::topic_aliases::TopicAliases;

/// A parked MQTT connection's state (see the module docs): 120 bytes, so that with the roster
/// place and the socket the record fits jemalloc's 128-byte class (a unit test in
/// `crate::park` pins it).
pub(crate) struct ParkedWire {
    pub(crate) session: ParkedSession,
    claim: Claim,
    /// Every other part, for a connection that is not lean.
    full: Option<Box<Full>>,
    /// When a packet was last heard, in Unix seconds rounded up (so the keep-alive deadline
    /// is never earlier than in a task, and at most a second later; deadlines are whole
    /// seconds anyway).
    last_heard_s: u32,
    /// The keep-alive in seconds, as the CONNECT gave it (its deadline is one and a half
    /// times that).
    keep_alive_s: u16,
    /// A lean connection's next outbound packet id ([`Outbound::idle`]; its window is the
    /// listener's `max_inflight_out`).
    next_id: u16,
    /// A lean connection's Topic Alias Maximum towards its client.
    alias_max: u16,
    /// The driver's marks.
    marks: Marks,
    /// What the connection's socket carries (`crate::park`).
    pub(crate) over: Over,
    /// The version, Request Problem Information and a zero Session Expiry Interval
    /// ([`Flags`]).
    flags: u8,
    /// What a lean connection's lone exact subscription was granted, packed
    /// ([`pack_granted`]), 0 for no subscription: its channel is the client session's one
    /// subscription's ([`ParkedSession::lone_channel`]), so the name is not kept twice.
    lone: u8,
}

/// The bits of [`ParkedWire::flags`].
struct Flags;

impl Flags {
    const V5: u8 = 1;
    const PROBLEM_INFORMATION: u8 = 2;
    const SESSION_EXPIRY_ZERO: u8 = 4;
}

/// The bits of [`ParkedWire::lone`]: the QoS in the low two, then Retain As Published and No
/// Local, and the top bit set for a subscription (none has a Subscription Identifier: a
/// connection whose lone subscription has one is not lean).
const LONE_RETAIN_AS_PUBLISHED: u8 = 4;
const LONE_NO_LOCAL: u8 = 8;
const LONE_HELD: u8 = 0x80;

/// `granted` in one byte, if it has no Subscription Identifier.
fn pack_granted(granted: &Granted) -> Option<u8> {
    if granted.identifier.is_some() {
        return None;
    }
    let mut packed = LONE_HELD | granted.qos as u8;
    if granted.retain_as_published {
        packed |= LONE_RETAIN_AS_PUBLISHED;
    }
    if granted.no_local {
        packed |= LONE_NO_LOCAL;
    }
    Some(packed)
}

/// What [`pack_granted`] packed (`None` for 0, no subscription).
fn unpack_granted(packed: u8) -> Option<Granted> {
    if packed & LONE_HELD == 0 {
        return None;
    }
    let qos = match packed & 3 {
        0 => QoS::AtMostOnce,
        1 => QoS::AtLeastOnce,
        _ => QoS::ExactlyOnce,
    };
    Some(Granted {
        qos,
        retain_as_published: packed & LONE_RETAIN_AS_PUBLISHED != 0,
        no_local: packed & LONE_NO_LOCAL != 0,
        identifier: None,
    })
}

/// The parts of a connection that is not lean, as they were in its task.
struct Full {
    /// The listener's settings, when they are not those of its sessions
    /// ([`Sessions::settings`]).
    settings: Option<Arc<MqttSettings>>,
    anonymous: Option<Arc<Rules>>,
    subscriptions: Subscriptions,
    outbound: Outbound,
    persist: Option<Box<PersistentSession>>,
    inbox: Option<Box<InboxState>>,
    qos2: InboundQoS2,
    aliases: Box<[(u16, TopicName)]>,
    topic_aliases: TopicAliases,
    will: Option<Box<packet::Will>>,
    /// The client's Maximum Packet Size (a lean connection's is `u32::MAX`, none given).
    client_max_packet: u32,
}

impl MqttWire {
    /// The connection's state in its parked form, with its listener's `sessions`, the
    /// driver's `marks` and what its socket carries (`over`). Call it only on a connection
    /// the driver let park (nothing read in part, nothing decoded and not handled).
    pub(crate) fn park(self, sessions: &Sessions, marks: Marks, over: Over) -> ParkedWire {
        let MqttWire {
            session,
            version,
            settings,
            anonymous,
            problem_information,
            client_max_packet,
            subscriptions,
            outbound,
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
        let mut flags = 0;
        if version == ProtocolVersion::V5 {
            flags |= Flags::V5;
        }
        if problem_information {
            flags |= Flags::PROBLEM_INFORMATION;
        }
        if session_expiry_zero {
            flags |= Flags::SESSION_EXPIRY_ZERO;
        }
        let mut parked = ParkedWire {
            session: session.park(),
            claim,
            full: None,
            // Rounded up; a time past 2106 is not reached.
            last_heard_s: u32::try_from(last_heard_ms.div_ceil(1000)).unwrap_or(u32::MAX),
            // One and a half times the CONNECT's 16-bit keep-alive (`MqttWire::new`).
            keep_alive_s: u16::try_from(keep_alive_ms / 1500).unwrap_or(u16::MAX),
            next_id: 0,
            alias_max: 0,
            marks,
            over,
            flags,
            lone: 0,
        };
        let listeners_window = Outbound::new(sessions.settings.max_inflight_out)
            .idle()
            .map(|(window, _)| window);
        let rare_parts_unused = anonymous.is_none()
            && persist.is_none()
            && inbox.is_none()
            && aliases.is_empty()
            && will.is_none()
            && client_max_packet == u32::MAX
            && (Arc::ptr_eq(&settings, &sessions.settings) || settings == sessions.settings);
        let lone = subscriptions.lone().and_then(|lone| match &lone {
            None => Some((lone, 0)),
            Some((_, granted)) => pack_granted(granted).map(|packed| (lone, packed)),
        });
        match (
            lone,
            outbound.idle(),
            qos2.is_idle(),
            topic_aliases.unused_max(),
        ) {
            (Some((lone, packed)), Some((window, next_id)), true, Some(alias_max))
                if rare_parts_unused
                    && Some(window) == listeners_window
                    && named_by(&lone, &parked.session) =>
            {
                parked.lone = packed;
                parked.next_id = next_id;
                parked.alias_max = alias_max;
            }
            _ => {
                let (mut subscriptions, mut outbound) = (subscriptions, outbound);
                subscriptions.shrink_to_fit();
                outbound.shrink_to_fit();
                let settings = (!Arc::ptr_eq(&settings, &sessions.settings)).then_some(settings);
                parked.full = Some(Box::new(Full {
                    settings,
                    anonymous,
                    subscriptions,
                    outbound,
                    persist,
                    inbox,
                    qos2,
                    aliases: aliases.into_boxed_slice(),
                    topic_aliases,
                    will,
                    client_max_packet,
                }));
            }
        }
        parked
    }
}

/// Whether a lean connection's lone subscription (if any) is on the channel of the client
/// session's one subscription, which then gives its name back on revival.
fn named_by(lone: &Option<(ChannelName, Granted)>, session: &ParkedSession) -> bool {
    match lone {
        None => true,
        Some((channel, _)) => session.lone_channel() == Some(channel),
    }
}

impl ParkedWire {
    /// The connection's state again, as it parked (with a fresh command budget), and the
    /// driver's marks, with the listener's persistent sessions (`crate::park`'s record keeps
    /// them).
    pub(crate) fn revive(self, sessions: &Sessions) -> (MqttWire, Marks) {
        let ParkedWire {
            session,
            claim,
            full,
            last_heard_s,
            keep_alive_s,
            next_id,
            alias_max,
            marks,
            over: _,
            flags,
            lone,
        } = self;
        let lone = unpack_granted(lone).and_then(|granted| {
            let channel = session.lone_channel()?;
            Some((channel.clone(), granted))
        });
        let full = match full {
            Some(full) => *full,
            None => Full {
                settings: None,
                anonymous: None,
                subscriptions: Subscriptions::from_lone(lone),
                outbound: Outbound::from_idle((sessions.settings.max_inflight_out, next_id)),
                persist: None,
                inbox: None,
                qos2: InboundQoS2::new(super::now_ms().saturating_mul(1000)),
                aliases: Box::default(),
                topic_aliases: TopicAliases::new(alias_max, alias_max),
                will: None,
                client_max_packet: u32::MAX,
            },
        };
        let version = match flags & Flags::V5 {
            0 => ProtocolVersion::V311,
            _ => ProtocolVersion::V5,
        };
        let keep_alive_ms = u64::from(keep_alive_s) * 1500;
        let last_heard_ms = u64::from(last_heard_s) * 1000;
        let mut wire = MqttWire {
            session: ClientSession::revive_for(Transport::Mqtt, session),
            version,
            settings: full.settings.unwrap_or_else(|| sessions.settings.clone()),
            anonymous: full.anonymous,
            problem_information: flags & Flags::PROBLEM_INFORMATION != 0,
            client_max_packet: full.client_max_packet,
            subscriptions: full.subscriptions,
            outbound: full.outbound,
            persist: full.persist,
            inbox: full.inbox,
            qos2: full.qos2,
            aliases: full.aliases.into_vec(),
            topic_aliases: full.topic_aliases,
            sys: sessions.sys.clone(),
            read_buf: BytesMut::new(),
            incoming: VecDeque::new(),
            failed: None,
            eof: false,
            keep_alive_ms,
            last_heard_ms,
            keep_alive_deadline: None,
            claim,
            session_expiry_zero: flags & Flags::SESSION_EXPIRY_ZERO != 0,
            unsendable: AtomicBool::new(false),
            will: full.will,
            will_due: false,
        };
        // The deadline as it stands, past or not: a past one fires the driver's timer at once,
        // which closes a client that stayed silent (or sets the next deadline for one that
        // pinged while parked). One set a second ahead would let the revived connection park
        // again first, and the parking revive it again at that second, and so on.
        wire.keep_alive_deadline = super::keep_alive_deadline(last_heard_ms, keep_alive_ms, 0);
        (wire, marks)
    }

    /// Whether the connection may stay parked: as [`MqttWire::may_stay_parked`].
    pub(crate) fn may_stay_parked(&self) -> bool {
        let waiting = (self.full.as_ref()).is_some_and(|full| full.outbound.has_waiting());
        !waiting && !self.claim.is_taken()
    }

    /// A packet was heard now (a PINGREQ answered while parked, `crate::park`).
    pub(crate) fn heard_now(&mut self) {
        let now_s = super::now_ms().div_ceil(1000);
        self.last_heard_s = u32::try_from(now_s).unwrap_or(u32::MAX);
    }

    /// When the parked connection is revived at the latest (Unix seconds): its token's expiry
    /// or its keep-alive deadline, whichever comes first.
    pub(crate) fn expires(&self) -> Option<u64> {
        let keep_alive_ms = u64::from(self.keep_alive_s) * 1500;
        let last_heard_ms = u64::from(self.last_heard_s) * 1000;
        let keep_alive = super::keep_alive_deadline(last_heard_ms, keep_alive_ms, super::now_ms());
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
            ("its full parts (boxed, when not lean)", size_of::<Full>()),
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
    fn a_lone_subscriptions_options_come_back_from_their_byte() {
        assert_eq!(unpack_granted(0), None, "no subscription");
        for qos in [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce] {
            for (retain_as_published, no_local) in
                [(false, false), (true, false), (false, true), (true, true)]
            {
                let granted = Granted {
                    qos,
                    retain_as_published,
                    no_local,
                    identifier: None,
                };
                let packed = pack_granted(&granted).expect("no identifier");
                assert_eq!(unpack_granted(packed), Some(granted));
            }
        }
        let identified = Granted {
            qos: QoS::AtMostOnce,
            retain_as_published: false,
            no_local: false,
            identifier: std::num::NonZeroU32::new(7),
        };
        assert_eq!(pack_granted(&identified), None, "kept in the full parts");
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
