//! Coalesced reads of channel states for subscribes ([`StateReads`]): when many subscribers
//! of channels the hub does not know arrive at once (a subscribe storm, the clients of a lost
//! node reconnecting), their states are read with one [`ChannelLog::states`] call per batch
//! instead of one store read each. Used for a store whose batched read is one round trip
//! ([`ChannelLog::batches_states`]); for the others a subscriber reads its state itself.
//!
//! In a cluster the bus may know the heads without the store ([`HeadSource`], `RedisBus`
//! keeps them in Redis): each batch is asked of it first, and read from the store only when
//! it cannot vouch for them, so a storm of subscribes to channels that never had a message
//! costs no store read at all.

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::head::{Head, HeadSource};
use crate::log::{ChannelLog, ChannelState, StoreError};
use crate::ChannelName;

/// Channels whose states one store call reads at most.
const BATCH: usize = 1000;

type Reply = oneshot::Sender<Result<ChannelState, StoreError>>;

/// The state reads waiting for the next batch, and whether a batch is being read.
#[derive(Default)]
struct Queue {
    waiting: Vec<(ChannelName, Reply)>,
    reading: bool,
}

/// One batch of state reads at a time; the reads asked for meanwhile make the next batch.
pub(crate) struct StateReads {
    log: Arc<dyn ChannelLog>,
    /// Asked before the log, once set ([`StateReads::use_source`]).
    source: OnceLock<Arc<dyn HeadSource>>,
    queue: Mutex<Queue>,
}

impl StateReads {
    pub(crate) fn new(log: Arc<dyn ChannelLog>) -> Arc<StateReads> {
        Arc::new(StateReads {
            log,
            source: OnceLock::new(),
            queue: Mutex::default(),
        })
    }

    /// Asks `source` for each batch's heads before the log.
    pub(crate) fn use_source(&self, source: Arc<dyn HeadSource>) {
        let _ = self.source.set(source);
    }

    /// The states of `channels`: from the head source if it vouches for them, else the log.
    async fn read(&self, channels: &[ChannelName]) -> Result<Vec<ChannelState>, StoreError> {
        if let Some(source) = self.source.get() {
            if let Some(heads) = source
                .heads(channels)
                .await
                .filter(|heads| heads.len() == channels.len())
            {
                return Ok(channels
                    .iter()
                    .zip(heads)
                    .map(|(name, head)| state_of(name, head))
                    .collect());
            }
        }
        self.log.states(channels).await
    }

    /// `channel`'s state, read in the next batch.
    pub(crate) async fn state(
        self: &Arc<Self>,
        channel: &ChannelName,
    ) -> Result<ChannelState, StoreError> {
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut queue = self.queue.lock();
            queue.waiting.push((channel.clone(), reply));
            !std::mem::replace(&mut queue.reading, true)
        };
        if start {
            // A task of its own: a subscriber that gives up does not strand the others.
            tokio::spawn(self.clone().read_batches());
        }
        answer.await.unwrap_or(Err(StoreError::Closed))
    }

    /// Reads batches until none is waiting.
    async fn read_batches(self: Arc<Self>) {
        let mut reading = Reading {
            reads: &self,
            done: false,
        };
        loop {
            let batch: Vec<(ChannelName, Reply)> = {
                let mut queue = self.queue.lock();
                if queue.waiting.is_empty() {
                    queue.reading = false;
                    reading.done = true;
                    return;
                }
                let n = queue.waiting.len().min(BATCH);
                queue.waiting.drain(..n).collect()
            };
            let channels: Vec<ChannelName> = batch.iter().map(|(c, _)| c.clone()).collect();
            match self.read(&channels).await {
                Ok(states) if states.len() == batch.len() => {
                    for ((_, reply), state) in batch.into_iter().zip(states) {
                        let _ = reply.send(Ok(state));
                    }
                }
                Ok(_) => {
                    let error = StoreError::failed("a batched state read answered another count");
                    for (_, reply) in batch {
                        let _ = reply.send(Err(error.clone()));
                    }
                }
                Err(error) => {
                    for (_, reply) in batch {
                        let _ = reply.send(Err(error.clone()));
                    }
                }
            }
        }
    }
}

/// A channel's state as a head tells it. Which seqs are still retained is not known from a
/// head: the state says none is (a cursorless subscriber, the only one whose state is read
/// in batches, replays nothing from it; one asking for the last message reads it).
fn state_of(name: &ChannelName, head: Head) -> ChannelState {
    ChannelState {
        name: name.clone(),
        first_seq: head.last_seq + 1,
        epoch: head.epoch,
        last_seq: head.last_seq,
    }
}

/// The batch reader's turn: ends when it finds nothing waiting, or if its task is dropped
/// (then the subscribers waiting are told the store is closed, and the next starts a reader).
struct Reading<'a> {
    reads: &'a StateReads,
    /// Ended by finding nothing waiting.
    done: bool,
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        if !self.done {
            let mut queue = self.reads.queue.lock();
            queue.reading = false;
            queue.waiting.clear();
        }
    }
}
