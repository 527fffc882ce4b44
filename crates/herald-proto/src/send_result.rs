//! What became of one provider send of a push to one device: [`SendResult`], the one list the
//! delivery worker decides from, the stores keep (a finished job's `result`, the counters
//! `done:RESULT`), the receipts count ([`crate::receipt::ProviderReceipt::count_result`]) and
//! `herald jobs` shows.
//!
//! Its string form is stable (stored and in JSON): `accepted`, `live`, `unregistered:REASON`,
//! `rejected:REASON`, `expired`, `inactive`, `no_token`, `no_credentials`. Reading it back is
//! total: a string this version does not name (written by another version of Herald) is kept as
//! [`SendResult::Other`], written back as it was, and counted as skipped by a receipt.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What one provider send of a push to a device came to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SendResult {
    /// The provider accepted the notification (`accepted`).
    Accepted,
    /// The device acknowledged the push over a live connection before a provider push was
    /// needed: none was sent (`live`).
    Live,
    /// The provider says the token no longer reaches a device (`unregistered:REASON`, the
    /// provider's reason); the device was deactivated.
    Unregistered(String),
    /// The provider refused the notification for good (`rejected:REASON`).
    Rejected(String),
    /// The push expired (or is gone) before it was sent (`expired`).
    Expired,
    /// The device is gone or inactive (`inactive`).
    Inactive,
    /// The device has no token for the job's provider (`no_token`).
    NoToken,
    /// The app has no usable credentials for the device's provider (`no_credentials`).
    NoCredentials,
    /// A result this version does not name, kept as written.
    Other(String),
}

const ACCEPTED: &str = "accepted";
const LIVE: &str = "live";
const EXPIRED: &str = "expired";
const INACTIVE: &str = "inactive";
const NO_TOKEN: &str = "no_token";
const NO_CREDENTIALS: &str = "no_credentials";
const UNREGISTERED: &str = "unregistered:";
const REJECTED: &str = "rejected:";

impl SendResult {
    /// Reads a result's string form; total (see [`SendResult::Other`]).
    pub fn parse(text: &str) -> SendResult {
        match text {
            ACCEPTED => SendResult::Accepted,
            LIVE => SendResult::Live,
            EXPIRED => SendResult::Expired,
            INACTIVE => SendResult::Inactive,
            NO_TOKEN => SendResult::NoToken,
            NO_CREDENTIALS => SendResult::NoCredentials,
            _ => {
                if let Some(reason) = text.strip_prefix(UNREGISTERED) {
                    SendResult::Unregistered(reason.to_string())
                } else if let Some(reason) = text.strip_prefix(REJECTED) {
                    SendResult::Rejected(reason.to_string())
                } else {
                    SendResult::Other(text.to_string())
                }
            }
        }
    }

    /// The string form, as stored and shown. Borrowed for every result but the two that carry
    /// a provider's reason.
    pub fn as_text(&self) -> Cow<'_, str> {
        match self {
            SendResult::Accepted => Cow::Borrowed(ACCEPTED),
            SendResult::Live => Cow::Borrowed(LIVE),
            SendResult::Expired => Cow::Borrowed(EXPIRED),
            SendResult::Inactive => Cow::Borrowed(INACTIVE),
            SendResult::NoToken => Cow::Borrowed(NO_TOKEN),
            SendResult::NoCredentials => Cow::Borrowed(NO_CREDENTIALS),
            SendResult::Unregistered(reason) => Cow::Owned(format!("{UNREGISTERED}{reason}")),
            SendResult::Rejected(reason) => Cow::Owned(format!("{REJECTED}{reason}")),
            SendResult::Other(text) => Cow::Borrowed(text),
        }
    }

    /// Whether a provider answered a send (`accepted`, `unregistered:...`, `rejected:...`): the
    /// receipt's `sent`, and the sends a stopped process may have made twice.
    pub fn was_sent(&self) -> bool {
        matches!(
            self,
            SendResult::Accepted | SendResult::Unregistered(_) | SendResult::Rejected(_)
        )
    }

    /// Whether the provider failed it for good (`unregistered:...`, `rejected:...`).
    pub fn is_failure(&self) -> bool {
        matches!(self, SendResult::Unregistered(_) | SendResult::Rejected(_))
    }
}

impl fmt::Display for SendResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendResult::Unregistered(reason) => write!(f, "{UNREGISTERED}{reason}"),
            SendResult::Rejected(reason) => write!(f, "{REJECTED}{reason}"),
            other => f.write_str(&other.as_text()),
        }
    }
}

impl From<&str> for SendResult {
    fn from(text: &str) -> Self {
        SendResult::parse(text)
    }
}

impl From<String> for SendResult {
    fn from(text: String) -> Self {
        SendResult::parse(&text)
    }
}

impl Serialize for SendResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.as_text())
    }
}

impl<'de> Deserialize<'de> for SendResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(deserializer)?;
        Ok(SendResult::parse(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every result the worker makes, with its string form as stored before the enum existed.
    fn named() -> Vec<(SendResult, &'static str)> {
        vec![
            (SendResult::Accepted, "accepted"),
            (SendResult::Live, "live"),
            (
                SendResult::Unregistered("Unregistered".into()),
                "unregistered:Unregistered",
            ),
            (
                SendResult::Unregistered("410 Gone".into()),
                "unregistered:410 Gone",
            ),
            (
                SendResult::Rejected("BadDeviceToken".into()),
                "rejected:BadDeviceToken",
            ),
            (SendResult::Rejected("no_token".into()), "rejected:no_token"),
            (SendResult::Rejected(String::new()), "rejected:"),
            (SendResult::Expired, "expired"),
            (SendResult::Inactive, "inactive"),
            (SendResult::NoToken, "no_token"),
            (SendResult::NoCredentials, "no_credentials"),
        ]
    }

    #[test]
    fn each_result_has_its_stored_string_and_reads_back() {
        for (result, text) in named() {
            assert_eq!(result.as_text(), text);
            assert_eq!(result.to_string(), text);
            assert_eq!(SendResult::parse(text), result, "{text}");
            assert_eq!(SendResult::from(text), result);
            assert_eq!(serde_json::to_string(&result).unwrap(), format!("{text:?}"));
            let back: SendResult = serde_json::from_str(&format!("{text:?}")).unwrap();
            assert_eq!(back, result);
        }
    }

    #[test]
    fn a_string_no_result_names_is_kept_as_written() {
        for text in ["twice", "", "rejected", "Accepted", "unregistered", " live"] {
            let result = SendResult::parse(text);
            assert_eq!(result, SendResult::Other(text.to_string()));
            assert_eq!(result.as_text(), text);
            assert!(!result.was_sent() && !result.is_failure());
        }
    }

    #[test]
    fn sent_and_failed_are_the_provider_answered_ones() {
        let sent: Vec<_> = named()
            .into_iter()
            .filter(|(r, _)| r.was_sent())
            .map(|(_, t)| t)
            .collect();
        assert_eq!(
            sent,
            [
                "accepted",
                "unregistered:Unregistered",
                "unregistered:410 Gone",
                "rejected:BadDeviceToken",
                "rejected:no_token",
                "rejected:"
            ]
        );
        let failed = named().into_iter().filter(|(r, _)| r.is_failure()).count();
        assert_eq!(failed, 5);
    }

    proptest! {
        #[test]
        fn any_string_round_trips_byte_for_byte(text in ".{0,40}") {
            let result = SendResult::parse(&text);
            prop_assert_eq!(result.as_text(), text.as_str());
            prop_assert_eq!(SendResult::parse(&result.as_text()), result);
        }

        #[test]
        fn any_reason_round_trips(reason in ".{0,40}") {
            for result in [
                SendResult::Rejected(reason.clone()),
                SendResult::Unregistered(reason.clone()),
            ] {
                prop_assert_eq!(SendResult::parse(&result.as_text()), result);
            }
        }
    }
}
