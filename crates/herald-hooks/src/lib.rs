//! Webhooks: an app's backend told, by `POST`s to endpoints it registered, what happens to its
//! users, channels and devices, from every node, signed, batched, retried and never lost once
//! queued. docs/hooks.md is the user's guide.
//!
//! - [`event`]: the event types an endpoint asks for, event ids, and one event as sent
//!   ([`HookEvent`], built from a lifecycle event).
//! - [`endpoint`]: an endpoint as stored and shown, and which events it wants.
//! - [`signing`]: Standard Webhooks 1.0 signatures and the `whsec_` signing secrets.
//! - [`seal`]: signing secrets sealed at rest.
//! - [`input`]: the create and PATCH bodies of the API, checked (every error names its field),
//!   and the URL's destination.
//! - [`error`]: [`HooksError`], what the service answers when it does not do what it was asked.
//! - [`store`]: [`HookStore`], the storage trait (endpoints, and the durable queue per
//!   endpoint, in order, leased an endpoint at a time).
//! - [`sender`]: [`Sender`], one signed request of a batch to an endpoint (reaching only the
//!   addresses the operator allows, following no redirect), and what came of it.
//! - `memory` (tests only, or with the `memory-store` feature): `MemoryHookStore`, a
//!   [`HookStore`] in memory.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod endpoint;
pub mod error;
pub mod event;
pub mod input;
#[cfg(any(test, feature = "memory-store"))]
pub mod memory;
pub mod seal;
pub mod sender;
pub mod signing;
pub mod store;

pub use endpoint::{Endpoint, EndpointId, StoredEndpoint};
pub use error::HooksError;
pub use event::{EventId, EventSet, EventType, HookEvent};
pub use sender::{SendOutcome, SendResult, Sender};
pub use signing::{Signed, SigningSecret};
pub use store::HookStore;
