//! Which message a SUBSCRIBE is sent as a topic's **retained message** (docs/mqtt.md,
//! "Retained messages"): the newer of
//!
//! - the channel's stored retained message: the last one an MQTT client published with RETAIN 1
//!   (or a will with Will Retain 1, or any transport's publish whose data is a `$mqtt`
//!   envelope with `"retain":true`: `payload::retain_of_data`, the server's retain rule for
//!   core's `Publisher`), kept by the store apart from the history until replaced,
//!   cleared by a retained empty payload, or past its Message Expiry Interval (core's
//!   [`Retain`](herald_core::Retain), written with the message before the PUBACK); and
//! - the channel's newest message, when another transport (HTTP, WebSocket, Pusher, Meteor)
//!   published it: those have no RETAIN flag (unless their data says so), and a channel's last
//!   message is sent on subscribe (Herald's "last message"), while it is the newest.
//!
//! So an MQTT RETAIN 0 publish neither replaces nor hides the retained message
//! [MQTT-3.3.1-12], and a message of another transport is the retained one until anything is
//! published after it. [`choose`] is the rule; an exact SUBSCRIBE reads both for its channel
//! ([`send_exact`]); a wildcard SUBSCRIBE reads the store's by prefix (`wildcards.rs`).

use herald_core::engine::Engine;
use herald_core::log::ReadFrom;
use herald_core::message::SharedMessage;
use herald_core::ChannelName;

use crate::origin;
use crate::wire::MqttWire;

/// The retained message of a channel whose newest message is `newest` and whose stored
/// retained message is `stored` (see the module doc).
pub(crate) fn choose(
    newest: Option<SharedMessage>,
    stored: Option<SharedMessage>,
) -> Option<SharedMessage> {
    match newest {
        Some(newest) if is_other_transports(&newest) => match stored {
            Some(stored) if stored.epoch == newest.epoch && stored.seq >= newest.seq => {
                Some(stored)
            }
            _ => Some(newest),
        },
        _ => stored,
    }
}

/// Whether `message` was published by another transport than MQTT (it has no RETAIN flag).
pub(crate) fn is_other_transports(message: &SharedMessage) -> bool {
    origin::of(message).client_id.is_none()
}

/// The retained message of `channel` now; `None` when it has none or a read failed (the
/// SUBSCRIBE is answered all the same; live messages follow).
pub(crate) async fn of_channel(engine: &Engine, channel: &ChannelName) -> Option<SharedMessage> {
    let (newest, stored) = tokio::join!(
        engine.read(channel, ReadFrom::Tail(1), 1),
        engine.retained(channel)
    );
    let newest = newest
        .ok()
        .and_then(|slice| slice.messages.into_iter().last());
    choose(newest, stored.ok().flatten())
}

/// Finds `channel`'s retained message for an exact SUBSCRIBE whose subscription just went live
/// at the channel's head `head` (nothing is read for a channel that never had a message) and
/// adds it to `after_suback`, queued once the SUBACK is (`crate::inbound`): in the connection's
/// retained window, so that it never goes out after a newer live message.
pub(crate) async fn send_exact(
    wire: &mut MqttWire,
    channel: &ChannelName,
    head: u64,
    after_suback: &mut Vec<SharedMessage>,
) {
    if head == 0 {
        return;
    }
    let engine = wire.session.edge().engine.clone();
    let Some(message) = of_channel(&engine, channel).await else {
        return;
    };
    // Marked before the writer can take it: it runs only once this SUBSCRIBE is handled.
    wire.subscriptions.retained_queued_exact(&message);
    after_suback.push(message);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use herald_core::{Epoch, StoredMessage};

    use super::*;
    use crate::packet::QoS;

    fn msg(seq: u64, key: Option<String>) -> SharedMessage {
        let channel = ChannelName::parse("t").unwrap();
        Arc::new(StoredMessage::new(
            channel,
            Epoch::new("e"),
            seq,
            key,
            0,
            Bytes::from_static(b"1"),
        ))
    }

    fn mqtt(seq: u64) -> SharedMessage {
        msg(seq, Some(origin::key("dev", QoS::AtLeastOnce, seq)))
    }

    fn seq(m: Option<SharedMessage>) -> Option<u64> {
        m.map(|m| m.seq)
    }

    #[test]
    fn an_mqtt_newest_message_leaves_the_stored_retained_one() {
        // RETAIN 0 after the retained message [MQTT-3.3.1-12].
        assert_eq!(seq(choose(Some(mqtt(5)), Some(mqtt(3)))), Some(3));
        assert_eq!(seq(choose(Some(mqtt(5)), None)), None);
        assert_eq!(seq(choose(None, Some(mqtt(3)))), Some(3), "history trimmed");
    }

    #[test]
    fn another_transports_newest_message_is_retained_while_it_is_the_newest() {
        assert_eq!(seq(choose(Some(msg(5, None)), Some(mqtt(3)))), Some(5));
        assert_eq!(
            seq(choose(Some(msg(5, Some("order-1".into()))), None)),
            Some(5)
        );
        assert_eq!(seq(choose(Some(mqtt(7)), Some(mqtt(3)))), Some(3));
        let other_epoch = Arc::new(StoredMessage::new(
            ChannelName::parse("t").unwrap(),
            Epoch::new("old"),
            9,
            None,
            0,
            Bytes::from_static(b"1"),
        ));
        assert_eq!(
            seq(choose(Some(msg(5, None)), Some(other_epoch))),
            Some(5),
            "a retained message of the channel's earlier log is older"
        );
    }
}
