//! The HTTP side of the contract: how a request carries its credentials
//! (`Authorization: Bearer <token or key>`) and how an error is answered (the code's status and
//! `{"error":{"code":"...","message":"..."}}`). Every HTTP answer of an error, from the API or a
//! transport, is rendered here.

use crate::error::HeraldError;
use crate::reply::ErrorBody;

/// The credential of an `Authorization` header value that reads exactly `Bearer <x>` (capital
/// B, one space), trimmed; `None` for any other scheme. An empty credential is returned as
/// `Some("")`: whether that counts as none is the caller's rule.
pub fn bearer(authorization: &str) -> Option<&str> {
    authorization.strip_prefix("Bearer ").map(str::trim)
}

/// The JSON body of an HTTP error answer: `{"error":{"code":"...","message":"..."}}`.
pub fn error_body(e: &HeraldError) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Envelope<'a> {
        error: ErrorBody<'a>,
    }
    let mut body = Vec::with_capacity(48 + e.message.len());
    // Serialising two strings into a Vec cannot fail.
    let _ = serde_json::to_writer(
        &mut body,
        &Envelope {
            error: ErrorBody::from(e),
        },
    );
    body
}

/// The HTTP status and JSON body that answer `e`.
pub fn error_answer(e: &HeraldError) -> (u16, Vec<u8>) {
    (e.code.http_status(), error_body(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn bearer_reads_only_the_exact_scheme() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("Bearer  abc "), Some("abc"));
        assert_eq!(bearer("Bearer "), Some(""));
        assert_eq!(bearer("bearer abc"), None);
        assert_eq!(bearer("Basic abc"), None);
    }

    #[test]
    fn error_answers_carry_the_status_and_body() {
        let (status, body) = error_answer(&HeraldError::new(ErrorCode::NotFound, "no \"x\""));
        assert_eq!(status, 404);
        assert_eq!(
            body,
            br#"{"error":{"code":"not_found","message":"no \"x\""}}"#.to_vec()
        );
    }
}
