//! Who published a stored message over MQTT, and at what QoS: read back from the message's
//! idempotency key (its message id), which every MQTT publish sets, so it is durable with the
//! message (a persistent session resuming from the channel log after a restart reads it) and
//! reaches other nodes with it (the bus carries the key).
//!
//! - A QoS 2 PUBLISH is stored with `mqtt:{client id}:{packet id}:{n}` (`inflight.rs`, whose
//!   key also makes a resent PUBLISH not stored twice).
//! - A QoS 0 or 1 PUBLISH, and a will, with `mqtt:{client id}:q{QoS}:{n}` ([`key`]), `n`
//!   counted per connection from its start time (`InboundQoS2`), so no two publishes of a
//!   client share a key.
//!
//! A message without such a key (HTTP, WebSocket, Pusher, Meteor) counts as published at QoS 2:
//! it is durable with a seq, so it goes out at whatever QoS a subscription was granted. Reading
//! the key costs a few byte comparisons per delivery, and nothing for a message without a key.
//! Its price is paid per publish instead: the key is stored with the message and in the store's
//! idempotency index (see docs/design/mqtt.md, "QoS").

use crate::packet::QoS;
use herald_core::engine::MAX_MESSAGE_ID_LEN;
use herald_core::StoredMessage;

/// Every MQTT key starts with this.
const PREFIX: &str = "mqtt:";

/// Where a message came from, as its key says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Origin<'a> {
    /// The client identifier that published it over MQTT (cut as the key cut it), if it was.
    pub(crate) client_id: Option<&'a str>,
    /// The QoS it was published with (QoS 2 for every other transport's message).
    pub(crate) qos: QoS,
    /// Its key is as long as a key may be, so `client_id` may have been cut.
    cut: bool,
}

impl Origin<'_> {
    /// Whether the client `client_id` published it (over MQTT).
    pub(crate) fn is_client(&self, client_id: &str) -> bool {
        match self.client_id {
            Some(id) if id == client_id => true,
            Some(id) => self.cut && client_id.starts_with(id),
            None => false,
        }
    }
}

/// Where `message` came from.
pub(crate) fn of(message: &StoredMessage) -> Origin<'_> {
    let key = message.client_id.as_deref();
    key.and_then(parse).map_or(
        Origin {
            client_id: None,
            qos: QoS::ExactlyOnce,
            cut: false,
        },
        |(client_id, qos)| Origin {
            client_id: Some(client_id),
            qos,
            cut: key.is_some_and(|k| k.len() + 3 >= MAX_MESSAGE_ID_LEN),
        },
    )
}

/// The client identifier and QoS an MQTT key names; `None` for any other key.
fn parse(key: &str) -> Option<(&str, QoS)> {
    let rest = key.strip_prefix(PREFIX)?;
    let (rest, n) = rest.rsplit_once(':')?;
    if !is_number(n) {
        return None;
    }
    let (client_id, mark) = rest.rsplit_once(':')?;
    let qos = match mark {
        "q0" => QoS::AtMostOnce,
        "q1" => QoS::AtLeastOnce,
        "q2" => QoS::ExactlyOnce,
        // A QoS 2 PUBLISH's packet identifier.
        id if is_number(id) => QoS::ExactlyOnce,
        _ => return None,
    };
    Some((client_id, qos))
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The key a message `client_id` publishes at `qos` other than as a QoS 2 PUBLISH (a QoS 0 or
/// 1 PUBLISH, a will) is stored with: `mqtt:{client id}:q{qos}:{n}`, the client identifier cut
/// (at a character boundary) so the key fits [`MAX_MESSAGE_ID_LEN`].
pub(crate) fn key(client_id: &str, qos: QoS, n: u64) -> String {
    let tail = format!(":q{}:{n}", qos.as_u8());
    format!("{PREFIX}{}{tail}", cut(client_id, tail.len()))
}

/// `client_id` cut so that a key with a tail of `tail` bytes fits.
pub(crate) fn cut(client_id: &str, tail: usize) -> &str {
    let room = MAX_MESSAGE_ID_LEN - PREFIX.len() - tail;
    let mut at = client_id.len().min(room);
    while !client_id.is_char_boundary(at) {
        at -= 1;
    }
    &client_id[..at]
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU16;

    use bytes::Bytes;
    use herald_core::{ChannelName, Epoch};

    use super::*;

    fn keyed(key: Option<String>) -> StoredMessage {
        let channel = ChannelName::parse("t").expect("a channel");
        StoredMessage::new(
            channel,
            Epoch::new("e"),
            1,
            key,
            0,
            Bytes::from_static(b"1"),
        )
    }

    #[test]
    fn each_qos_is_read_back_from_its_key() {
        for qos in [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce] {
            let m = keyed(Some(key("dev:1", qos, 1_700_000_000_000_000)));
            let origin = of(&m);
            assert_eq!(origin.qos, qos);
            assert_eq!(origin.client_id, Some("dev:1"));
            assert!(origin.is_client("dev:1") && !origin.is_client("dev"));
        }
        let id = NonZeroU16::new(7).unwrap();
        let m = keyed(Some(crate::inflight::qos2_key("dev", id, 42)));
        assert_eq!(of(&m).qos, QoS::ExactlyOnce);
        assert_eq!(of(&m).client_id, Some("dev"));
    }

    #[test]
    fn other_transports_messages_count_as_qos_2() {
        for key in [None, Some("order-17".into()), Some("mqtt:x:q1:".into())] {
            let m = keyed(key);
            assert_eq!(of(&m).qos, QoS::ExactlyOnce);
            assert_eq!(of(&m).client_id, None);
        }
    }

    #[test]
    fn a_long_client_id_is_cut_and_still_recognised() {
        let long = "é".repeat(200);
        let k = key(&long, QoS::AtLeastOnce, u64::MAX);
        assert!(k.len() <= MAX_MESSAGE_ID_LEN);
        let m = keyed(Some(k));
        let origin = of(&m);
        assert_eq!(origin.qos, QoS::AtLeastOnce);
        assert!(origin.is_client(&long));
        assert!(!origin.is_client("other"));
    }
}
