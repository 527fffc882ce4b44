//! What the workers need of a push, kept with its receipt when it is accepted: how it is
//! delivered, its ack window, its audience (broadcasts), where it sits in the app's broadcast
//! log, and its rendered provider payloads; and the rule that a push the device acknowledged
//! is settled as `live` instead of sent to its provider ([`DeliveryRecord::acked_live`]).
//!
//! The audience is carried typed: the expression parsed when the push was accepted, written
//! as its text, and parsed once when the record is read back ([`Audience::from_stored`]).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use herald_core::error::HeraldError;
use herald_proto::SendResult;

use crate::audience::Audience;
use crate::delivery::payloads::Payloads;
use crate::delivery::Delivery;
use crate::device::InboxCursor;

/// The result of a send that the device's ack settled instead of a provider push (`live`):
/// what [`DeliveryRecord::acked_live`] sends end with, and what the stores write for the queued
/// jobs an ack settles (`JobQueue::settle_live`).
pub static ACKED: SendResult = SendResult::Live;

/// A push as the delivery workers read it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// How it is delivered.
    pub delivery: Delivery,
    /// The ack window, milliseconds (`auto`).
    pub ack_window_ms: u64,
    /// Whether it is in the app's broadcast log (a tag or app push) rather than in each
    /// device's own log.
    pub broadcast: bool,
    /// Who a broadcast reaches ([`Audience::All`] for the whole app, and for a device or user
    /// push); stored as the tag expression's text, none for the whole app. An error when the
    /// stored text no longer parses: the record is damaged, and its push must not become one
    /// to everyone.
    #[serde(
        default = "whole_app",
        skip_serializing_if = "is_whole_app",
        serialize_with = "write_audience",
        deserialize_with = "read_audience"
    )]
    pub audience: Result<Audience, StoredAudienceError>,
    /// Expires at, milliseconds since the Unix epoch.
    pub expires: i64,
    /// The payloads.
    pub payloads: Payloads,
}

/// A stored audience that does not parse: its text, kept as it was, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAudienceError {
    /// The stored text.
    pub text: String,
    /// Why it does not parse.
    pub error: HeraldError,
}

fn whole_app() -> Result<Audience, StoredAudienceError> {
    Ok(Audience::All)
}

fn is_whole_app(audience: &Result<Audience, StoredAudienceError>) -> bool {
    matches!(audience, Ok(Audience::All))
}

fn write_audience<S: Serializer>(
    audience: &Result<Audience, StoredAudienceError>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match audience {
        Ok(audience) => audience.stored_text().serialize(s),
        Err(damaged) => Some(&damaged.text).serialize(s),
    }
}

fn read_audience<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Result<Audience, StoredAudienceError>, D::Error> {
    let text = Option::<String>::deserialize(d)?;
    Ok(
        Audience::from_stored(text.as_deref()).map_err(|error| StoredAudienceError {
            text: text.unwrap_or_default(),
            error,
        }),
    )
}

impl DeliveryRecord {
    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a delivery record serializes")
    }

    /// Reads the stored form; `None` if it is damaged (a damaged audience alone is kept as
    /// [`DeliveryRecord::audience`]'s error).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }

    /// Whether a device's acknowledgement settles this push's provider sends as `live`: only
    /// an `auto` push waits for one (a `provider` push is sent whatever the device read).
    pub fn settled_by_ack(&self) -> bool {
        self.delivery == Delivery::Auto
    }

    /// The rule, for every send of the push (a send job's, a broadcast page's, and the jobs a
    /// device's ack settles through [`DeliveryRecord::settled_by_ack`]): a device whose inbox
    /// cursor is `cursor` has acknowledged the push, which sits at `seq` in the log it acks
    /// (the app's broadcast log for a broadcast, its own log otherwise), so the send settles as
    /// `live` and no provider push is sent.
    pub fn acked_live(&self, cursor: &InboxCursor, seq: u64) -> bool {
        let acked = if self.broadcast {
            cursor.app.seq
        } else {
            cursor.device.seq
        };
        self.settled_by_ack() && acked >= seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_proto::cursor::Cursor;

    use crate::delivery::payloads::PlatformOptions;
    use crate::tags::TagExpr;

    fn payloads() -> Payloads {
        let common = herald_providers::common::Common {
            title: Some("Hi"),
            expires_ms: i64::MAX,
            push_id: "p-1",
            ..Default::default()
        };
        Payloads::render(&PlatformOptions::default(), &common).unwrap()
    }

    fn record(delivery: Delivery, broadcast: bool) -> DeliveryRecord {
        DeliveryRecord {
            delivery,
            ack_window_ms: 5000,
            broadcast,
            audience: Ok(Audience::All),
            expires: i64::MAX,
            payloads: payloads(),
        }
    }

    fn cursor(app: u64, device: u64) -> InboxCursor {
        let at = |seq| Cursor {
            seq,
            ..Cursor::default()
        };
        InboxCursor {
            app: at(app),
            device: at(device),
        }
    }

    #[test]
    fn an_auto_push_acked_at_or_past_its_seq_is_live() {
        let targeted = record(Delivery::Auto, false);
        assert!(
            targeted.acked_live(&cursor(0, 7), 7),
            "acked exactly at the push"
        );
        assert!(targeted.acked_live(&cursor(0, 8), 7), "acked past it");
        assert!(!targeted.acked_live(&cursor(0, 6), 7), "acked before it");
        assert!(
            !targeted.acked_live(&InboxCursor::default(), 1),
            "nothing acked"
        );
    }

    #[test]
    fn a_broadcast_reads_the_app_log_and_a_targeted_push_the_device_log() {
        let broadcast = record(Delivery::Auto, true);
        assert!(broadcast.acked_live(&cursor(7, 0), 7));
        assert!(
            !broadcast.acked_live(&cursor(6, 9), 7),
            "the device log's cursor is not it"
        );
        let targeted = record(Delivery::Auto, false);
        assert!(
            !targeted.acked_live(&cursor(9, 6), 7),
            "the app log's cursor is not it"
        );
    }

    #[test]
    fn only_an_auto_push_is_settled_by_an_ack() {
        for delivery in [Delivery::Provider, Delivery::Live] {
            let r = record(delivery, false);
            assert!(!r.settled_by_ack());
            assert!(!r.acked_live(&cursor(9, 9), 7), "{delivery:?}");
        }
        assert!(record(Delivery::Auto, true).settled_by_ack());
    }

    #[test]
    fn the_audience_is_stored_as_its_text_and_read_back_typed() {
        let mut r = record(Delivery::Auto, true);
        let expr = TagExpr::parse("sports AND NOT muted").unwrap();
        r.audience = Ok(Audience::Tags(expr.clone()));
        let stored: serde_json::Value = serde_json::from_slice(&r.encode()).unwrap();
        assert_eq!(stored["audience"], "sports AND NOT muted");
        let back = DeliveryRecord::decode(&r.encode()).unwrap();
        assert_eq!(back.audience, Ok(Audience::Tags(expr)));

        let whole = record(Delivery::Auto, true);
        let stored: serde_json::Value = serde_json::from_slice(&whole.encode()).unwrap();
        assert!(
            stored.get("audience").is_none(),
            "the whole app stores none"
        );
        let back = DeliveryRecord::decode(&whole.encode()).unwrap();
        assert_eq!(back.audience, Ok(Audience::All));
    }

    #[test]
    fn a_damaged_audience_is_kept_as_an_error_not_as_the_whole_app() {
        let mut stored: serde_json::Value =
            serde_json::from_slice(&record(Delivery::Auto, true).encode()).unwrap();
        stored["audience"] = "sports AND".into();
        let bytes = serde_json::to_vec(&stored).unwrap();
        let back = DeliveryRecord::decode(&bytes).unwrap();
        let damaged = back.audience.clone().unwrap_err();
        assert_eq!(damaged.text, "sports AND");
        // Written back as it was read.
        let again: serde_json::Value = serde_json::from_slice(&back.encode()).unwrap();
        assert_eq!(again, stored);
    }
}
