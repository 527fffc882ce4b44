//! Webhooks on this node: the [`Hooks`] service over the store ([`NodeHooks::new`]), its tasks
//! (the writer, the worker, the endpoints' reload: [`NodeHooks::start`], stopped by
//! [`NodeHooks::stop`] once the connections are gone, so their departures are queued first),
//! and its lifecycle listener on the node's registry.
//!
//! **The listener joins at once, wanting what the endpoints want**
//! ([`Hooks::listen_to`]): every time the service's endpoint snapshot is replaced (the load at
//! start, before anything is served; a change made through this node; the reload every
//! [`herald_hooks::service::SNAPSHOT_RELOAD`] that finds another node's change) it sets the
//! kinds of lifecycle event the enabled endpoints are given on the registry. A kind nobody
//! wants is not built: the hub's subscribe and unsubscribe paths and the live clients'
//! register and leave read one atomic word for it, and connections are tracked only while a
//! kind that needs them is wanted ([`herald_core::lifecycle`]). So no endpoint, or an endpoint
//! that wants `channel.occupied` alone, costs what nobody listening costs, bar the occupied
//! events themselves. A kind wanted late (an endpoint created or widened at run time) has the
//! registry's caveat: what happened before is not reported. A connection made before then is
//! not tracked: its departure is not told, and a user it held may be told online (and later
//! offline) as if that connection had been alone; a channel occupied before is not told
//! occupied. In a cluster each node wants a new kind within a reload period of the change.
//!
//! **`subscription_count` counts** ([`NodeHooks::count_with`], [`herald_hooks::counts`]): on
//! one node the hub's subscriber count, the last one told held in memory; in a cluster
//! ([`ClusterCounts`]) the cluster's (this node's own plus the others' as of the bus's presence
//! period), read once per channel per interval by the node that claimed the channel's interval
//! in Redis, which also keeps the last count told, and read again two presence periods after a
//! change here if the first read came sooner ([`herald_hooks::counts`], "Settling").

use std::sync::Arc;

use async_trait::async_trait;
use herald_bus_redis::presence::CountClaim;
use herald_core::lifecycle::Lifecycle;
use herald_core::{ChannelName, Engine};
use herald_hooks::counts::{ChannelCounts, Claim, LocalCounts};
use herald_hooks::service::{Hooks, HooksConfig};
use herald_hooks::HookStore;
use herald_providers::destination::Destinations;
use herald_push::credentials::sealer::Sealer;
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::ServerError;
use crate::node::NodeBus;

/// The webhook service of this node, and what starts and stops it.
pub(crate) struct NodeHooks {
    /// The service the API calls.
    pub service: Arc<Hooks>,
    /// Stops the tasks; cancelled by [`NodeHooks::stop`], after the connections are gone.
    stop: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl NodeHooks {
    /// The service over `store`, its secrets sealed with `sealer`, reaching only
    /// `destinations`; its listener joins `lifecycle` now, wanting what the endpoints want
    /// (nothing until they load, [`NodeHooks::start`]).
    pub(crate) fn new(
        store: Arc<dyn HookStore>,
        sealer: Arc<Sealer>,
        destinations: Destinations,
        config: HooksConfig,
        lifecycle: Arc<Lifecycle>,
    ) -> Result<NodeHooks, ServerError> {
        let service = Arc::new(
            Hooks::new(store, sealer, destinations, config).map_err(ServerError::HookClient)?,
        );
        service.listen_to(lifecycle);
        Ok(NodeHooks {
            service,
            stop: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
        })
    }

    /// Gives the `subscription_count` windows their counts: the hub's of `engine` on one node,
    /// the cluster's through `bus` on a cluster node (see the [module documentation](self)).
    pub(crate) fn count_with(&self, engine: Arc<Engine>, bus: Arc<NodeBus>) {
        let source: Arc<dyn ChannelCounts> = if bus.redis().is_some() {
            Arc::new(ClusterCounts { bus })
        } else {
            Arc::new(LocalCounts::new(move |channel: &ChannelName| {
                engine.subscriber_count(channel) as u64
            }))
        };
        self.service.subscription_counts().set_source(source);
    }

    /// Loads the endpoints (the listener wants what they want from then on) and starts the
    /// service's tasks. Call it before connections are served: a node restarted with
    /// endpoints tells of its first connection.
    pub(crate) async fn start(&self) {
        if let Err(e) = self.service.reload().await {
            tracing::warn!(error = %e, "webhooks: the endpoints did not load at start; trying again in the background");
        }
        *self.tasks.lock() = self.service.start(self.stop.clone());
    }

    /// Stops the tasks and waits for them: the writer stores what the node queue holds (the
    /// connections' last departures), the worker ends its requests under way.
    pub(crate) async fn stop(&self) {
        self.stop.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock());
        for task in tasks {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "a webhook task failed");
            }
        }
    }
}

/// A cluster node's `subscription_count` counts: the channel's interval claimed in Redis, the
/// cluster's count read, the last count told kept there.
struct ClusterCounts {
    bus: Arc<NodeBus>,
}

#[async_trait]
impl ChannelCounts for ClusterCounts {
    async fn claim(&self, channel: &ChannelName, interval: std::time::Duration) -> Claim {
        let Some(redis) = self.bus.redis() else {
            return Claim::Unavailable;
        };
        match redis.claim_count_report(channel, interval).await {
            Ok(CountClaim::Claimed { last }) => match redis.cluster_subscribers(channel).await {
                Ok(count) => Claim::Report { count, last },
                Err(_) => Claim::Unavailable,
            },
            Ok(CountClaim::Held(retry_in)) => Claim::Taken { retry_in },
            Err(_) => Claim::Unavailable,
        }
    }

    /// Two presence periods: the other nodes' shares are written once a period (and a busy
    /// node may write a little late).
    fn settle(&self) -> Option<std::time::Duration> {
        Some(self.bus.redis()?.presence_period() * 2)
    }

    async fn told(&self, channel: &ChannelName, count: u64) {
        if let Some(redis) = self.bus.redis() {
            if let Err(e) = redis.count_reported(channel, count).await {
                tracing::debug!(error = %e, "webhooks: the subscription count told was not kept in Redis");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use herald_core::lifecycle::{Kinds, Lifecycle};
    use herald_core::tenant::AppId;
    use herald_hooks::memory::MemoryHookStore;

    use super::*;

    fn sealer() -> Arc<Sealer> {
        Arc::new(Sealer::new(&"07".repeat(32)).unwrap())
    }

    #[tokio::test]
    async fn the_listener_wants_what_the_endpoints_want_from_the_load_at_start() {
        let lifecycle = Lifecycle::new();
        let store: Arc<dyn HookStore> = Arc::new(MemoryHookStore::new());
        let hooks = NodeHooks::new(
            store.clone(),
            sealer(),
            Destinations::allowing(vec!["127.0.0.0/8".parse().unwrap()]),
            HooksConfig::default(),
            lifecycle.clone(),
        )
        .unwrap();
        hooks.start().await;
        assert!(!lifecycle.is_active(), "no endpoint: nothing is built");
        let app = AppId::default_app();
        let body = serde_json::json!({
            "url": "http://127.0.0.1:9/",
            "events": ["channel.occupied"],
            "channels": ["nomatch/**"],
        });
        let (endpoint, _) = hooks.service.create(&app, &body).await.unwrap();
        assert_eq!(
            lifecycle.emitted(),
            Kinds::CHANNEL_OCCUPIED,
            "an endpoint created here: its kind alone"
        );
        hooks.stop().await;

        // Another node's endpoint (already in the store): the start's load sets its kinds.
        let lifecycle = Lifecycle::new();
        let again = NodeHooks::new(
            store.clone(),
            sealer(),
            Destinations::public_only(),
            HooksConfig::default(),
            lifecycle.clone(),
        )
        .unwrap();
        assert!(!lifecycle.is_active());
        tokio::time::timeout(Duration::from_secs(5), again.start())
            .await
            .unwrap();
        assert_eq!(
            lifecycle.emitted(),
            Kinds::CHANNEL_OCCUPIED,
            "wanted at start, before serving"
        );
        // Deleted on the other node: the next reload wants nothing any more.
        store.delete_endpoint(&app, endpoint.id).await.unwrap();
        again.service.reload().await.unwrap();
        assert!(!lifecycle.is_active());
        again.stop().await;
    }
}
