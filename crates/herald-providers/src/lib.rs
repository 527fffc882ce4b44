//! Herald's provider clients: how a notification reaches a device that holds no live connection.
//!
//! - [`apns`]: Apple Push Notification service over HTTP/2 (token auth with an ES256 `.p8` key,
//!   or certificate auth), push types, payload rules and Apple's reasons.
//! - [`fcm`]: Firebase Cloud Messaging HTTP v1 (service-account OAuth2 token, `messages:send`).
//! - [`webpush`]: Web Push (RFC 8030) with RFC 8291 `aes128gcm` encryption and RFC 8292 VAPID.
//!
//! Every client answers a send with an [`Outcome`]: accepted, the token is gone, the request was
//! rejected, or try again later (and whether the whole provider should back off). This crate
//! knows nothing of Herald's apps, devices or queue; `herald-push` decides what to do with an
//! outcome. Base URLs are configurable so tests and benchmarks point at `herald-mock`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod apns;
mod coalesce;
pub mod common;
pub mod destination;
pub mod fcm;
pub mod h2pool;
pub mod origin;
pub mod outcome;
pub mod tls;
pub mod webpush;

/// Entry points for `herald-fuzz` (the fuzz targets under `fuzz/` and their replay test): what
/// each provider's answer means, reached without a connection. Not part of the crate's API.
#[doc(hidden)]
pub mod fuzzing {
    use crate::outcome::Outcome;

    /// The meaning of one answer as APNs, FCM and a Web Push service would each give it:
    /// `(APNs outcome, FCM outcome, FCM said unauthenticated, Web Push outcome)`.
    pub fn answers(
        status: http::StatusCode,
        headers: &http::HeaderMap,
        body: &[u8],
    ) -> (Outcome, Outcome, bool, Outcome) {
        let (apns, _) =
            crate::apns::response::interpret(status, headers, &bytes::Bytes::copy_from_slice(body));
        let fcm = crate::fcm::answer::classify(status, headers, body);
        let webpush = crate::webpush::classify(status, headers, body);
        (apns, fcm.outcome, fcm.unauthenticated, webpush)
    }
}

pub use common::{Common, PayloadError};
pub use outcome::{Outcome, RetryScope};
