//! The subscription task: keeps the subscriber connection's sharded subscriptions equal to the
//! channels the hub has local interest in. Interest changes are taken in batches, one
//! `SSUBSCRIBE` naming a whole batch on a single Redis server (on a Redis Cluster, one per hash
//! tag, [`crate::names`], sent together): a subscribe storm costs a few commands, not a round
//! trip per channel.
//! A channel is "listening" once Redis confirmed it; the repair task then reads from the log
//! what was committed before. After a reconnect every followed channel is subscribed again and
//! read from the log, the cache events are subscribed again, and the caches are reloaded from
//! the store (events may have been missed).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::{Client, ClientLike, PubsubInterface, Server, Value};
use herald_core::ChannelName;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::task::JoinSet;

use crate::bus::Shared;
use crate::error::in_words;
use crate::followed::{ChannelSet, StartRead};
use crate::names::Names;

/// Channels named in one `SSUBSCRIBE` at most on a Redis Cluster (those of one hash tag).
const CHANNELS_PER_COMMAND: usize = 1000;
/// Channels named in one `SSUBSCRIBE` at most on a single Redis server.
const CHANNELS_PER_SERVER_COMMAND: usize = 20_000;
const RETRY_AFTER: Duration = Duration::from_millis(200);
/// How long one round of subscription commands is awaited before its channels are retried.
const COMMAND_WAIT: Duration = Duration::from_secs(1);
/// When to retry commands that went unanswered (Redis away).
const UNANSWERED_RETRY: Duration = Duration::from_secs(5);
/// First wait before asking again whether Redis has read a round's command ([`confirmed`]).
const MARKER_POLL: Duration = Duration::from_millis(1);
/// Longest wait between those questions.
const MARKER_POLL_MAX: Duration = Duration::from_millis(50);

pub(crate) async fn run(shared: Arc<Shared>, mut reconnects: broadcast::Receiver<Server>) {
    // `RedisBus::connect` subscribed them.
    let mut events_subscribed = true;
    let mut retry = ChannelSet::default();
    let mut retry_after = RETRY_AFTER;
    // Numbers each command's marker channel ([`Names::round_marker`]).
    let mut markers_sent = 0;
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
                        follow.owe_read();
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
        // Channels retried that were dropped meanwhile are not subscribed again; those this
        // round follows are followed (only this task follows and drops channels), and those it
        // drops are taken out below: none is looked up again before the command.
        let mut subscribe = std::mem::take(&mut retry);
        subscribe.retain(|c| shared.followed.is_followed(c));
        let mut unsubscribe = ChannelSet::default();
        let (changes, taken) = shared.interest.take();
        for (channel, gained) in changes {
            if gained {
                if shared.followed.follow(&channel) {
                    // Started (and read from the log) by the repair task as soon as the hub
                    // knows where its subscribers stand, whether or not Redis answers: this
                    // node's own commits must reach its subscribers. The hub says when it
                    // knows (the interest hook's `head_known`, with the floor); if it said so
                    // before this follow, the repair task looks again until the channel is
                    // followed, so nothing here asks the hub.
                    unsubscribe.remove(&channel);
                    subscribe.insert(channel);
                }
            } else if shared.followed.unfollow(&channel) {
                subscribe.remove(&channel);
                unsubscribe.insert(channel);
            }
        }
        // Every channel of this take is followed or dropped: a head read waiting for channels
        // gained before it knows which to wait for (`crate::heads`).
        shared.interest.settle(taken);
        if !unsubscribe.is_empty() {
            // A failure leaves a stray subscription: its traffic is counted and dropped, and a
            // reconnect ends it.
            let _ = send(&shared, unsubscribe, false, &mut markers_sent).await;
        }
        if !subscribe.is_empty() {
            let (failed, unanswered) =
                send(&shared, subscribe.iter().cloned(), true, &mut markers_sent).await;
            // Unanswered commands stay queued in the client until Redis is back (the reconnect
            // then subscribes everything again): retry them rarely, not every round.
            retry_after = if unanswered {
                UNANSWERED_RETRY
            } else {
                RETRY_AFTER
            };
            // Listening, owing a read: `with` marks each for the repair task.
            for channel in subscribe
                .iter()
                .filter(|c| failed.is_empty() || !failed.contains(*c))
            {
                shared.followed.with(
                    channel,
                    |follow, _, _| {
                        follow.listening = true;
                        follow.needs_read = true;
                    },
                    |_| {},
                );
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
            // Head reads waiting for these channels' confirmation go on.
            shared.interest.progressed();
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

/// Sends `SSUBSCRIBE` (or `SUNSUBSCRIBE`) for `channels`, all commands at once: on a single
/// Redis server one command names up to [`CHANNELS_PER_SERVER_COMMAND`] channels, on a Redis
/// Cluster up to [`CHANNELS_PER_COMMAND`] of one hash tag. Returns the channels whose command
/// failed or was not confirmed within [`COMMAND_WAIT`], and whether any went unanswered.
///
/// The client takes the first confirmation it receives after a command as that command's
/// answer, whichever command it confirms: Redis sends one per channel, so an earlier command's
/// confirmations still arriving answer the next commands before Redis has read them. So each
/// `SSUBSCRIBE` names last a marker channel of its own ([`Names::round_marker`]), and its
/// channels count as subscribed once Redis counts a subscriber of the marker (`PUBSUB
/// SHARDNUMSUB` on the other connection, [`confirmed`]): Redis subscribes a command's channels
/// in order, all before it reads the next command. The markers are unsubscribed afterwards.
async fn send(
    shared: &Shared,
    channels: impl IntoIterator<Item = ChannelName>,
    subscribe: bool,
    markers_sent: &mut u64,
) -> (ChannelSet, bool) {
    let chunks: Vec<Vec<ChannelName>> = if shared.subscriber.is_clustered() {
        // A Redis Cluster takes one slot's channels per command: one group per hash tag.
        let mut by_tag: HashMap<u32, Vec<ChannelName>> = HashMap::new();
        for channel in channels {
            by_tag
                .entry(Names::tag(&channel))
                .or_default()
                .push(channel);
        }
        by_tag
            .into_values()
            .flat_map(|group| {
                group
                    .chunks(CHANNELS_PER_COMMAND)
                    .map(<[ChannelName]>::to_vec)
                    .collect::<Vec<_>>()
            })
            .collect()
    } else {
        // A single server takes any channels in one command: a storm's round is one command,
        // not one per hash tag (the client sends them one after another, never pipelined).
        // The names are moved into the commands' lists, not copied.
        let mut rest: Vec<ChannelName> = channels.into_iter().collect();
        let mut chunks = Vec::with_capacity(rest.len().div_ceil(CHANNELS_PER_SERVER_COMMAND));
        while rest.len() > CHANNELS_PER_SERVER_COMMAND {
            let next = rest.split_off(CHANNELS_PER_SERVER_COMMAND);
            chunks.push(std::mem::replace(&mut rest, next));
        }
        if !rest.is_empty() {
            chunks.push(rest);
        }
        chunks
    };
    let mut commands = JoinSet::new();
    let mut markers = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let mut names: Vec<String> = Vec::with_capacity(chunk.len() + 1);
        names.extend(chunk.iter().map(|c| shared.names.channel(c)));
        let client = shared.subscriber.clone();
        if !subscribe {
            commands.spawn(async move { (i, client.sunsubscribe(names).await) });
            continue;
        }
        // Same hash tag as the command's channels: a Redis Cluster takes it with them.
        let tag = chunk.first().map_or(0, Names::tag);
        let marker = shared.names.round_marker(tag, shared.node, *markers_sent);
        *markers_sent += 1;
        names.push(marker.clone());
        markers.push(marker.clone());
        let publisher = shared.publisher.clone();
        commands.spawn(async move {
            let result = match client.ssubscribe(names).await {
                Ok(()) => confirmed(&publisher, &marker).await,
                Err(error) => Err(error),
            };
            (i, result)
        });
    }
    let mut answered = vec![false; chunks.len()];
    let mut failed = ChannelSet::default();
    let in_time = tokio::time::timeout(COMMAND_WAIT, async {
        while let Some(done) = commands.join_next().await {
            let Ok((i, result)) = done else { continue };
            answered[i] = true;
            if let Err(error) = result {
                let error = in_words(&error);
                let n = chunks[i].len();
                if shared.link_log.is_down() {
                    tracing::debug!(%error, channels = n, subscribe, "a Redis bus subscription command failed");
                } else {
                    tracing::warn!(%error, channels = n, subscribe, "a Redis bus subscription command failed");
                }
                failed.extend(chunks[i].iter().cloned());
            }
        }
    })
    .await;
    let unanswered = in_time.is_err();
    if unanswered {
        // Redis is away (commands wait for the reconnection): retry later, and meanwhile keep
        // taking the hub's interest changes, so newly followed channels start at once.
        let waiting: Vec<&Vec<ChannelName>> = chunks
            .iter()
            .zip(&answered)
            .filter(|(_, answered)| !**answered)
            .map(|(chunk, _)| chunk)
            .collect();
        tracing::debug!(
            channels = waiting.iter().map(|c| c.len()).sum::<usize>(),
            subscribe,
            "Redis bus subscription commands unanswered; retrying"
        );
        for chunk in waiting {
            failed.extend(chunk.iter().cloned());
        }
    }
    if !markers.is_empty() {
        // Not awaited: the client answers an `SUNSUBSCRIBE` once it is written (Redis's
        // confirmations of it are dropped), and the round need not wait for that.
        let client = shared.subscriber.clone();
        let clustered = client.is_clustered();
        tokio::spawn(async move {
            if clustered {
                // Markers of different tags: one command each.
                for marker in markers {
                    let _ = client.sunsubscribe(marker).await;
                }
            } else {
                let _ = client.sunsubscribe(markers).await;
            }
        });
    }
    (failed, unanswered)
}

/// Waits until Redis counts a subscriber of `marker` (this node's, named last in an
/// `SSUBSCRIBE` just answered): asked on the publishing connection, again after a short
/// wait while the answer was an earlier command's confirmation and Redis has not read this
/// one yet. The caller bounds the wait ([`COMMAND_WAIT`]).
async fn confirmed(publisher: &Client, marker: &str) -> Result<(), fred::error::Error> {
    let mut pause = MARKER_POLL;
    loop {
        let counts: Value = publisher.pubsub_shardnumsub(marker).await?;
        // `[marker, subscribers]`.
        let subscribers = match counts {
            Value::Array(values) => values.get(1).and_then(Value::as_i64).unwrap_or(0),
            _ => 0,
        };
        if subscribers > 0 {
            return Ok(());
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MARKER_POLL_MAX);
    }
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
