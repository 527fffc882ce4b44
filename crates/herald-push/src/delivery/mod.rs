//! The delivery state machine: how a push reaches a device, live or through its provider.
//!
//! A push says how it is delivered ([`Delivery`]):
//! - `live`: the inbox and live connections only;
//! - `provider`: a provider push to every targeted device that has a provider token, at once;
//! - `auto` (the default for a push with a `notification`): the inbox and live connection
//!   first. A device that holds a connection gets a provider job due when the ack window ends;
//!   an offline device gets one due now. When the job runs, a device that has acknowledged the
//!   push meanwhile (its inbox cursor reached the push) is settled as `live` and no provider push
//!   is sent; otherwise exactly one is. One rule decides it for every send
//!   ([`record::DeliveryRecord::acked_live`]).
//!
//! The job queue ([`crate::jobs`]) makes this durable; [`worker::Deliverer`] runs it
//! ([`broadcast`]: a broadcast's pages sent directly, each page's sends run by
//! [`page_sends`]; [`listing`]: results per device),
//! [`senders::Senders`] holds each app's provider clients, [`payloads::Payloads`] are the
//! per-provider payloads rendered once per push, [`stats::WorkerStats`] count what the
//! workers did, and `failures` writes a WARN line, rate-limited, for each dead letter and each
//! provider pause; `round_failures` says once when the worker's rounds start failing (the store
//! cannot be reached) and once when they work again, and spaces the failing rounds out.

pub mod broadcast;
mod failures;
pub mod listing;
pub mod page_sends;
pub mod payloads;
pub mod record;
mod round_failures;
pub mod senders;
pub mod stats;
pub mod worker;

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How a push is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Delivery {
    /// Live connections and the inbox only.
    Live,
    /// A provider push to every device with a provider token, at once.
    Provider,
    /// Live first; the provider when the device has not acknowledged within the ack window.
    Auto,
}

impl Delivery {
    /// The name the API uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Live => "live",
            Delivery::Provider => "provider",
            Delivery::Auto => "auto",
        }
    }
}

/// The ack window when neither the push nor its app sets one.
pub const DEFAULT_ACK_WINDOW: Duration = Duration::from_secs(5);
/// The longest ack window a push or app may ask for.
pub const MAX_ACK_WINDOW: Duration = Duration::from_secs(3600);
