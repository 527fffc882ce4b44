//! What an FCM HTTP v1 answer means, per its error codes: the `errorCode` of the
//! `google.firebase.fcm.v1.FcmError` detail when there is one, else the HTTP status and the
//! canonical `status` string.

use http::{header, HeaderMap, StatusCode};
use serde::Deserialize;

use crate::outcome::{retry_after, Outcome, RetryScope};

/// How much of FCM's own message a reason quotes.
const MESSAGE_CHARS: usize = 200;

#[derive(Deserialize)]
struct Accepted {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorInfo,
}

#[derive(Deserialize, Default)]
struct ErrorInfo {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    details: Vec<ErrorDetail>,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(rename = "errorCode", default)]
    error_code: Option<String>,
    #[serde(rename = "fieldViolations", default)]
    field_violations: Vec<FieldViolation>,
}

#[derive(Deserialize)]
struct FieldViolation {
    #[serde(default)]
    field: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

/// What a `messages:send` answer means. `unauthenticated` is true when FCM refused the access
/// token (the caller drops it so the next send fetches another).
pub(crate) struct Classified {
    pub outcome: Outcome,
    pub unauthenticated: bool,
}

/// Classifies one answer.
pub(crate) fn classify(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Classified {
    let plain = |outcome| Classified {
        outcome,
        unauthenticated: false,
    };
    if status.is_success() {
        let name = serde_json::from_slice::<Accepted>(body)
            .ok()
            .and_then(|a| a.name);
        return plain(Outcome::Accepted { id: name });
    }
    let info = serde_json::from_slice::<ErrorBody>(body)
        .map(|b| b.error)
        .unwrap_or_default();
    let code = info
        .details
        .iter()
        .find_map(|d| d.error_code.clone())
        .or_else(|| info.status.clone())
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_string());
    let reason = describe(&code, &info);
    let retry = |scope| Outcome::Retry {
        reason: reason.clone(),
        after: retry_after(headers.get(header::RETRY_AFTER)),
        scope,
    };
    match (status.as_u16(), code.as_str()) {
        (_, "UNREGISTERED") | (404, _) => plain(Outcome::Unregistered {
            reason: code,
            since_ms: None,
        }),
        // Bad APNs or Web Push credentials in the Firebase project: a new token cannot help.
        (_, "THIRD_PARTY_AUTH_ERROR") => plain(Outcome::Rejected { reason }),
        (401, _) => Classified {
            outcome: retry(RetryScope::Provider),
            unauthenticated: true,
        },
        (429, _) | (_, "QUOTA_EXCEEDED") => plain(retry(RetryScope::Provider)),
        (500..=599, _) | (_, "UNAVAILABLE") | (_, "INTERNAL") => plain(retry(RetryScope::Provider)),
        (400..=499, _) => plain(Outcome::Rejected { reason }),
        _ => plain(retry(RetryScope::Notification)),
    }
}

/// `CODE: field: description` when FCM names the field, else `CODE: message`.
fn describe(code: &str, info: &ErrorInfo) -> String {
    let violation = info
        .details
        .iter()
        .flat_map(|d| d.field_violations.iter())
        .next();
    let detail = match violation {
        Some(v) => format!(
            "{}: {}",
            v.field.as_deref().unwrap_or("?"),
            v.description.as_deref().unwrap_or("")
        ),
        None => info.message.clone().unwrap_or_default(),
    };
    let detail: String = detail.chars().take(MESSAGE_CHARS).collect();
    if detail.is_empty() {
        code.to_string()
    } else {
        format!("{code}: {detail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(status: u16, code: &str, fcm_code: Option<&str>) -> Vec<u8> {
        let details = match fcm_code {
            Some(c) => serde_json::json!([{
                "@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": c}]),
            None => serde_json::json!([]),
        };
        serde_json::to_vec(&serde_json::json!({"error": {
            "code": status, "message": "m", "status": code, "details": details}}))
        .unwrap()
    }

    fn outcome(status: u16, body: &[u8]) -> Classified {
        let mut headers = HeaderMap::new();
        headers.insert(header::RETRY_AFTER, "7".parse().unwrap());
        classify(StatusCode::from_u16(status).unwrap(), &headers, body)
    }

    #[test]
    fn maps_the_v1_error_codes() {
        let c = outcome(200, br#"{"name":"projects/p/messages/1"}"#);
        assert_eq!(
            c.outcome,
            Outcome::Accepted {
                id: Some("projects/p/messages/1".into())
            }
        );
        let c = outcome(404, &error(404, "NOT_FOUND", Some("UNREGISTERED")));
        assert!(
            matches!(c.outcome, Outcome::Unregistered { ref reason, .. } if reason == "UNREGISTERED")
        );
        let c = outcome(
            403,
            &error(403, "PERMISSION_DENIED", Some("SENDER_ID_MISMATCH")),
        );
        assert!(
            matches!(c.outcome, Outcome::Rejected { ref reason } if reason.starts_with("SENDER_ID_MISMATCH"))
        );
        let c = outcome(
            429,
            &error(429, "RESOURCE_EXHAUSTED", Some("QUOTA_EXCEEDED")),
        );
        assert!(
            matches!(c.outcome, Outcome::Retry { scope: RetryScope::Provider, after: Some(a), .. } if a.as_secs() == 7)
        );
        for (status, code) in [(503, "UNAVAILABLE"), (500, "INTERNAL")] {
            let c = outcome(status, &error(status, code, Some(code)));
            assert!(matches!(
                c.outcome,
                Outcome::Retry {
                    scope: RetryScope::Provider,
                    ..
                }
            ));
        }
        let c = outcome(401, &error(401, "UNAUTHENTICATED", None));
        assert!(c.unauthenticated);
        assert!(matches!(
            c.outcome,
            Outcome::Retry {
                scope: RetryScope::Provider,
                ..
            }
        ));
        let c = outcome(
            401,
            &error(401, "UNAUTHENTICATED", Some("THIRD_PARTY_AUTH_ERROR")),
        );
        assert!(!c.unauthenticated);
        assert!(matches!(c.outcome, Outcome::Rejected { .. }));
        // Not JSON at all: the status decides.
        assert!(matches!(
            outcome(502, b"<html>").outcome,
            Outcome::Retry { .. }
        ));
        assert!(matches!(
            outcome(404, b"").outcome,
            Outcome::Unregistered { .. }
        ));
    }

    #[test]
    fn invalid_argument_names_the_field() {
        let body = serde_json::to_vec(&serde_json::json!({"error": {
            "code": 400, "message": "Invalid value", "status": "INVALID_ARGUMENT",
            "details": [
                {"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "INVALID_ARGUMENT"},
                {"@type": "type.googleapis.com/google.rpc.BadRequest",
                 "fieldViolations": [{"field": "message.android.ttl", "description": "Invalid duration"}]}
            ]}}))
        .unwrap();
        let c = outcome(400, &body);
        assert_eq!(
            c.outcome,
            Outcome::Rejected {
                reason: "INVALID_ARGUMENT: message.android.ttl: Invalid duration".into()
            }
        );
    }
}
