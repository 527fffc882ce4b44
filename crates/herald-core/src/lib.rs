//! Herald's core: the model (channels, messages), the channel engine that appends, fans out and
//! resumes, each message's encode-once wire frames ([`frames`]), the one publish rule
//! ([`publish`]), the per-connection outbox, client/publisher authentication, and tenancy
//! (apps, keys, limits, usage). The wire contract (error codes, cursors, token claims, frame
//! encoders) is `herald-proto`'s; core re-exports what its users name through it.
//!
//! Nothing here opens a socket or speaks SQL. Storage is reached through [`log::ChannelLog`]
//! and [`tenancy::Tenancy`], implemented in `herald-store`; committed messages and
//! cache-invalidation events ([`caches`]) travel between nodes over the [`bus::Bus`] seam
//! ([`bus::LocalBus`] on one node); transports live in `herald-edge`; devices and pushes in
//! `herald-push`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
pub mod auth;
pub mod bus;
pub mod caches;
pub mod catchup;
pub mod claims;
pub mod device_id;
pub mod engine;
pub mod error;
pub mod fanout;
pub mod frames;
pub mod head;
pub mod hub;
pub mod jwks;
pub(crate) mod keyring;
pub mod lifecycle;
pub mod limits;
pub mod live;
pub mod log;
pub mod message;
pub mod name;
pub mod namespace;
pub mod outbox;
pub mod paged;
pub mod pattern;
pub mod presence;
pub mod publish;
pub mod revoked;
mod state_reads;
pub mod store_error;
pub mod telemetry;
pub mod tenancy;
pub mod tenant;
#[cfg(debug_assertions)]
pub mod test_hold;
pub mod token_keys;
mod tokens;
pub mod usage;
pub mod wiring;

pub use engine::Engine;
pub use error::{ErrorCode, HeraldError};
pub use message::{Cursor, Epoch, HeldPacket, NewMessage, Retain, SessionHold, StoredMessage};
pub use name::ChannelName;
