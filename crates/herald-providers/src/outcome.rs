//! What a provider's answer to one send means for Herald: delivered to the provider, the token
//! is gone (deactivate the device), the request is wrong (report, do not retry), or try again
//! later, for this one notification or for the whole provider (rate limit, outage, bad
//! credentials being refreshed).

use std::time::Duration;

/// The meaning of one send's answer (or of the failure to get one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The provider accepted the notification; `id` is its id for it when it gives one
    /// (`apns-id`, FCM's message name).
    Accepted {
        /// The provider's id for the notification.
        id: Option<String>,
    },
    /// The token or subscription no longer reaches a device: deactivate it. `since_ms` is when
    /// the provider says it stopped being valid (APNs' `timestamp`), when it says.
    Unregistered {
        /// The provider's reason (`Unregistered`, `UNREGISTERED`, `410 Gone`).
        reason: String,
        /// Milliseconds since the Unix epoch.
        since_ms: Option<i64>,
    },
    /// The provider refused this notification for good (bad token, payload too large, wrong
    /// topic, bad credentials): report it and do not retry.
    Rejected {
        /// The provider's reason (`BadDeviceToken`, `INVALID_ARGUMENT`, `413`).
        reason: String,
    },
    /// Try again later.
    Retry {
        /// The provider's reason, or what failed (`TooManyRequests`, `connect: refused`).
        reason: String,
        /// The provider's `Retry-After`, when it gave one.
        after: Option<Duration>,
        /// Whether only this notification or everything for this app and provider waits.
        scope: RetryScope,
    },
}

/// Who waits after a [`Outcome::Retry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryScope {
    /// Only this notification (a stream reset, a 500 for one request).
    Notification,
    /// Every notification for this app and provider: a rate limit, an outage, too many token
    /// updates, a connection that cannot be made.
    Provider,
}

impl Outcome {
    /// The reason a failed send gives (`None` when accepted).
    pub fn reason(&self) -> Option<&str> {
        match self {
            Outcome::Accepted { .. } => None,
            Outcome::Unregistered { reason, .. }
            | Outcome::Rejected { reason }
            | Outcome::Retry { reason, .. } => Some(reason),
        }
    }

    /// A retry for the whole provider with no `Retry-After`: what a connection failure means.
    pub fn unreachable(reason: impl Into<String>) -> Self {
        Outcome::Retry {
            reason: reason.into(),
            after: None,
            scope: RetryScope::Provider,
        }
    }
}

/// Parses an HTTP `Retry-After` given in seconds (the HTTP-date form is read as "no hint").
pub fn retry_after(value: Option<&http::HeaderValue>) -> Option<Duration> {
    let secs: u64 = value?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_only() {
        let v = http::HeaderValue::from_static("120");
        assert_eq!(retry_after(Some(&v)), Some(Duration::from_secs(120)));
        let date = http::HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT");
        assert_eq!(retry_after(Some(&date)), None);
        assert_eq!(retry_after(None), None);
    }
}
