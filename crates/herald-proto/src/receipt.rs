//! A push's receipt as `GET /v1/push/{id}` answers it: the server builds it, clients read it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::send_result::SendResult;

/// What became of a push.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// Push id.
    pub id: String,
    /// Devices it was for (`None` while a broadcast's audience is still being counted).
    pub targeted: Option<u64>,
    /// Devices that acknowledged it.
    pub delivered: u64,
    /// Devices still expected to acknowledge it before it expires.
    pub pending: u64,
    /// Devices that did not acknowledge it before it expired.
    pub expired: u64,
    /// Accepted at, milliseconds since the Unix epoch.
    pub created: i64,
    /// Expires at, milliseconds since the Unix epoch.
    pub expires: i64,
    /// How it was to be delivered: `live`, `provider` or `auto` (absent: `live`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
    /// What became of its provider pushes (absent for `live` pushes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub providers: Option<ProviderReceipt>,
    /// Per device, when asked for (`?devices=true`): its provider job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<DeviceReceipt>>,
}

/// The provider path of a push: one entry per device that has a provider token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderReceipt {
    /// Waiting for the ack window to pass or for a worker (including retries).
    pub queued: u64,
    /// Acknowledged over a live connection before a provider push was needed: none was sent.
    pub live: u64,
    /// Sent to a provider and answered (accepted or failed).
    pub sent: u64,
    /// Accepted by the provider.
    pub accepted: u64,
    /// Failed, by reason (`rejected:BadDeviceToken`, `unregistered:Unregistered`, ...).
    pub failed: BTreeMap<String, u64>,
    /// Not sent, by reason: `expired`, `inactive` (deactivated meanwhile), `no_token`,
    /// `no_credentials` (the app has no credentials for the device's provider).
    pub skipped: BTreeMap<String, u64>,
    /// Given up after every retry (dead letters, see `herald jobs dead`).
    pub dead: u64,
    /// Sent while a server stopped, then sent again: those devices may have received it twice.
    pub in_doubt: u64,
    /// Whether a broadcast is still being expanded into provider jobs.
    pub expanding: bool,
}

/// One device's provider job for a push.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceReceipt {
    /// Device id.
    pub device: String,
    /// `apns`, `fcm` or `webpush`.
    pub provider: String,
    /// `queued`, `running`, `done` or `dead`.
    pub state: String,
    /// What happened (`accepted`, `live`, `rejected:BadDeviceToken`, ...) or the last failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Attempts made.
    pub attempts: u32,
    /// Whether the device may have received it twice.
    pub in_doubt: bool,
}

impl ProviderReceipt {
    /// Counts one finished provider job by its result (its string form, as stored; see
    /// [`SendResult`]).
    pub fn count_result(&mut self, result: &str, n: u64) {
        match SendResult::parse(result) {
            SendResult::Accepted => {
                self.sent += n;
                self.accepted += n;
            }
            SendResult::Live => self.live += n,
            r if r.is_failure() => {
                self.sent += n;
                *self.failed.entry(result.to_string()).or_default() += n;
            }
            _ => *self.skipped.entry(result.to_string()).or_default() += n,
        }
    }
}

impl Receipt {
    /// Fills `pending` and `expired` from `targeted`, `delivered` and the time.
    pub fn settle(mut self, now_ms: i64) -> Self {
        let open = self.targeted.unwrap_or(0).saturating_sub(self.delivered);
        if self.expires <= now_ms {
            self.expired = open;
            self.pending = 0;
        } else {
            self.pending = open;
            self.expired = 0;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_count_where_receipts_have_always_shown_them() {
        let mut r = ProviderReceipt::default();
        for (result, n) in [
            ("accepted", 5),
            ("live", 2),
            ("rejected:BadDeviceToken", 1),
            ("unregistered:Unregistered", 3),
            ("expired", 1),
            ("no_credentials", 4),
            ("twice", 1),
        ] {
            r.count_result(result, n);
        }
        assert_eq!((r.sent, r.accepted, r.live), (9, 5, 2));
        let failed: Vec<_> = r.failed.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        assert_eq!(
            failed,
            [
                ("rejected:BadDeviceToken", 1),
                ("unregistered:Unregistered", 3)
            ]
        );
        let skipped: Vec<_> = r.skipped.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        assert_eq!(
            skipped,
            [("expired", 1), ("no_credentials", 4), ("twice", 1)]
        );
    }
}
