//! A device's inbox over MQTT: the topic `$device`.
//!
//! A client whose token names a device (the same device tokens Herald's WebSocket takes)
//! SUBSCRIBEs to the exact topic `$device` and receives its inbox: the app's broadcast log
//! (`$app`, the pushes whose audience its tags match) and its own log (pushes to the device and
//! to its user), opened exactly as the WebSocket opens them (edge's
//! [`ClientSession::open_inbox`](herald_edge::session::ClientSession::open_inbox)): from the
//! device's acknowledged cursor, then live. Both logs' messages go out on the topic `$device`
//! (`outbound.rs`) with the push envelope as the payload, byte for byte, never as retained
//! messages (`deliver.rs`). The subscription is granted QoS 1 at most (QoS 2 asked: QoS 1).
//!
//! **A PUBACK is an inbox ack**: [`acknowledged`] acknowledges the log up to the message's seq,
//! through the session's one ack rule (the WebSocket `ack`'s), which moves the device's cursor
//! and settles the delivery state machine: no provider push follows. PUBACKs come in the order
//! the PUBLISH packets went [MQTT-4.6.0-2], so acknowledging "up to" each one is exact. At QoS 0
//! nothing is acknowledged: the pushes come again on the next connection, and an `auto` push's
//! provider push follows its ack window.
//!
//! `$` topics are matched by no leading wildcard [MQTT-4.7.2-1], and core's filter registry never
//! matches a push log, so `#` never delivers the inbox. A client without a device token that
//! subscribes to `$device` is refused with 0x87 Not authorized (3.1.1: 0x80), and no client may
//! publish to it. The subscription is the connection's: a persistent session does not keep it,
//! and the client subscribes again on each connection (what the device's cursor resumes, not
//! the session).

use std::sync::Mutex;

use herald_core::engine::SubscribeOutcome;
use herald_core::message::{Cursor, Epoch};
use herald_core::tenant::{scoped_local, DEVICE_LOG_PREFIX, RESERVED};
use herald_core::{ChannelName, ErrorCode, HeraldError};

use crate::packet::{QoS, ReasonCode, SubscriptionOptions};
use crate::subscriptions::Granted;
use crate::wire::MqttWire;

/// The topic a device's inbox is delivered on.
pub(crate) const INBOX_TOPIC: &str = "$device";

/// The inbox a connection opened: each log's epoch when it opened (a PUBACK acknowledges a
/// position in that epoch), and whether the `$device` subscription holds it now.
pub(crate) struct InboxState {
    epochs: Vec<(ChannelName, Epoch)>,
    open: bool,
}

/// Whether `channel` (a full name) is one of an app's push logs (`$app`, a device's log).
pub(crate) fn is_inbox_log(channel: &ChannelName) -> bool {
    scoped_local(channel.as_str()).is_some_and(|local| local.starts_with(RESERVED))
}

/// Why a PUBLISH to `topic` is refused, if it is the inbox's topic: it is read-only.
pub(crate) fn refuse_publish(topic: &str) -> Option<(ReasonCode, String)> {
    (topic == INBOX_TOPIC).then(|| {
        (
            ReasonCode::NotAuthorized,
            "$device is a device's inbox, which only pushes (POST /v1/push) write to".to_owned(),
        )
    })
}

/// SUBSCRIBE to `$device`: opens the device's inbox from its acknowledged cursor (or, when
/// it is open, takes the new QoS); the QoS granted, or the refusal.
pub(crate) async fn subscribe(
    wire: &mut MqttWire,
    options: &SubscriptionOptions,
    asked: Granted,
) -> Result<QoS, (ReasonCode, String)> {
    let client = wire
        .session
        .client()
        .map_err(|e| (ReasonCode::NotAuthorized, e.message))?;
    let Some(device) = client.device.as_deref() else {
        return Err((
            ReasonCode::NotAuthorized,
            "$device is a device's inbox: only a client whose token names a device may \
             subscribe to it"
                .to_owned(),
        ));
    };
    let app = client.app.clone();
    let logs = [
        app.reserved_log(herald_core::tenant::APP_LOG),
        app.reserved_log(&format!("{DEVICE_LOG_PREFIX}{device}")),
    ];
    let granted = Granted {
        qos: options.qos.min(QoS::AtLeastOnce),
        retain_as_published: false,
        no_local: false,
        identifier: asked.identifier,
    };
    // Recorded first: the catch-up may be queued before the inbox is open.
    for log in &logs {
        wire.subscriptions.insert(log.clone(), granted);
    }
    if wire.inbox.as_ref().is_some_and(|inbox| inbox.open) {
        return Ok(granted.qos);
    }
    let epochs = Mutex::new(Vec::with_capacity(2));
    let confirm = |name: &ChannelName, outcome: &SubscribeOutcome| {
        if let Ok(mut epochs) = epochs.lock() {
            epochs.push((name.clone(), outcome.epoch.clone()));
        }
        None
    };
    let opened = wire.session.open_inbox(&confirm).await;
    let epochs = epochs.into_inner().unwrap_or_default();
    match opened {
        Ok(()) => {
            wire.inbox = Some(Box::new(InboxState { epochs, open: true }));
            Ok(granted.qos)
        }
        Err(e) => {
            wire.session.close_inbox();
            for log in &logs {
                wire.subscriptions.remove(log);
            }
            Err((refusal_code(&e), e.message))
        }
    }
}

/// UNSUBSCRIBE from `$device`: closes the inbox; whether it was open. A PUBACK of a push sent
/// before still acknowledges it.
pub(crate) fn unsubscribe(wire: &mut MqttWire) -> bool {
    let Some(inbox) = wire.inbox.as_mut().filter(|inbox| inbox.open) else {
        return false;
    };
    inbox.open = false;
    for (log, _) in &inbox.epochs {
        wire.subscriptions.remove(log);
    }
    wire.session.close_inbox();
    true
}

/// A PUBACK came for message `seq` of `channel`: if that is an inbox log, the device's inbox
/// is acknowledged up to it, as the WebSocket `ack` does. A refused ack (the log was reset
/// meanwhile, the device deactivated) leaves the push unacknowledged: it comes again on the
/// next connection.
pub(crate) async fn acknowledged(wire: &MqttWire, channel: &ChannelName, seq: u64) {
    let Some(inbox) = &wire.inbox else {
        return;
    };
    let Some((log, epoch)) = inbox.epochs.iter().find(|(log, _)| log == channel) else {
        return;
    };
    let upto = Cursor {
        epoch: epoch.clone(),
        seq,
    };
    if let Err(e) = wire.session.ack(log.public(), upto).await {
        tracing::debug!(
            client_id = wire.claim.client_id(),
            log = log.public(),
            seq,
            error = %e.message,
            "MQTT: a PUBACK of an inbox push could not be recorded as its ack"
        );
    }
}

/// The SUBACK reason code of an inbox that could not be opened.
fn refusal_code(e: &HeraldError) -> ReasonCode {
    match e.code {
        // A device token whose device is not registered, or deactivated.
        ErrorCode::Forbidden
        | ErrorCode::Unauthorized
        | ErrorCode::TokenExpired
        | ErrorCode::NotFound => ReasonCode::NotAuthorized,
        ErrorCode::LimitExceeded | ErrorCode::RateLimited | ErrorCode::TooManySubscriptions => {
            ReasonCode::QuotaExceeded
        }
        _ => ReasonCode::UnspecifiedError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::tenant::AppId;

    #[test]
    fn push_logs_are_the_inbox_and_channels_are_not() {
        let shop = AppId::parse("shop").unwrap();
        assert!(is_inbox_log(&shop.reserved_log("$app")));
        assert!(is_inbox_log(&shop.reserved_log("$dev/d1")));
        let device_topic = shop.parse_channel("==24device").unwrap();
        assert!(!is_inbox_log(&device_topic));
        assert!(!is_inbox_log(&shop.parse_channel("news").unwrap()));
    }

    #[test]
    fn only_the_inbox_topic_is_read_only() {
        assert_eq!(
            refuse_publish("$device").map(|(code, _)| code),
            Some(ReasonCode::NotAuthorized)
        );
        assert!(refuse_publish("$device/x").is_none());
        assert!(refuse_publish("device").is_none());
    }
}
