//! What an APNs answer means: status and `reason` (Apple's "Handling notification responses
//! from APNs") mapped to an [`Outcome`], plus what the provider token must do about it.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, StatusCode};

use crate::outcome::{retry_after, Outcome, RetryScope};

/// What a send's answer asks of the provider token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenVerdict {
    /// APNs answered with something other than 403: the token (if any) was accepted.
    Accepted,
    /// `ExpiredProviderToken`: make a new token.
    Expired,
    /// `InvalidProviderToken` or `MissingProviderToken`.
    Invalid,
    /// Another 403 (a certificate problem, `Forbidden`).
    Refused,
}

#[derive(serde::Deserialize)]
struct ErrorBody {
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    timestamp: Option<i64>,
}

/// `apns-id`, the header of every 200.
static APNS_ID: HeaderName = HeaderName::from_static("apns-id");

/// Maps one answer to its [`Outcome`] and its [`TokenVerdict`].
pub fn interpret(status: StatusCode, headers: &HeaderMap, body: &Bytes) -> (Outcome, TokenVerdict) {
    if status == StatusCode::OK {
        // The common answer: nothing to parse, no reason to make.
        let id = headers
            .get(&APNS_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        return (Outcome::Accepted { id }, TokenVerdict::Accepted);
    }
    let parsed: Option<ErrorBody> = serde_json::from_slice(body).ok();
    let timestamp = parsed.as_ref().and_then(|b| b.timestamp);
    let reason = parsed
        .and_then(|b| b.reason)
        .filter(|r| !r.is_empty() && r.len() <= 128)
        .unwrap_or_else(|| format!("HTTP {}", status.as_u16()));
    let after = retry_after(headers.get(http::header::RETRY_AFTER));
    let provider_retry = |reason: String| Outcome::Retry {
        reason,
        after,
        scope: RetryScope::Provider,
    };
    let verdict = if status == StatusCode::FORBIDDEN {
        match reason.as_str() {
            "ExpiredProviderToken" => TokenVerdict::Expired,
            "InvalidProviderToken" | "MissingProviderToken" => TokenVerdict::Invalid,
            _ => TokenVerdict::Refused,
        }
    } else {
        TokenVerdict::Accepted
    };
    let outcome = match status.as_u16() {
        200 => Outcome::Accepted {
            id: headers
                .get("apns-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        },
        410 => Outcome::Unregistered {
            reason,
            since_ms: timestamp,
        },
        403 if verdict != TokenVerdict::Refused => provider_retry(reason),
        429 | 500..=599 => provider_retry(reason),
        _ => Outcome::Rejected { reason },
    };
    (outcome, verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> (Outcome, TokenVerdict) {
        let mut headers = HeaderMap::new();
        headers.insert("apns-id", "abc".parse().unwrap());
        headers.insert(http::header::RETRY_AFTER, "7".parse().unwrap());
        interpret(
            StatusCode::from_u16(status).unwrap(),
            &headers,
            &Bytes::from(body.to_string()),
        )
    }

    #[test]
    fn statuses_map_to_outcomes() {
        assert_eq!(
            answer(200, "").0,
            Outcome::Accepted {
                id: Some("abc".into())
            }
        );
        assert_eq!(
            answer(
                410,
                r#"{"reason":"Unregistered","timestamp":1700000000123}"#
            )
            .0,
            Outcome::Unregistered {
                reason: "Unregistered".into(),
                since_ms: Some(1_700_000_000_123)
            }
        );
        assert_eq!(
            answer(400, r#"{"reason":"BadDeviceToken"}"#).0,
            Outcome::Rejected {
                reason: "BadDeviceToken".into()
            }
        );
        assert_eq!(
            answer(413, "garbage").0,
            Outcome::Rejected {
                reason: "HTTP 413".into()
            }
        );
        let (retry, verdict) = answer(403, r#"{"reason":"ExpiredProviderToken"}"#);
        assert_eq!(verdict, TokenVerdict::Expired);
        assert!(matches!(
            retry,
            Outcome::Retry {
                scope: RetryScope::Provider,
                ..
            }
        ));
        let (refused, verdict) = answer(403, r#"{"reason":"BadCertificate"}"#);
        assert_eq!(verdict, TokenVerdict::Refused);
        assert!(matches!(refused, Outcome::Rejected { .. }));
        for status in [429, 500, 503] {
            let (o, v) = answer(status, r#"{"reason":"TooManyRequests"}"#);
            assert_eq!(v, TokenVerdict::Accepted);
            assert_eq!(
                o,
                Outcome::Retry {
                    reason: "TooManyRequests".into(),
                    after: Some(std::time::Duration::from_secs(7)),
                    scope: RetryScope::Provider
                }
            );
        }
    }
}
