//! The provider job queue: what a provider job is, and the [`JobQueue`] the store implements.
//! Its rules (exponential backoff with jitter, `Retry-After` honoured, a dead letter after
//! [`MAX_ATTEMPTS`], pauses per destination, dead letters replayed or dropped) are the
//! outbound queue's, `herald-outbound`, whose first user this is: a provider job's
//! destination is its app and provider, and [`JobQueue`] is its [`OutboundStore`] (below).
//!
//! A job is one of two kinds:
//! - **send**: deliver one push to one device through its provider (APNs, FCM, Web Push);
//! - **expand**: turn a broadcast or tag push into send jobs, a page of devices at a time,
//!   moving its own cursor (`after`, a device id) in the same transaction that adds the page's
//!   send jobs, so an expansion interrupted by a crash resumes where it stopped and never adds a
//!   device twice.
//!
//! A broadcast expansion also *sends* each page directly ([`JobQueue::mark_in_flight`] before
//! the sends, [`JobQueue::expand_page`] after their answers): a device the provider accepts
//! costs no job row, only a count on the push; every other device gets a row as before.
//!
//! A job is *leased* while a worker runs it. A lease that runs out without a settlement (the
//! process died) makes the job due again, and the store marks it `in_doubt`: its provider send
//! may have happened, so a second one may be a duplicate, and the receipt says so.

use std::borrow::Cow;

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_outbound::OutboundStore;
use herald_proto::SendResult;

use crate::device::Platform;

pub use herald_outbound::{JobId, RetryPolicy, BACKOFF_BASE, BACKOFF_CAP, MAX_ATTEMPTS};

/// What a job does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobKind {
    /// Send the push to this device (its provider is the job's `provider`).
    Send {
        /// Device id.
        device: String,
    },
    /// Expand a broadcast or tag push into send jobs, from the device after `after`.
    Expand {
        /// Last device id already expanded (`None`: from the start).
        after: Option<String>,
    },
}

/// A job to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// The app whose credentials and devices it uses.
    pub app: AppId,
    /// The push it delivers.
    pub push: String,
    /// The provider (`None` for an expansion, which covers every provider).
    pub provider: Option<Platform>,
    /// What it does.
    pub kind: JobKind,
    /// Where the push sits in the log the device acknowledges (its own log for a device or
    /// user push, the app's broadcast log for a broadcast): a device whose inbox cursor reached
    /// it has the push, and an `auto` send job settles as `live`.
    pub seq: u64,
    /// When it may run, milliseconds since the Unix epoch (`auto` pushes: after the ack window).
    pub due_ms: i64,
}

/// A job as a worker holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Its id.
    pub id: JobId,
    /// The job itself.
    pub job: NewJob,
    /// Attempts including this one.
    pub attempts: u32,
    /// Whether an earlier attempt's lease ran out unsettled (its send may have happened).
    pub in_doubt: bool,
    /// When it was added, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// An expansion only: the last device of the pages it was sending directly when it last
    /// ran. Devices after its cursor up to this one may have been sent to already (a process
    /// stopped mid-page): a send to them again is in doubt.
    pub in_flight_until: Option<String>,
}

/// A send job row that an expansion page writes: a device that waits (an `auto` push to a
/// connected device), or one whose direct send needs a row (every result except `accepted`
/// not in doubt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageJob {
    /// The send job.
    pub job: NewJob,
    /// `None`: not tried, queued until `job.due_ms`. Otherwise how its direct send, one attempt,
    /// ended: `Done` (a finished row with that result), `Retry` (queued again at its time),
    /// `Dead` (a dead letter).
    pub sent: Option<Settlement>,
    /// Whether the send may have been a duplicate (its page was in flight when a process
    /// stopped).
    pub in_doubt: bool,
}

/// What one page of a broadcast expansion leaves behind once its direct sends have answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpandedPage {
    /// Send job rows to add.
    pub jobs: Vec<PageJob>,
    /// Results of direct sends that need no row (`accepted`, not in doubt), by the string form
    /// of their [`SendResult`], counted on the push only.
    pub counted: Vec<(String, u64)>,
}

/// How a leased job ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// Finished; `result` is what happened ([`SendResult`]; receipts and `herald jobs` show
    /// its string form: `live`, `accepted`, `unregistered:REASON`, `rejected:REASON`,
    /// `expired`, `inactive`, `no_token`, `no_credentials`).
    Done {
        /// What happened.
        result: SendResult,
    },
    /// Run again at `due_ms`; `reason` is why this attempt failed.
    Retry {
        /// When, milliseconds since the Unix epoch.
        due_ms: i64,
        /// Why.
        reason: String,
    },
    /// Give up: a dead letter with `reason`.
    Dead {
        /// Why.
        reason: String,
    },
}

impl Settlement {
    /// What a job row's `result` holds once settled like this: the result's string form
    /// ([`SendResult::as_text`]) when done, otherwise why the attempt failed.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Settlement::Done { result } => result.as_text(),
            Settlement::Retry { reason, .. } | Settlement::Dead { reason } => Cow::Borrowed(reason),
        }
    }
}

/// A provider job's dead letter as listed.
pub type DeadLetter = herald_outbound::DeadLetter<NewJob>;

/// Where a provider job goes, as far as pauses go: an app's provider.
pub type Destination = (AppId, Platform);

/// Queue depth for one app and provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Depth {
    /// The app.
    pub app: AppId,
    /// The provider (`None`: expansions).
    pub provider: Option<Platform>,
    /// Jobs waiting or running.
    pub queued: u64,
    /// When the oldest of them was added, milliseconds since the Unix epoch.
    pub oldest_ms: Option<i64>,
    /// Dead letters.
    pub dead: u64,
}

/// How the provider jobs of one push ended and stand, per result (the string form of a
/// [`SendResult`]: `accepted`, `live`, `rejected:BadDeviceToken`, ...), plus those still
/// queued, dead, and in doubt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushJobs {
    /// Finished send jobs by result.
    pub done: Vec<(String, u64)>,
    /// Send jobs waiting or running.
    pub queued: u64,
    /// Dead letters.
    pub dead: u64,
    /// Send jobs that were in flight when a process stopped (a duplicate provider push is
    /// possible for these devices).
    pub in_doubt: u64,
    /// Whether an expansion of the push is still running.
    pub expanding: bool,
}

/// One device's provider job for a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceJob {
    /// Device id.
    pub device: String,
    /// Provider.
    pub provider: Platform,
    /// `queued`, `running`, `done` or `dead`.
    pub state: String,
    /// What happened (done) or the last failure (queued again, dead).
    pub result: Option<String>,
    /// Attempts made.
    pub attempts: u32,
    /// Whether a send may have been duplicated.
    pub in_doubt: bool,
}

/// The durable job queue, implemented by `herald-store` in the same database as the devices.
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Adds jobs (one transaction).
    async fn enqueue(&self, jobs: Vec<NewJob>) -> Result<(), StoreError>;
    /// Leases up to `limit` due jobs (due at or before `now_ms`, or leased with a lease that ran
    /// out, which marks them in doubt) until `now_ms + lease_ms`, oldest due first, skipping
    /// the `(app, provider)` pairs in `paused`. Each lease counts an attempt.
    async fn lease(
        &self,
        now_ms: i64,
        limit: usize,
        lease_ms: i64,
        paused: &[(AppId, Platform)],
    ) -> Result<Vec<Job>, StoreError>;
    /// Settles leased jobs (one transaction). A job no longer leased is left alone.
    async fn settle(&self, settled: Vec<(JobId, Settlement)>) -> Result<(), StoreError>;
    /// Settles `device`'s queued (not running) send jobs of `pushes` as `live`: the device
    /// acknowledged those pushes over a live connection, so no provider push is needed.
    /// Returns how many jobs it settled.
    async fn settle_live(
        &self,
        app: &AppId,
        device: &str,
        pushes: &[String],
        now_ms: i64,
    ) -> Result<u64, StoreError>;
    /// In one transaction: adds `page`'s send jobs and moves expansion `job`'s cursor to
    /// `next` (`None`: the expansion is finished and settles as done). The lease is renewed
    /// until `now_ms + lease_ms`. (An [`JobQueue::expand_page`] whose jobs are all untried.)
    async fn expand(
        &self,
        job: JobId,
        page: Vec<NewJob>,
        next: Option<String>,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<(), StoreError> {
        let page = ExpandedPage {
            jobs: page
                .into_iter()
                .map(|job| PageJob {
                    job,
                    sent: None,
                    in_doubt: false,
                })
                .collect(),
            counted: Vec::new(),
        };
        self.expand_page(job, page, next, now_ms, lease_ms).await
    }
    /// Records durably, before a page's direct sends start, that expansion `job` may send to
    /// the devices after its cursor up to `until` (kept as [`Job::in_flight_until`]; it only
    /// ever moves forward, so calling it again with an older device, or `""`, just renews the
    /// lease).
    /// Renews the lease until `now_ms + lease_ms`. Fails if `job` is not a leased expansion.
    async fn mark_in_flight(
        &self,
        job: JobId,
        until: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<(), StoreError>;
    /// In one transaction, once a page's direct sends have answered: adds `page`'s job rows
    /// (a device the push already has a job for is left out), adds its results to the push's
    /// counters, and moves expansion `job`'s cursor to `next` (`None`: the expansion is finished
    /// and settles as done). The lease is renewed until `now_ms + lease_ms`. Refuses a job that
    /// is not a leased expansion and rows for another app or push.
    async fn expand_page(
        &self,
        job: JobId,
        page: ExpandedPage,
        next: Option<String>,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<(), StoreError>;
    /// Dead letters of an app, in id order after `after`.
    async fn dead_letters(
        &self,
        app: &AppId,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, StoreError>;
    /// Makes a dead letter due now with its attempts reset; `false` if it is not a dead letter
    /// of this app.
    async fn replay(&self, app: &AppId, id: JobId, now_ms: i64) -> Result<bool, StoreError>;
    /// Deletes a dead letter; `false` if it is not a dead letter of this app.
    async fn drop_dead(&self, app: &AppId, id: JobId) -> Result<bool, StoreError>;
    /// Queue depth and dead letters per app and provider (`app`: only that app's).
    async fn depth(&self, app: Option<&AppId>) -> Result<Vec<Depth>, StoreError>;
    /// How a push's jobs stand, read from counters kept as jobs move (its cost does not grow
    /// with the number of devices). Results of direct sends that left no row are counted too.
    async fn push_jobs(&self, app: &AppId, push: &str) -> Result<PushJobs, StoreError>;
    /// A push's send jobs per device, in device order after `after`. Only devices with a job
    /// row are listed: a device a broadcast page sent to directly and that the provider
    /// accepted (not in doubt) has none; it is counted in [`JobQueue::push_jobs`]
    /// (`Deliverer::device_listing` adds such devices to a receipt's list).
    async fn device_jobs(
        &self,
        app: &AppId,
        push: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeviceJob>, StoreError>;
    /// Deletes finished send jobs (done) of pushes that expired before `before_ms`; returns
    /// how many.
    async fn prune(&self, before_ms: i64) -> Result<u64, StoreError>;
}

/// The provider queue as the outbound queue sees it: a provider job's destination is its app
/// and provider, its dead letters are an app's. Every store's [`JobQueue`] is one.
#[async_trait]
impl<'q> OutboundStore for dyn JobQueue + 'q {
    type Destination = Destination;
    type Leased = Job;
    type Settlement = Settlement;
    type Owner = AppId;
    type Job = NewJob;
    type Depth = Depth;

    async fn lease(
        &self,
        now_ms: i64,
        limit: usize,
        lease_ms: i64,
        paused: &[Destination],
    ) -> Result<Vec<Job>, StoreError> {
        JobQueue::lease(self, now_ms, limit, lease_ms, paused).await
    }

    async fn settle(&self, settled: Vec<(JobId, Settlement)>) -> Result<(), StoreError> {
        JobQueue::settle(self, settled).await
    }

    async fn dead_letters(
        &self,
        app: &AppId,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, StoreError> {
        JobQueue::dead_letters(self, app, after, limit).await
    }

    async fn replay(&self, app: &AppId, id: JobId, now_ms: i64) -> Result<bool, StoreError> {
        JobQueue::replay(self, app, id, now_ms).await
    }

    async fn drop_dead(&self, app: &AppId, id: JobId) -> Result<bool, StoreError> {
        JobQueue::drop_dead(self, app, id).await
    }

    async fn depth(&self, app: Option<&AppId>) -> Result<Vec<Depth>, StoreError> {
        JobQueue::depth(self, app).await
    }
}
