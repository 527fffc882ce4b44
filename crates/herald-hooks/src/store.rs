//! [`HookStore`], the storage trait a store implements for webhooks (in the same database as
//! the apps: SQLite on one node, PostgreSQL shared by a cluster's nodes): the endpoints, and
//! the durable queue of their events.
//!
//! **The queue is per endpoint and in order.** Each queued event is one row for one endpoint,
//! due at the time of its event (a held `user.offline` at that time plus the endpoint's
//! offline delay). A worker leases an *endpoint* ([`HookStore::lease_batches`]), not single
//! events: with the lease it takes the endpoint's oldest due events, ordered by (due time, row
//! id), up to a batch's size, and sends them in one request. The batch grows with the
//! endpoint's backlog ([`Batching`]): an endpoint with more than the normal size due gets up to
//! [`Batching::most`] in one request, so a backlog drains in fewer, larger requests. One lease per endpoint at a time, across
//! every node, so an endpoint's events are sent in order and one batch at a time. A failed
//! batch makes the endpoint wait (its next attempt time, kept in the store, so every node and
//! a restarted one honour it); its events stay queued and are sent again, with whatever was
//! queued meanwhile, when the endpoint's turn comes. A batch that failed past the retry horizon
//! becomes dead letters, which stay until replayed or dropped.
//!
//! A lease that runs out unsettled (the node died mid-send) leaves its events queued: the next
//! lease sends them again, marked in doubt. Delivery is at least once; a receiver de-duplicates
//! on each event's id.
//!
//! **A user's presence alternates in the queue.** A lease marks the rows it took as in flight
//! until its end; a [`Settlement::Retry`] frees them (and a lease that ran out no longer
//! holds them: the next lease takes them again). A held `user.offline` is withdrawn by the
//! user's return ([`Hold::Online`], [`Hold::Withdraw`]) when it is not dead, due after the
//! return's time, and not in a live lease (one ending after the return's time) — whether or not
//! the endpoint holds a lease for other rows. A `user.online` that withdrew nothing is queued
//! due at its time or at the due time of the user's latest pending (not dead) `user.offline`
//! for that endpoint, whichever is later, so it follows that offline in the queue (a later row
//! at an equal due time), before and after a failed batch is retried. An endpoint that gets
//! both therefore hears a user's `user.online` and `user.offline` alternate, starting with an
//! online.

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;

use crate::endpoint::{EndpointId, StoredEndpoint};
use crate::event::EventType;

/// A queued event's row id (also a dead letter's id).
pub type RowId = i64;

/// A new endpoint to store: everything but its id and creation time, its secret sealed.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEndpoint {
    /// The app.
    pub app: AppId,
    /// Where batches go.
    pub url: String,
    /// A note.
    pub description: String,
    /// The event types, as a set.
    pub events: crate::event::EventSet,
    /// Channel patterns (empty: every channel).
    pub channels: Vec<String>,
    /// Whether events are queued for it.
    pub enabled: bool,
    /// The offline delay.
    pub offline_delay_ms: u32,
    /// The signing secret, sealed.
    pub secret: Vec<u8>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// How its requests are written and signed.
    pub format: crate::endpoint::Format,
}

/// Changes to an endpoint; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndpointPatch {
    /// A new URL.
    pub url: Option<String>,
    /// A new description.
    pub description: Option<String>,
    /// New event types.
    pub events: Option<crate::event::EventSet>,
    /// New channel patterns.
    pub channels: Option<Vec<String>>,
    /// Enabled or disabled.
    pub enabled: Option<bool>,
    /// A new offline delay.
    pub offline_delay_ms: Option<u32>,
}

/// How a queued `user` event is debounced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// A `user.offline`: queued due at its time plus the endpoint's offline delay, keyed by the
    /// user, so that the user's next `user.online` can withdraw it while it is not yet due.
    Offline {
        /// The user (the token's `sub`).
        user: Box<str>,
    },
    /// A `user.online`: withdraws the same endpoint's held `user.offline` of the same user that
    /// is not dead, due after this event's time and not in a live lease (the latest such, by
    /// due time then row); when it withdrew one, this event is not queued either (the user
    /// never went away, as far as the receiver hears). When it withdrew none it is queued due
    /// no earlier than the user's latest pending `user.offline` for the endpoint (see the
    /// [module documentation](self)).
    Online {
        /// The user.
        user: Box<str>,
    },
    /// A `user.online` for an endpoint that asked for `user.offline` but not `user.online`:
    /// withdraws what [`Hold::Online`] would, and is never queued itself (whether it withdrew
    /// one or not: the endpoint did not ask for it). Counted as `withdrawn` when it withdrew
    /// one, otherwise not counted at all; never dropped for a full queue.
    Withdraw {
        /// The user.
        user: Box<str>,
    },
}

/// One event queued for one endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Enqueue {
    /// The endpoint.
    pub endpoint: EndpointId,
    /// The event's id (`evt_...`).
    pub event_id: String,
    /// Its type.
    pub kind: EventType,
    /// When it may be sent, milliseconds since the Unix epoch (its time; a held offline's
    /// time plus the delay). The queue's order is (due, row id); a [`Hold::Online`] that
    /// withdraws nothing is queued at this or at its user's latest pending offline's due time,
    /// whichever is later.
    pub due_ms: i64,
    /// The event's JSON as sent.
    pub payload: String,
    /// How it is debounced, for `user.online` and `user.offline`.
    pub hold: Option<Hold>,
}

/// What [`HookStore::enqueue`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Enqueued {
    /// Events queued.
    pub queued: u64,
    /// `user.online`s ([`Hold::Online`] and [`Hold::Withdraw`]) that withdrew a held
    /// `user.offline` (neither is sent).
    pub withdrawn: u64,
    /// Events not queued because their endpoint's queue was full (or the endpoint is gone).
    pub dropped: u64,
}

/// One event of a leased batch.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedEvent {
    /// Its row.
    pub row: RowId,
    /// Its id.
    pub event_id: String,
    /// Its JSON.
    pub payload: String,
}

/// How many times the normal batch a backlogged endpoint's batch may grow to
/// ([`Batching::growing`]).
pub const BATCH_GROWTH: usize = 10;

/// Most events in one grown batch, whatever the normal size ([`Batching::growing`]).
pub const GROWN_BATCH_MAX: usize = 1_000;

/// How a lease cuts an endpoint's due events into a batch ([`HookStore::lease_batches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    /// The normal size (`hooks.batch_max`): an endpoint with this many events due is ready at
    /// once; otherwise when its oldest due event waited `delay_ms`.
    pub size: usize,
    /// Most events in one batch (at least `size`): a ready endpoint with more than `size` due
    /// gets up to this many.
    pub most: usize,
    /// How long the oldest due event waits for `size` events to be due (`hooks.batch_delay`).
    pub delay_ms: i64,
}

impl Batching {
    /// Batches of exactly up to `size` events (no growth).
    pub fn fixed(size: usize, delay_ms: i64) -> Batching {
        Batching {
            size,
            most: size,
            delay_ms,
        }
    }

    /// The worker's rule: batches of `size` normally; an endpoint with more than `size` events
    /// due gets up to [`BATCH_GROWTH`] times `size` in one request, at most
    /// [`GROWN_BATCH_MAX`] (and never fewer than `size`).
    pub fn growing(size: usize, delay_ms: i64) -> Batching {
        Batching {
            size,
            most: size
                .saturating_mul(BATCH_GROWTH)
                .min(GROWN_BATCH_MAX)
                .max(size),
            delay_ms,
        }
    }
}

/// An endpoint leased with its next batch.
#[derive(Debug, Clone, PartialEq)]
pub struct LeasedBatch {
    /// The endpoint, with its secrets (to sign) and URL (to send to).
    pub endpoint: StoredEndpoint,
    /// The lease's end, milliseconds since the Unix epoch: also the token [`HookStore::settle`]
    /// checks, so a lease that ran out and was taken by another worker is not settled twice.
    pub lease_until_ms: i64,
    /// The batch, in queue order (at least one event).
    pub events: Vec<QueuedEvent>,
    /// Failed attempts in a row before this one (0: the endpoint's last attempt succeeded).
    pub failures: u32,
    /// Since when the endpoint has been failing, when it is.
    pub failing_since_ms: Option<i64>,
    /// Whether a previous lease of this endpoint ran out unsettled (its batch may have been
    /// delivered).
    pub in_doubt: bool,
}

/// How a leased batch ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Settlement {
    /// The endpoint answered 2xx: the batch's rows are deleted, its failures reset.
    Delivered {
        /// The batch's rows.
        rows: Vec<RowId>,
    },
    /// It failed: the rows stay queued, no longer in flight (a held offline among them may be
    /// withdrawn again); the endpoint waits until `next_attempt_ms`.
    Retry {
        /// When the endpoint may be tried again.
        next_attempt_ms: i64,
        /// Why it failed, a short excerpt (kept as the endpoint's last error).
        reason: String,
    },
    /// It failed past the horizon: the rows become dead letters; the endpoint is tried again
    /// with its next batch at once.
    Dead {
        /// The batch's rows.
        rows: Vec<RowId>,
        /// Why.
        reason: String,
    },
}

/// A dead letter as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadEvent {
    /// Its row (the id to replay or drop it by).
    pub row: RowId,
    /// The endpoint it was for.
    pub endpoint: EndpointId,
    /// The event's id.
    pub event_id: String,
    /// Its type.
    pub kind: EventType,
    /// Its JSON.
    pub payload: String,
    /// The last failure.
    pub reason: String,
    /// When it died, milliseconds since the Unix epoch.
    pub died_ms: i64,
}

/// An endpoint's queue and delivery state, as the store keeps it (shared by a cluster's
/// nodes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointDepth {
    /// The endpoint.
    pub endpoint: EndpointId,
    /// Events queued (held offlines included).
    pub queued: u64,
    /// The oldest queued event's due time.
    pub oldest_due_ms: Option<i64>,
    /// Dead letters.
    pub dead: u64,
    /// Events delivered, ever.
    pub delivered: u64,
    /// Failed attempts in a row (0: the last attempt succeeded).
    pub failures: u32,
    /// Since when it has been failing.
    pub failing_since_ms: Option<i64>,
    /// When it may be tried next (0: now).
    pub next_attempt_ms: i64,
    /// The last failure's reason, while it is failing.
    pub last_error: Option<String>,
}

/// Why [`HookStore::create_endpoint`] stored no endpoint.
#[derive(Debug, thiserror::Error)]
pub enum CreateEndpointError {
    /// The app already has `max` endpoints (or more).
    #[error("the app already has {max} webhook endpoints")]
    TooMany {
        /// The most an app may have, as asked.
        max: usize,
    },
    /// The store failed; nothing was stored.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Endpoints and their queues (see the [module documentation](self)).
#[async_trait]
pub trait HookStore: Send + Sync {
    /// Stores a new endpoint and answers it with its id, unless its app already has
    /// `max_per_app` endpoints ([`CreateEndpointError::TooMany`]): the count and the insert are
    /// one step, so endpoints created at once (on any node) never take an app past it.
    async fn create_endpoint(
        &self,
        new: NewEndpoint,
        max_per_app: usize,
    ) -> Result<StoredEndpoint, CreateEndpointError>;
    /// Every endpoint (`app`: only that app's), in id order.
    async fn endpoints(&self, app: Option<&AppId>) -> Result<Vec<StoredEndpoint>, StoreError>;
    /// One endpoint of `app`.
    async fn endpoint(
        &self,
        app: &AppId,
        id: EndpointId,
    ) -> Result<Option<StoredEndpoint>, StoreError>;
    /// Changes an endpoint of `app`; `None` if there is none.
    async fn update_endpoint(
        &self,
        app: &AppId,
        id: EndpointId,
        patch: &EndpointPatch,
    ) -> Result<Option<StoredEndpoint>, StoreError>;
    /// Replaces an endpoint's secret with `secret` (sealed), the old one kept as its previous
    /// secret until `previous_until_ms`; `false` if there is no such endpoint of `app`.
    async fn rotate_secret(
        &self,
        app: &AppId,
        id: EndpointId,
        secret: Vec<u8>,
        previous_until_ms: i64,
    ) -> Result<bool, StoreError>;
    /// Deletes an endpoint of `app`, its queue and its dead letters; `false` if there is none.
    async fn delete_endpoint(&self, app: &AppId, id: EndpointId) -> Result<bool, StoreError>;

    /// Queues events (one transaction), applying each one's [`Hold`] in order (a return may
    /// withdraw an offline queued earlier in the same call); the rows queued get ids in the
    /// order of `events`. An endpoint already holding `max_queued` events (or deleted) gets
    /// none of them (counted as dropped; a [`Hold::Withdraw`] for a deleted endpoint is not
    /// counted).
    async fn enqueue(&self, events: Vec<Enqueue>, max_queued: u64) -> Result<Enqueued, StoreError>;
    /// Leases up to `limit` endpoints until `now_ms + lease_ms`, each with up to
    /// `batching.most` of its oldest events due at or before `now_ms`: enabled endpoints whose
    /// next attempt time has come, not leased (or whose lease ran out: in doubt), not in
    /// `paused`, and ready: `batching.size` events due, or the oldest due at or before
    /// `now_ms - batching.delay_ms`. Endpoints with the oldest due event first. The batch's
    /// rows are in flight until the lease's end (or its settlement).
    async fn lease_batches(
        &self,
        now_ms: i64,
        limit: usize,
        lease_ms: i64,
        batching: Batching,
        paused: &[EndpointId],
    ) -> Result<Vec<LeasedBatch>, StoreError>;
    /// [`HookStore::lease_batches`] with batches of up to `batch_max` events, ready with
    /// `batch_max` due or the oldest due `batch_delay_ms` ago ([`Batching::fixed`]).
    async fn lease(
        &self,
        now_ms: i64,
        limit: usize,
        lease_ms: i64,
        batch_max: usize,
        batch_delay_ms: i64,
        paused: &[EndpointId],
    ) -> Result<Vec<LeasedBatch>, StoreError> {
        let batching = Batching::fixed(batch_max, batch_delay_ms);
        self.lease_batches(now_ms, limit, lease_ms, batching, paused)
            .await
    }
    /// Settles leased batches (one transaction), each by its endpoint and lease token; a lease
    /// that is no longer held is left alone. Ends the lease.
    async fn settle(
        &self,
        now_ms: i64,
        settled: Vec<(EndpointId, i64, Settlement)>,
    ) -> Result<(), StoreError>;
    /// The earliest time at or after which [`HookStore::lease`] could find something (per
    /// enabled endpoint with events queued, its oldest due event, or its next attempt time or
    /// the end of its lease if later; the soonest of those), so a worker sleeps until then (the
    /// batch delay not added: it may be past); `None` when nothing is queued.
    async fn next_due(&self) -> Result<Option<i64>, StoreError>;
    /// Dead letters of `app` (`endpoint`: only that endpoint's), in row order after `after`.
    async fn dead_letters(
        &self,
        app: &AppId,
        endpoint: Option<EndpointId>,
        after: Option<RowId>,
        limit: usize,
    ) -> Result<Vec<DeadEvent>, StoreError>;
    /// Queues a dead letter of `app` again, due now (behind the endpoint's other due events);
    /// `false` if it is not one.
    async fn replay(&self, app: &AppId, row: RowId, now_ms: i64) -> Result<bool, StoreError>;
    /// Deletes a dead letter of `app`; `false` if it is not one.
    async fn drop_dead(&self, app: &AppId, row: RowId) -> Result<bool, StoreError>;
    /// Queue and delivery state of every endpoint (`app`: only that app's), in endpoint order.
    async fn depth(&self, app: Option<&AppId>) -> Result<Vec<EndpointDepth>, StoreError>;
}
