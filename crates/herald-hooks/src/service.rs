//! [`Hooks`], the webhook service the API handlers call: an app's endpoints registered,
//! listed, changed, deleted, their secrets rotated, a test event sent, dead letters listed,
//! replayed and dropped, the events this node queues tailed ([`Hooks::tail`]); and, once
//! [`Hooks::start`]ed, the tasks that queue lifecycle events (the [`Hooks::listener`] and its
//! writer) and deliver them (the worker).
//!
//! Every endpoint operation is scoped to its app: another app's endpoint is "not found".
//! A signing secret is generated here, sealed at rest, and its text returned once (from
//! [`Hooks::create`] and [`Hooks::rotate_secret`]), never shown again.
//!
//! The endpoints events are matched against are held in memory (the `snapshot` module): loaded
//! when the service starts, replaced after every change made through this service, and
//! reloaded every [`SNAPSHOT_RELOAD`] for other nodes' changes. Once the service listens to a
//! node's lifecycle registry ([`Hooks::listen_to`]), every replacement also sets the kinds of
//! lifecycle event its listener wants there: those some enabled endpoint is given (a kind
//! nobody wants is then not even built, [`herald_core::lifecycle`]). In a cluster another
//! node's new endpoint is wanted here within a reload.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use herald_core::lifecycle::{ChannelInterest, Kinds, Lifecycle, LifecycleListener, ListenerId};
use herald_core::tenant::AppId;
use herald_providers::destination::Destinations;
use herald_push::credentials::sealer::Sealer;
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::counts::SubscriptionCounts;
use crate::endpoint::{Endpoint, EndpointId, Format, StoredEndpoint};
use crate::error::HooksError;
use crate::event::{EventId, EventType, HookEvent};
use crate::input;
use crate::pusher::PusherWebhooks;
use crate::seal;
use crate::sender::{batch_body, webhook_id, Sender};
use crate::signing::SigningSecret;
use crate::snapshot::Snapshot;
use crate::store::{DeadEvent, HookStore, QueuedEvent, RowId};
use crate::tail::{Tail, Tails, TooManyTails};
use crate::view::{EndpointView, TestOutcome};

/// How often the endpoint snapshot is reloaded from the store (other nodes' changes).
pub const SNAPSHOT_RELOAD: Duration = Duration::from_secs(2);

/// Longest overlap of a rotated secret (requests are signed with both meanwhile).
pub const MAX_ROTATE_OVERLAP: Duration = Duration::from_secs(7 * 24 * 3600);

/// The webhook settings (`[hooks]` in the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HooksConfig {
    /// Events in one request normally (`hooks.batch_max`, 100): an endpoint with more due gets
    /// up to 10 times as many, at most 1,000 ([`crate::store::Batching::growing`]).
    pub batch_max: usize,
    /// How long the oldest due event waits for a batch to fill (`hooks.batch_delay`, 1 s).
    pub batch_delay: Duration,
    /// How long an endpoint may fail before its batch becomes dead letters
    /// (`hooks.retry_horizon`, 24 h).
    pub horizon: Duration,
    /// Most events queued per endpoint; past it events are dropped and counted
    /// (`hooks.max_queued_per_endpoint`, 1,000,000: about 20 s of the worker's drain under
    /// churn).
    pub max_queued_per_endpoint: u64,
    /// Most events waiting on this node to be queued; past it events are dropped and counted
    /// (`hooks.node_queue`, 65,536).
    pub node_queue: usize,
    /// Longest request, connecting included (`hooks.request_timeout`, 10 s).
    pub request_timeout: Duration,
    /// Most endpoints per app (`hooks.max_endpoints_per_app`, 20).
    pub max_endpoints_per_app: usize,
    /// Shortest time between two `subscription_count` events about one channel, and longest
    /// a change waits to be told (`hooks.subscription_count_interval`, 5 s; [`crate::counts`]).
    pub subscription_count_interval: Duration,
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            batch_max: 100,
            batch_delay: Duration::from_secs(1),
            horizon: Duration::from_secs(24 * 3600),
            max_queued_per_endpoint: 1_000_000,
            node_queue: 65_536,
            request_timeout: Duration::from_secs(10),
            max_endpoints_per_app: 20,
            subscription_count_interval: Duration::from_secs(5),
        }
    }
}

/// The webhook service (see the [module documentation](self)).
pub struct Hooks {
    store: Arc<dyn HookStore>,
    sealer: Arc<Sealer>,
    destinations: Destinations,
    sender: Sender,
    config: HooksConfig,
    /// Poked by the writer when it queued events, waking the worker (see
    /// [`Hooks::worker_wake`]).
    worker_wake: Arc<Notify>,
    snapshot: ArcSwap<Snapshot>,
    /// The node queue: the listener's end, and the writer's until [`Hooks::start`] takes it.
    queue: mpsc::Sender<HookEvent>,
    queued: Mutex<Option<mpsc::Receiver<HookEvent>>>,
    /// The tails open on this node, fed by the writer.
    tails: Arc<Tails>,
    /// The `subscription_count` windows the listener notes, told by their task.
    counts: SubscriptionCounts,
    /// The lifecycle registry the listener joined ([`Hooks::listen_to`]), its place there and
    /// the kinds it wants; held while the snapshot is replaced, so the kinds follow the
    /// snapshots in order.
    listening: Mutex<Option<Listening>>,
    /// What Pusher endpoints need of Pusher, once the server gave it ([`Hooks::set_pusher`]).
    pusher: PusherSlot,
}

/// Where the service (its writer and worker) finds [`PusherWebhooks`] once it is given.
pub(crate) type PusherSlot = Arc<OnceLock<Arc<dyn PusherWebhooks>>>;

/// Where the service's listener joined and what it wants there.
struct Listening {
    lifecycle: Arc<Lifecycle>,
    id: ListenerId,
    wants: Kinds,
    /// The channels it wants channel events about ([`Snapshot::channel_interest`]).
    channels: ChannelInterest,
}

impl Hooks {
    /// The service over `store`, sealing secrets with `sealer`, reaching only `destinations`.
    /// Nothing runs until [`Hooks::start`]. An error when the HTTP client cannot be built.
    pub fn new(
        store: Arc<dyn HookStore>,
        sealer: Arc<Sealer>,
        destinations: Destinations,
        config: HooksConfig,
    ) -> Result<Hooks, String> {
        let sender = Sender::new(destinations.clone(), config.request_timeout)?;
        let (queue, queued) = mpsc::channel(config.node_queue.max(1));
        let counts = SubscriptionCounts::new(config.subscription_count_interval);
        Ok(Hooks {
            store,
            sealer,
            destinations,
            sender,
            config,
            worker_wake: Arc::new(Notify::new()),
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            queue,
            queued: Mutex::new(Some(queued)),
            tails: Arc::new(Tails::default()),
            counts,
            listening: Mutex::new(None),
            pusher: Arc::new(OnceLock::new()),
        })
    }

    /// Gives the service what Pusher endpoints need (the Pusher names of channels, apps'
    /// Pusher keys and secrets); until then, and without it, they are queued nothing. The
    /// first one given stays.
    pub fn set_pusher(&self, pusher: Arc<dyn PusherWebhooks>) {
        let _ = self.pusher.set(pusher);
    }

    /// What Pusher endpoints need, once given.
    pub fn pusher(&self) -> Option<&Arc<dyn PusherWebhooks>> {
        self.pusher.get()
    }

    pub(crate) fn pusher_slot(&self) -> &PusherSlot {
        &self.pusher
    }

    /// Whether an enabled endpoint of `app` wants events of type `kind` about `channel` (the
    /// app's name for it): one look at the endpoints held in memory.
    pub fn wants(&self, app: &AppId, kind: EventType, channel: &str) -> bool {
        self.snapshot().wants(app.as_str(), kind, Some(channel))
    }

    /// Tells the Pusher protocol's own event of type `kind` (`pusher.client_event`,
    /// `pusher.cache_miss`) about `app`'s `channel` (the app's Herald name for it): `user` and
    /// `data` are built only when an enabled endpoint wants it (one look at the endpoints held
    /// in memory otherwise), then queued as a lifecycle event is (dropped, counted, when the
    /// node queue is full).
    pub fn tell_pusher(
        &self,
        app: &AppId,
        kind: EventType,
        channel: &str,
        event: impl FnOnce() -> (Option<Box<str>>, serde_json::Value),
    ) {
        if !self.wants(app, kind, channel) {
            return;
        }
        let (user, data) = event();
        let at_ms = now_ms();
        let event = HookEvent {
            id: EventId::new(at_ms),
            app: app.clone(),
            kind,
            at_ms,
            user,
            channel: Some(channel.into()),
            data,
        };
        if let Err(mpsc::error::TrySendError::Full(_)) = self.queue.try_send(event) {
            metrics::counter!(crate::listener::DROPPED_METRIC, "reason" => "node_queue_full")
                .increment(1);
        }
    }

    /// Registers an endpoint for `app` from a create body ([`input::parse_create`]), its
    /// destination checked; answers it with its new signing secret (shown this once).
    pub async fn create(
        &self,
        app: &AppId,
        input: &serde_json::Value,
    ) -> Result<(Endpoint, SigningSecret), HooksError> {
        let fields = input::parse_create(input)?;
        let max = self.config.max_endpoints_per_app;
        // Refused at once when the app is full; the store checks again as it inserts (creates at
        // once, on any node, never go past it).
        if self.store.endpoints(Some(app)).await?.len() >= max {
            return Err(HooksError::TooMany { max });
        }
        input::check_destination(&self.destinations, &fields.url).await?;
        let secret = SigningSecret::generate();
        let sealed = seal::seal(&self.sealer, app, &secret);
        let stored = self
            .store
            .create_endpoint(fields.into_new(app.clone(), sealed, now_ms()), max)
            .await?;
        self.refresh().await;
        Ok((stored.endpoint, secret))
    }

    /// The endpoints of `app`, in id order, with their queues and delivery state.
    pub async fn list(&self, app: &AppId) -> Result<Vec<EndpointView>, HooksError> {
        let endpoints = self.store.endpoints(Some(app)).await?;
        let mut depths = self.store.depth(Some(app)).await?;
        Ok(endpoints
            .into_iter()
            .map(|stored| {
                let id = stored.endpoint.id;
                let depth = depths
                    .iter()
                    .position(|d| d.endpoint == id)
                    .map(|i| depths.swap_remove(i));
                EndpointView::new(stored.endpoint, depth)
            })
            .collect())
    }

    /// One endpoint of `app`, with its queue and delivery state.
    pub async fn get(&self, app: &AppId, id: EndpointId) -> Result<EndpointView, HooksError> {
        let stored = self.stored(app, id).await?;
        let depth = self
            .store
            .depth(Some(app))
            .await?
            .into_iter()
            .find(|d| d.endpoint == id);
        Ok(EndpointView::new(stored.endpoint, depth))
    }

    /// Changes an endpoint of `app` from a PATCH body ([`input::parse_patch`]; a new URL's
    /// destination checked).
    pub async fn update(
        &self,
        app: &AppId,
        id: EndpointId,
        input: &serde_json::Value,
    ) -> Result<Endpoint, HooksError> {
        let mut patch = input::parse_patch(input)?;
        if let Some(events) = patch.events {
            // A Pusher endpoint is told Pusher's types only.
            let format = self.stored(app, id).await?.endpoint.format;
            patch.events = Some(input::events_for(format, events, &input["events"])?);
        }
        if let Some(url) = &patch.url {
            input::check_destination(&self.destinations, url).await?;
        }
        let stored = self
            .store
            .update_endpoint(app, id, &patch)
            .await?
            .ok_or(HooksError::NotFound)?;
        self.refresh().await;
        Ok(stored.endpoint)
    }

    /// Deletes an endpoint of `app`, with its queue and dead letters.
    pub async fn delete(&self, app: &AppId, id: EndpointId) -> Result<(), HooksError> {
        if !self.store.delete_endpoint(app, id).await? {
            return Err(HooksError::NotFound);
        }
        self.refresh().await;
        Ok(())
    }

    /// Gives an endpoint of `app` a new signing secret (answered, shown this once); requests
    /// are signed with the old one too for `overlap` (at most [`MAX_ROTATE_OVERLAP`]).
    pub async fn rotate_secret(
        &self,
        app: &AppId,
        id: EndpointId,
        overlap: Duration,
    ) -> Result<SigningSecret, HooksError> {
        if overlap > MAX_ROTATE_OVERLAP {
            return Err(HooksError::bad_input(
                "overlap_seconds",
                format!("at most {} (7 days)", MAX_ROTATE_OVERLAP.as_secs()),
            ));
        }
        let secret = SigningSecret::generate();
        let sealed = seal::seal(&self.sealer, app, &secret);
        let until = now_ms().saturating_add(overlap.as_millis() as i64);
        if !self.store.rotate_secret(app, id, sealed, until).await? {
            return Err(HooksError::NotFound);
        }
        Ok(secret)
    }

    /// Sends one signed `hook.test` event to an endpoint of `app` now (not queued, whether the
    /// endpoint is enabled or not) and answers what came of it. A Pusher endpoint, Pusher having
    /// no test event, is sent a signed request with no events (`{"time_ms":..,"events":[]}`).
    pub async fn test(&self, app: &AppId, id: EndpointId) -> Result<TestOutcome, HooksError> {
        let stored = self.stored(app, id).await?;
        let at_ms = now_ms();
        if stored.endpoint.format == Format::Pusher {
            let sent =
                crate::pusher::send_batch(&self.sender, self.pusher(), &stored, &[], at_ms).await;
            let outcome = match sent {
                Ok(outcome) => outcome,
                Err(error) => {
                    return Ok(TestOutcome {
                        delivered: false,
                        status: None,
                        error: Some(error),
                        latency_ms: 0,
                    })
                }
            };
            return Ok(TestOutcome::of(&outcome));
        }
        let secrets = match seal::signing_secrets(&self.sealer, &stored, at_ms) {
            Ok(secrets) => secrets,
            Err(why) => {
                return Ok(TestOutcome {
                    delivered: false,
                    status: None,
                    error: Some(format!(
                        "the endpoint's signing secret does not open (was the credentials key \
                         changed?): {why}"
                    )),
                    latency_ms: 0,
                })
            }
        };
        let event = HookEvent {
            id: EventId::new(at_ms),
            app: app.clone(),
            kind: EventType::HookTest,
            at_ms,
            user: None,
            channel: None,
            data: json!({ "endpoint": id }),
        };
        let queued = QueuedEvent {
            row: 0,
            event_id: event.id.to_string(),
            payload: event.to_json().to_string(),
        };
        let body = batch_body(std::slice::from_ref(&queued));
        let signers: Vec<&SigningSecret> = secrets.iter().collect();
        let outcome = self
            .sender
            .send(&stored, &signers, &webhook_id(&queued.event_id, 1), body)
            .await;
        Ok(TestOutcome::of(&outcome))
    }

    /// Dead letters of an endpoint of `app`, in row order after `after`, at most `limit`.
    pub async fn dead_letters(
        &self,
        app: &AppId,
        id: EndpointId,
        after: Option<RowId>,
        limit: usize,
    ) -> Result<Vec<DeadEvent>, HooksError> {
        self.stored(app, id).await?;
        Ok(self.store.dead_letters(app, Some(id), after, limit).await?)
    }

    /// Queues a dead letter of an endpoint of `app` again, due now. Not found unless `row` is
    /// that endpoint's dead letter.
    pub async fn replay(&self, app: &AppId, id: EndpointId, row: RowId) -> Result<(), HooksError> {
        self.dead_letter(app, id, row).await?;
        match self.store.replay(app, row, now_ms()).await? {
            true => Ok(()),
            false => Err(HooksError::NotFound),
        }
    }

    /// Deletes a dead letter of an endpoint of `app`. Not found unless `row` is that
    /// endpoint's dead letter.
    pub async fn drop_dead(
        &self,
        app: &AppId,
        id: EndpointId,
        row: RowId,
    ) -> Result<(), HooksError> {
        self.dead_letter(app, id, row).await?;
        match self.store.drop_dead(app, row).await? {
            true => Ok(()),
            false => Err(HooksError::NotFound),
        }
    }

    /// Opens a tail of the events this node queues for `app`'s endpoints, from now on (see
    /// [`crate::tail`]); refused past [`crate::tail::MAX_TAILS`] open on this node.
    pub fn tail(&self, app: &AppId) -> Result<Tail, TooManyTails> {
        self.tails.open(app)
    }

    /// The lifecycle listener that queues this node's events for the app's endpoints. Joined
    /// on its own it wants every kind; [`Hooks::listen_to`] joins it wanting only what the
    /// endpoints want.
    pub fn listener(self: &Arc<Self>) -> Arc<dyn LifecycleListener> {
        Arc::new(crate::listener::HooksListener::new(self.clone()))
    }

    /// Joins the [`Hooks::listener`] to `lifecycle` (once; a second call does nothing),
    /// wanting the kinds of lifecycle event the enabled endpoints are given now (the types
    /// they asked for; `user.online` too for `user.offline`; for `subscription_count` the
    /// subscriptions and channels it is counted from), and from now on those of every snapshot
    /// that replaces this one. While no endpoint wants a kind, it costs the node one atomic load where that
    /// kind would be built: join at start, before anything is served, whatever the endpoints.
    pub fn listen_to(self: &Arc<Self>, lifecycle: Arc<Lifecycle>) {
        let mut listening = self.listening.lock();
        if listening.is_some() {
            return;
        }
        let snapshot = self.snapshot();
        let wants = snapshot.lifecycle_kinds();
        let channels = snapshot.channel_interest();
        drop(snapshot);
        let id = lifecycle.join_wanting(self.listener(), Kinds::NONE);
        lifecycle.set_channel_interest(id, channels.clone());
        lifecycle.set_wanted(id, wants);
        *listening = Some(Listening {
            lifecycle,
            id,
            wants,
            channels,
        });
    }

    /// Starts the service's tasks: the snapshot's reload (at once, then every
    /// [`SNAPSHOT_RELOAD`]), the `subscription_count` windows' ([`crate::counts`]), the writer
    /// (the node queue into the store) and the worker (the store's queues to the endpoints).
    /// They end when `shutdown` is cancelled, the writer after a last attempt to store what is
    /// in the node queue. Called once, when the server starts.
    pub fn start(self: &Arc<Self>, shutdown: CancellationToken) -> Vec<JoinHandle<()>> {
        let mut tasks = vec![
            tokio::spawn(reload_snapshot(self.clone(), shutdown.clone())),
            tokio::spawn(crate::counts::run_counts(self.clone(), shutdown.clone())),
        ];
        if let Some(queued) = self.take_queue() {
            tasks.push(tokio::spawn(crate::writer::run_writer(
                self.clone(),
                queued,
                shutdown.clone(),
            )));
        }
        tasks.push(tokio::spawn(crate::worker::run_worker(
            self.clone(),
            shutdown,
        )));
        tasks
    }

    /// Loads the endpoint snapshot from the store now (what [`Hooks::start`] does at once).
    pub async fn reload(&self) -> Result<(), HooksError> {
        let endpoints = self.store.endpoints(None).await?;
        self.replace(Snapshot::build(endpoints));
        Ok(())
    }

    /// Replaces the snapshot, and sets the kinds the listener wants from it (see the [module
    /// documentation](self)).
    fn replace(&self, snapshot: Snapshot) {
        let wants = snapshot.lifecycle_kinds();
        let channels = snapshot.channel_interest();
        let mut listening = self.listening.lock();
        let names = snapshot.wanted_names();
        self.snapshot.store(Arc::new(snapshot));
        let Some(listening) = listening.as_mut() else {
            return;
        };
        if listening.channels != channels {
            listening
                .lifecycle
                .set_channel_interest(listening.id, channels.clone());
            listening.channels = channels;
        }
        if listening.wants == wants {
            return;
        }
        let widened = !listening.wants.contains(wants);
        listening.lifecycle.set_wanted(listening.id, wants);
        listening.wants = wants;
        if widened {
            tracing::info!(
                events = ?names,
                "webhooks: the endpoints want more lifecycle events; this node builds them from \
                 now on (connections and channels from before now are not reported)"
            );
        }
    }

    /// The store.
    pub(crate) fn store(&self) -> &Arc<dyn HookStore> {
        &self.store
    }

    /// The settings.
    pub(crate) fn config(&self) -> &HooksConfig {
        &self.config
    }

    /// The HTTP sender.
    pub(crate) fn sender(&self) -> &Sender {
        &self.sender
    }

    /// The sealer of signing secrets.
    pub(crate) fn sealer(&self) -> &Arc<Sealer> {
        &self.sealer
    }

    /// What wakes the worker: the writer pokes it (`notify_one`, kept until the worker waits)
    /// after queueing events, so they are leased without waiting out the worker's idle sleep.
    pub(crate) fn worker_wake(&self) -> &Arc<Notify> {
        &self.worker_wake
    }

    /// The endpoint snapshot.
    pub(crate) fn snapshot(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.snapshot.load()
    }

    /// This node's `subscription_count` windows; give them their counts' source
    /// ([`SubscriptionCounts::set_source`]) before the server serves.
    pub fn subscription_counts(&self) -> &SubscriptionCounts {
        &self.counts
    }

    /// The tails open on this node.
    pub(crate) fn tails(&self) -> &Tails {
        &self.tails
    }

    /// The node queue's sending end.
    pub(crate) fn queue(&self) -> &mpsc::Sender<HookEvent> {
        &self.queue
    }

    /// The node queue's receiving end, to the first caller (the writer).
    pub(crate) fn take_queue(&self) -> Option<mpsc::Receiver<HookEvent>> {
        self.queued.lock().take()
    }

    async fn stored(&self, app: &AppId, id: EndpointId) -> Result<StoredEndpoint, HooksError> {
        self.store
            .endpoint(app, id)
            .await?
            .ok_or(HooksError::NotFound)
    }

    /// Not found unless `row` is a dead letter of endpoint `id` of `app`.
    async fn dead_letter(&self, app: &AppId, id: EndpointId, row: RowId) -> Result<(), HooksError> {
        let found = self
            .store
            .dead_letters(app, Some(id), Some(row.saturating_sub(1)), 1)
            .await?;
        match found.first() {
            Some(dead) if dead.row == row => Ok(()),
            _ => Err(HooksError::NotFound),
        }
    }

    /// Replaces the snapshot after a change; a store that fails now leaves it to the next
    /// periodic reload.
    async fn refresh(&self) {
        if let Err(e) = self.reload().await {
            tracing::warn!(
                error = %e,
                "webhooks: reloading the endpoints after a change failed; retried within \
                 {SNAPSHOT_RELOAD:?}"
            );
        }
    }
}

/// Reloads the snapshot at once, then every [`SNAPSHOT_RELOAD`], until `shutdown`.
async fn reload_snapshot(hooks: Arc<Hooks>, shutdown: CancellationToken) {
    let mut every = tokio::time::interval(SNAPSHOT_RELOAD);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = every.tick() => {}
        }
        match hooks.reload().await {
            Ok(()) if failing => {
                failing = false;
                tracing::info!("webhooks: the endpoints load again");
            }
            Ok(()) => {}
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(
                    error = %e,
                    "webhooks: loading the endpoints failed; events are matched against the \
                     last ones loaded until it succeeds"
                );
            }
            Err(_) => {}
        }
    }
}

/// Now, milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
pub(crate) mod tests;
