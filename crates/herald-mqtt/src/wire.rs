//! An MQTT connection as a [`Wire`] of edge's connection driver (`herald_edge::driver`): bytes
//! read without waiting and decoded into packets, the packets handled ([`crate::inbound`]), the
//! outbox's batch encoded into one buffer (its control packets as they are, its messages as
//! PUBLISH packets, `deliver.rs`, from their shared encoding, [`crate::outbound`]), keep-alive,
//! and the goodbye.
//!
//! **Keep-alive** is the client's, as MQTT has it: the server closes a connection it heard no
//! packet from for one and a half times the keep-alive [MQTT-3.1.2-22] (v5 DISCONNECT 0x8D Keep
//! Alive timeout). The roster's keep-alive ping is not used (MQTT clients ping; the roster only
//! brings shutdown). The deadline rides on the driver's expiry timer ([`Wire::expires`]: the
//! earlier of the token's expiry and the keep-alive deadline), moved on lazily: when it fires
//! early because packets came meanwhile, [`Wire::expired`] sets the next one.
//!
//! **Reading** keeps a buffer only while a packet is part-read; idle, the connection holds none.
//! Packets decoded before a malformed one are handled first, then the connection closes with the
//! decoder's answer (v5: DISCONNECT with its reason code and reason string; 3.1.1: close).
//!
//! **Answers** that cannot be encoded ([`MqttWire::send`]) close the connection (v5: DISCONNECT
//! 0x80) rather than leave the client waiting for them.

mod parked;

use std::borrow::Cow;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use herald_core::engine::{SubscribeOutcome, SubscribeRequest};
use herald_core::lifecycle::DisconnectReason;
use herald_core::outbox::{Batch, CloseReason, OutFrame, Outbox};
use herald_core::telemetry::telemetry;
use herald_core::{ChannelName, HeraldError};
use herald_edge::conn::Conn;
use herald_edge::driver::{self, Encoded, Ended, Wire};
use herald_edge::session::{ClientSession, Opened, PresenceAsk};

use crate::access::Rules;
use crate::inflight::{InboundQoS2, Outbound};
use crate::packet::TopicName;
use crate::packet::{self, DecodeError, ErrorResponse, Packet, ProtocolVersion, ReasonCode};
use crate::session::PersistentSession;
use crate::settings::MqttSettings;
use crate::subscriptions::Subscriptions;
use crate::takeover::Claim;

pub(crate) use parked::ParkedWire;

/// Most bytes read in one go before other work gets a turn.
const READ_BUDGET: usize = 64 * 1024;
/// The on-stack read buffer; nothing is kept between reads but a part-read packet.
const READ_CHUNK: usize = 8 * 1024;

/// How an MQTT connection ends, from the server's side (besides [`Ended::Gone`] and a slow
/// consumer's [`Ended::Cut`]).
#[derive(Debug)]
pub(crate) enum End {
    /// The server closes: v5 says why in a DISCONNECT with this reason code and reason
    /// string; 3.1.1 just closes.
    Disconnect(ReasonCode, Cow<'static, str>),
    /// The outbox was closed for this reason (told as a DISCONNECT in v5).
    Closed(CloseReason),
    /// The client sent DISCONNECT with this reason code.
    ClientDisconnected(ReasonCode),
    /// The node was fenced (`crate::cluster`): v5 DISCONNECT 0x9C Use another server, 3.1.1
    /// close; the persistent session and its stored will are left to the node that claims
    /// this one.
    Fenced,
}

/// One MQTT connection's state after its CONNECT.
pub(crate) struct MqttWire {
    /// The protocol-neutral client session (subscriptions, publish, registration).
    pub(crate) session: ClientSession,
    /// The version the CONNECT chose.
    pub(crate) version: ProtocolVersion,
    /// The listener's settings.
    pub(crate) settings: Arc<MqttSettings>,
    /// The anonymous mode's rules, for an anonymous client.
    pub(crate) anonymous: Option<Arc<Rules>>,
    /// v5 Request Problem Information: reason strings on acknowledgements.
    pub(crate) problem_information: bool,
    /// The client's Maximum Packet Size (`u32::MAX` without one).
    pub(crate) client_max_packet: u32,
    /// What each subscription was granted.
    pub(crate) subscriptions: Subscriptions,
    /// Outbound QoS 1 and 2: ids in flight and messages waiting.
    pub(crate) outbound: Outbound,
    /// The persistent session the connection holds, if its session outlives it (boxed: a
    /// clean session's connection pays one pointer).
    pub(crate) persist: Option<Box<PersistentSession>>,
    /// The device inbox the connection opened by subscribing to `$device` (`inbox.rs`;
    /// boxed: a connection without one pays one pointer).
    pub(crate) inbox: Option<Box<crate::inbox::InboxState>>,
    /// Inbound QoS 2: ids awaiting PUBREL.
    pub(crate) qos2: InboundQoS2,
    /// Inbound topic aliases (v5), set by the client's PUBLISH packets.
    pub(crate) aliases: Vec<(u16, TopicName)>,
    /// Outbound topic aliases (v5), set by the server's PUBLISH packets (`topic_aliases.rs`).
    pub(crate) topic_aliases: crate::topic_aliases::TopicAliases,
    /// The listener's `$SYS/` tree (`sys.rs`).
    pub(crate) sys: Arc<crate::sys::SysTree>,
    /// Bytes of a part-read packet (empty, with no allocation, between packets).
    read_buf: BytesMut,
    /// Packets decoded and not handled yet.
    pub(crate) incoming: VecDeque<Packet>,
    /// A decode error after the packets in `incoming`: the connection ends once they ran
    /// (boxed: rare, and every connection would pay its size).
    failed: Option<Box<DecodeError>>,
    /// The client closed its side after the packets in `incoming`.
    eof: bool,
    /// One and a half times the keep-alive, in milliseconds (0: no keep-alive).
    keep_alive_ms: u64,
    /// When a packet was last heard, in Unix milliseconds.
    last_heard_ms: u64,
    /// The keep-alive deadline the driver's timer is armed for (Unix seconds).
    keep_alive_deadline: Option<u64>,
    /// The connection's hold on its client identifier (a takeover ends it), and the one copy
    /// of the identifier it keeps (assigned if the client sent none): [`Claim::client_id`].
    pub(crate) claim: Claim,
    /// v5: the CONNECT's Session Expiry Interval was 0, so a DISCONNECT may not set one.
    pub(crate) session_expiry_zero: bool,
    /// An answer could not be encoded ([`MqttWire::send`]): the connection closes rather than
    /// leave the client waiting for it.
    unsendable: AtomicBool,
    /// The will, published when the connection ends other than by DISCONNECT 0x00
    /// (`will.rs`; boxed: a connection without one pays one pointer).
    pub(crate) will: Option<Box<packet::Will>>,
    /// How the connection ended calls for its will ([`crate::will::published_after`]), set
    /// by the goodbye.
    pub(crate) will_due: bool,
}

/// What [`MqttWire::new`] takes from an accepted CONNECT.
pub(crate) struct Start {
    pub(crate) version: ProtocolVersion,
    pub(crate) anonymous: Option<Arc<Rules>>,
    pub(crate) problem_information: bool,
    pub(crate) client_max_packet: Option<u32>,
    pub(crate) client_receive_maximum: u16,
    /// The client's Topic Alias Maximum (v5 CONNECT; 0: it takes no aliases).
    pub(crate) client_topic_alias_maximum: u16,
    pub(crate) keep_alive: u16,
    pub(crate) will: Option<packet::Will>,
    pub(crate) claim: Claim,
    pub(crate) session_expiry_zero: bool,
    pub(crate) persist: Option<Box<PersistentSession>>,
    pub(crate) sys: Arc<crate::sys::SysTree>,
}

impl MqttWire {
    /// The connection's state once `start` was accepted, around `session`, with `read_ahead`
    /// (bytes the client sent after its CONNECT) decoded.
    pub(crate) fn new(
        session: ClientSession,
        settings: Arc<MqttSettings>,
        start: Start,
        read_ahead: BytesMut,
    ) -> Self {
        let now = now_ms();
        let mut wire = MqttWire {
            session,
            version: start.version,
            anonymous: start.anonymous,
            problem_information: start.problem_information,
            client_max_packet: start.client_max_packet.unwrap_or(u32::MAX),
            subscriptions: Subscriptions::default(),
            outbound: Outbound::new(start.client_receive_maximum.min(settings.max_inflight_out)),
            persist: start.persist,
            inbox: None,
            qos2: InboundQoS2::new(now.saturating_mul(1000)),
            aliases: Vec::new(),
            topic_aliases: crate::topic_aliases::TopicAliases::new(
                start.client_topic_alias_maximum,
                settings.max_topic_aliases_out,
            ),
            sys: start.sys,
            read_buf: read_ahead,
            incoming: VecDeque::new(),
            failed: None,
            eof: false,
            keep_alive_ms: u64::from(start.keep_alive) * 1500,
            last_heard_ms: now,
            keep_alive_deadline: None,
            will: start.will.map(Box::new),
            will_due: false,
            claim: start.claim,
            session_expiry_zero: start.session_expiry_zero,
            unsendable: AtomicBool::new(false),
            settings,
        };
        wire.keep_alive_deadline = wire.next_deadline(now);
        wire.decode_buffered();
        wire
    }

    /// Subscribes the client session to `channel` as `request` says, with no frame of the
    /// session's own to confirm it: MQTT answers with its SUBACK, or, for a resumed session's
    /// subscriptions, not at all.
    pub(crate) async fn subscribe_quietly(
        &mut self,
        channel: &ChannelName,
        request: &SubscribeRequest,
    ) -> Result<Opened, HeraldError> {
        let no_confirmation = |_: &ChannelName, _: &SubscribeOutcome| -> Option<OutFrame> { None };
        self.session
            .subscribe(
                channel.public(),
                request,
                &PresenceAsk::default(),
                &no_confirmation,
            )
            .await
    }

    /// The connection's hold on its client identifier in the cluster, taken out once its
    /// session's end is stored (`serve.rs` hands it to a will waiting for its delay).
    pub(crate) fn take_cluster_hold(&mut self) -> Option<herald_core::claims::ClusterHold> {
        self.claim.take_cluster_hold()
    }

    /// Ends the connection as fenced (`crate::cluster`): its next batch says so.
    pub(crate) fn fence(&self) {
        self.claim.fence();
    }

    /// Whether the connection ends because the node was fenced: its persistent session is not
    /// ended here, nor its stored will published (`session/connection.rs`).
    pub(crate) fn is_fenced(&self) -> bool {
        self.claim.is_fenced()
    }

    /// The keep-alive deadline after a packet heard at `last_heard_ms`, in whole seconds, never
    /// before `now` (so a fired timer is never re-armed for the same second).
    fn next_deadline(&self, now: u64) -> Option<u64> {
        keep_alive_deadline(self.last_heard_ms, self.keep_alive_ms, now)
    }

    /// Whether the connection may park (its parked form asks the same,
    /// [`ParkedWire::may_stay_parked`]): no message waits for its packet id to be stored or for
    /// room in the window, no takeover wants it gone, no answer failed.
    pub(crate) fn may_stay_parked(&self) -> bool {
        !self.outbound.has_waiting()
            && !self.claim.is_taken()
            && !self.unsendable.load(Ordering::Relaxed)
    }

    /// Decodes every whole packet in the read buffer.
    fn decode_buffered(&mut self) {
        let before = self.incoming.len();
        while self.failed.is_none() {
            match packet::decode(
                &mut self.read_buf,
                Some(self.version),
                self.settings.max_packet_size,
            ) {
                Ok(Some(packet)) => self.incoming.push_back(packet),
                Ok(None) => break,
                Err(e) => self.failed = Some(Box::new(e)),
            }
        }
        if self.incoming.len() > before {
            self.last_heard_ms = now_ms();
        }
        if self.read_buf.is_empty() {
            // No allocation kept between packets.
            self.read_buf = BytesMut::new();
        }
    }

    /// Queues an encoded control packet (an acknowledgement) behind what the outbox holds. One
    /// that cannot be encoded (a field its version cannot carry: a server defect; or too large
    /// for the client's Maximum Packet Size even without its reason string) is logged at warn:
    /// the connection closes once the packet being handled is done ([`handle_incoming`])
    /// rather than leave the client waiting for an answer that never comes.
    pub(crate) fn send(&self, packet: &Packet) {
        let bytes = encode_for(packet, self.version, self.client_max_packet);
        if bytes.is_empty() {
            let error = packet::encode(packet, self.version, &mut BytesMut::new())
                .err()
                .map_or_else(
                    || "over the client's Maximum Packet Size".to_owned(),
                    |e| e.to_string(),
                );
            tracing::warn!(
                packet = packet.name(),
                version = ?self.version,
                %error,
                "MQTT: an answer could not be encoded; closing the connection"
            );
            self.unsendable.store(true, Ordering::Relaxed);
            return;
        }
        self.session.outbox().push(OutFrame::Control(bytes.into()));
    }

    /// A reason string for an acknowledgement, only if the client asked for problem
    /// information [MQTT-3.1.2-29] and speaks v5.
    pub(crate) fn reason_string(&self, why: impl Into<String>) -> Option<String> {
        (self.version == ProtocolVersion::V5 && self.problem_information).then(|| why.into())
    }
}

impl Wire for MqttWire {
    type End = End;
    /// Where each packet of the batch ends (offsets into the batch's bytes).
    type Cuts = Vec<usize>;

    fn outbox(&self) -> &Outbox {
        self.session.outbox()
    }

    fn expires(&self) -> Option<u64> {
        match (self.session.expires(), self.keep_alive_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn is_between_frames(&self) -> bool {
        self.read_buf.is_empty()
    }

    /// Parked (`crate::park`), nothing would send a message waiting for its packet id to be
    /// stored (the store's answer wakes the connection with a ping request, which a parked
    /// connection takes as the roster's).
    /// The parked form keeps no command budget either (a revived connection gets a fresh
    /// one), so a connection parks only once what it spent came back.
    fn may_park(&self) -> bool {
        self.may_stay_parked() && self.session.may_park()
    }

    fn has_input(&self) -> bool {
        !self.incoming.is_empty() || self.failed.is_some() || self.eof
    }

    fn handle_input<'a>(
        &'a mut self,
        _conn: &'a mut Conn,
    ) -> impl Future<Output = Option<Ended<End>>> + Send + 'a {
        handle_incoming(self)
    }

    fn read(&mut self, conn: &mut Conn) -> Option<Ended<End>> {
        let mut chunk = [0u8; READ_CHUNK];
        let mut budget = READ_BUDGET;
        while budget > 0 && self.failed.is_none() {
            match conn.try_read(&mut chunk) {
                Ok(0) => {
                    if self.incoming.is_empty() {
                        return Some(Ended::Gone);
                    }
                    self.eof = true;
                    break;
                }
                Ok(n) => {
                    self.read_buf.extend_from_slice(&chunk[..n]);
                    budget = budget.saturating_sub(n);
                    self.decode_buffered();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Some(Ended::Gone),
            }
        }
        None
    }

    fn encode(&mut self, batch: Batch, _active: &mut bool) -> Encoded<Self> {
        let Batch { frames, closed, .. } = batch;
        let mut bytes = Vec::new();
        let mut cuts = Vec::new();
        // What waited (for the window, or for its packet id to be stored) first, in order, as
        // far as it may go now.
        self.write_waiting(&mut bytes, &mut cuts);
        let mut messages = cuts.len() as u64;
        let mut lag_recorded = false;
        for frame in &frames {
            let written = match frame {
                OutFrame::Control(b) => {
                    bytes.extend_from_slice(b);
                    b.len()
                }
                OutFrame::Message(m) => {
                    if !lag_recorded {
                        herald_core::message::record_delivery_lag(m);
                        lag_recorded = true;
                    }
                    self.write_message(&mut bytes, m, false)
                }
                OutFrame::Replayed(m) => self.write_message(&mut bytes, m, true),
                OutFrame::Presence(_) => 0,
            };
            if written > 0 {
                cuts.push(bytes.len());
                messages += u64::from(!matches!(frame, OutFrame::Control(_)));
            }
        }
        if messages > 0 {
            telemetry().written_mqtt.increment(messages);
        }
        let mut ends = closed.map(End::Closed);
        if ends.is_none() && self.claim.is_fenced() {
            ends = Some(End::Fenced);
        } else if ends.is_none() && self.claim.is_taken() {
            let why = "another connection with this client identifier took over [MQTT-3.1.4-3]";
            ends = Some(End::Disconnect(ReasonCode::SessionTakenOver, why.into()));
        }
        // Messages waiting for acknowledgements are bounded like the outbox.
        if ends.is_none()
            && self.outbound.waiting_bytes() > self.session.edge().settings.outbox_bytes
        {
            self.session.outbox().close(CloseReason::SlowConsumer);
            ends = Some(End::Closed(CloseReason::SlowConsumer));
        }
        Encoded {
            bytes,
            cuts,
            ends: ends.map(Ended::Wire),
            last: false,
        }
    }

    fn cut_end(cuts: &Vec<usize>, sent: usize, _rest: &[u8], at: usize) -> usize {
        match cuts.iter().find(|&&end| end > sent + at) {
            Some(end) => end - sent,
            None => at,
        }
    }

    fn expired(&mut self) -> Option<Ended<End>> {
        let now = now_ms();
        if self.keep_alive_ms > 0 && now >= self.last_heard_ms + self.keep_alive_ms {
            let why = format!(
                "no packet for one and a half times the keep-alive ({} s) [MQTT-3.1.2-22]",
                self.keep_alive_ms / 1500
            );
            return Some(Ended::Wire(End::Disconnect(
                ReasonCode::KeepAliveTimeout,
                why.into(),
            )));
        }
        if self.session.expires().is_some_and(|exp| exp <= now / 1000) {
            return Some(Ended::Wire(End::Closed(CloseReason::TokenExpired)));
        }
        // Packets came since the timer was armed: the next deadline.
        self.keep_alive_deadline = self.next_deadline(now);
        None
    }

    fn goodbye<'a>(
        &'a mut self,
        conn: &'a mut Conn,
        ended: Ended<End>,
    ) -> impl Future<Output = ()> + Send + 'a {
        let reason = match &ended {
            Ended::Wire(End::Closed(reason)) => Some(DisconnectReason::from(*reason)),
            Ended::Wire(End::Disconnect(ReasonCode::KeepAliveTimeout, _)) => {
                Some(DisconnectReason::TimedOut)
            }
            Ended::Cut(_) => Some(DisconnectReason::SlowConsumer),
            Ended::Wire(End::Fenced) => Some(DisconnectReason::NodeLost),
            _ => None,
        };
        if let Some(reason) = reason {
            self.session.set_disconnect_reason(reason);
        }
        self.will_due = crate::will::published_after(&ended);
        self.session.close();
        let disconnect = match ended {
            Ended::Wire(End::Disconnect(code, why)) => Some((code, why, Vec::new())),
            Ended::Wire(End::Fenced) => {
                let why = "this node lost the cluster's bus (Redis) and cannot hold the \
                           session; connect to another node, which resumes it";
                Some((ReasonCode::UseAnotherServer, why.into(), Vec::new()))
            }
            Ended::Wire(End::Closed(reason)) => {
                let (code, why) = close_reason_code(reason);
                Some((code, why.into(), Vec::new()))
            }
            Ended::Cut(rest) => {
                let (code, why) = close_reason_code(CloseReason::SlowConsumer);
                Some((code, why.into(), rest))
            }
            Ended::Wire(End::ClientDisconnected(_)) | Ended::Gone => None,
        };
        let version = self.version;
        let max = self.client_max_packet;
        async move {
            let Some((code, why, mut bytes)) = disconnect else {
                return;
            };
            if version == ProtocolVersion::V5 {
                let packet = Packet::Disconnect(packet::Disconnect {
                    reason_code: code,
                    properties: packet::DisconnectProperties {
                        reason_string: Some(why.into_owned()),
                        ..Default::default()
                    },
                });
                bytes.extend_from_slice(&encode_for(&packet, version, max));
            }
            if !bytes.is_empty() {
                let write = driver::write_rest(conn, bytes);
                let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
            }
        }
    }
}

/// Handles the packets decoded so far, then a decode error or the client's close that came
/// after them; returns how the connection ends, if it does. The driver boxes this future, so
/// it is no part of an idle connection.
async fn handle_incoming(wire: &mut MqttWire) -> Option<Ended<End>> {
    while let Some(packet) = wire.incoming.pop_front() {
        let mut end = crate::inbound::handle(wire, packet).await;
        if end.is_none() && wire.unsendable.load(Ordering::Relaxed) {
            let why = "the server could not encode its answer to the last packet";
            end = Some(End::Disconnect(ReasonCode::UnspecifiedError, why.into()));
        }
        if let Some(end) = end {
            wire.incoming.clear();
            return Some(Ended::Wire(end));
        }
    }
    // The queue's room (four decoded packets, 832 bytes, jemalloc's 896-byte class) is not
    // kept between reads: a connection that parks would otherwise hold it until then, and the
    // classes' slabs would be left part-used by the ones freed last (issue 33).
    if wire.incoming.capacity() > 0 {
        wire.incoming = VecDeque::new();
    }
    // Once per read, not per SUBSCRIBE (`session/connection.rs`).
    wire.store_changed_subscriptions();
    if wire.outbound.has_waiting() {
        // Freed ids: the next batch sends what waited (see `encode`).
        wire.session.outbox().request_ping();
    }
    if let Some(e) = wire.failed.take() {
        return Some(match e.response {
            ErrorResponse::Disconnect => Ended::Wire(End::Disconnect(e.reason_code, e.message)),
            _ => Ended::Gone,
        });
    }
    if std::mem::take(&mut wire.eof) {
        return Some(Ended::Gone);
    }
    None
}

/// The v5 DISCONNECT reason code and reason string for an outbox's close reason.
fn close_reason_code(reason: CloseReason) -> (ReasonCode, &'static str) {
    let code = match reason {
        CloseReason::SlowConsumer => ReasonCode::QuotaExceeded,
        CloseReason::Shutdown => ReasonCode::ServerShuttingDown,
        CloseReason::TokenExpired => ReasonCode::NotAuthorized,
        CloseReason::Revoked
        | CloseReason::AppDeleted
        | CloseReason::SecretChanged
        | CloseReason::DeviceRevoked => ReasonCode::AdministrativeAction,
        CloseReason::RateLimited => ReasonCode::MessageRateTooHigh,
        CloseReason::StoreUnavailable => ReasonCode::ServerBusy,
        CloseReason::ResumeLost => ReasonCode::UnspecifiedError,
    };
    (code, reason.message())
}

/// `packet` encoded for `version`, within the client's Maximum Packet Size: a reason string
/// and user properties that make it too large are left out [MQTT-3.1.2-25]; empty if it
/// cannot be encoded or still does not fit.
pub(crate) fn encode_for(packet: &Packet, version: ProtocolVersion, max: u32) -> Vec<u8> {
    let mut packet = Cow::Borrowed(packet);
    if packet::encoded_len(&packet, version) > max as usize {
        strip_problem_information(packet.to_mut());
    }
    if packet::encoded_len(&packet, version) > max as usize {
        return Vec::new();
    }
    let mut out = BytesMut::new();
    match packet::encode(&packet, version, &mut out) {
        Ok(()) => out.to_vec(),
        Err(_) => Vec::new(),
    }
}

/// Leaves out a packet's reason string and user properties.
fn strip_problem_information(packet: &mut Packet) {
    let (reason, users) = match packet {
        Packet::ConnAck(p) => (
            &mut p.properties.reason_string,
            &mut p.properties.user_properties,
        ),
        Packet::PubAck(p) => (
            &mut p.properties.reason_string,
            &mut p.properties.user_properties,
        ),
        Packet::PubRec(p) => (
            &mut p.properties.reason_string,
            &mut p.properties.user_properties,
        ),
        Packet::PubRel(p) => (
            &mut p.properties.reason_string,
            &mut p.properties.user_properties,
        ),
        Packet::PubComp(p) => (
            &mut p.properties.reason_string,
            &mut p.properties.user_properties,
        ),
        Packet::SubAck(p) => (
            &mut p.properties.reason_string,
            &mut p.properties.user_properties,
        ),
        Packet::UnsubAck(p) => (
            &mut p.properties.reason_string,
            &mut p.properties.user_properties,
        ),
        Packet::Disconnect(p) => (
            &mut p.properties.reason_string,
            &mut p.properties.user_properties,
        ),
        _ => return,
    };
    *reason = None;
    users.clear();
}

/// The keep-alive deadline (whole Unix seconds, never before `now`'s next second, so a fired
/// timer is never re-armed for the same second) of a connection last heard at
/// `last_heard_ms` with one and a half times its keep-alive `keep_alive_ms` (0: none).
fn keep_alive_deadline(last_heard_ms: u64, keep_alive_ms: u64, now: u64) -> Option<u64> {
    if keep_alive_ms == 0 {
        return None;
    }
    let due = last_heard_ms + keep_alive_ms;
    Some(due.div_ceil(1000).max(now / 1000 + 1))
}

/// The time in Unix milliseconds.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_ends_after_the_packet_in_progress() {
        let cuts = vec![5, 8, 12];
        assert_eq!(MqttWire::cut_end(&cuts, 0, &[], 0), 5);
        assert_eq!(MqttWire::cut_end(&cuts, 0, &[], 5), 8);
        assert_eq!(MqttWire::cut_end(&cuts, 4, &[], 1), 4);
        assert_eq!(MqttWire::cut_end(&cuts, 0, &[], 12), 12);
    }

    #[test]
    fn a_disconnect_too_large_for_the_client_loses_its_reason_string() {
        let packet = Packet::Disconnect(packet::Disconnect {
            reason_code: ReasonCode::ProtocolError,
            properties: packet::DisconnectProperties {
                reason_string: Some("x".repeat(100)),
                ..Default::default()
            },
        });
        let full = encode_for(&packet, ProtocolVersion::V5, u32::MAX);
        assert!(full.len() > 100);
        let short = encode_for(&packet, ProtocolVersion::V5, 50);
        assert!(!short.is_empty() && short.len() < 50);
        assert_eq!(short[0], 0xE0);
    }
}
