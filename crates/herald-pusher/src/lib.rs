//! The Pusher Channels protocol in Herald (issue 35; docs/design/pusher.md is the design,
//! docs/pusher.md the user's guide): pusher-js, Laravel Echo and Pusher's server SDKs work
//! against Herald unchanged, on the same channels as every other transport.
//!
//! This crate owns what is Pusher's: an app's Pusher credentials (app id, key, secrets), the
//! signatures made with them, Pusher channel names and what they map to, the `$pusher`
//! envelope a Pusher event is stored in, and Pusher's HTTP API. So far:
//!
//! - [`signature`]: the HTTP API's request signature, channel authorisation and sign-in
//!   signatures (HMAC-SHA256), checked in constant time.
//! - [`channel_map`]: Pusher channel names ↔ Herald channels (core's topic-style encoding),
//!   and a name's kind (public, private, presence, encrypted, cache).
//! - [`event`]: a Pusher event ↔ a message's data (the `$pusher` envelope).
//! - [`credentials`]: the credentials as stored (the [`PusherCredentialStore`] trait
//!   herald-store implements), the service the admin API calls, and each node's cache.
//! - [`http`]: the HTTP API at `/apps/{app_id}/...` (events and batches), a router
//!   herald-server merges into the HTTP listener's.
//! - [`serve`]: the client protocol 7 at `/app/{key}` (a WebSocket over edge's driver and
//!   session, a router herald-server merges too): [`frame`] its JSON frames and Pusher's
//!   codes, `session.rs` its commands (public and private channels, client events),
//!   `wire.rs` the driver's wire (keep-alive, goodbye), `outbound.rs` a channel message as
//!   the event frame every Pusher subscriber shares; [`settings`] its settings.
//! - [`presence`]: Pusher presence channels as Herald presence channels (`channel_data`, the
//!   members' frames); [`cache`]: cache channels' last event (the log's last message, 30
//!   minutes) or `pusher:cache_miss`.
//!
//! - [`users`]: user sign-in (`pusher:signin`) and the server-to-user channel; [`watchlist`]:
//!   a signed-in user's watchlist, told who of it comes online and goes offline (a core
//!   presence channel per user, so across the cluster);
//!   [`connections`]: this node's Pusher connections by app and key, closed when their key
//!   goes, and `terminate_connections` across the cluster.
//!
//! - [`resume`]: exact resume for clients that ask for it (positions of a channel's events,
//!   a subscribe after a cursor), an extension unchanged Pusher clients never see.
//!
//! - [`webhooks`]: what herald-hooks asks of Pusher for endpoints in Pusher's format (channels'
//!   Pusher names, the app's key and secret to sign with).
//!
//! The rest comes in the design's order.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cache;
pub mod channel_map;
pub mod connections;
pub mod credentials;
pub mod event;
pub mod frame;
pub mod http;
mod keepalive;
mod outbound;
mod park;
mod parked;
pub mod presence;
pub mod resume;
pub mod serve;
mod session;
pub mod settings;
pub mod signature;
pub mod users;
pub mod watchlist;
pub mod webhooks;
mod wire;

pub use credentials::store::PusherCredentialStore;
pub use webhooks::PusherHookFormat;
