//! Webhooks on this node: the [`Hooks`] service over the store ([`NodeHooks::new`]), its tasks
//! (the writer, the worker, the endpoints' reload: [`NodeHooks::start`], stopped by
//! [`NodeHooks::stop`] once the connections are gone, so their departures are queued first),
//! and when its lifecycle listener joins the node's registry.
//!
//! **The listener joins once an endpoint exists**, not before: a node that joined a listener
//! tracks every connection (who it is, its user's count), which costs memory and a lock per
//! connect and disconnect, while a registry nobody listens to costs one atomic load
//! ([`herald_core::lifecycle`]). So the store is watched ([`Watched`], in front of the store
//! the service uses): the first time it answers an endpoint (the reload at start, before
//! anything is served; an endpoint created through this node; the reload every
//! [`herald_hooks::service::SNAPSHOT_RELOAD`] that finds one another node created), the
//! listener joins. Joining late is safe (the registry's listeners are behind a lock, and its
//! switch is an atomic), with the registry's caveat: what happened before it joined is not
//! reported. A connection or a subscription made before then is not tracked: its departure is
//! not told, and a user or channel it held may be told online or occupied (and later offline or
//! vacated) as if it had been alone. In a cluster each node joins within a reload period of
//! the first endpoint's creation. Once joined, the listener stays (deleting every endpoint
//! leaves it answering "nobody wants this" from the snapshot).
//!
//! **`subscription_count` counts** ([`NodeHooks::count_with`], [`herald_hooks::counts`]): on
//! one node the hub's subscriber count, the last one told held in memory; in a cluster
//! ([`ClusterCounts`]) the cluster's (this node's own plus the others' as of the bus's presence
//! period), read once per channel per interval by the node that claimed the channel's interval
//! in Redis, which also keeps the last count told.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use herald_bus_redis::presence::CountClaim;
use herald_core::lifecycle::{Lifecycle, LifecycleListener};
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_core::{ChannelName, Engine};
use herald_hooks::counts::{ChannelCounts, Claim, LocalCounts};
use herald_hooks::endpoint::{EndpointId, StoredEndpoint};
use herald_hooks::service::{Hooks, HooksConfig};
use herald_hooks::store::{
    CreateEndpointError, DeadEvent, EndpointDepth, EndpointPatch, Enqueue, Enqueued, LeasedBatch,
    NewEndpoint, RowId, Settlement,
};
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
    /// `destinations`; its listener joins `lifecycle` once an endpoint exists.
    pub(crate) fn new(
        store: Arc<dyn HookStore>,
        sealer: Arc<Sealer>,
        destinations: Destinations,
        config: HooksConfig,
        lifecycle: Arc<Lifecycle>,
    ) -> Result<NodeHooks, ServerError> {
        let joiner = Arc::new(Joiner {
            lifecycle,
            listener: OnceLock::new(),
            joined: AtomicBool::new(false),
        });
        let watched = Arc::new(Watched {
            inner: store,
            joiner: joiner.clone(),
        });
        let service = Arc::new(
            Hooks::new(watched, sealer, destinations, config).map_err(ServerError::HookClient)?,
        );
        let _ = joiner.listener.set(service.listener());
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

    /// Loads the endpoints (joining the listener if there is one) and starts the service's
    /// tasks. Call it before connections are served: a node restarted with endpoints tells of
    /// its first connection.
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

    async fn told(&self, channel: &ChannelName, count: u64) {
        if let Some(redis) = self.bus.redis() {
            if let Err(e) = redis.count_reported(channel, count).await {
                tracing::debug!(error = %e, "webhooks: the subscription count told was not kept in Redis");
            }
        }
    }
}

/// Joins the listener to the registry, once.
struct Joiner {
    lifecycle: Arc<Lifecycle>,
    listener: OnceLock<Arc<dyn LifecycleListener>>,
    joined: AtomicBool,
}

impl Joiner {
    /// An endpoint exists: the listener joins if it has not yet.
    fn endpoints_exist(&self) {
        if self.joined.load(Ordering::Acquire) {
            return;
        }
        let Some(listener) = self.listener.get() else {
            return;
        };
        if !self.joined.swap(true, Ordering::AcqRel) {
            self.lifecycle.join(listener.clone());
            tracing::info!(
                "webhooks: an endpoint exists; this node tells lifecycle events from now on \
                 (connections made before now are not reported)"
            );
        }
    }
}

/// The store the service uses, telling the [`Joiner`] when it answers an endpoint.
struct Watched {
    inner: Arc<dyn HookStore>,
    joiner: Arc<Joiner>,
}

impl Watched {
    fn seen(&self, endpoints: usize) {
        if endpoints > 0 {
            self.joiner.endpoints_exist();
        }
    }
}

#[async_trait]
impl HookStore for Watched {
    async fn create_endpoint(
        &self,
        new: NewEndpoint,
        max_per_app: usize,
    ) -> Result<StoredEndpoint, CreateEndpointError> {
        let created = self.inner.create_endpoint(new, max_per_app).await?;
        self.seen(1);
        Ok(created)
    }

    async fn endpoints(&self, app: Option<&AppId>) -> Result<Vec<StoredEndpoint>, StoreError> {
        let endpoints = self.inner.endpoints(app).await?;
        self.seen(endpoints.len());
        Ok(endpoints)
    }

    async fn endpoint(
        &self,
        app: &AppId,
        id: EndpointId,
    ) -> Result<Option<StoredEndpoint>, StoreError> {
        self.inner.endpoint(app, id).await
    }

    async fn update_endpoint(
        &self,
        app: &AppId,
        id: EndpointId,
        patch: &EndpointPatch,
    ) -> Result<Option<StoredEndpoint>, StoreError> {
        self.inner.update_endpoint(app, id, patch).await
    }

    async fn rotate_secret(
        &self,
        app: &AppId,
        id: EndpointId,
        secret: Vec<u8>,
        previous_until_ms: i64,
    ) -> Result<bool, StoreError> {
        self.inner
            .rotate_secret(app, id, secret, previous_until_ms)
            .await
    }

    async fn delete_endpoint(&self, app: &AppId, id: EndpointId) -> Result<bool, StoreError> {
        self.inner.delete_endpoint(app, id).await
    }

    async fn enqueue(&self, events: Vec<Enqueue>, max_queued: u64) -> Result<Enqueued, StoreError> {
        self.inner.enqueue(events, max_queued).await
    }

    async fn lease(
        &self,
        now_ms: i64,
        limit: usize,
        lease_ms: i64,
        batch_max: usize,
        batch_delay_ms: i64,
        paused: &[EndpointId],
    ) -> Result<Vec<LeasedBatch>, StoreError> {
        self.inner
            .lease(now_ms, limit, lease_ms, batch_max, batch_delay_ms, paused)
            .await
    }

    async fn settle(
        &self,
        now_ms: i64,
        settled: Vec<(EndpointId, i64, Settlement)>,
    ) -> Result<(), StoreError> {
        self.inner.settle(now_ms, settled).await
    }

    async fn next_due(&self) -> Result<Option<i64>, StoreError> {
        self.inner.next_due().await
    }

    async fn dead_letters(
        &self,
        app: &AppId,
        endpoint: Option<EndpointId>,
        after: Option<RowId>,
        limit: usize,
    ) -> Result<Vec<DeadEvent>, StoreError> {
        self.inner.dead_letters(app, endpoint, after, limit).await
    }

    async fn replay(&self, app: &AppId, row: RowId, now_ms: i64) -> Result<bool, StoreError> {
        self.inner.replay(app, row, now_ms).await
    }

    async fn drop_dead(&self, app: &AppId, row: RowId) -> Result<bool, StoreError> {
        self.inner.drop_dead(app, row).await
    }

    async fn depth(&self, app: Option<&AppId>) -> Result<Vec<EndpointDepth>, StoreError> {
        self.inner.depth(app).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use herald_core::lifecycle::Lifecycle;
    use herald_hooks::memory::MemoryHookStore;

    use super::*;

    fn sealer() -> Arc<Sealer> {
        Arc::new(Sealer::new(&"07".repeat(32)).unwrap())
    }

    #[tokio::test]
    async fn the_listener_joins_when_the_first_endpoint_exists_and_not_before() {
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
        assert!(!lifecycle.is_active(), "no endpoint: nobody listens");
        let app = AppId::default_app();
        hooks
            .service
            .create(
                &app,
                &serde_json::json!({"url": "http://127.0.0.1:9/", "events": ["*"]}),
            )
            .await
            .unwrap();
        assert!(lifecycle.is_active(), "an endpoint created here: joined");
        hooks.stop().await;

        // Another node's endpoint (already in the store): the start's load joins.
        let lifecycle = Lifecycle::new();
        let again = NodeHooks::new(
            store,
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
        assert!(lifecycle.is_active(), "joined at start, before serving");
        again.stop().await;
    }
}
