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
pub mod fcm;
pub mod h2pool;
pub mod origin;
pub mod outcome;
pub mod tls;
pub mod webpush;

pub use common::{Common, PayloadError};
pub use outcome::{Outcome, RetryScope};
