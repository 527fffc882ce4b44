//! Coalesced reads of channel states for subscribes ([`StateReads`]): when many subscribers
//! of channels the hub does not know arrive at once (a subscribe storm, the clients of a lost
//! node reconnecting), their states are read with one [`ChannelLog::states`] call per batch
//! instead of one store read each. Used for a store whose batched read is one round trip
//! ([`ChannelLog::batches_states`]); for the others a subscriber reads its state itself.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;

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
    queue: Mutex<Queue>,
}

impl StateReads {
    pub(crate) fn new(log: Arc<dyn ChannelLog>) -> Arc<StateReads> {
        Arc::new(StateReads {
            log,
            queue: Mutex::default(),
        })
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
            match self.log.states(&channels).await {
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
