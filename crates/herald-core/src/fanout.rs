//! The fan-out thread: receives committed messages from the log, in commit order, and delivers
//! them through the hub. Running delivery here rather than on the store's writer thread means a
//! channel with many subscribers never holds up the next group commit, and a publisher's answer
//! never waits for subscribers to be queued. The queue between the two is bounded, so a fan-out
//! that falls behind slows commits instead of growing without limit. Commits that queue while
//! the thread delivers are gathered and delivered together, a channel's run of messages to each
//! subscriber at once.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;

use crate::hub::Hub;
use crate::log::CommitSink;
use crate::message::SharedMessage;

/// Committed batches that may wait for the fan-out thread before commits block.
const QUEUE_BATCHES: usize = 1024;

/// Most messages of queued commits delivered together (see [`Hub::deliver_all`]).
const MAX_GATHERED: usize = 4096;

/// The commit sink that hands committed messages to the fan-out thread.
pub struct FanOut {
    queue: SyncSender<Vec<SharedMessage>>,
    hub: Arc<Hub>,
}

impl FanOut {
    /// Starts the fan-out thread for `hub`. It stops once the returned sink is dropped and
    /// everything queued has been delivered. Private to the crate: [`crate::Engine::open`]
    /// (or [`crate::Engine::open_with_bus`]) starts the one fan-out that feeds an engine's hub.
    pub(crate) fn start(hub: Arc<Hub>) -> std::io::Result<Arc<FanOut>> {
        let (queue, batches) = sync_channel::<Vec<SharedMessage>>(QUEUE_BATCHES);
        let delivering = hub.clone();
        std::thread::Builder::new()
            .name("herald-fanout".into())
            .spawn(move || {
                while let Ok(mut messages) = batches.recv() {
                    // Commits that queued while the last ones were delivered go out together:
                    // a subscriber then gets all of its channel's messages in one wake.
                    while messages.len() < MAX_GATHERED {
                        match batches.try_recv() {
                            Ok(more) => messages.extend(more),
                            Err(_) => break,
                        }
                    }
                    delivering.deliver_all(&messages);
                }
            })?;
        Ok(Arc::new(FanOut { queue, hub }))
    }

    /// The hub this fan-out delivers to: a networked bus sets its [`crate::hub::InterestHook`]
    /// and reads [`Hub::head_floor`] there. Messages must still reach the hub only through
    /// [`CommitSink::committed`] on this fan-out, which keeps them in order.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }
}

impl CommitSink for FanOut {
    fn committed(&self, messages: &[SharedMessage]) {
        // Fails only once the thread is gone, i.e. while shutting down.
        let _ = self.queue.send(messages.to_vec());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Epoch, StoredMessage};
    use crate::outbox::{OutFrame, Outbox};
    use crate::ChannelName;
    use bytes::Bytes;

    #[test]
    fn delivers_in_commit_order_on_its_own_thread() {
        let hub = Hub::new();
        let ch = ChannelName::parse("f").unwrap();
        let out = Outbox::new(1 << 20);
        let (sub, _) = hub.subscribe(&ch, out.clone());
        sub.go_live(vec![], 0);
        let fanout = FanOut::start(hub).unwrap();
        let batch = |from: u64| -> Vec<SharedMessage> {
            (from..from + 3)
                .map(|seq| {
                    Arc::new(StoredMessage::new(
                        ch.clone(),
                        Epoch::new("e"),
                        seq,
                        None,
                        0,
                        Bytes::from_static(b"1"),
                    ))
                })
                .collect()
        };
        fanout.committed(&batch(1));
        fanout.committed(&batch(4));
        drop(fanout);
        let mut seqs = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while seqs.len() < 6 && std::time::Instant::now() < deadline {
            seqs.extend(out.take().0.into_iter().filter_map(|f| match f {
                OutFrame::Message(m) | OutFrame::Replayed(m) => Some(m.seq),
                OutFrame::Control(_) => None,
            }));
            std::thread::yield_now();
        }
        assert_eq!(seqs, vec![1, 2, 3, 4, 5, 6]);
    }
}
