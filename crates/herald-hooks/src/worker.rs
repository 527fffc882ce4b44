//! The delivery worker: leases endpoints with their due batches ([`HookStore::lease_batches`]),
//! sends each batch ([`Sender`]) while the others are under way, and settles each one as it
//! ends ([`HookStore::settle`]).
//!
//! **A batch grows with the endpoint's backlog** ([`Batching::growing`]): an endpoint is ready
//! with `hooks.batch_max` events due (or its oldest due event waited `hooks.batch_delay`), and
//! a ready endpoint with more than `batch_max` due is sent up to 10 times `batch_max` (at most
//! 1,000) in one request. A quiet endpoint's batches stay `batch_max`; a backlog (a burst,
//! an endpoint that was down) drains in fewer, larger requests.
//!
//! - A 2xx answer delivers the batch (its rows are deleted).
//! - Any other end (an error status, a timeout, a refused destination, a redirect, a secret
//!   that does not open) is a failure: the endpoint waits, in the store, so every node honours
//!   it, for a step of backoff (herald-outbound's [`RetryPolicy`], 1 s doubling to 10 min, with
//!   jitter) or the endpoint's `Retry-After` (at most [`LONGEST_RETRY_AFTER`]), and its events
//!   are sent again with whatever was queued meanwhile. Once the endpoint has been failing
//!   longer than the retry horizon, the failed batch becomes dead letters (a WARN line says so,
//!   naming the app, the endpoint and its host, never its URL) and the endpoint goes on with
//!   its next batch.
//! - After [`PAUSE_AFTER`] failures in a row the endpoint counts as paused: each further
//!   attempt is a probe, and the first success says, once, that it delivers again.
//!
//! The loop ([`run_worker`]) keeps up to [`ENDPOINTS_AT_ONCE`] batches in flight, leasing again
//! as each ends; idle, it sleeps until the store's next due time (at most a second, so what
//! other nodes queue is picked up) or until the writer wakes it. Every [`DEPTH_EVERY`] it
//! refreshes the queue depth gauges.
//!
//! Metrics (labels `app` and `endpoint` id only, never a URL or a user):
//! `herald_hook_events_total{outcome="delivered|failed|dead"}`,
//! `herald_hook_requests_total{result="ok|http_4xx|http_5xx|timeout|connect|refused|redirect"}`,
//! `herald_hook_request_seconds` (histogram) and `herald_hook_queue_depth` (gauge).
//! [`describe_metrics`] describes them and the listener's and writer's
//! `herald_hook_events_dropped_total`: every metric of this crate.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_outbound::{LineLimiter, Outbound, RetryPolicy};
use herald_push::credentials::sealer::Sealer;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::endpoint::{EndpointId, Format};
use crate::listener::DROPPED_METRIC;
use crate::pusher;
use crate::seal;
use crate::sender::{batch_body, webhook_id, SendOutcome, Sender};
use crate::service::PusherSlot;
use crate::signing::SigningSecret;
use crate::store::{Batching, HookStore, LeasedBatch, Settlement};

/// Batches in flight at once (endpoints leased per lease).
pub const ENDPOINTS_AT_ONCE: usize = 16;

/// Failures in a row after which an endpoint counts as paused.
pub const PAUSE_AFTER: u32 = 5;

/// Longest `Retry-After` honoured as given.
pub const LONGEST_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// How failed batches back off: 1 s doubling to 10 min, with jitter, never giving up (the
/// retry horizon makes dead letters, not a count of attempts).
pub const RETRY: RetryPolicy = RetryPolicy {
    max_attempts: u32::MAX,
    base: Duration::from_secs(1),
    cap: Duration::from_secs(600),
};

/// Longest idle sleep: events other nodes queue are picked up within it.
const LONGEST_SLEEP: Duration = Duration::from_secs(1);

/// Shortest idle sleep (the store said something is due, but nothing could be leased).
const SHORTEST_SLEEP: Duration = Duration::from_millis(50);

/// Longest wait after failed leases in a row.
const LONGEST_STORE_BACKOFF: Duration = Duration::from_secs(30);

/// How often the queue depth gauges are refreshed.
pub const DEPTH_EVERY: Duration = Duration::from_secs(5);

/// Shortest time between two WARN lines of one endpoint and kind.
const LINES_EVERY: Duration = Duration::from_secs(10);

/// How the worker runs (from the `[hooks]` settings).
#[derive(Debug, Clone)]
pub(crate) struct WorkerSettings {
    /// Events per request normally (a backlog grows it, [`Batching::growing`]).
    pub(crate) batch_max: usize,
    /// How long the oldest due event waits for others to join its batch.
    pub(crate) batch_delay: Duration,
    /// How long an endpoint fails before its failed batches become dead letters.
    pub(crate) horizon: Duration,
    /// A request's timeout (a lease lasts twice as long and 5 s).
    pub(crate) request_timeout: Duration,
}

impl WorkerSettings {
    fn lease_ms(&self) -> i64 {
        (self.request_timeout * 2 + Duration::from_secs(5)).as_millis() as i64
    }
}

/// What a WARN line reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Line {
    Dead,
    Paused,
    Store,
}

/// How one leased batch ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BatchReport {
    /// The endpoint.
    pub(crate) endpoint: EndpointId,
    /// Events in the batch.
    pub(crate) events: usize,
    /// The request's outcome (`None`: no request, the secret did not open).
    pub(crate) outcome: Option<SendOutcome>,
    /// How it was settled.
    pub(crate) settlement: Settlement,
    /// Whether this success ended a pause (the endpoint had failed [`PAUSE_AFTER`] times or
    /// more in a row).
    pub(crate) resumed: bool,
}

/// The webhook delivery worker (see the [module documentation](self)).
pub(crate) struct Worker {
    store: Arc<dyn HookStore>,
    sender: Sender,
    sealer: Arc<Sealer>,
    settings: WorkerSettings,
    /// The retry policy, and which endpoints count as paused on this node.
    outbound: Outbound<EndpointId>,
    /// Poked when events due now were queued.
    wake: Arc<Notify>,
    /// WARN lines, at most one per endpoint and kind every [`LINES_EVERY`].
    lines: LineLimiter<(EndpointId, Line)>,
    /// The endpoints whose depth gauge was last set, with their app.
    exported: parking_lot::Mutex<HashSet<(String, String)>>,
    /// What Pusher endpoints' requests are signed with, once the server gave it.
    pusher: PusherSlot,
}

/// Describes every metric of this crate (the worker's, and the events the listener and the
/// writer drop), so `/metrics` has a `# HELP` line for each. Call it once the recorder is
/// installed.
pub fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "herald_hook_events_total",
        "Webhook events by app, endpoint and outcome (delivered, failed: to be retried, dead)."
    );
    describe_counter!(
        "herald_hook_requests_total",
        "Webhook requests by app, endpoint and result (ok, http_4xx, http_5xx, timeout, \
         connect, refused, redirect)."
    );
    describe_histogram!(
        "herald_hook_request_seconds",
        "Time one webhook request took, seconds, by app and endpoint."
    );
    describe_gauge!(
        "herald_hook_queue_depth",
        "Webhook events queued, by app and endpoint (refreshed every 5 s)."
    );
    describe_counter!(
        DROPPED_METRIC,
        "Webhook events dropped before they were queued, by reason (node_queue_full: this \
         node's queue was full; endpoint_full: the endpoint's queue in the store was full)."
    );
}

/// Runs the delivery worker of `hooks` until `shutdown`; the batches under way then finish
/// (each within the request timeout) and are settled.
pub async fn run_worker(hooks: Arc<crate::service::Hooks>, shutdown: CancellationToken) {
    let config = hooks.config();
    let settings = WorkerSettings {
        batch_max: config.batch_max,
        batch_delay: config.batch_delay,
        horizon: config.horizon,
        request_timeout: config.request_timeout,
    };
    let worker = Worker::new(
        hooks.store().clone(),
        hooks.sender().clone(),
        hooks.sealer().clone(),
        settings,
        hooks.worker_wake().clone(),
    )
    .with_pusher(hooks.pusher_slot().clone());
    Arc::new(worker).run(shutdown).await;
}

/// The metric labels of `app`'s endpoint `id`.
fn labels(app: &AppId, id: EndpointId) -> [(&'static str, String); 2] {
    [
        ("app", app.as_str().to_string()),
        ("endpoint", id.to_string()),
    ]
}

/// The host of `url` (what a log line names; the URL's path and query may hold secrets).
fn host_of(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default()
}

impl Worker {
    pub(crate) fn new(
        store: Arc<dyn HookStore>,
        sender: Sender,
        sealer: Arc<Sealer>,
        settings: WorkerSettings,
        wake: Arc<Notify>,
    ) -> Worker {
        Worker {
            store,
            sender,
            sealer,
            settings,
            outbound: Outbound::new(RETRY),
            wake,
            lines: LineLimiter::new(LINES_EVERY),
            exported: parking_lot::Mutex::new(HashSet::new()),
            pusher: PusherSlot::default(),
        }
    }

    /// The worker, signing Pusher endpoints' requests with what `pusher` holds once given.
    pub(crate) fn with_pusher(mut self, pusher: PusherSlot) -> Worker {
        self.pusher = pusher;
        self
    }

    /// Leases up to `slots` endpoints with their due batches at `now_ms`.
    async fn lease(&self, now_ms: i64, slots: usize) -> Result<Vec<LeasedBatch>, StoreError> {
        let paused = self.outbound.pauses().paused(now_ms);
        let batching = Batching::growing(
            self.settings.batch_max,
            self.settings.batch_delay.as_millis() as i64,
        );
        self.store
            .lease_batches(now_ms, slots, self.settings.lease_ms(), batching, &paused)
            .await
    }

    /// One round at `now_ms` (tests drive the worker with these): leases, sends every batch
    /// at once, settles each at `now_ms`.
    #[cfg(test)]
    pub(crate) async fn round(&self, now_ms: i64) -> Result<Vec<BatchReport>, StoreError> {
        let batches = self.lease(now_ms, ENDPOINTS_AT_ONCE).await?;
        let sends = batches.into_iter().map(|b| self.deliver(b, Some(now_ms)));
        Ok(futures_util::future::join_all(sends).await)
    }

    /// Sends one leased batch and settles it (at `at_ms`, or when the request ended).
    async fn deliver(&self, batch: LeasedBatch, at_ms: Option<i64>) -> BatchReport {
        let stored = &batch.endpoint;
        let (app, id) = (&stored.endpoint.app, stored.endpoint.id);
        let labels = labels(app, id);
        let events = batch.events.len();
        let signed_at = at_ms.unwrap_or_else(now_millis);
        let sent = match stored.endpoint.format {
            Format::Standard => match seal::signing_secrets(&self.sealer, stored, signed_at) {
                Ok(secrets) => {
                    let refs: Vec<&SigningSecret> = secrets.iter().collect();
                    let message = webhook_id(&batch.events[0].event_id, events);
                    let body = batch_body(&batch.events);
                    Ok(self.sender.send(stored, &refs, &message, body).await)
                }
                Err(e) => Err(format!("the endpoint's signing secret: {e}")),
            },
            // Signed with the app's Pusher secret; without one the events wait (retried).
            Format::Pusher => {
                let pusher = self.pusher.get();
                pusher::send_batch(&self.sender, pusher, stored, &batch.events, signed_at).await
            }
        };
        let outcome = match sent {
            Ok(outcome) => {
                let result = outcome.result.label();
                metrics::counter!(
                    "herald_hook_requests_total",
                    &[
                        ("app", labels[0].1.clone()),
                        ("endpoint", labels[1].1.clone()),
                        ("result", result.to_string()),
                    ]
                )
                .increment(1);
                metrics::histogram!("herald_hook_request_seconds", &labels)
                    .record(outcome.latency.as_secs_f64());
                Ok(outcome)
            }
            Err(reason) => Err(reason),
        };
        let now = at_ms.unwrap_or_else(now_millis);
        let mut resumed = false;
        let settlement = match &outcome {
            Ok(outcome) if outcome.result.delivered() => {
                // The store's count of failures in a row says whether it was paused, whichever
                // node saw the failures (and across restarts); the success resets it, so this
                // is said once.
                self.outbound.succeeded(&id);
                resumed = batch.failures >= PAUSE_AFTER;
                if resumed {
                    tracing::info!(
                        app = %app.as_str(),
                        endpoint = id,
                        failures = batch.failures,
                        "webhook endpoint {id} delivers again"
                    );
                }
                Settlement::Delivered {
                    rows: batch.events.iter().map(|e| e.row).collect(),
                }
            }
            Ok(outcome) => self.failed(
                &batch,
                outcome.result.reason(),
                outcome.result.retry_after(),
                now,
            ),
            Err(reason) => self.failed(&batch, reason.clone(), None, now),
        };
        let ended = match &settlement {
            Settlement::Delivered { .. } => "delivered",
            Settlement::Retry { .. } => "failed",
            Settlement::Dead { .. } => "dead",
        };
        metrics::counter!(
            "herald_hook_events_total",
            &[
                ("app", labels[0].1.clone()),
                ("endpoint", labels[1].1.clone()),
                ("outcome", ended.to_string()),
            ]
        )
        .increment(events as u64);
        let settled = vec![(id, batch.lease_until_ms, settlement.clone())];
        if let Err(e) = self.store.settle(now, settled).await {
            // The lease runs out and the batch is sent again (in doubt).
            self.warn_store(&e, id);
        }
        BatchReport {
            endpoint: id,
            events,
            outcome: outcome.ok(),
            settlement,
            resumed,
        }
    }

    /// How long an endpoint waits after its attempt `attempts` (1 for the first) failed: its
    /// `Retry-After` (at most [`LONGEST_RETRY_AFTER`]), or a step of backoff.
    pub(crate) fn retry_wait(&self, attempts: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(after) => after.min(LONGEST_RETRY_AFTER),
            None => {
                let policy = self.outbound.policy();
                policy.next_attempt(attempts, None).unwrap_or(policy.cap)
            }
        }
    }

    /// A failed batch at `now_ms`: dead letters once the endpoint has failed longer than the
    /// horizon, otherwise a retry after [`Worker::retry_wait`] (the endpoint counting as
    /// paused from its [`PAUSE_AFTER`]th failure in a row).
    fn failed(
        &self,
        batch: &LeasedBatch,
        reason: String,
        retry_after: Option<Duration>,
        now_ms: i64,
    ) -> Settlement {
        let endpoint = &batch.endpoint.endpoint;
        let id = endpoint.id;
        let attempts = batch.failures.saturating_add(1);
        let failing_since = batch.failing_since_ms.unwrap_or(now_ms);
        if now_ms - failing_since >= self.settings.horizon.as_millis() as i64 {
            if let Some(held_back) = self.lines.admit((id, Line::Dead), Instant::now()) {
                tracing::warn!(
                    app = %endpoint.app.as_str(),
                    endpoint = id,
                    host = %host_of(&endpoint.url),
                    attempts,
                    events = batch.events.len(),
                    reason = %reason,
                    held_back,
                    "webhook batch failed past the retry horizon: its events are dead letters \
                     (`herald hooks dead` lists them; replay them once the endpoint works)"
                );
            }
            return Settlement::Dead {
                rows: batch.events.iter().map(|e| e.row).collect(),
                reason,
            };
        }
        let wait = self.retry_wait(attempts, retry_after);
        if attempts >= PAUSE_AFTER {
            self.outbound.pauses().pause(&id, now_ms, Some(wait));
            if attempts == PAUSE_AFTER {
                if let Some(held_back) = self.lines.admit((id, Line::Paused), Instant::now()) {
                    tracing::warn!(
                        app = %endpoint.app.as_str(),
                        endpoint = id,
                        host = %host_of(&endpoint.url),
                        attempts,
                        reason = %reason,
                        held_back,
                        "webhook endpoint paused after {PAUSE_AFTER} failures in a row: its \
                         events wait, and each further attempt is a probe"
                    );
                }
            }
        }
        Settlement::Retry {
            next_attempt_ms: now_ms.saturating_add(wait.as_millis() as i64),
            reason,
        }
    }

    /// A store error, said at most every [`LINES_EVERY`] for the endpoint (0: the lease).
    fn warn_store(&self, e: &StoreError, endpoint: EndpointId) {
        match self.lines.admit((endpoint, Line::Store), Instant::now()) {
            Some(held_back) => tracing::warn!(
                error = %e.chain(),
                endpoint,
                held_back,
                "webhook delivery could not reach the store; it goes on when the store is back \
                 (a leased batch is sent again when its lease runs out)"
            ),
            None => tracing::debug!(error = %e.chain(), "webhook delivery: store error"),
        }
    }

    /// How long an idle loop sleeps at `now_ms`: until the store's next due time and the
    /// batch delay, within [`SHORTEST_SLEEP`] and [`LONGEST_SLEEP`].
    async fn idle_sleep(&self, now_ms: i64) -> Duration {
        match self.store.next_due().await {
            Ok(Some(due_ms)) => {
                let ready = due_ms.saturating_add(self.settings.batch_delay.as_millis() as i64);
                let wait = Duration::from_millis(ready.saturating_sub(now_ms).max(0) as u64);
                wait.clamp(SHORTEST_SLEEP, LONGEST_SLEEP)
            }
            Ok(None) => LONGEST_SLEEP,
            Err(e) => {
                self.warn_store(&e, 0);
                LONGEST_SLEEP
            }
        }
    }

    /// Sets `herald_hook_queue_depth{app,endpoint}` from the store (an endpoint deleted since
    /// the last time goes to 0).
    async fn export_depth(&self) {
        let read = async {
            let apps: HashMap<EndpointId, AppId> = self
                .store
                .endpoints(None)
                .await?
                .into_iter()
                .map(|s| (s.endpoint.id, s.endpoint.app))
                .collect();
            let depth = self.store.depth(None).await?;
            Ok::<_, StoreError>((apps, depth))
        };
        let (apps, depth) = match read.await {
            Ok(read) => read,
            Err(e) => return self.warn_store(&e, 0),
        };
        let mut now_exported = HashSet::new();
        for d in depth {
            let Some(app) = apps.get(&d.endpoint) else {
                continue;
            };
            let labels = labels(app, d.endpoint);
            metrics::gauge!("herald_hook_queue_depth", &labels).set(d.queued as f64);
            let [(_, app), (_, endpoint)] = labels;
            now_exported.insert((app, endpoint));
        }
        let mut exported = self.exported.lock();
        for (app, endpoint) in exported.difference(&now_exported) {
            let labels = [("app", app.clone()), ("endpoint", endpoint.clone())];
            metrics::gauge!("herald_hook_queue_depth", &labels).set(0.0);
        }
        *exported = now_exported;
    }

    /// The loop (see the [module documentation](self)) until `shutdown`; the batches under way
    /// then finish and are settled.
    pub(crate) async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let mut running: JoinSet<()> = JoinSet::new();
        let mut depth_read: Option<Instant> = None;
        let mut failed_leases = 0u32;
        while !shutdown.is_cancelled() {
            if depth_read.is_none_or(|at| at.elapsed() >= DEPTH_EVERY) {
                self.export_depth().await;
                depth_read = Some(Instant::now());
            }
            let now = now_millis();
            let slots = ENDPOINTS_AT_ONCE.saturating_sub(running.len());
            let sleep = if slots == 0 {
                // Every slot is taken: the next batch to end frees one.
                LONGEST_SLEEP
            } else {
                match self.lease(now, slots).await {
                    Ok(batches) if batches.is_empty() => {
                        failed_leases = 0;
                        self.idle_sleep(now).await
                    }
                    Ok(batches) => {
                        failed_leases = 0;
                        for batch in batches {
                            let worker = self.clone();
                            running.spawn(async move {
                                worker.deliver(batch, None).await;
                            });
                        }
                        // More may be due: lease again at once.
                        Duration::ZERO
                    }
                    Err(e) => {
                        failed_leases = failed_leases.saturating_add(1);
                        self.warn_store(&e, 0);
                        Duration::from_secs(1 << failed_leases.min(5)).min(LONGEST_STORE_BACKOFF)
                    }
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => {}
                Some(ended) = running.join_next(), if !running.is_empty() => {
                    if let Err(e) = ended {
                        tracing::error!(error = %e, "a webhook delivery task failed");
                    }
                }
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(sleep) => {}
            }
        }
        while running.join_next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests;
