//! What one node runs over, opened together: its store (SQLite in the data directory, or a
//! PostgreSQL database shared with other nodes) and its bus (this node alone, or Redis between
//! nodes). The store's commits feed the bus and the bus feeds this node's hub, through
//! [`Engine::open_with_bus_async`], so the wiring cannot be got wrong.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use herald_bus_redis::{BusOptions, Connected, RedisBus};
use herald_core::audit::AuditLog;
use herald_core::bus::{Bus, BusLink, ChannelQuery, LocalBus, OccupiedChannels, Presence};
use herald_core::caches::{CacheEvent, Caches};
use herald_core::claims::ClusterClaims;
use herald_core::fanout::FanOut;
use herald_core::head::HeadSource;
use herald_core::log::{ChannelLog, CommitSink, StoreError};
use herald_core::message::SharedMessage;
use herald_core::tenancy::Tenancy;
use herald_core::usage::UsageMeter;
use herald_core::wiring::OpenError;
use herald_core::{ChannelName, Engine};
use herald_hooks::HookStore;
use herald_mqtt::session::store::MqttSessionStore;
use herald_push::credentials::CredentialStore;
use herald_push::jobs::JobQueue;
use herald_push::DeviceRegistry;
use herald_pusher::PusherCredentialStore;
use herald_store::{PostgresStore, SqliteLog};
use tokio_util::sync::CancellationToken;

use herald_push::credentials::sealer::Sealer;

use crate::error::ServerError;
use crate::sealed_tenancy::SealedTenancy;
use crate::settings::{redact_url, ServerSettings};

/// The store one node runs over, as the traits the rest of the server uses (one value
/// implements them all).
#[derive(Clone)]
pub(crate) struct Store {
    /// Channel logs.
    pub log: Arc<dyn ChannelLog>,
    /// Apps, keys, limits, usage.
    pub tenancy: Arc<dyn Tenancy>,
    /// Devices, inbox cursors, receipts.
    pub devices: Arc<dyn DeviceRegistry>,
    /// Sealed provider credentials.
    pub credentials: Arc<dyn CredentialStore>,
    /// Provider jobs.
    pub jobs: Arc<dyn JobQueue>,
    /// The audit log of admin actions.
    pub audit: Arc<dyn AuditLog>,
    /// Webhook endpoints and their queues.
    pub hooks: Arc<dyn HookStore>,
    /// Pusher credentials.
    pub pusher: Arc<dyn PusherCredentialStore>,
    /// MQTT persistent sessions.
    pub mqtt_sessions: Arc<dyn MqttSessionStore>,
}

impl Store {
    fn of<S>(store: Arc<S>) -> Store
    where
        S: ChannelLog
            + Tenancy
            + DeviceRegistry
            + CredentialStore
            + JobQueue
            + AuditLog
            + HookStore
            + PusherCredentialStore
            + MqttSessionStore
            + 'static,
    {
        Store {
            log: store.clone(),
            tenancy: store.clone(),
            devices: store.clone(),
            credentials: store.clone(),
            jobs: store.clone(),
            audit: store.clone(),
            hooks: store.clone(),
            pusher: store.clone(),
            mqtt_sessions: store,
        }
    }

    /// Flushes and closes the store (after its last commits).
    pub async fn close(&self) {
        self.log.close().await;
    }
}

/// This node's bus, with the caches it applies events to.
pub(crate) struct NodeBus {
    kind: BusKind,
    caches: Arc<Caches>,
}

/// Alone, or one of a cluster over Redis.
enum BusKind {
    /// One node: committed messages to this node's fan-out, events to its caches.
    Local(Arc<LocalBus>),
    /// A cluster node: also to and from the other nodes through Redis.
    Redis(Arc<RedisBus>),
}

impl CommitSink for NodeBus {
    #[inline]
    fn committed(&self, messages: &[SharedMessage]) {
        match &self.kind {
            BusKind::Local(bus) => bus.committed(messages),
            BusKind::Redis(bus) => bus.committed(messages),
        }
    }
}

impl Bus for NodeBus {
    fn publish(&self, event: CacheEvent) {
        match &self.kind {
            BusKind::Local(bus) => bus.publish(event),
            BusKind::Redis(bus) => bus.publish(event),
        }
    }

    fn link(&self) -> BusLink {
        match &self.kind {
            BusKind::Local(bus) => bus.link(),
            BusKind::Redis(bus) => bus.link(),
        }
    }

    fn head_source(&self) -> Option<Arc<dyn HeadSource>> {
        match &self.kind {
            BusKind::Local(bus) => bus.head_source(),
            BusKind::Redis(bus) => bus.head_source(),
        }
    }

    fn claims(&self) -> Option<Arc<dyn ClusterClaims>> {
        match &self.kind {
            BusKind::Local(bus) => bus.claims(),
            BusKind::Redis(bus) => bus.claims(),
        }
    }

    fn occupied_channels(
        &self,
        query: ChannelQuery,
    ) -> Pin<Box<dyn Future<Output = OccupiedChannels> + Send + '_>> {
        match &self.kind {
            BusKind::Local(bus) => bus.occupied_channels(query),
            BusKind::Redis(bus) => bus.occupied_channels(query),
        }
    }
}

impl NodeBus {
    /// The caches this bus applies events to.
    pub fn caches(&self) -> &Arc<Caches> {
        &self.caches
    }

    /// The Redis bus, on a cluster node.
    pub fn redis(&self) -> Option<&Arc<RedisBus>> {
        match &self.kind {
            BusKind::Local(_) => None,
            BusKind::Redis(bus) => Some(bus),
        }
    }

    /// Cluster-wide counts, on a cluster node.
    pub fn presence(self: &Arc<Self>) -> Option<Arc<dyn Presence>> {
        self.redis().map(|_| self.clone() as Arc<dyn Presence>)
    }

    /// On a cluster node, stops relaying lifecycle events: the departures queued are written
    /// to Redis and this node leaves the cluster's records, the transitions that makes (its
    /// channels and users that had nobody else) told to this node's listeners now. Call it
    /// once the connections are gone, before the listeners stop (the webhook writer).
    pub async fn stop_lifecycle(&self) {
        if let Some(bus) = self.redis() {
            bus.stop_lifecycle().await;
        }
    }

    /// Stops the bus's tasks (on a cluster node), after the store has closed: the store's last
    /// commits are sent to the other nodes first.
    pub async fn shutdown(&self) {
        if let Some(bus) = self.redis() {
            bus.shutdown().await;
        }
    }
}

#[async_trait::async_trait]
impl Presence for NodeBus {
    /// This node's subscribers (exact) plus the other nodes' as they last reported them (at
    /// most one presence period old, `BusOptions::presence_period`); `None` on one node or when
    /// Redis does not answer.
    async fn subscribers(&self, channel: &ChannelName) -> Option<u64> {
        self.redis()?.cluster_subscribers(channel).await.ok()
    }
}

/// On a cluster node, until `shutdown`: every presence period, tells `usage` how many
/// connections of each app with a `max_connections` limit the other nodes hold, and how many
/// devices each app with a `max_devices` limit has in the shared store, so both limits hold for
/// the cluster (to within what several nodes accept in one period).
pub(crate) async fn learn_from_other_nodes(
    bus: Arc<NodeBus>,
    usage: Arc<UsageMeter>,
    devices: Arc<dyn DeviceRegistry>,
    shutdown: CancellationToken,
) {
    let Some(redis) = bus.redis() else {
        return;
    };
    let period = BusOptions::default().presence_period;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        for app in usage.limited_apps() {
            let Ok(total) = redis.cluster_connections(&app).await else {
                continue;
            };
            let here = usage.live_connections(&app);
            usage.set_elsewhere(&app, total.saturating_sub(here));
        }
        for app in usage.device_limited_apps() {
            if let Ok(stored) = devices.device_count(&app).await {
                usage.app(&app).set_devices(stored);
            }
        }
    }
}

/// Opens this node's store and bus with the engine over them. `caches` (with the default
/// app's token secret) are the ones the bus applies events to.
pub(crate) async fn open(
    settings: &ServerSettings,
    caches: Arc<Caches>,
) -> Result<(Engine, Arc<NodeBus>, Store), ServerError> {
    // Push logs (an app's broadcast log, device inboxes) keep messages by their own rule.
    let mut namespaces = settings.namespaces.clone();
    herald_push::logs::register(&mut namespaces, herald_push::logs::DEFAULT_RETENTION);
    // Pusher's `presence-` channels are Herald presence channels in every app.
    herald_pusher::presence::register(&mut namespaces, settings.pusher.presence_max_members);
    let cluster = &settings.cluster;
    let connected: Option<Connected> = if cluster.redis.is_empty() {
        None
    } else {
        let options = BusOptions {
            cluster: cluster.redis_cluster,
            tls_ca_pem: cluster.redis_ca_pem.clone(),
            presence_members: namespaces.any_presence(),
            ..BusOptions::default()
        };
        let options = BusOptions {
            subscriber_notifications: cluster
                .redis_receive_queue
                .unwrap_or(options.subscriber_notifications),
            ..options
        };
        Some(
            RedisBus::connect(&cluster.redis, caches.clone(), options)
                .await
                .map_err(ServerError::Bus)?,
        )
    };
    let make_bus = move |fan_out: Arc<FanOut>| {
        let kind = match connected {
            Some(connected) => BusKind::Redis(connected.start(fan_out)),
            None => BusKind::Local(LocalBus::new(fan_out, caches.clone())),
        };
        Arc::new(NodeBus { kind, caches })
    };
    let opened = match &cluster.postgres {
        Some(url) => {
            let options = cluster.postgres_options.clone();
            Engine::open_with_bus_async(namespaces, make_bus, |sink| async move {
                PostgresStore::open(url, options, sink).await
            })
            .await
            .map(|(engine, bus, store)| (engine, bus, Store::of(store)))
            .map_err(|e| open_error(e, || format!("PostgreSQL at {}", redact_url(url))))?
        }
        None => {
            let data = &settings.data;
            std::fs::create_dir_all(data).map_err(|source| ServerError::DataDir {
                path: data.clone(),
                source,
            })?;
            Engine::open_with_bus(namespaces, make_bus, |sink| {
                SqliteLog::open(data, settings.store.clone(), sink)
            })
            .map(|(engine, bus, store)| (engine, bus, Store::of(store)))
            .map_err(|e| open_error(e, || data.display().to_string()))?
        }
    };
    let mut opened = opened;
    let edge = &settings.edge;
    opened
        .0
        .set_catchup_bytes(edge.catchup_bytes.min(edge.outbox_bytes));
    opened.0.set_tail_cache_bytes(edge.tail_cache_bytes);
    opened.0.set_fanout_backlog(settings.fanout_backlog);
    seal_token_secrets(settings, &mut opened.2).await?;
    if let Some(bus) = opened.1.redis() {
        bus.attach(opened.2.log.clone(), opened.2.tenancy.clone());
    }
    Ok(opened)
}

/// Puts the store's tenancy behind [`SealedTenancy`] (token secrets sealed with the server key)
/// and seals what an older Herald stored in plain text.
async fn seal_token_secrets(
    settings: &ServerSettings,
    store: &mut Store,
) -> Result<(), ServerError> {
    let key = crate::secrets::credentials_key(settings)?;
    let sealer = Sealer::new(&key).map_err(|e| ServerError::CredentialsKey(e.to_string()))?;
    let sealed = SealedTenancy::new(store.tenancy.clone(), Arc::new(sealer));
    sealed
        .seal_plain_secrets()
        .await
        .map_err(|source| ServerError::OpenStore {
            place: "the store's token secrets".to_owned(),
            source,
        })?;
    store.tenancy = Arc::new(sealed);
    Ok(())
}

fn open_error(e: OpenError<StoreError>, place: impl FnOnce() -> String) -> ServerError {
    match e {
        OpenError::FanOut(e) => ServerError::FanOut(e),
        OpenError::Log(source) => ServerError::OpenStore {
            place: place(),
            source,
        },
    }
}

/// Runs a PostgreSQL store's migrations (`herald migrate`): answers the schema version before
/// and after.
pub async fn migrate_postgres(url: &str) -> Result<(i64, i64), ServerError> {
    let before = PostgresStore::migrate(url)
        .await
        .map_err(|source| ServerError::OpenStore {
            place: format!("PostgreSQL at {}", redact_url(url)),
            source,
        })?;
    Ok((before, herald_store::postgres::SCHEMA_VERSION))
}
