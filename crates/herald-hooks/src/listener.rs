//! [`HooksListener`], the lifecycle listener that puts this node's events on the node queue.
//!
//! It is called where an event happens, some under a hub shard's or the user counts' lock
//! (see [`herald_core::lifecycle`]), so it only looks and queues: it asks the endpoint
//! snapshot whether an enabled endpoint of the event's app wants its type (and channel), and
//! returns at once, allocating nothing, when none does; otherwise it builds the webhook event
//! and `try_send`s it on the bounded node queue. A full queue drops the event, counted as
//! `herald_hook_events_dropped_total{reason="node_queue_full"}` with a WARN at most every few
//! seconds: the store is slower than events come (the writer retries a failing store with one
//! batch in hand, and the queue fills meanwhile).
//!
//! A subscription made or ended (and a channel occupied or vacated) is also noted for
//! `subscription_count` when an endpoint wants that about the channel ([`crate::counts`]: the
//! count is read and told later, at most once per interval).

use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_core::lifecycle::{LifecycleEvent, LifecycleListener};
use herald_core::tenant::split_app;
use herald_outbound::LineLimiter;
use tokio::sync::mpsc::error::TrySendError;

use crate::event::{EventType, HookEvent};
use crate::service::{now_ms, Hooks};

/// The counter of events dropped before they were queued, by reason.
pub const DROPPED_METRIC: &str = "herald_hook_events_dropped_total";

/// At most one WARN about a full node queue this often.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Queues lifecycle events for the app's endpoints (see the [module documentation](self)).
pub struct HooksListener {
    hooks: Arc<Hooks>,
    warnings: LineLimiter<()>,
}

impl HooksListener {
    /// The listener feeding `hooks`' node queue.
    pub fn new(hooks: Arc<Hooks>) -> Self {
        HooksListener {
            hooks,
            warnings: LineLimiter::new(WARN_EVERY),
        }
    }
}

impl LifecycleListener for HooksListener {
    fn on_event(&self, event: &LifecycleEvent) {
        let (kind, app, channel) = describe(event);
        let snapshot = self.hooks.snapshot();
        if let Some(full) = counted(event) {
            if snapshot.wants(app, EventType::SubscriptionCount, channel)
                && self.hooks.subscription_counts().has_source()
            {
                self.hooks.subscription_counts().note(full);
            }
        }
        if !snapshot.wants(app, kind, channel) {
            return;
        }
        drop(snapshot);
        let event = HookEvent::from_lifecycle(event, now_ms());
        match self.hooks.queue().try_send(event) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                metrics::counter!(DROPPED_METRIC, "reason" => "node_queue_full").increment(1);
                if let Some(held_back) = self.warnings.admit((), Instant::now()) {
                    tracing::warn!(
                        held_back,
                        "webhooks: the node queue is full (hooks.node_queue); lifecycle events \
                         are dropped until the store takes them ({DROPPED_METRIC} counts them)"
                    );
                }
            }
            // The service is shutting down.
            Err(TrySendError::Closed(_)) => {}
        }
    }
}

/// The channel whose subscriber count `event` may have changed: a subscription made or ended
/// here, or the cluster's occupied or vacated (a lost node's channels too), for
/// [`crate::counts`].
fn counted(event: &LifecycleEvent) -> Option<&herald_core::ChannelName> {
    match event {
        LifecycleEvent::Subscribed { channel, .. }
        | LifecycleEvent::Unsubscribed { channel, .. }
        | LifecycleEvent::ChannelOccupied { channel }
        | LifecycleEvent::ChannelVacated { channel } => Some(channel),
        _ => None,
    }
}

/// An event of type `kind` about `channel`: its app and its name within the app, from one
/// look for the app scope.
fn about(kind: EventType, channel: &herald_core::ChannelName) -> (EventType, &str, Option<&str>) {
    let (app, local) = split_app(channel.as_str());
    (kind, app, Some(local))
}

/// An event's webhook type, its app's id and the channel it is about (the app's name for it),
/// borrowed from the event.
fn describe(event: &LifecycleEvent) -> (EventType, &str, Option<&str>) {
    match event {
        LifecycleEvent::Connected { connection } => {
            (EventType::ClientConnected, connection.app.as_str(), None)
        }
        LifecycleEvent::Disconnected { connection, .. } => {
            (EventType::ClientDisconnected, connection.app.as_str(), None)
        }
        LifecycleEvent::UserOnline { app, .. } => (EventType::UserOnline, app.as_str(), None),
        LifecycleEvent::UserOffline { app, .. } => (EventType::UserOffline, app.as_str(), None),
        LifecycleEvent::Subscribed { channel, .. } => about(EventType::ClientSubscribed, channel),
        LifecycleEvent::Unsubscribed { channel, .. } => {
            about(EventType::ClientUnsubscribed, channel)
        }
        LifecycleEvent::ChannelOccupied { channel } => about(EventType::ChannelOccupied, channel),
        LifecycleEvent::ChannelVacated { channel } => about(EventType::ChannelVacated, channel),
        LifecycleEvent::MemberAdded { channel, .. } => {
            about(EventType::PresenceMemberAdded, channel)
        }
        LifecycleEvent::MemberRemoved { channel, .. } => {
            about(EventType::PresenceMemberRemoved, channel)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::tenant::AppId;

    #[test]
    fn an_event_is_described_as_its_webhook_event_is() {
        let shop = AppId::parse("shop").unwrap();
        for event in [
            LifecycleEvent::ChannelVacated {
                channel: shop.parse_channel("rooms/1").unwrap(),
            },
            LifecycleEvent::ChannelOccupied {
                channel: AppId::default_app().parse_channel("news").unwrap(),
            },
            LifecycleEvent::UserOffline {
                app: shop.clone(),
                sub: "al".into(),
            },
        ] {
            let (kind, app, channel) = describe(&event);
            let built = HookEvent::from_lifecycle(&event, 0);
            assert_eq!(kind, built.kind);
            assert_eq!(app, built.app.as_str());
            assert_eq!(channel, built.channel.as_deref());
            assert_eq!(kind.as_str(), event.kind());
        }
    }
}
