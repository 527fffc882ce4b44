//! What both writers (SQLite's writer thread, PostgreSQL's writer task) share: the append
//! request they take, how often they sweep expired messages, and what they do once a group
//! commit is durable (count it, hand its new messages to the [`CommitSink`]). Plain types and
//! inlined functions: nothing here adds an allocation or a dynamic call to the writer's loop.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use herald_core::log::{Appended, CommitSink, Retention, StoreError};
use herald_core::message::{NewMessage, SharedMessage};
use herald_core::name::ChannelName;
use tokio::sync::oneshot;

/// How long a writer waits between age sweeps.
pub(crate) const AGE_TRIM_INTERVAL: Duration = Duration::from_secs(30);

/// Where a request's answer goes.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// One append call.
pub(crate) struct AppendRequest {
    pub channel: ChannelName,
    pub messages: Vec<NewMessage>,
    pub retention: Retention,
    pub reply: Reply<Vec<Appended>>,
}

/// A group commit is durable: records how many messages it was asked for and how many it
/// appended, then hands the new ones to `sink` (a panicking sink is logged; the messages are
/// stored whatever it does).
#[inline]
pub(crate) fn committed(sink: &dyn CommitSink, requested: usize, new: &[SharedMessage]) {
    metrics::histogram!("herald_store_batch_messages").record(requested as f64);
    metrics::counter!("herald_store_appends_total").increment(new.len() as u64);
    if !new.is_empty() && catch_unwind(AssertUnwindSafe(|| sink.committed(new))).is_err() {
        tracing::error!("commit sink panicked; the messages are stored");
    }
}
