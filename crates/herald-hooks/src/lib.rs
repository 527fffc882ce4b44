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
//! - [`service`]: [`Hooks`], the service the API calls (endpoints registered, listed,
//!   changed, deleted, secrets rotated, test events, dead letters), and its tasks once
//!   started; [`HooksConfig`], its settings.
//! - [`view`]: what the API shows of an endpoint ([`EndpointView`]) and of a test request.
//! - [`listener`]: the lifecycle listener that puts this node's events on the node queue, when
//!   an enabled endpoint wants them; [`writer`]: the task that queues them in the store, one
//!   row per endpoint, a `user.offline` held for the endpoint's offline delay. Both match
//!   against `snapshot`, the endpoints held in memory.
//! - [`counts`]: `subscription_count` events, at most one per channel per interval, with the
//!   count at its end ([`counts::SubscriptionCounts`], the windows the listener notes, and
//!   [`counts::ChannelCounts`], where counts come from: the hub's, or the cluster's).
//! - [`tail`]: this node's tails, the events the writer queues shown live per app
//!   (`GET /v1/apps/{id}/hooks/tail`).
//! - [`push`]: device and delivery events ([`HookEvent::from_push`]) and [`PushHooks`], the
//!   observer `herald-push` tells them to, which puts them on the node queue as the listener
//!   does.
//! - [`pusher`]: Pusher's webhook format, for endpoints whose format is `pusher`: its events,
//!   body and signature, and [`pusher::PusherWebhooks`], what herald-pusher tells the service.
//! - [`sender`]: [`Sender`], one signed request of a batch to an endpoint (reaching only the
//!   addresses the operator allows, following no redirect), and what came of it.
//! - [`worker`]: the delivery worker, sending each endpoint's due batches, settling them
//!   (delivered, retried with backoff, dead letters past the horizon) and exporting the
//!   queue's depth.
//! - `memory` (tests only, or with the `memory-store` feature): `MemoryHookStore`, a
//!   [`HookStore`] in memory.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod counts;
pub mod endpoint;
pub mod error;
pub mod event;
pub mod input;
pub mod listener;
#[cfg(any(test, feature = "memory-store"))]
pub mod memory;
pub mod push;
pub mod pusher;
pub mod seal;
pub mod sender;
pub mod service;
pub mod signing;
mod snapshot;
pub mod store;
pub mod tail;
pub mod view;
pub mod worker;
pub mod writer;

pub use endpoint::{Endpoint, EndpointId, Format, StoredEndpoint};
pub use error::HooksError;
pub use event::{EventId, EventSet, EventType, HookEvent};
pub use push::PushHooks;
pub use sender::{SendOutcome, SendResult, Sender};
pub use service::{Hooks, HooksConfig};
pub use signing::{Signed, SigningSecret};
pub use store::HookStore;
pub use view::{EndpointState, EndpointView, TestOutcome};
