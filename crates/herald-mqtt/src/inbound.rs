//! What a connection does with each packet its client sends after CONNECT: PUBLISH at QoS 0,
//! 1 and 2 (stored through the client session's one publish rule, acknowledged after the append
//! committed; a persistent session's QoS 2 packet ids held in its store, written by the
//! message's append, their release deferred before the PUBCOMP to the session's next append
//! or the session writer's next batch), the acknowledgements of the
//! server's own PUBLISH packets, SUBSCRIBE and UNSUBSCRIBE to exact topics, to wildcard filters
//! (`wildcards.rs`) and shared subscriptions (`shared.rs`), PINGREQ and DISCONNECT. Every answer is queued in the connection's outbox, so
//! answers and messages reach the client in the order they were produced.
//!
//! Herald's errors become reason codes ([`publish_code`], [`subscribe_code`]); a packet the
//! server must not receive (CONNACK, SUBACK, ... from a client, AUTH without enhanced
//! authentication) and a PUBLISH carrying a Subscription Identifier [MQTT-3.3.4-6] are Protocol
//! Errors: v5 DISCONNECT 0x82, 3.1.1 close.

use std::num::NonZeroU32;

use herald_core::engine::SubscribeRequest;
use herald_core::limits::Admission;
use herald_core::message::SharedMessage;
use herald_core::outbox::{CloseReason, OutFrame};
use herald_core::{ErrorCode, HeraldError};

use crate::inflight::{qos2_key, Arrival};
use crate::origin;
use crate::packet::{
    AckProperties, Packet, ProtocolVersion, PubAck, PubComp, PubRec, PubRel, Publish, QoS,
    ReasonCode, RetainHandling, SubAck, Subscribe, TopicName, UnsubAck, Unsubscribe,
};
use crate::payload::{self, MessageProps};
use crate::subscriptions::Granted;
use crate::topic_map::{self, FilterTarget};
use crate::wire::{End, MqttWire};

/// Handles one packet; returns how the connection ends, if it does.
pub(crate) async fn handle(wire: &mut MqttWire, packet: Packet) -> Option<End> {
    // PUBLISH and SUBSCRIBE count against the connection's command limit, as a WebSocket's
    // commands do (`limits.command`): over it they are refused (0x97 Quota exceeded, a QoS 0
    // PUBLISH dropped), and a client that goes on through a burst of refusals is disconnected
    // (0x96 Message rate too high).
    if matches!(packet, Packet::Publish(_) | Packet::Subscribe(_)) {
        match wire.session.admit_command() {
            Admission::Run => {}
            Admission::Refuse(wait) => {
                let e = wire.session.edge().limits.command_refused(wait);
                refuse_over_limit(wire, &packet, e.message);
                return None;
            }
            Admission::Disconnect => {
                wire.session.edge().limits.command_flood();
                wire.session.outbox().close(CloseReason::RateLimited);
                return Some(End::Closed(CloseReason::RateLimited));
            }
        }
    }
    match packet {
        Packet::Publish(publish) => return publish_in(wire, publish).await,
        Packet::PubAck(ack) => {
            // An unknown id is tolerated (a client's duplicate acknowledgement).
            if let Some(sent) = wire.outbound.acknowledge(ack.packet_id) {
                wire.subscriptions.shared.settled(&sent.channel, sent.seq);
                wire.position_acknowledged(&sent.channel, sent.seq);
                wire.qos1_acknowledged(&sent);
                // An inbox push's PUBACK is its ack (`inbox.rs`).
                crate::inbox::acknowledged(wire, &sent.channel, sent.seq).await;
            }
        }
        Packet::PubRec(rec) => {
            let mut rel = PubRel::new(rec.packet_id);
            match wire.outbound.received(rec.packet_id) {
                // A failure code ends the exchange [MQTT-4.3.3-4]: the id is free.
                Some((sent, _)) if rec.reason_code.is_error() => {
                    wire.subscriptions.shared.settled(&sent.channel, sent.seq);
                    wire.outbound.complete(rec.packet_id);
                    wire.position_acknowledged(&sent.channel, sent.seq);
                    wire.qos2_completed(&sent);
                    return None;
                }
                // The first PUBREC moves the position; a repeated one only gets PUBREL again.
                Some((sent, true)) => {
                    wire.subscriptions.shared.settled(&sent.channel, sent.seq);
                    wire.qos2_received(&sent);
                }
                Some((_, false)) => {}
                None if wire.version == ProtocolVersion::V5 => {
                    rel.reason_code = ReasonCode::PacketIdentifierNotFound;
                }
                None => {}
            }
            wire.send(&Packet::PubRel(rel));
        }
        Packet::PubComp(comp) => {
            // An unknown id is tolerated like a PUBACK's.
            if let Some(sent) = wire.outbound.complete(comp.packet_id) {
                wire.qos2_completed(&sent);
            }
        }
        Packet::PubRel(rel) => release_qos2(wire, rel),
        Packet::Subscribe(subscribe) => {
            let ended = subscribe_to(wire, subscribe).await;
            // What a resumed session's replay no longer brings goes now (`crate::session`).
            wire.resend_no_longer_replayed().await;
            return ended;
        }
        Packet::Unsubscribe(unsubscribe) => {
            unsubscribe_from(wire, unsubscribe);
            wire.resend_no_longer_replayed().await;
        }
        Packet::PingReq => wire.send(&Packet::PingResp),
        Packet::Disconnect(disconnect) => {
            let expiry = disconnect.properties.session_expiry_interval;
            if wire.session_expiry_zero && expiry.is_some_and(|secs| secs != 0) {
                let why = "a Session Expiry Interval in DISCONNECT after 0 in CONNECT";
                return Some(End::Disconnect(ReasonCode::ProtocolError, why.into()));
            }
            if let Some(secs) = expiry {
                wire.set_session_expiry(secs);
            }
            return Some(End::ClientDisconnected(disconnect.reason_code));
        }
        other => {
            let why = match other {
                Packet::Auth(_) => "AUTH without an Authentication Method in CONNECT".into(),
                other => format!("a client may not send {}", other.name()),
            };
            return Some(End::Disconnect(ReasonCode::ProtocolError, why.into()));
        }
    }
    None
}

/// Answers a PUBLISH or SUBSCRIBE refused by the command limit: 0x97 Quota exceeded in its
/// acknowledgement (3.1.1: a positive PUBACK or PUBREC, the message dropped [MQTT-3.3.5-2], and
/// SUBACK's failure code).
fn refuse_over_limit(wire: &MqttWire, packet: &Packet, why: String) {
    let code = ReasonCode::QuotaExceeded;
    let v5 = wire.version == ProtocolVersion::V5;
    match packet {
        Packet::Publish(p) => match (p.qos, p.packet_id) {
            (QoS::ExactlyOnce, Some(id)) => {
                let mut rec = PubRec::new(id);
                if v5 {
                    rec.reason_code = code;
                    rec.properties = ack_properties(wire, why);
                }
                wire.send(&Packet::PubRec(rec));
            }
            (_, Some(id)) => {
                let mut ack = PubAck::new(id);
                if v5 {
                    ack.reason_code = code;
                    ack.properties = ack_properties(wire, why);
                }
                wire.send(&Packet::PubAck(ack));
            }
            (_, None) => {}
        },
        Packet::Subscribe(s) => wire.send(&Packet::SubAck(SubAck {
            packet_id: s.packet_id,
            properties: ack_properties(wire, why),
            reason_codes: vec![code; s.filters.len()],
        })),
        _ => {}
    }
}

/// Handles a PUBLISH: resolves its topic (and alias), checks it, stores it, acknowledges it.
async fn publish_in(wire: &mut MqttWire, publish: Publish) -> Option<End> {
    if !publish.properties.subscription_identifiers.is_empty() {
        // The server's to set, on what it sends (MQTT 5.0 3.3.2.3.8).
        let why = "a PUBLISH from a client may not carry a Subscription Identifier [MQTT-3.3.4-6]";
        return Some(End::Disconnect(ReasonCode::ProtocolError, why.into()));
    }
    let topic = match resolve_alias(wire, &publish) {
        Ok(topic) => topic,
        Err(end) => return Some(end),
    };
    let Some(id) = publish.packet_id else {
        // QoS 0: no answer; a refusal is told in v5 only by DISCONNECT for a bad topic.
        let key = origin::key(wire.claim.client_id(), publish.qos, wire.qos2.next_n());
        return match store(wire, &publish, &topic, Some(key), None).await {
            Err((ReasonCode::TopicNameInvalid, why)) => {
                Some(End::Disconnect(ReasonCode::TopicNameInvalid, why.into()))
            }
            _ => None,
        };
    };
    if publish.qos == QoS::ExactlyOnce {
        return publish_qos2(wire, &publish, &topic, id).await;
    }
    let mut ack = PubAck::new(id);
    let key = origin::key(wire.claim.client_id(), publish.qos, wire.qos2.next_n());
    if let Err((code, why)) = store(wire, &publish, &topic, Some(key), None).await {
        match refusal_ack(wire, &topic, code, why) {
            Ok(Some((code, properties))) => {
                ack.reason_code = code;
                ack.properties = properties;
            }
            Ok(None) => {}
            Err(end) => return Some(end),
        }
    }
    wire.send(&Packet::PubAck(ack));
    None
}

/// Handles a QoS 2 PUBLISH with packet id `id`: stored once, answered with PUBREC, its id held
/// until its PUBREL. A persistent session's hold is written by the message's append, in its
/// transaction (core's `SessionHold`): durable with the message before the PUBREC, so a resend
/// after a restart, or on another node, is not stored twice (`crate::session`), and the
/// PUBREC waits for no other commit.
async fn publish_qos2(
    wire: &mut MqttWire,
    publish: &Publish,
    topic: &TopicName,
    id: std::num::NonZeroU16,
) -> Option<End> {
    let (mut n, recovered) = match wire.qos2.arrival(id, publish.dup) {
        Arrival::Held => {
            wire.send(&Packet::PubRec(PubRec::new(id)));
            return None;
        }
        Arrival::New(n) => (n, false),
        Arrival::Recovered(n) => (n, true),
    };
    // Lenient with a client over the Receive Maximum (as Mosquitto 2.1.1 had to be), up to
    // twice it.
    let held = wire.qos2.len();
    let bound = usize::from(wire.settings.receive_maximum).max(1) * 2;
    if !recovered && held >= bound {
        let why = format!("more than {bound} QoS 2 messages awaiting PUBREL");
        return Some(End::Disconnect(
            ReasonCode::ReceiveMaximumExceeded,
            why.into(),
        ));
    }
    let mut stored = store_qos2(wire, publish, topic, id, n).await;
    if recovered {
        // A resend of the message its stored hold is for finds that message under its key.
        // A different one is a new message whose first PUBLISH a crash lost together with
        // the release of the id's message before (its PUBCOMP had gone): stored as new.
        let other =
            |earlier: &SharedMessage| payload::from_data(&earlier.data).payload != publish.payload;
        if matches!(&stored, Ok(Some(earlier)) if other(earlier)) {
            n = wire.qos2.next_n();
            stored = store_qos2(wire, publish, topic, id, n).await;
        }
    }
    let mut rec = PubRec::new(id);
    match stored {
        Ok(_) => wire.qos2.hold(id, n),
        Err((code, why)) => {
            // The id is not held after a refusal: a hold taken on from the session's store
            // leaves it before the answer, since the client may reuse the id at once.
            if let Some(was) = wire.qos2.release(id) {
                if let Some(release) = wire.qos2_release_write(id, was) {
                    let _ = release.await;
                }
            }
            match refusal_ack(wire, topic, code, why) {
                Ok(Some((code, properties))) => {
                    rec.reason_code = code;
                    rec.properties = properties;
                }
                // 3.1.1: acknowledged as stored; the PUBREL that follows finds no id held
                // and is completed all the same.
                Ok(None) => {}
                Err(end) => return Some(end),
            }
        }
    }
    wire.send(&Packet::PubRec(rec));
    None
}

/// Stores a QoS 2 PUBLISH with packet id `id` under the key numbered `n`, with its hold for a
/// persistent session; the message stored before with that key, if it was.
async fn store_qos2(
    wire: &MqttWire,
    publish: &Publish,
    topic: &TopicName,
    id: std::num::NonZeroU16,
    n: u64,
) -> Result<Option<SharedMessage>, (ReasonCode, String)> {
    let key = qos2_key(wire.claim.client_id(), id, n);
    store(wire, publish, topic, Some(key), Some((id, n))).await
}

/// Handles a PUBREL: its id released, then PUBCOMP (v5: Packet Identifier not found if it
/// was not held). A persistent session's release is deferred to a commit that happens anyway
/// (its next append carries it, or the session writer's next batch, within
/// `session::flusher::RELEASE_WAITS_AT_MOST`) and the PUBCOMP does not wait for it: a crash
/// that loses it leaves a hold whose id, reused by the client for a new message, comes
/// without DUP, which makes it new (`crate::inflight::InboundQoS2::arrival`;
/// docs/design/mqtt.md, "Inbound QoS 2 of a persistent session").
fn release_qos2(wire: &mut MqttWire, rel: PubRel) {
    let mut comp = PubComp::new(rel.packet_id);
    match wire.qos2.release(rel.packet_id) {
        Some(n) => wire.qos2_release_queued(rel.packet_id, n),
        // 3.1.1's PUBCOMP has no reason code: an unknown id is completed all the same.
        None if wire.version == ProtocolVersion::V5 => {
            comp.reason_code = ReasonCode::PacketIdentifierNotFound;
        }
        None => {}
    }
    wire.send(&Packet::PubComp(comp));
}

/// What the PUBACK or PUBREC of a refused QoS 1 or 2 PUBLISH carries: in v5 the refusal's
/// reason code and (if asked for) reason string; `None` in 3.1.1, whose acknowledgements have
/// no reason code: the message is dropped (logged at debug) and acknowledged positively
/// [MQTT-3.3.5-2], except an invalid topic, which closes the connection.
fn refusal_ack(
    wire: &MqttWire,
    topic: &TopicName,
    code: ReasonCode,
    why: String,
) -> Result<Option<(ReasonCode, AckProperties)>, End> {
    if wire.version == ProtocolVersion::V5 {
        return Ok(Some((code, ack_properties(wire, why))));
    }
    if code == ReasonCode::TopicNameInvalid {
        return Err(End::Disconnect(code, why.into()));
    }
    tracing::debug!(
        client_id = wire.claim.client_id(),
        topic = topic.as_str(),
        code = code.name(),
        why = %why,
        "MQTT 3.1.1 PUBLISH refused: acknowledged and dropped"
    );
    Ok(None)
}

fn ack_properties(wire: &MqttWire, why: String) -> AckProperties {
    AckProperties {
        reason_string: wire.reason_string(why),
        ..AckProperties::default()
    }
}

/// The topic a PUBLISH names, through its v5 Topic Alias: a topic with an alias sets it, an
/// empty topic uses it.
fn resolve_alias(wire: &mut MqttWire, publish: &Publish) -> Result<TopicName, End> {
    let Some(alias) = publish.properties.topic_alias else {
        if publish.topic.is_empty() {
            return Err(End::Disconnect(
                ReasonCode::ProtocolError,
                "an empty topic name without a Topic Alias [MQTT-3.3.2-1]".into(),
            ));
        }
        return Ok(publish.topic.clone());
    };
    if alias.get() > wire.settings.max_topic_aliases {
        let why = format!(
            "Topic Alias {alias} is above the Topic Alias Maximum {}",
            wire.settings.max_topic_aliases
        );
        return Err(End::Disconnect(ReasonCode::TopicAliasInvalid, why.into()));
    }
    if publish.topic.is_empty() {
        return match wire.aliases.iter().find(|(a, _)| *a == alias.get()) {
            Some((_, topic)) => Ok(topic.clone()),
            None => Err(End::Disconnect(
                ReasonCode::ProtocolError,
                format!("Topic Alias {alias} was never set").into(),
            )),
        };
    }
    match wire.aliases.iter_mut().find(|(a, _)| *a == alias.get()) {
        Some((_, topic)) => *topic = publish.topic.clone(),
        None => wire.aliases.push((alias.get(), publish.topic.clone())),
    }
    Ok(publish.topic.clone())
}

/// Stores a PUBLISH's message in the channel its topic maps to, with idempotency key `key`; in
/// the same write, a persistent session's hold of QoS 2 packet id `held` (with its key's
/// number) and the releases of its holds deferred since its last append (core's
/// `SessionHold`). The message stored before with `key`, if it was; the refusal's reason code
/// and reason string otherwise.
async fn store(
    wire: &MqttWire,
    publish: &Publish,
    topic: &TopicName,
    key: Option<String>,
    held: Option<(std::num::NonZeroU16, u64)>,
) -> Result<Option<SharedMessage>, (ReasonCode, String)> {
    let session = &wire.session;
    let app = &session
        .client()
        .map_err(|e| (ReasonCode::NotAuthorized, e.message))?
        .app;
    let channel = topic_map::topic_to_channel(app, topic.as_str())
        .map_err(|e| (e.publish_reason_code(), e.reason))?;
    if let Some(refused) = crate::inbox::refuse_publish(topic.as_str()) {
        return Err(refused);
    }
    if let Some(refused) = crate::sys::refuse_publish(topic.as_str()) {
        return Err(refused);
    }
    if let Some(rules) = &wire.anonymous {
        if !rules.may_publish(topic.as_str()) {
            return Err((
                ReasonCode::NotAuthorized,
                format!("anonymous clients may not publish to {:?}", topic.as_str()),
            ));
        }
    }
    let props = &publish.properties;
    let message_props = MessageProps {
        content_type: props.content_type.clone(),
        payload_format: match wire.version {
            ProtocolVersion::V5 if props.payload_format == crate::packet::PayloadFormat::Utf8 => {
                Some(payload::PayloadFormat::Utf8)
            }
            _ => None,
        },
        expiry_at_ms: props
            .message_expiry_interval
            .map(|secs| crate::wire::now_ms() + u64::from(secs) * 1000),
        response_topic: props.response_topic.as_ref().map(|t| t.as_str().to_owned()),
        correlation_data: props.correlation_data.clone(),
        user_properties: props.user_properties.clone(),
    };
    // A Payload Format Indicator of 1 promises UTF-8: checked, 0x99 otherwise.
    if message_props.payload_format == Some(payload::PayloadFormat::Utf8)
        && std::str::from_utf8(&publish.payload).is_err()
    {
        return Err((
            ReasonCode::PayloadFormatInvalid,
            "the Payload Format Indicator says UTF-8 and the payload is not".into(),
        ));
    }
    let data = payload::to_data(&publish.payload, publish.retain, &message_props);
    // RETAIN 1: the channel's retained message, stored with the message before the answer.
    let retain = payload::retain_of(&publish.payload, publish.retain, &message_props);
    let hold = wire.qos2_session_write(held);
    let released = hold.as_ref().map_or_else(Vec::new, |h| h.released.clone());
    let stored = session
        .publish_retained(channel.public(), key, &data, retain, hold)
        .await;
    if stored.is_err() {
        // The releases it carried were not written: the next append or batch takes them.
        wire.qos2_releases_unwritten(released);
    }
    stored
        .map(|(_, appended)| appended.duplicate.then_some(appended.message))
        .map_err(|e| {
            let code = publish_code(&e);
            let why = match e.code {
                ErrorCode::TooLarge => format!(
                    "{}: the server's message size limit (max_frame_bytes), the $mqtt envelope \
                     included",
                    e.message
                ),
                _ => e.message,
            };
            (code, why)
        })
}

/// The PUBACK / PUBREC reason code of a refused publish.
fn publish_code(e: &HeraldError) -> ReasonCode {
    match e.code {
        ErrorCode::Forbidden | ErrorCode::Unauthorized | ErrorCode::TokenExpired => {
            ReasonCode::NotAuthorized
        }
        ErrorCode::LimitExceeded | ErrorCode::RateLimited => ReasonCode::QuotaExceeded,
        // Over the message size limit (`max_frame_bytes`): PUBACK and PUBREC have no "too
        // large" code (0x95 is DISCONNECT's), and 0x83 is the one for a valid PUBLISH the
        // server is not willing to accept [MQTT-3.4.2-1]; the reason string names the limit.
        ErrorCode::TooLarge => ReasonCode::ImplementationSpecificError,
        ErrorCode::ChannelInvalid => ReasonCode::TopicNameInvalid,
        _ => ReasonCode::UnspecifiedError,
    }
}

/// The SUBACK reason code of a refused subscription.
fn subscribe_code(e: &HeraldError) -> ReasonCode {
    match e.code {
        ErrorCode::Forbidden | ErrorCode::Unauthorized | ErrorCode::TokenExpired => {
            ReasonCode::NotAuthorized
        }
        ErrorCode::LimitExceeded | ErrorCode::RateLimited | ErrorCode::TooManySubscriptions => {
            ReasonCode::QuotaExceeded
        }
        ErrorCode::ChannelInvalid => ReasonCode::TopicFilterInvalid,
        _ => ReasonCode::UnspecifiedError,
    }
}

/// Handles a SUBSCRIBE: each filter subscribed (or refused) in order, then one SUBACK, then
/// the retained messages the filters are sent, so a client reads its SUBACK first (as
/// Mosquitto sends them; the standards also allow them before it, MQTT 5.0 3.8.4).
async fn subscribe_to(wire: &mut MqttWire, subscribe: Subscribe) -> Option<End> {
    // Kept with each of its subscriptions (0 is refused by the codec [MQTT-3.8.2-1]); a
    // 3.1.1 SUBSCRIBE has none.
    let identifier = subscribe.properties.subscription_identifier;
    let mut codes = Vec::with_capacity(subscribe.filters.len());
    let mut reasons = Vec::new();
    let mut after_suback = Vec::new();
    for (filter, options) in &subscribe.filters {
        let shared = filter.shared().is_some();
        let (id, after) = (identifier, &mut after_suback);
        match subscribe_one(wire, filter.as_str(), shared, options, id, after).await {
            Ok(granted) => codes.push(match granted {
                QoS::AtMostOnce => ReasonCode::GrantedQoS0,
                QoS::AtLeastOnce => ReasonCode::GrantedQoS1,
                QoS::ExactlyOnce => ReasonCode::GrantedQoS2,
            }),
            Err((code, why)) => {
                codes.push(code);
                reasons.push(why);
            }
        }
    }
    let mut suback = SubAck {
        packet_id: subscribe.packet_id,
        properties: AckProperties::default(),
        reason_codes: codes,
    };
    if !reasons.is_empty() {
        suback.properties.reason_string = wire.reason_string(reasons.join("; "));
    }
    wire.send(&Packet::SubAck(suback));
    if !after_suback.is_empty() {
        // Told apart from a resumed session's replay of their channels (`crate::session`).
        let after_suback = wire.apart_from_replays(after_suback);
        wire.session
            .outbox()
            .push_all_unbounded(after_suback.into_iter().map(OutFrame::Replayed));
    }
    None
}

/// Subscribes one filter, with the SUBSCRIBE's Subscription Identifier, adding the retained
/// messages it is sent to `after_suback`; the QoS granted, or the refusal.
async fn subscribe_one(
    wire: &mut MqttWire,
    filter: &str,
    shared: bool,
    options: &crate::packet::SubscriptionOptions,
    identifier: Option<NonZeroU32>,
    after_suback: &mut Vec<SharedMessage>,
) -> Result<QoS, (ReasonCode, String)> {
    let refuse = |code: ReasonCode, why: String| Err((code, why));
    let granted = Granted::asked(options, identifier);
    if shared {
        return crate::shared::subscribe(wire, filter, options, granted).await;
    }
    if filter == crate::inbox::INBOX_TOPIC {
        return crate::inbox::subscribe(wire, options, granted).await;
    }
    let app = wire
        .session
        .client()
        .map_err(|e| (ReasonCode::NotAuthorized, e.message))?
        .app
        .clone();
    let channel = match topic_map::parse_filter(&app, filter) {
        Ok(FilterTarget::Exact(channel)) => channel,
        Ok(FilterTarget::Wildcard(_)) => {
            let after = after_suback;
            return crate::wildcards::subscribe(wire, filter, options, granted, after).await;
        }
        Err(e) => return refuse(e.subscribe_reason_code(), e.reason),
    };
    if let Some(rules) = &wire.anonymous {
        if let Some(code) = rules.may_subscribe(filter).refusal_code() {
            return refuse(
                code,
                format!("anonymous clients may not subscribe to {filter:?}"),
            );
        }
    }
    let exists = wire.subscriptions.exact(&channel).is_some();
    if !exists && wire.replaying_for_filter(&channel) {
        // The channel's subscription replaying what a resumed filter missed becomes the
        // client's: made again, it would lose what it has yet to replay.
        wire.subscriptions.insert(channel.clone(), granted);
        wire.replay_taken_over(&channel);
        wire.session_subscribed(filter, options, granted, &channel, None);
        return Ok(granted.qos);
    }
    let send_retained = match options.retain_handling {
        RetainHandling::SendAtSubscribe => true,
        RetainHandling::SendAtSubscribeIfNew => !exists,
        RetainHandling::DoNotSend => false,
    };
    if exists {
        // Replaced [MQTT-3.8.4-3]: new options; the retained message again if asked for, by
        // subscribing anew.
        wire.subscriptions.insert(channel.clone(), granted);
        if !send_retained || wire.catching_up(&channel) {
            wire.session_subscribed(filter, options, granted, &channel, None);
            return Ok(granted.qos);
        }
        let _ = wire.session.unsubscribe(channel.public());
    }
    let sys = crate::sys::is_sys_topic(filter);
    let request = SubscribeRequest {
        since: None,
        // The retained message is read once the subscription is live (`retained.rs`); a
        // `$SYS/` topic's last value is the channel's last message.
        last: Some(send_retained && sys),
        replay_retained_if_lost: false,
    };
    // Recorded first: the retained message may be queued before `subscribe` returns.
    wire.subscriptions.insert(channel.clone(), granted);
    match wire.subscribe_quietly(&channel, &request).await {
        Ok(opened) => {
            wire.subscriptions.share_name(&opened.name);
            let position = Some(&opened.position);
            wire.session_subscribed(filter, options, granted, &channel, position);
            if sys {
                wire.follow_sys(filter, send_retained.then_some(after_suback));
            } else if send_retained {
                let head = opened.outcome.seq;
                crate::retained::send_exact(wire, &channel, head, after_suback).await;
            }
            Ok(granted.qos)
        }
        Err(e) => {
            wire.subscriptions.remove(&channel);
            Err((subscribe_code(&e), e.message))
        }
    }
}

/// Handles an UNSUBSCRIBE: each filter's subscription ended, then one UNSUBACK (v5: 0x00, or
/// 0x11 No subscription existed, per filter).
fn unsubscribe_from(wire: &mut MqttWire, unsubscribe: Unsubscribe) {
    let app = match wire.session.client() {
        Ok(client) => client.app.clone(),
        Err(_) => return,
    };
    let codes = unsubscribe
        .filters
        .iter()
        .map(|filter| {
            if filter.shared().is_some() {
                return match crate::shared::unsubscribe(wire, filter.as_str()) {
                    true => ReasonCode::Success,
                    false => ReasonCode::NoSubscriptionExisted,
                };
            }
            match topic_map::parse_filter(&app, filter.as_str()) {
                _ if filter.as_str() == crate::inbox::INBOX_TOPIC => {
                    match crate::inbox::unsubscribe(wire) {
                        true => ReasonCode::Success,
                        false => ReasonCode::NoSubscriptionExisted,
                    }
                }
                Ok(FilterTarget::Exact(channel)) if wire.subscriptions.remove(&channel) => {
                    let _ = wire.session.unsubscribe(channel.public());
                    wire.session_unsubscribed(filter.as_str(), &channel);
                    ReasonCode::Success
                }
                Ok(FilterTarget::Wildcard(_))
                    if crate::wildcards::unsubscribe(wire, filter.as_str()) =>
                {
                    ReasonCode::Success
                }
                Ok(_) => ReasonCode::NoSubscriptionExisted,
                Err(_) => ReasonCode::TopicFilterInvalid,
            }
        })
        .collect();
    wire.send(&Packet::UnsubAck(UnsubAck {
        packet_id: unsubscribe.packet_id,
        properties: AckProperties::default(),
        reason_codes: codes,
    }));
}
