//! The engine's [`HeadSource`]: the heads of channels new to this node, read from Redis
//! ([`crate::heads::read`]) once Redis has confirmed this node's subscriptions to them.
//!
//! A head read after the subscription is confirmed is one the node can start the channel
//! from: the head moves in the same step as its message is published (`crate::heads`), so
//! every message after the head read arrives on the subscription. The read then serves twice:
//! it answers the engine's subscribers, and the repair task starts the channel at it without
//! checking its head again ([`crate::followed::Follow::head_read`]), so a channel new to the
//! node costs one head read, not two. The wait is one subscription round (the subscription
//! task takes the channels the hub gained before the engine asks): a batch waits for the
//! subscriptions of its channels still followed, for [`LISTEN_WAIT`] at most, and not at all
//! while Redis is away or does not vouch for the heads; a head read without the wait is
//! checked again by the repair task once the channel is listening, as before.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use fred::prelude::{ClientLike, ClientState};
use herald_core::head::{Head, HeadSource};
use herald_core::ChannelName;

use crate::bus::Shared;

/// Longest wait for a batch's subscriptions before its heads are read anyway.
const LISTEN_WAIT: Duration = Duration::from_secs(1);

/// The engine's head source over the bus's connections.
pub(crate) struct RedisHeads(pub(crate) Weak<Shared>);

#[async_trait::async_trait]
impl HeadSource for RedisHeads {
    async fn heads(&self, channels: &[ChannelName]) -> Option<Vec<Head>> {
        let shared = self.0.upgrade()?;
        // A reconnect after this may have lost subscriptions confirmed before it.
        let reconnects = shared.counters.reconnects.load(Ordering::Acquire);
        let confirmed = shared.heads_vouched.load(Ordering::Relaxed)
            && shared.subscriber.state() == ClientState::Connected
            && wait_listening(&shared, channels).await;
        let heads = crate::heads::read(&shared, channels).await;
        let counter = match heads {
            Some(_) => &shared.counters.heads_from_redis,
            None => &shared.counters.heads_not_vouched,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let (true, Some(heads)) = (confirmed, &heads) {
            for (channel, head) in channels.iter().zip(heads) {
                shared.followed.note_head_read(channel, head.last_seq, || {
                    shared.counters.reconnects.load(Ordering::Acquire) == reconnects
                });
            }
        }
        heads
    }
}

/// Waits until Redis has confirmed this node's subscription to each of `channels` that is
/// still followed; `false` if that took longer than [`LISTEN_WAIT`].
async fn wait_listening(shared: &Arc<Shared>, channels: &[ChannelName]) -> bool {
    // The hub told the interest queue of these channels before the engine asked: a take
    // after this one has them, so once it is settled a channel not followed was dropped
    // (its subscribers left) and is not waited for.
    let taken = shared.interest.takes();
    let deadline = tokio::time::Instant::now() + LISTEN_WAIT;
    let mut waiting: Vec<&ChannelName> = channels.iter().collect();
    loop {
        let progress = shared.interest.progress().notified();
        tokio::pin!(progress);
        progress.as_mut().enable();
        let settled = shared.interest.settled() > taken;
        waiting.retain(|channel| match shared.followed.is_listening(channel) {
            Some(listening) => !listening,
            None => !settled,
        });
        if waiting.is_empty() {
            return true;
        }
        if tokio::time::timeout_at(deadline, progress).await.is_err() {
            return false;
        }
    }
}
