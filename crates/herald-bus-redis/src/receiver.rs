//! The receiver task: takes what Redis delivers on the subscriber connection. Message batches
//! of followed channels go through their sequencers to the fan-out (this node's own too:
//! dropped there as duplicates, unless committed before the node followed the channel);
//! batches of channels no
//! longer followed are counted and dropped; cache events from other nodes are applied (a
//! changed token secret is read from the store) and claims messages handled
//! ([`crate::claims`]); presence changes go to the channel's watchers
//! ([`crate::members`]); batches on apps' feeds go to the filters only, feeds messages are
//! handled ([`crate::feeds`]), and so are share groups' announcements and hand-overs on the
//! feeds ([`crate::shares`]), in the feed's order. If the client's queue overflowed, every
//! followed channel is read from the log, since any of them may have lost messages, and the
//! caches are reloaded from the store, since cache events may have been lost with them.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use fred::prelude::Value;
use fred::types::Message;
use herald_core::caches::CacheEvent;
use herald_core::log::CommitSink;
use tokio::sync::broadcast::{self, error::RecvError};

use crate::bus::Shared;
use crate::codec::decode_batch;
use crate::events::{decode_event, Received};

pub(crate) async fn run(shared: Arc<Shared>, mut messages: broadcast::Receiver<Message>) {
    let events_channel = shared.names.events();
    loop {
        let message = match messages.recv().await {
            Ok(message) => message,
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "the Redis bus fell behind; reading followed channels from the log and \
                     reloading the caches from the store"
                );
                shared.counters.lags.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(crate::subscriptions::reload_caches(shared.clone()));
                for channel in shared.followed.all() {
                    shared
                        .followed
                        .with(&channel, |follow, _, _| follow.owe_read(), |_| {});
                    shared.followed.attend(&channel);
                }
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        let payload = match message.value {
            Value::Bytes(bytes) => bytes,
            Value::String(text) => text.into_inner(),
            _ => continue,
        };
        if *message.channel == *events_channel && payload.first() == Some(&crate::claims::MARK) {
            crate::claims::on_message(&shared, &payload);
        } else if *message.channel == *events_channel
            && payload.first() == Some(&crate::feeds::MARK)
        {
            crate::feeds::on_message(&shared, &payload);
        } else if shared.names.is_feed(&message.channel)
            && payload.first() == Some(&crate::shares::MARK)
        {
            crate::shares::on_message(&shared, &payload);
        } else if shared.names.is_feed(&message.channel) {
            on_feed_batch(&shared, &payload);
        } else if *message.channel == *events_channel {
            on_event(&shared, &payload);
        } else if payload.first() == Some(&crate::members::MARK) {
            crate::members::on_message(
                &shared.names,
                shared.fan_out.hub().presence(),
                &message.channel,
                &payload,
            );
        } else {
            on_batch(&shared, &payload);
        }
    }
}

fn on_batch(shared: &Shared, payload: &Bytes) {
    let batch = match decode_batch(payload) {
        Ok(batch) => batch,
        Err(error) => {
            shared
                .counters
                .decode_errors
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%error, "undecodable batch on the Redis bus");
            return;
        }
    };
    // This node's own batches were delivered here when committed, and its sequencers drop
    // them as duplicates; but one committed before this node followed the channel, and
    // published after the repair task read the channel's head, reaches its subscribers only
    // this way (`crate::heads`).
    let own = batch.origin == shared.node;
    let followed = shared.followed.with(
        &batch.channel,
        |follow, now, ready| {
            for message in batch.messages {
                follow.sequencer.offer(message, now, ready);
            }
            follow.sequencer.heard_of(batch.head, now);
        },
        |ready| shared.fan_out.committed(ready),
    );
    let counter = match followed {
        _ if own => return,
        Some(()) => &shared.counters.received_batches,
        None => &shared.counters.received_unfollowed,
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

/// A batch from an app's feed: to the filters only (the hub passes over what they had).
fn on_feed_batch(shared: &Arc<Shared>, payload: &Bytes) {
    match decode_batch(payload) {
        Ok(batch) => {
            shared
                .counters
                .feed_received
                .fetch_add(1, Ordering::Relaxed);
            crate::shares::drain(shared, &batch.messages);
            shared.fan_out.hub().deliver_filters_only(&batch.messages);
        }
        Err(error) => {
            shared
                .counters
                .decode_errors
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%error, "undecodable batch on an app's feed");
        }
    }
}

fn on_event(shared: &Arc<Shared>, payload: &Bytes) {
    let (origin, received) = match decode_event(payload) {
        Ok(decoded) => decoded,
        Err(error) => {
            shared
                .counters
                .decode_errors
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%error, "undecodable cache event on the Redis bus");
            return;
        }
    };
    if origin == shared.node {
        return;
    }
    match received {
        Received::Event(event) => shared.caches.apply(&event),
        Received::SecretChanged(app) => {
            let shared = shared.clone();
            tokio::spawn(async move {
                let Some(tenancy) = shared.tenancy.get() else {
                    return;
                };
                // Everything that verifies the app's tokens; a store that keeps only the
                // secret (no token keys) answers an error, and the secret is read instead.
                match tenancy.token_keys(&app).await {
                    Ok(Some(keys)) => {
                        shared.caches.apply(&CacheEvent::TokenKeysSet { app, keys });
                        return;
                    }
                    Ok(None) => return,
                    Err(_) => {}
                }
                match tenancy.app(&app).await {
                    Ok(Some(stored)) => {
                        if let Some(secret) = stored.token_secret {
                            shared.caches.apply(&CacheEvent::TokenSecretSet {
                                app,
                                secret: herald_core::caches::TokenSecret(secret),
                            });
                        }
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::warn!(%error, %app, "cannot read an app's new token secret");
                    }
                }
            });
        }
    }
}
