//! A broadcast or tag push's expansion, sending each page of its audience directly.
//!
//! For each page of devices (in id order after the expansion's cursor):
//! - a device that must wait (an `auto` push to a device holding a live connection) gets a send
//!   job due when the ack window ends, as before;
//! - every other device is sent to at once from the page, with the decisions a send job gets
//!   (`Deliverer::attempt`), at most `batch` sends in flight per expansion;
//! - once the page's sends have answered, one transaction ([`crate::jobs::JobQueue::expand_page`]) adds the
//!   page's results to the push's counters, writes a job row for every device except one the
//!   provider accepted (not in doubt), and moves the cursor past the page. A device the
//!   provider accepted, the common case, costs no row; one that waits, retries, is a dead
//!   letter, failed, was skipped or was in doubt has one, listed per device as before.
//!
//! Crash safety: before a send starts, the devices up to the end of its chunk (`batch` devices)
//! are marked in flight on the expansion job ([`crate::jobs::JobQueue::mark_in_flight`], durable). After a
//! crash the expansion is leased again and finds the mark past its cursor: it sends those
//! devices again and records them in doubt (a duplicate provider push is possible for them and
//! only them). The lease is renewed while pages run, so a slow provider does not let it lapse.
//!
//! Pipelining: the next page is read, and its sends start, while the current page's sends wait
//! for their answers; at most [`PAGES_IN_FLIGHT`] pages are between their first send and their
//! transaction, so the in-flight mark spans at most two pages.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_proto::SendResult;

use crate::audience::Audience;
use crate::delivery::page_sends::PageSends;
use crate::delivery::record::DeliveryRecord;
use crate::delivery::worker::{Attempt, Deliverer};
use crate::device::{Device, InboxCursor, Platform};
use crate::jobs::{ExpandedPage, Job, JobId, JobKind, NewJob, PageJob, Settlement};
use crate::push_events::PushEvent;
use crate::registry::DeviceQuery;

/// Pages of one expansion between their first send and their transaction.
pub const PAGES_IN_FLIGHT: usize = 2;

/// One device's direct send, as its page's transaction needs it.
struct DirectSend {
    device: String,
    provider: Platform,
    settlement: Settlement,
    in_doubt: bool,
    /// What the send is told as once its page is written (`crate::push_events`).
    event: Option<PushEvent>,
}

/// A page whose sends have started.
struct PageInFlight {
    /// Job rows for devices that wait.
    waiting: Vec<PageJob>,
    /// The page's sends.
    sends: PageSends<DirectSend>,
    /// Where the cursor moves once the page is written (`None`: the last page).
    next: Option<String>,
    /// Held until the page is written ([`PAGES_IN_FLIGHT`]).
    _slot: OwnedSemaphorePermit,
}

/// What every page of one expansion shares.
struct Expansion {
    job: JobId,
    app: AppId,
    push: String,
    seq: u64,
    record: Arc<DeliveryRecord>,
    audience: Audience,
    /// Devices up to this one (after the cursor) were in flight when the expansion last ran.
    doubt_until: Option<String>,
    /// The durable in-flight mark as it was leased.
    marked: Option<String>,
}

impl Expansion {
    fn send_job(&self, device: &Device, due_ms: i64) -> NewJob {
        NewJob {
            app: self.app.clone(),
            push: self.push.clone(),
            provider: Some(device.platform),
            kind: JobKind::Send {
                device: device.id.clone(),
            },
            seq: self.seq,
            due_ms,
        }
    }
}

impl Deliverer {
    /// Runs a leased expansion job: sends the push to its audience a page at a time, writing
    /// each page's results and moving the cursor after the page's answers, until the audience
    /// is done (the job settles) or the worker stops (between pages; the job resumes from its
    /// cursor once its lease runs out).
    pub(super) async fn expand(self: Arc<Self>, job: Job) -> Result<(), StoreError> {
        let JobKind::Expand { after } = &job.job.kind else {
            return Ok(());
        };
        let app = job.job.app.clone();
        let now = now_millis();
        let Some(record) = self
            .record(&app, &job.job.push)
            .await?
            .filter(|r| r.expires > now)
        else {
            let done = Settlement::Done {
                result: SendResult::Expired,
            };
            return self.queue.settle(vec![(job.id, done)]).await;
        };
        let audience = match &record.audience {
            Ok(audience) => audience.clone(),
            // It parsed when the push was accepted; a record that no longer does is damaged,
            // and must not become a push to everyone.
            Err(damaged) => {
                let reason = format!("stored audience does not parse: {}", damaged.error);
                self.failures
                    .dead_letter(&app, None, job.id, job.attempts, &reason);
                let dead = Settlement::Dead { reason };
                return self.queue.settle(vec![(job.id, dead)]).await;
            }
        };
        let marked = job.in_flight_until.clone();
        let doubt_until = marked
            .clone()
            .filter(|m| after.as_ref().is_none_or(|a| m > a));
        if let Some(until) = &doubt_until {
            tracing::info!(push = %job.job.push, until = %until, "a broadcast page was in flight when the worker stopped; its devices are sent again, in doubt");
        }
        let expansion = Expansion {
            job: job.id,
            app,
            push: job.job.push.clone(),
            seq: job.job.seq,
            record,
            audience,
            doubt_until,
            marked,
        };
        let renewing = CancellationToken::new();
        let renewal = tokio::spawn(self.clone().renew_lease(job.id, renewing.clone()));
        let (pages_tx, pages_rx) = unbounded_channel();
        let (sent, written) = tokio::join!(
            self.send_pages(&expansion, after.clone(), pages_tx),
            self.write_pages(&expansion, pages_rx),
        );
        renewing.cancel();
        let _ = renewal.await;
        sent.and(written)
    }

    /// Renews expansion `job`'s lease every third of a lease until `stop`.
    async fn renew_lease(self: Arc<Self>, job: JobId, stop: CancellationToken) {
        let lease_ms = self.config.lease.as_millis() as i64;
        let every = (self.config.lease / 3).max(Duration::from_millis(50));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            if let Err(e) = self
                .queue
                .mark_in_flight(job, "", now_millis(), lease_ms)
                .await
            {
                tracing::warn!(error = %e, "could not renew a broadcast expansion's lease");
                return;
            }
        }
    }

    /// Reads the audience a page at a time and starts each page's sends, handing the page to
    /// [`Deliverer::write_pages`].
    async fn send_pages(
        self: &Arc<Self>,
        x: &Expansion,
        mut after: Option<String>,
        pages: UnboundedSender<PageInFlight>,
    ) -> Result<(), StoreError> {
        let batch = self.config.batch.max(1);
        let lease_ms = self.config.lease.as_millis() as i64;
        let sends = Arc::new(Semaphore::new(batch));
        let slots = Arc::new(Semaphore::new(PAGES_IN_FLIGHT));
        let mut marked = x.marked.clone();
        loop {
            let slot = slots
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| StoreError::failed("page slots closed"))?;
            if pages.is_closed() {
                return Ok(());
            }
            let query = DeviceQuery {
                after: after.clone(),
                limit: self.config.expand_page,
                provider_reachable: true,
                ..DeviceQuery::default()
            };
            let page = self.registry.devices(&x.app, &query).await?;
            let next = if page.len() < self.config.expand_page {
                None
            } else {
                page.last().map(|d| d.id.clone())
            };
            let now = now_millis();
            let mut waiting = Vec::new();
            let mut due = Vec::new();
            for device in page {
                if !x.audience.reaches_tags(device.active, &device.tags) {
                    continue;
                }
                let due_ms = self.due_for(&x.app, &device.id, &x.record, now);
                if due_ms > now {
                    waiting.push(PageJob {
                        job: x.send_job(&device, due_ms),
                        sent: None,
                        in_doubt: false,
                    });
                } else {
                    due.push(device);
                }
            }
            // A push an ack settles (`auto`) reads each device again with its inbox cursor: one
            // acknowledged meanwhile settles as `live` (`DeliveryRecord::acked_live`), as a
            // send job would.
            let mut cursors: HashMap<String, (Device, InboxCursor)> =
                if x.record.settled_by_ack() && !due.is_empty() {
                    let ids: Vec<String> = due.iter().map(|d| d.id.clone()).collect();
                    self.registry
                        .devices_by_id(&x.app, &ids)
                        .await?
                        .into_iter()
                        .map(|(d, c)| (d.id.clone(), (d, c)))
                        .collect()
                } else {
                    HashMap::new()
                };
            let observed = self.observes_deliveries(&x.app);
            let mut running = PageSends::spawn();
            // Each device is moved into its send (taken from `due`), not copied; the ids of the
            // devices after it are still there to mark chunks with.
            let mut due: Vec<Option<Device>> = due.into_iter().map(Some).collect();
            for i in 0..due.len() {
                let permit = sends
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| StoreError::failed("send permits closed"))?;
                let Some(this_device) = due[i].take() else {
                    continue;
                };
                let id = this_device.id.clone();
                if marked.as_deref().is_none_or(|m| m < id.as_str()) {
                    let last = (i + batch - 1).min(due.len() - 1);
                    // `last` >= `i`: not taken yet, unless it is this device.
                    let until = due[last]
                        .as_ref()
                        .map_or_else(|| id.clone(), |d| d.id.clone());
                    self.queue
                        .mark_in_flight(x.job, &until, now_millis(), lease_ms)
                        .await?;
                    marked = Some(until);
                }
                let in_doubt = x.doubt_until.as_deref().is_some_and(|u| id.as_str() <= u);
                let platform = this_device.platform;
                let device = if x.record.settled_by_ack() {
                    cursors.remove(&id)
                } else {
                    Some((this_device, InboxCursor::default()))
                };
                let (this, app, record) = (self.clone(), x.app.clone(), x.record.clone());
                let (seq, job) = (x.seq, x.job);
                // The push's id only when its sends are to be told (no copy per device else).
                let push = observed.then(|| x.push.clone());
                // Boxed: a send's future is large, and spawning it unboxed copied it into the
                // task several times (a fifth of the server's CPU in a broadcast's profile).
                running.start(Box::pin(async move {
                    let attempt = Attempt {
                        app: &app,
                        job,
                        provider: Some(platform),
                        seq,
                        attempts: 1,
                    };
                    let (settlement, event) = this
                        .observed_attempt(attempt, push.as_deref(), true, device, Some(record))
                        .await;
                    drop(permit);
                    DirectSend {
                        device: id,
                        provider: platform,
                        settlement,
                        in_doubt,
                        event,
                    }
                }));
            }
            running.finish();
            let started = PageInFlight {
                waiting,
                sends: running,
                next: next.clone(),
                _slot: slot,
            };
            if pages.send(started).is_err() {
                return Ok(());
            }
            match next {
                Some(n) => after = Some(n),
                None => return Ok(()),
            }
            if self.stopping.is_cancelled() {
                return Ok(());
            }
        }
    }

    /// Waits for each page's sends in turn and writes the page ([`crate::jobs::JobQueue::expand_page`]).
    async fn write_pages(
        &self,
        x: &Expansion,
        mut pages: UnboundedReceiver<PageInFlight>,
    ) -> Result<(), StoreError> {
        let lease_ms = self.config.lease.as_millis() as i64;
        while let Some(page) = pages.recv().await {
            let PageInFlight {
                waiting,
                sends,
                next,
                _slot: slot,
            } = page;
            let mut written = ExpandedPage {
                jobs: waiting,
                counted: Vec::new(),
            };
            // Only `accepted` goes without a row: counted here, named once per page.
            let mut accepted = 0u64;
            let sent = sends.results().await.map_err(|e| {
                StoreError::failed(format!("a broadcast page's sends did not finish: {e}"))
            })?;
            let mut told = Vec::new();
            for mut sent in sent {
                told.extend(sent.event.take());
                match row_for(x, sent) {
                    Some(row) => written.jobs.push(row),
                    None => accepted += 1,
                }
            }
            if accepted > 0 {
                written
                    .counted
                    .push((SendResult::Accepted.to_string(), accepted));
            }
            self.queue
                .expand_page(x.job, written, next, now_millis(), lease_ms)
                .await?;
            // The page's results are committed: its sends' events are facts now.
            for event in &told {
                self.events.tell(event);
            }
            drop(slot);
            self.wake();
        }
        Ok(())
    }
}

/// The job row a direct send needs, or `None` when it is only counted, as `accepted`. Only a
/// send the provider accepted, not in doubt, goes without a row, so a device of the audience
/// behind the cursor with no row was accepted (`delivery::listing` relies on it).
fn row_for(x: &Expansion, sent: DirectSend) -> Option<PageJob> {
    let in_doubt = match &sent.settlement {
        Settlement::Done {
            result: SendResult::Accepted,
        } if !sent.in_doubt => return None,
        // A result that made no provider send (expired, inactive, no token or credentials,
        // acknowledged live) cannot have been duplicated.
        Settlement::Done { result } => sent.in_doubt && result.was_sent(),
        Settlement::Retry { .. } | Settlement::Dead { .. } => sent.in_doubt,
    };
    Some(PageJob {
        job: NewJob {
            app: x.app.clone(),
            push: x.push.clone(),
            provider: Some(sent.provider),
            kind: JobKind::Send {
                device: sent.device,
            },
            seq: x.seq,
            due_ms: now_millis(),
        },
        sent: Some(sent.settlement),
        in_doubt,
    })
}
