//! The subscription task: keeps the subscriber connection's sharded subscriptions equal to the
//! channels the hub has local interest in. Interest changes are taken in batches; channels are
//! grouped by hash tag ([`crate::names`]) so one `SSUBSCRIBE` names many, and the groups are sent
//! together (a subscribe storm costs a few pipelined commands, not a round trip per channel).
//! A channel is "listening" once Redis confirmed it; the repair task then reads from the log
//! what was committed before. After a reconnect every followed channel is subscribed again and
//! read from the log, the cache events are subscribed again, and the caches are reloaded from
//! the store (events may have been missed).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::{PubsubInterface, Server};
use herald_core::ChannelName;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::task::JoinSet;

use crate::bus::Shared;
use crate::error::in_words;
use crate::followed::StartRead;
use crate::names::Names;

/// Channels named in one `SSUBSCRIBE` at most.
const CHANNELS_PER_COMMAND: usize = 1000;
const RETRY_AFTER: Duration = Duration::from_millis(200);
/// How long one round of subscription commands is awaited before its channels are retried.
const COMMAND_WAIT: Duration = Duration::from_secs(1);
/// When to retry commands that went unanswered (Redis away).
const UNANSWERED_RETRY: Duration = Duration::from_secs(5);

pub(crate) async fn run(shared: Arc<Shared>, mut reconnects: broadcast::Receiver<Server>) {
    // `RedisBus::connect` subscribed them.
    let mut events_subscribed = true;
    let mut retry: HashSet<ChannelName> = HashSet::new();
    let mut retry_after = RETRY_AFTER;
    loop {
        let waiting = !retry.is_empty() || !events_subscribed;
        let reconnected = tokio::select! {
            _ = shared.interest_changed.notified() => false,
            got = reconnects.recv() => match got {
                Ok(_) | Err(RecvError::Lagged(_)) => true,
                Err(RecvError::Closed) => return,
            },
            _ = tokio::time::sleep(retry_after), if waiting => false,
        };
        if reconnected {
            while reconnects.try_recv().is_ok() {}
            shared.counters.reconnects.fetch_add(1, Ordering::Relaxed);
            // The link log says the return at INFO, once both connections are back.
            tracing::debug!(
                "the Redis bus reconnected; subscribing again and repairing from the log"
            );
            for channel in shared.followed.all() {
                shared.followed.with(
                    &channel,
                    |follow, _, _| {
                        follow.listening = false;
                        follow.needs_read = true;
                    },
                    |_| {},
                );
                retry.insert(channel);
            }
            events_subscribed = false;
            tokio::spawn(reload_caches(shared.clone()));
        }
        if !events_subscribed {
            events_subscribed = subscribe_events(&shared).await;
        }
        let mut subscribe = std::mem::take(&mut retry);
        let mut unsubscribe = HashSet::new();
        for (channel, gained) in shared.interest.take() {
            if gained {
                if shared.followed.follow(&channel) {
                    // Started (and read from the log) by the repair task at once, whether or
                    // not Redis answers: this node's own commits must reach its subscribers.
                    shared.followed.attend(&channel);
                    unsubscribe.remove(&channel);
                    subscribe.insert(channel);
                }
            } else if shared.followed.unfollow(&channel) {
                subscribe.remove(&channel);
                unsubscribe.insert(channel);
            }
        }
        subscribe.retain(|c| shared.followed.is_followed(c));
        if !unsubscribe.is_empty() {
            // A failure leaves a stray subscription: its traffic is counted and dropped, and a
            // reconnect ends it.
            let _ = send(&shared, unsubscribe, false).await;
        }
        if !subscribe.is_empty() {
            let (failed, unanswered) = send(&shared, subscribe.clone(), true).await;
            // Unanswered commands stay queued in the client until Redis is back (the reconnect
            // then subscribes everything again): retry them rarely, not every round.
            retry_after = if unanswered {
                UNANSWERED_RETRY
            } else {
                RETRY_AFTER
            };
            for channel in subscribe.iter().filter(|c| !failed.contains(*c)) {
                shared.followed.with(
                    channel,
                    |follow, _, _| {
                        follow.listening = true;
                        follow.needs_read = true;
                    },
                    |_| {},
                );
                shared.followed.attend(channel);
            }
            // A channel started without reading the log (its read left to Redis's
            // confirmation) reads it now: this node's own commits must reach its subscribers
            // while Redis is away.
            for channel in &failed {
                let owed = shared.followed.with(
                    channel,
                    |follow, _, _| {
                        let owed = follow.start_read == StartRead::Deferred;
                        if owed {
                            follow.start_read = StartRead::Owed;
                        }
                        owed
                    },
                    |_| {},
                );
                if owed == Some(true) {
                    shared.followed.attend(channel);
                }
            }
            retry.extend(failed);
        }
    }
}

async fn subscribe_events(shared: &Shared) -> bool {
    match shared.subscriber.ssubscribe(shared.names.events()).await {
        Ok(()) => true,
        Err(error) => {
            let error = in_words(&error);
            if shared.link_log.is_down() {
                tracing::debug!(%error, "the Redis bus cannot subscribe to cache events yet");
            } else {
                tracing::warn!(%error, "the Redis bus cannot subscribe to cache events yet");
            }
            false
        }
    }
}

/// Sends `SSUBSCRIBE` (or `SUNSUBSCRIBE`) for `channels`, grouped by hash tag, all groups at
/// once; returns the channels whose command failed or was not answered within
/// [`COMMAND_WAIT`], and whether any went unanswered.
async fn send(
    shared: &Shared,
    channels: HashSet<ChannelName>,
    subscribe: bool,
) -> (HashSet<ChannelName>, bool) {
    let all = channels.clone();
    let mut by_tag: HashMap<u32, Vec<ChannelName>> = HashMap::new();
    for channel in channels {
        by_tag
            .entry(Names::tag(&channel))
            .or_default()
            .push(channel);
    }
    let mut commands = JoinSet::new();
    for group in by_tag.into_values() {
        for chunk in group.chunks(CHANNELS_PER_COMMAND) {
            let chunk = chunk.to_vec();
            let names: Vec<String> = chunk.iter().map(|c| shared.names.channel(c)).collect();
            let client = shared.subscriber.clone();
            commands.spawn(async move {
                let result = if subscribe {
                    client.ssubscribe(names).await
                } else {
                    client.sunsubscribe(names).await
                };
                (chunk, result)
            });
        }
    }
    let mut failed = HashSet::new();
    let mut waiting = all;
    let answered = tokio::time::timeout(COMMAND_WAIT, async {
        while let Some(done) = commands.join_next().await {
            let Ok((chunk, result)) = done else { continue };
            for channel in &chunk {
                waiting.remove(channel);
            }
            if let Err(error) = result {
                let error = in_words(&error);
                if shared.link_log.is_down() {
                    tracing::debug!(%error, channels = chunk.len(), subscribe, "a Redis bus subscription command failed");
                } else {
                    tracing::warn!(%error, channels = chunk.len(), subscribe, "a Redis bus subscription command failed");
                }
                failed.extend(chunk);
            }
        }
    })
    .await;
    let unanswered = answered.is_err();
    if unanswered {
        // Redis is away (commands wait for the reconnection): retry later, and meanwhile keep
        // taking the hub's interest changes, so newly followed channels start at once.
        tracing::debug!(
            channels = waiting.len(),
            subscribe,
            "Redis bus subscription commands unanswered; retrying"
        );
        failed.extend(waiting);
    }
    (failed, unanswered)
}

/// Reloads this node's caches from the store after events may have been missed (a reconnect,
/// or the receiver lagging behind Redis).
pub(crate) async fn reload_caches(shared: Arc<Shared>) {
    let tenancy = loop {
        let attached = shared.attached.notified();
        if let Some(tenancy) = shared.tenancy.get() {
            break tenancy.clone();
        }
        attached.await;
    };
    let loaded = async {
        Ok::<_, herald_core::log::StoreError>((
            tenancy.apps().await?,
            tenancy.keys().await?,
            tenancy.token_revocations().await?,
        ))
    };
    match loaded.await {
        Ok((apps, keys, revoked)) => {
            shared.caches.reload(&apps, &keys, &revoked);
            // What verifies each app's tokens besides its secret (a store without token keys
            // answers an error: its secrets were reloaded above).
            if let Ok(all) = tenancy.all_token_keys().await {
                for (app, keys) in all {
                    shared
                        .caches
                        .apply(&herald_core::caches::CacheEvent::TokenKeysSet { app, keys });
                }
            }
        }
        Err(error) => tracing::warn!(%error, "cannot reload caches after missing Redis bus events"),
    }
}
