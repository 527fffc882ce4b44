//! The sender task: publishes this node's committed messages and cache events. It takes
//! whatever has queued since its last round, groups messages by channel (in order), encodes
//! several messages of one channel into one [`crate::codec::Batch`], and sends the round's
//! publishes as one pipeline: each channel's batch through the script that raises the
//! channel's head in Redis and publishes the batch (`SPUBLISH`) in one step
//! ([`crate::heads::PUBLISH`]). A publish that fails (Redis down, or the queue was full when
//! the message was committed) is owed as a head notice, retried with backoff: the other nodes
//! then see the channel's head beyond what they hold and read the gap from the log. Events are
//! kept and retried until Redis takes them. When the bus shuts down, one last round sends
//! everything still queued. A batch of an app whose feed is on (`crate::feeds`) is also
//! published, the same bytes, on the app's feed, in the same pipeline.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fred::prelude::{ClientLike, PubsubInterface, Value};
use herald_core::caches::CacheEvent;
use herald_core::message::{Epoch, SharedMessage};
use herald_core::ChannelName;
use tokio::sync::mpsc;

use crate::bus::Shared;
use crate::codec::encode_batch;
use crate::events::encode_event;
use crate::heads::publish;

/// Committed batches taken per round at most.
const ROUND_BATCHES: usize = 512;
/// Messages per publish at most.
const PUBLISH_MESSAGES: usize = 256;
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// What one pipelined command was for.
enum Sent {
    Channel(ChannelName, u64, Epoch),
    Feed,
    Event,
}

pub(crate) async fn run(
    shared: Arc<Shared>,
    mut committed: mpsc::Receiver<Vec<SharedMessage>>,
    mut events: mpsc::UnboundedReceiver<CacheEvent>,
) {
    let mut pending_events: VecDeque<Bytes> = VecDeque::new();
    let mut backoff = FIRST_BACKOFF;
    let mut retry = tokio::time::interval(Duration::from_millis(100));
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stopping = false;
    loop {
        let mut batches = Vec::new();
        tokio::select! {
            got = committed.recv() => match got {
                Some(batch) => batches.push(batch),
                None => return,
            },
            Some(event) = events.recv() => pending_events.push_back(encode_event(shared.node, &event)),
            _ = retry.tick() => {}
            _ = shared.stopping.notified() => stopping = true,
        }
        while stopping || batches.len() < ROUND_BATCHES {
            match committed.try_recv() {
                Ok(batch) => batches.push(batch),
                Err(_) => break,
            }
        }
        while let Ok(event) = events.try_recv() {
            pending_events.push_back(encode_event(shared.node, &event));
        }
        let failed = publish_round(&shared, batches, &mut pending_events).await;
        if stopping {
            // The last round: what failed stays owed, and other nodes read it from the log
            // once this channel's head moves again or they resubscribe.
            return;
        }
        if failed {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(shared.options.max_reconnect_delay);
        } else {
            backoff = FIRST_BACKOFF;
        }
    }
}

/// Publishes one round; returns whether anything failed.
async fn publish_round(
    shared: &Shared,
    batches: Vec<Vec<SharedMessage>>,
    pending_events: &mut VecDeque<Bytes>,
) -> bool {
    let mut groups: Vec<(ChannelName, Vec<SharedMessage>)> = Vec::new();
    let mut index: HashMap<ChannelName, usize> = HashMap::new();
    for message in batches.into_iter().flatten() {
        let at = *index.entry(message.channel.clone()).or_insert_with(|| {
            groups.push((message.channel.clone(), Vec::new()));
            groups.len() - 1
        });
        groups[at].1.push(message);
    }
    let mut owed = std::mem::take(&mut *shared.owed.lock());
    if groups.is_empty() && owed.is_empty() && pending_events.is_empty() {
        return false;
    }
    let pipeline = shared.publisher.pipeline();
    let mut sent = Vec::new();
    for (channel, messages) in &groups {
        for chunk in messages.chunks(PUBLISH_MESSAGES) {
            let Some(newest) = chunk.last() else { continue };
            let (mut head, mut epoch) = (newest.seq, newest.epoch.clone());
            if let Some((owed_head, owed_epoch)) = owed.remove(channel) {
                if owed_head > head {
                    (head, epoch) = (owed_head, owed_epoch);
                }
            }
            let payload = encode_batch(shared.node, channel, head, chunk);
            let feed = shared.feeds.covers(channel).then(|| payload.clone());
            let (command, args) = publish(&shared.names, channel, payload, head, &epoch);
            let _: Result<(), _> = pipeline.custom::<(), _>(command, args).await;
            sent.push(Sent::Channel(channel.clone(), head, epoch));
            if let Some(payload) = feed {
                let app = herald_core::tenant::split_app(channel.as_str()).0;
                let _: Result<(), _> = pipeline
                    .spublish::<(), _, _>(shared.names.feed(app), Value::Bytes(payload))
                    .await;
                sent.push(Sent::Feed);
            }
        }
    }
    for (channel, (head, epoch)) in owed {
        let payload = encode_batch(shared.node, &channel, head, &[]);
        let (command, args) = publish(&shared.names, &channel, payload, head, &epoch);
        let _: Result<(), _> = pipeline.custom::<(), _>(command, args).await;
        sent.push(Sent::Channel(channel, head, epoch));
    }
    let events_sent = pending_events.len();
    for event in pending_events.iter() {
        let _: Result<(), _> = pipeline
            .spublish::<(), _, _>(shared.names.events(), Value::Bytes(event.clone()))
            .await;
        sent.push(Sent::Event);
    }
    let results = pipeline.try_all::<Value>().await;
    let all_failed = results.len() != sent.len();
    let mut failed = false;
    let mut events_failed = false;
    for (i, what) in sent.into_iter().enumerate() {
        let ok = !all_failed && results[i].is_ok();
        match what {
            Sent::Channel(..) if ok => {
                shared
                    .counters
                    .published_batches
                    .fetch_add(1, Ordering::Relaxed);
            }
            Sent::Channel(channel, head, epoch) => {
                failed = true;
                shared
                    .counters
                    .dropped_publishes
                    .fetch_add(1, Ordering::Relaxed);
                crate::bus::owe(&mut shared.owed.lock(), channel, head, epoch);
            }
            Sent::Feed if ok => {
                shared
                    .counters
                    .feed_published
                    .fetch_add(1, Ordering::Relaxed);
            }
            // Filters are live: a feed publish lost is not owed.
            Sent::Feed => failed = true,
            Sent::Event if ok => {}
            Sent::Event => {
                failed = true;
                events_failed = true;
            }
        }
    }
    if !events_failed {
        pending_events.drain(..events_sent);
    } else if shared.link_log.is_down() {
        // The link log said Redis is away; the events go once it is back.
        tracing::debug!("the Redis bus could not publish cache events; retrying");
    } else {
        tracing::warn!("the Redis bus could not publish cache events; retrying");
    }
    failed
}
