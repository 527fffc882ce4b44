//! The channel log as the engine sees it: durable, ordered appends with idempotency, reads from a
//! seq, and channel state. `herald-store` implements it (SQLite today, PostgreSQL later).

use async_trait::async_trait;

use crate::message::{Epoch, NewMessage, SharedMessage};
use crate::name::ChannelName;

pub use crate::store_error::StoreError;

/// How much history a channel keeps; older messages are removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Keep at most this many of the newest messages (at least 1).
    pub max_messages: u64,
    /// Remove messages older than this many milliseconds (0 = no age limit).
    pub max_age_ms: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_messages: 1000,
            max_age_ms: 24 * 3600 * 1000,
        }
    }
}

/// Where a channel's log stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelState {
    /// The channel.
    pub name: ChannelName,
    /// Current epoch; empty if the channel has never had a message.
    pub epoch: Epoch,
    /// Seq of the newest message (0 if none).
    pub last_seq: u64,
    /// Seq of the oldest message still retained (`last_seq + 1` when none is retained).
    pub first_seq: u64,
}

impl ChannelState {
    /// State of a channel that has never had a message.
    pub fn empty(name: ChannelName) -> Self {
        ChannelState {
            name,
            epoch: Epoch::default(),
            last_seq: 0,
            first_seq: 1,
        }
    }
}

/// Which part of a channel's log to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// Messages with seq greater than this, oldest first.
    After(u64),
    /// The newest n messages, oldest first.
    Tail(u64),
}

/// A read from a channel's log.
#[derive(Debug, Clone)]
pub struct LogSlice {
    /// The channel's state at the time of the read.
    pub state: ChannelState,
    /// The messages read, in seq order.
    pub messages: Vec<SharedMessage>,
}

/// What one append produced.
#[derive(Debug, Clone)]
pub struct Appended {
    /// The stored message (for a duplicate, the one stored earlier).
    pub message: SharedMessage,
    /// True if the idempotency key was already stored and nothing new was appended.
    pub duplicate: bool,
}

/// Receives committed messages in seq order, right after they are durable and before the append
/// that produced them returns. The engine's fan-out hub implements it; ordering across all
/// appends of a channel is the log's responsibility.
pub trait CommitSink: Send + Sync {
    /// Called with newly stored (never duplicate) messages, in commit order.
    fn committed(&self, messages: &[SharedMessage]);
}

/// A durable, ordered channel log.
#[async_trait]
pub trait ChannelLog: Send + Sync {
    /// Appends `messages` to `channel` in order and returns once they are stored according to the
    /// sync policy. A message whose `id` is already stored in the channel is not appended again;
    /// its earlier copy is returned with `duplicate: true`. New messages are passed to the
    /// [`CommitSink`] before this returns.
    async fn append(
        &self,
        channel: &ChannelName,
        messages: Vec<NewMessage>,
        retention: Retention,
    ) -> Result<Vec<Appended>, StoreError>;

    /// Reads up to `limit` messages.
    async fn read(
        &self,
        channel: &ChannelName,
        from: ReadFrom,
        limit: usize,
    ) -> Result<LogSlice, StoreError>;

    /// The channel's state (an empty state if it has never had a message).
    async fn state(&self, channel: &ChannelName) -> Result<ChannelState, StoreError>;

    /// The states of `channels`, in the same order: [`ChannelLog::state`] of each, which a
    /// networked store answers with one read for the whole batch (a subscribe storm's new
    /// channels cost one round trip, not one each). The default asks for each in turn.
    async fn states(&self, channels: &[ChannelName]) -> Result<Vec<ChannelState>, StoreError> {
        let mut states = Vec::with_capacity(channels.len());
        for channel in channels {
            states.push(self.state(channel).await?);
        }
        Ok(states)
    }

    /// Channels in name order, starting after `after`, at most `limit`.
    async fn list(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ChannelState>, StoreError>;

    /// The channel's retained message (see [`crate::message::Retain`]): the last one appended
    /// with [`Retain::Keep`](crate::message::Retain::Keep), unless a later
    /// [`Retain::Clear`](crate::message::Retain::Clear) cleared it or its expiry is at or
    /// before `now_ms`. Kept whatever the channel's history keeps. A store without retained
    /// messages has none.
    async fn retained(
        &self,
        channel: &ChannelName,
        now_ms: u64,
    ) -> Result<Option<SharedMessage>, StoreError> {
        let _ = (channel, now_ms);
        Ok(None)
    }

    /// The retained messages (as [`ChannelLog::retained`]) of the channels whose full names
    /// start with `prefix`, in name order, after the channel named `after` if given, at most
    /// `limit`; fewer than `limit` when there are no more.
    async fn retained_under(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        now_ms: u64,
    ) -> Result<Vec<SharedMessage>, StoreError> {
        let _ = (prefix, after, limit, now_ms);
        Ok(Vec::new())
    }

    /// Flushes and stops accepting appends; waits for in-flight appends to finish.
    async fn close(&self);

    /// Why writes fail now, if they do for a reason that outlasts one request: no space left
    /// (until a write succeeds again), or writes stopped after a failed fsync (until a restart).
    /// Known without any work: `/healthz` reports a fault that only a restart clears
    /// ([`StoreError::needs_restart`]). `None` while writes work.
    fn write_fault(&self) -> Option<StoreError> {
        None
    }

    /// Whether the store takes writes now, for `/readyz`: `Err` says why not. A store whose
    /// faults are all known in memory answers [`ChannelLog::write_fault`]; a networked one
    /// answers from its last write or reachability check while that is recent, and otherwise
    /// checks once, shared by every caller meanwhile, so that probes never cost a query each.
    async fn takes_writes(&self) -> Result<(), StoreError> {
        match self.write_fault() {
            Some(fault) => Err(fault),
            None => Ok(()),
        }
    }

    /// Whether [`ChannelLog::states`] reads a batch in one round trip (a networked store), so
    /// that the engine gathers the state reads of concurrent subscribes into batches. A store
    /// whose reads are local and cheap answers `false`: each subscribe reads its own.
    fn batches_states(&self) -> bool {
        false
    }

    /// Whether [`ChannelLog::state`] answers for a channel that never had a message without a
    /// read (the store keeps the names of the channels that have a log in memory). The hub
    /// then forgets such a channel's entry as soon as its last subscriber leaves, instead of
    /// keeping it lingering to spare the next subscriber a read ([`crate::hub::Hub`]).
    fn knows_unpublished_channels(&self) -> bool {
        false
    }
}
