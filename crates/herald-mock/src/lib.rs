//! Mock push providers that speak the real protocols, for tests, `herald bench` and
//! `herald mock`: nothing here is a stub of Herald's own code, each mock is a TLS HTTP/2 server
//! a real provider client can talk to.
//!
//! - [`apns`]: APNs' `POST /3/device/{token}`, checking ES256 provider tokens, with stream
//!   limits, GOAWAY and scripted failure reasons.
//! - [`fcm`]: Google's OAuth2 token endpoint and FCM's `messages:send`.
//! - [`webpush`]: a push service that decrypts `aes128gcm` (RFC 8291) and checks VAPID (RFC 8292).
//!
//! [`tls`] makes the self-signed certificate every mock serves (clients trust it through their
//! extra-CA setting) and [`server`] is the HTTP/2 accept loop they share.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod apns;
pub mod fcm;
pub mod server;
pub mod tls;
pub mod webpush;
