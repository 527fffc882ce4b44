//! The durable outbound queue's rules, for any kind of job that sends something somewhere and
//! may have to try again: a provider send of a push to a device (`herald-push`, the first user),
//! and next a webhook delivery to an endpoint.
//!
//! - [`retry`]: [`RetryPolicy`], exponential backoff with jitter, a `Retry-After` honoured,
//!   and the last attempt after which a job becomes a dead letter.
//! - [`pauses`]: [`Pauses`], one pause per destination after a failure of the destination as a
//!   whole (a rate limit, an outage), backing off while it goes on, lifted by a success.
//! - [`queue`]: [`Outbound`], the two together as a worker applies them (what to skip when
//!   leasing, what a failed attempt becomes), and [`OutboundStore`], the storage trait a store
//!   implements for each kind of job (lease, settle, dead letters listed, replayed, dropped,
//!   queue depth).
//! - [`lines`]: [`LineLimiter`], at most one log line per key every period, counting the
//!   lines held back.
//! - [`figures`]: [`Figures`], what sends came to (successes, failures by reason, retries)
//!   and how long they took (mean and 95th percentile).
//!
//! What a job is, where it goes and what its success is called belong to its user; this crate
//! knows destinations only as keys.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod figures;
pub mod lines;
pub mod pauses;
pub mod queue;
pub mod retry;

pub use figures::{Ended, Figures, Summary};
pub use lines::LineLimiter;
pub use pauses::Pauses;
pub use queue::{DeadLetter, Failure, JobId, Next, Outbound, OutboundStore, Verdict};
pub use retry::{RetryPolicy, BACKOFF_BASE, BACKOFF_CAP, MAX_ATTEMPTS};
