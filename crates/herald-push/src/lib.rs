//! Herald's push domain: devices and their registration, tags and tag expressions, pushes and
//! who they reach, device inboxes (storing a push where its devices read it, acknowledgements)
//! and receipts.
//!
//! Pushes are kept in each app's reserved logs of the channel engine (`herald-core`); this
//! crate says what goes in them, how long they keep it ([`logs::register`], called once at
//! start-up), and which device a stored push is for ([`audience::Audience`]). Devices and
//! receipts are stored through [`registry::DeviceRegistry`], implemented in `herald-store`.
//! What happens to devices and deliveries is told to an observer ([`push_events`]: webhooks, in
//! the server) once it is durable.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod audience;
pub mod credentials;
pub mod delivery;
pub mod device;
pub mod inbox;
pub mod jobs;
pub mod logs;
pub mod push;
pub mod push_events;
pub mod registry;
pub mod tags;

pub use audience::Audience;
pub use herald_providers::destination::Destinations;
pub use inbox::Inbox;
pub use registry::DeviceRegistry;
