//! `herald-providers`' answer parsers: what an APNs, FCM or Web Push answer means, for any
//! status, `Retry-After` and body; a Web Push 2xx is always accepted.

use herald_providers::outcome::Outcome;
use http::{HeaderMap, HeaderValue, StatusCode};

/// Bytes 0-1: the status (100 to 599); byte 2: the length of a `Retry-After` value that
/// follows; then an `apns-id`'s length and value the same way; the rest is the body.
pub fn provider_answers(data: &[u8]) {
    let [hi, lo, rest @ ..] = data else {
        return;
    };
    let status = 100 + u16::from_be_bytes([*hi, *lo]) % 500;
    let Ok(status) = StatusCode::from_u16(status) else {
        return;
    };
    let mut headers = HeaderMap::new();
    let mut rest = rest;
    for name in ["retry-after", "apns-id"] {
        let Some((&len, after)) = rest.split_first() else {
            break;
        };
        let len = usize::from(len).min(after.len());
        if let Ok(value) = HeaderValue::from_bytes(&after[..len]) {
            headers.insert(name, value);
        }
        rest = &after[len..];
    }
    let (_apns, _fcm, _unauthenticated, webpush) =
        herald_providers::fuzzing::answers(status, &headers, rest);
    if status.is_success() {
        assert!(
            matches!(webpush, Outcome::Accepted { .. }),
            "{status}: {webpush:?}"
        );
    }
}
