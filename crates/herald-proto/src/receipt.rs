//! A push's receipt as `GET /v1/push/{id}` answers it: the server builds it, clients read it.

use serde::{Deserialize, Serialize};

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
