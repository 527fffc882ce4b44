//! The delivery worker: leases due jobs, starts broadcast expansions beside the rounds (they
//! send their pages directly: `delivery::broadcast`), runs a batch of send jobs concurrently,
//! and settles the batch in one transaction.
//!
//! For each send, a job's or a broadcast page's, it decides (`Deliverer::attempt`), in this
//! order: the push expired or is gone → `expired`; the
//! device is gone or inactive → `inactive`; it has no token for the job's provider →
//! `no_token`; an `auto` push the device has acknowledged → `live` (no provider push); the app
//! has no usable credentials → `no_credentials`; otherwise one provider send, whose
//! [`Outcome`] settles the job, deactivates the device (token gone), or retries it with backoff.
//! A retry whose scope is the provider pauses that app and provider only: other apps and
//! providers keep going. Retries, pauses and dead letters follow the outbound queue's rules
//! (`herald_outbound::Outbound`, a provider job's destination being its app and provider).
//!
//! Once an attempt's settlement is committed, it is told to the observer, when one wants it
//! ([`crate::push_events`]: provider accepted, failed, dead letter); a device deactivated
//! because its token is gone is told once the deactivation is stored.
//!
//! A round that fails (the store cannot be reached) is said once, and its loop waits longer
//! after each failure in a row before the next round (`round_failures`: 1 s, 2 s ... 30 s).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use herald_core::engine::Engine;
use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_outbound::{Failure, Next, Outbound};
use herald_proto::SendResult;
use herald_providers::{Outcome, RetryScope};

use crate::delivery::failures::FailureLog;
use crate::delivery::record::{DeliveryRecord, ACKED};
use crate::delivery::round_failures::RoundFailures;
use crate::delivery::senders::{NoSender, Senders};
use crate::delivery::stats::{SendEnd, WorkerStats};
use crate::delivery::Delivery;
use crate::device::{Device, InboxCursor, Platform};
use crate::jobs::{Destination, Job, JobKind, JobQueue, NewJob, RetryPolicy, Settlement};
use crate::logs::PushLogs;
use crate::push_events::{
    DeliveryFacts, DeviceFacts, JobArguments, PushEvent, PushEventKind, PushEvents, PushObserver,
};
use crate::registry::DeviceRegistry;

/// How the worker runs.
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    /// Jobs leased (and sends run concurrently) per round; also the most sends one broadcast
    /// expansion has in flight.
    pub batch: usize,
    /// How long a lease lasts; a job whose worker died is due again after it.
    pub lease: Duration,
    /// Devices read per expansion page.
    pub expand_page: usize,
    /// Longest a send may take before it is retried.
    pub send_timeout: Duration,
    /// How often an idle worker looks for due jobs (it is also woken when jobs are added).
    pub poll: Duration,
    /// How failed sends are retried.
    pub retry: RetryPolicy,
    /// Rounds run at once: while one round's sends wait for their answers, another leases
    /// and sends the next batch.
    pub rounds: usize,
    /// This node is one of a cluster: a device it holds no connection for may be connected to
    /// another node, so an `auto` push waits the ack window for every device (on one node,
    /// only for devices connected here; the others are offline and sent to at once).
    pub clustered: bool,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig {
            batch: 1000,
            lease: Duration::from_secs(60),
            expand_page: 1000,
            send_timeout: Duration::from_secs(30),
            poll: Duration::from_millis(250),
            retry: RetryPolicy::default(),
            rounds: 2,
            clustered: false,
        }
    }
}

/// What one attempt is for: the app, the provider, the job it runs for (its own send job, or
/// the expansion job of the broadcast page it is in), where the push sits in the log the device
/// acknowledges, and how many attempts this makes (1 for the first).
pub(super) struct Attempt<'a> {
    pub(super) app: &'a AppId,
    pub(super) job: i64,
    pub(super) provider: Option<Platform>,
    pub(super) seq: u64,
    pub(super) attempts: u32,
}

/// Runs provider jobs.
pub struct Deliverer {
    pub(super) queue: Arc<dyn JobQueue>,
    pub(super) registry: Arc<dyn DeviceRegistry>,
    engine: Arc<Engine>,
    senders: Arc<Senders>,
    stats: Arc<WorkerStats>,
    pub(super) config: DeliveryConfig,
    wake: Notify,
    /// The queue's rules: retries, and the pauses of app and provider pairs after a
    /// provider-wide retry.
    outbound: Outbound<Destination>,
    /// The WARN lines of dead letters and pauses, rate-limited.
    pub(super) failures: FailureLog,
    /// Whether rounds fail (said once when they start and once when they stop).
    round_failures: RoundFailures,
    records: Mutex<HashMap<(AppId, String), CachedRecord>>,
    /// The (app, provider) pairs whose depth gauges were last set.
    exported: Mutex<std::collections::HashSet<(String, String)>>,
    /// Broadcast expansions running beside the rounds (a round starts one and goes on
    /// sending, so the devices of a page expanded are sent to while the next page is read).
    expansions: TaskTracker,
    /// Tells expansions to stop between two pages (their lease then runs out, and the
    /// expansion resumes from its cursor after a restart).
    pub(super) stopping: CancellationToken,
    /// Told of each settled provider send and of devices deactivated ([`Deliverer::observe`]).
    pub(super) events: PushEvents,
}

/// The kinds of event a provider send's settlement may be told as.
const DELIVERY_KINDS: [PushEventKind; 3] = [
    PushEventKind::DeliveryProviderAccepted,
    PushEventKind::DeliveryFailed,
    PushEventKind::DeliveryDeadLettered,
];

/// A push's delivery record as cached (`None`: the push is gone or has none).
type CachedRecord = Option<Arc<DeliveryRecord>>;

/// How often the queue's depth is read for the metrics.
const DEPTH_EVERY: Duration = Duration::from_secs(5);

/// Most delivery records cached before the cache is emptied.
const RECORD_CACHE: usize = 4096;

impl Deliverer {
    /// A worker over `queue`, reading devices and push records from `registry`, live
    /// connections from `engine`, sending with `senders`.
    pub fn new(
        queue: Arc<dyn JobQueue>,
        registry: Arc<dyn DeviceRegistry>,
        engine: Arc<Engine>,
        senders: Arc<Senders>,
        stats: Arc<WorkerStats>,
        config: DeliveryConfig,
    ) -> Self {
        let outbound = Outbound::new(config.retry);
        Deliverer {
            queue,
            registry,
            engine,
            senders,
            stats,
            config,
            wake: Notify::new(),
            outbound,
            failures: FailureLog::default(),
            round_failures: RoundFailures::default(),
            records: Mutex::new(HashMap::new()),
            exported: Mutex::new(std::collections::HashSet::new()),
            expansions: TaskTracker::new(),
            stopping: CancellationToken::new(),
            events: PushEvents::default(),
        }
    }

    /// Tells `observer` of provider sends settled and devices deactivated from now on; `false`
    /// if an observer was already set (it stays).
    pub fn observe(&self, observer: Arc<dyn PushObserver>) -> bool {
        self.events.observe(observer)
    }

    /// The worker figures.
    pub fn stats(&self) -> &Arc<WorkerStats> {
        &self.stats
    }

    /// The provider clients.
    pub fn senders(&self) -> &Arc<Senders> {
        &self.senders
    }

    /// The job queue.
    pub fn queue(&self) -> &Arc<dyn JobQueue> {
        &self.queue
    }

    /// Wakes an idle worker (jobs due now were added).
    pub fn wake(&self) {
        // Every idle loop looks, and one that is busy looks again when its round ends.
        self.wake.notify_waiters();
        self.wake.notify_one();
    }

    /// The ack window an `auto` job waits when the device holds a live connection.
    pub(super) fn due_for(
        &self,
        app: &AppId,
        device: &str,
        record: &DeliveryRecord,
        now: i64,
    ) -> i64 {
        if record.delivery == Delivery::Auto
            && (self.config.clustered || self.engine.subscriber_count(&app.device_log(device)) > 0)
        {
            now + record.ack_window_ms as i64
        } else {
            now
        }
    }

    /// The provider jobs of a push just stored: one send job per targeted device that has a
    /// provider token (`devices`, with the push's seq in each device's log in `seqs`), or one
    /// expansion job for a broadcast (`devices` is `None`, `seqs[0]` is the app log's seq).
    pub fn plan_jobs(
        &self,
        app: &AppId,
        push: &str,
        record: &DeliveryRecord,
        devices: Option<&[Device]>,
        seqs: &[u64],
        now: i64,
    ) -> Vec<NewJob> {
        match devices {
            None => seqs
                .first()
                .map(|seq| NewJob {
                    app: app.clone(),
                    push: push.to_string(),
                    provider: None,
                    kind: JobKind::Expand { after: None },
                    seq: *seq,
                    due_ms: now,
                })
                .into_iter()
                .collect(),
            Some(devices) => devices
                .iter()
                .zip(seqs)
                .filter(|(d, _)| d.active && d.platform != Platform::Herald && d.token.is_some())
                .map(|(d, seq)| NewJob {
                    app: app.clone(),
                    push: push.to_string(),
                    provider: Some(d.platform),
                    kind: JobKind::Send {
                        device: d.id.clone(),
                    },
                    seq: *seq,
                    due_ms: self.due_for(app, &d.id, record, now),
                })
                .collect(),
        }
    }

    /// A device acknowledged `pushes` over a live connection: its queued `auto` send jobs of
    /// them settle as `live` now, instead of when their ack window ends. (A job already running
    /// checks the device's cursor itself.)
    pub async fn settle_acked(&self, app: &AppId, device: &str, pushes: &[String]) {
        let mut auto = Vec::new();
        for push in pushes {
            match self.record(app, push).await {
                Ok(Some(r)) if r.settled_by_ack() => auto.push(push.clone()),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not read a push's delivery record"),
            }
        }
        if let Err(e) = self
            .queue
            .settle_live(app, device, &auto, now_millis())
            .await
        {
            tracing::warn!(error = %e, "could not settle acknowledged provider jobs");
        }
    }

    /// Publishes the queue's depth per app and provider as Prometheus gauges
    /// (`herald_provider_jobs_queued`, `herald_provider_jobs_dead`,
    /// `herald_provider_oldest_job_seconds`).
    async fn export_depth(&self) {
        match self.queue.depth(None).await {
            Ok(depth) => {
                let now = now_millis();
                let mut exported = self.exported.lock();
                let seen: std::collections::HashSet<(String, String)> = depth
                    .iter()
                    .map(|d| {
                        let provider = d.provider.map_or("expand", |p| p.as_str());
                        (d.app.as_str().to_string(), provider.to_string())
                    })
                    .collect();
                // A pair whose jobs are all finished drops out of the depth: its gauges go to 0.
                for (app, provider) in exported.difference(&seen) {
                    let labels = [("app", app.clone()), ("provider", provider.clone())];
                    metrics::gauge!("herald_provider_jobs_queued", &labels).set(0.0);
                    metrics::gauge!("herald_provider_jobs_dead", &labels).set(0.0);
                    metrics::gauge!("herald_provider_oldest_job_seconds", &labels).set(0.0);
                }
                *exported = seen;
                drop(exported);
                for d in depth {
                    let labels = [
                        ("app", d.app.as_str().to_string()),
                        (
                            "provider",
                            d.provider.map_or("expand", |p| p.as_str()).to_string(),
                        ),
                    ];
                    metrics::gauge!("herald_provider_jobs_queued", &labels).set(d.queued as f64);
                    metrics::gauge!("herald_provider_jobs_dead", &labels).set(d.dead as f64);
                    let age = d
                        .oldest_ms
                        .map_or(0.0, |t| (now - t).max(0) as f64 / 1000.0);
                    metrics::gauge!("herald_provider_oldest_job_seconds", &labels).set(age);
                }
            }
            // While rounds fail, the round's line said why (the store is away, most often).
            Err(e) if self.round_failures.is_failing() => {
                tracing::debug!(error = %e.chain(), "could not read the job queue's depth")
            }
            Err(e) => tracing::warn!(error = %e.chain(), "could not read the job queue's depth"),
        }
    }

    /// Runs rounds until `stop`; a round in progress finishes (its sends are settled).
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut loops = tokio::task::JoinSet::new();
        for i in 0..self.config.rounds.max(1) {
            loops.spawn(self.clone().rounds(stop.clone(), i == 0));
        }
        while let Some(ended) = loops.join_next().await {
            if let Err(e) = ended {
                tracing::error!(error = %e, "a delivery loop failed");
            }
        }
        self.stopping.cancel();
        self.expansions.close();
        self.expansions.wait().await;
    }

    /// One loop of rounds; the first also exports the queue's depth. An idle loop waits
    /// `poll` (or a wake) between rounds; after a failed round it waits longer each time
    /// (`round_failures::retry_delay`), or until woken (jobs were added), or until the store,
    /// which had a fault, has none (it is back: provider pushes should not wait out the rest of
    /// a long backoff).
    async fn rounds(self: Arc<Self>, stop: CancellationToken, exports_depth: bool) {
        let mut depth_read: Option<Instant> = None;
        let mut failed_in_a_row = 0u32;
        loop {
            let (wait, store_fault) = match self.round().await {
                Ok(handled) => {
                    failed_in_a_row = 0;
                    self.round_failures.worked();
                    ((handled == 0).then_some(self.config.poll), false)
                }
                Err(e) => {
                    failed_in_a_row = failed_in_a_row.saturating_add(1);
                    let wait = self.round_failures.failed(&e, failed_in_a_row);
                    (Some(wait), self.engine.store_write_fault().is_some())
                }
            };
            // After the round, so that an outage is said by the round's line first.
            if exports_depth && depth_read.is_none_or(|at| at.elapsed() >= DEPTH_EVERY) {
                self.export_depth().await;
                depth_read = Some(Instant::now());
            }
            if stop.is_cancelled() {
                return;
            }
            if let Some(wait) = wait {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = self.wake.notified() => {}
                    _ = tokio::time::sleep(wait) => {}
                    _ = self.store_back(), if store_fault => {}
                }
            }
        }
    }

    /// Returns once the store reports no write fault (looked at every second, in memory).
    async fn store_back(&self) {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if self.engine.store_write_fault().is_none() {
                return;
            }
        }
    }

    /// Leases one batch of due jobs and runs it (expansions are started beside it); returns
    /// how many jobs it took.
    pub async fn round(self: &Arc<Self>) -> Result<usize, StoreError> {
        let now = now_millis();
        // Skips the app and provider pairs paused now.
        let jobs = self
            .outbound
            .lease(
                &*self.queue,
                now,
                self.config.batch,
                self.config.lease.as_millis() as i64,
            )
            .await?;
        let count = jobs.len();
        let mut sends: HashMap<AppId, Vec<Job>> = HashMap::new();
        for job in jobs {
            match job.job.kind {
                JobKind::Expand { .. } => {
                    let this = self.clone();
                    self.expansions.spawn(async move {
                        if let Err(e) = this.expand(job).await {
                            tracing::warn!(error = %e, "a broadcast expansion stopped; it resumes when its lease runs out");
                        }
                    });
                }
                JobKind::Send { .. } => sends.entry(job.job.app.clone()).or_default().push(job),
            }
        }
        let mut running = FuturesUnordered::new();
        for (app, jobs) in sends {
            let ids: Vec<String> = jobs
                .iter()
                .filter_map(|j| match &j.job.kind {
                    JobKind::Send { device } => Some(device.clone()),
                    JobKind::Expand { .. } => None,
                })
                .collect();
            let devices: HashMap<String, (Device, InboxCursor)> = self
                .registry
                .devices_by_id(&app, &ids)
                .await?
                .into_iter()
                .map(|(d, c)| (d.id.clone(), (d, c)))
                .collect();
            for job in jobs {
                let record = self.record(&app, &job.job.push).await?;
                let device = match &job.job.kind {
                    JobKind::Send { device } => devices.get(device).cloned(),
                    JobKind::Expand { .. } => None,
                };
                running.push(self.send_one(job, device, record));
            }
        }
        let mut settled = Vec::with_capacity(count);
        let mut told = Vec::new();
        while let Some((job, settlement, event)) = running.next().await {
            settled.push((job, settlement));
            told.extend(event);
        }
        if !settled.is_empty() {
            self.queue.settle(settled).await?;
        }
        // Committed: now they are facts.
        for event in &told {
            self.events.tell(event);
        }
        Ok(count)
    }

    /// The push's delivery record, cached.
    pub(super) async fn record(
        &self,
        app: &AppId,
        push: &str,
    ) -> Result<Option<Arc<DeliveryRecord>>, StoreError> {
        let key = (app.clone(), push.to_string());
        if let Some(found) = self.records.lock().get(&key) {
            return Ok(found.clone());
        }
        let record = self
            .registry
            .delivery_record(app, push)
            .await?
            .and_then(|bytes| DeliveryRecord::decode(&bytes))
            .map(Arc::new);
        let mut records = self.records.lock();
        if records.len() >= RECORD_CACHE {
            records.clear();
        }
        records.insert(key, record.clone());
        Ok(record)
    }

    async fn send_one(
        &self,
        job: Job,
        device: Option<(Device, InboxCursor)>,
        record: Option<Arc<DeliveryRecord>>,
    ) -> (i64, Settlement, Option<PushEvent>) {
        let attempt = Attempt {
            app: &job.job.app,
            job: job.id,
            provider: job.job.provider,
            seq: job.job.seq,
            attempts: job.attempts,
        };
        let (settlement, event) = self
            .observed_attempt(attempt, Some(&job.job.push), false, device, record)
            .await;
        (job.id, settlement, event)
    }

    /// Whether an observer wants `app`'s delivery events now.
    pub(super) fn observes_deliveries(&self, app: &AppId) -> bool {
        self.events.wants_any(app, &DELIVERY_KINDS)
    }

    /// [`Deliverer::attempt`] of push `push`, and the event its settlement is to be told as
    /// once committed (`None` when no observer wants the app's delivery events, or `push` is
    /// `None`: nothing is built then).
    pub(super) async fn observed_attempt(
        &self,
        attempt: Attempt<'_>,
        push: Option<&str>,
        broadcast: bool,
        device: Option<(Device, InboxCursor)>,
        record: Option<Arc<DeliveryRecord>>,
    ) -> (Settlement, Option<PushEvent>) {
        let watched = match (push, &device, &record, attempt.provider) {
            (Some(push), Some((device, _)), Some(record), Some(provider))
                if self.observes_deliveries(attempt.app) =>
            {
                let facts = DeliveryFacts {
                    app: attempt.app.clone(),
                    push: push.to_owned(),
                    job: attempt.job,
                    broadcast,
                    provider,
                    device: DeviceFacts::of(device),
                    attempts: attempt.attempts,
                };
                Some((facts, record.clone(), device.token.clone()))
            }
            _ => None,
        };
        let settlement = self.attempt(attempt, device, record).await;
        let event = watched.and_then(|(facts, record, token)| {
            PushEvent::of_settlement(facts, &settlement, |facts| {
                JobArguments::new(
                    &facts.push,
                    &facts.device.id,
                    facts.provider,
                    token.as_deref().unwrap_or_default(),
                    &record,
                )
            })
        });
        (settlement, event)
    }

    /// One attempt to deliver a push to a device through its provider, decided in this order:
    /// the push expired or is gone → `expired`; the device is gone or inactive → `inactive`; no
    /// token for the provider → `no_token`; an `auto` push the device acknowledged → `live`;
    /// no usable credentials → `no_credentials`; otherwise one provider send, whose
    /// [`Outcome`] settles it (a gone token also deactivates the device; a retry backs off, and
    /// pauses the app's provider when provider-wide). Sends are counted in the worker figures.
    pub(super) async fn attempt(
        &self,
        attempt: Attempt<'_>,
        device: Option<(Device, InboxCursor)>,
        record: Option<Arc<DeliveryRecord>>,
    ) -> Settlement {
        let done = |result: SendResult| Settlement::Done { result };
        let now = now_millis();
        let Some(record) = record.filter(|r| r.expires > now) else {
            return done(SendResult::Expired);
        };
        let Some((device, cursor)) = device.filter(|(d, _)| d.active) else {
            return done(SendResult::Inactive);
        };
        let Some(provider) = attempt.provider.filter(|p| *p == device.platform) else {
            return done(SendResult::NoToken);
        };
        let Some(token) = device.token.as_deref() else {
            return done(SendResult::NoToken);
        };
        if record.acked_live(&cursor, attempt.seq) {
            return done(ACKED.clone());
        }
        let app = attempt.app;
        let sender = match self.senders.get(app, provider).await {
            Ok(Ok(sender)) => sender,
            Ok(Err(NoSender::NoCredentials)) | Ok(Err(NoSender::Unusable(_))) => {
                return done(SendResult::NoCredentials)
            }
            Err(e) => return self.retry(&attempt, provider, e.to_string(), None, false),
        };
        let started = Instant::now();
        let outcome = tokio::time::timeout(
            self.config.send_timeout,
            sender.send(&device, &record.payloads, record.expires),
        )
        .await
        .unwrap_or_else(|_| Outcome::Retry {
            reason: "timeout".into(),
            after: None,
            scope: RetryScope::Notification,
        });
        let took = started.elapsed();
        match outcome {
            Outcome::Accepted { .. } => {
                self.stats.record(app, provider, took, SendEnd::Success);
                self.resume(app, provider);
                done(SendResult::Accepted)
            }
            Outcome::Unregistered { reason, since_ms } => {
                let why = format!("{}: {reason}", provider.as_str());
                let result = SendResult::Unregistered(reason);
                self.stats
                    .record(app, provider, took, SendEnd::Failure(&result.as_text()));
                match self
                    .registry
                    .deactivate_gone(app, &device.id, token, since_ms, &why)
                    .await
                {
                    Ok(true) => {
                        let kind = PushEventKind::DeviceDeactivated;
                        if let Some(observer) = self.events.wanting(app, kind) {
                            observer.on_push_event(&PushEvent::DeviceDeactivated {
                                app: app.clone(),
                                device: DeviceFacts::of(&device),
                                reason: why,
                            });
                        }
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!(
                        error = %e,
                        "could not deactivate a device whose token is gone"
                    ),
                }
                done(result)
            }
            Outcome::Rejected { reason } => {
                let result = SendResult::Rejected(reason);
                self.stats
                    .record(app, provider, took, SendEnd::Failure(&result.as_text()));
                done(result)
            }
            Outcome::Retry {
                reason,
                after,
                scope,
            } => {
                self.stats.record(app, provider, took, SendEnd::Retry);
                self.retry(
                    &attempt,
                    provider,
                    reason,
                    after,
                    scope == RetryScope::Provider,
                )
            }
        }
    }

    /// Settles a failed attempt as a retry (or a dead letter), pausing the app's provider when
    /// the failure is provider-wide.
    fn retry(
        &self,
        attempt: &Attempt<'_>,
        provider: Platform,
        reason: String,
        after: Option<Duration>,
        provider_wide: bool,
    ) -> Settlement {
        let destination = (attempt.app.clone(), provider);
        let failure = Failure {
            destination: &destination,
            attempts: attempt.attempts,
            retry_after: after,
            destination_wide: provider_wide,
        };
        let verdict = self.outbound.failed(failure, now_millis());
        if let Some(wait) = verdict.paused_for {
            self.failures
                .paused(attempt.app, provider, attempt.job, &reason, wait);
        }
        match verdict.next {
            Next::Retry { due_ms } => Settlement::Retry { due_ms, reason },
            Next::Dead => {
                self.failures.dead_letter(
                    attempt.app,
                    Some(provider),
                    attempt.job,
                    attempt.attempts,
                    &reason,
                );
                Settlement::Dead { reason }
            }
        }
    }

    /// A send went through: the app's provider is no longer paused (said once, at INFO).
    fn resume(&self, app: &AppId, provider: Platform) {
        if self.outbound.succeeded(&(app.clone(), provider)) {
            tracing::info!(app = %app.as_str(), provider = provider.as_str(), "provider sends work again for this app");
        }
    }
}
