//! Device inboxes: storing a push where its devices will read it, opening a device's inbox on a
//! connection from its acknowledged cursor, and acknowledgements that move that cursor and count
//! receipts.
//!
//! A push to the app or to a tag expression is one append to the app's broadcast log, whatever
//! the number of devices; a push to a device or a user appends to each device's own log. A
//! device reads both logs from its cursor (see [`crate::logs`] and [`crate::push`]).
//!
//! Devices registered and pushes acknowledged are told to the observer once stored, when one
//! wants them ([`crate::push_events`]).

use std::sync::Arc;

use herald_core::auth::Client;
use herald_core::engine::{Catchup, Engine, SubscribeRequest};
use herald_core::error::{ErrorCode, HeraldError};
use herald_core::hub::{Filter, Tally};
use herald_core::log::{ReadFrom, StoreError};
use herald_core::message::{now_millis, Cursor, NewMessage};
use herald_core::name::ChannelName;
use herald_core::outbox::Outbox;
use herald_core::publish::Publisher;
use herald_core::tenant::AppId;
use herald_core::usage::{AppUsage, UsageMeter};
use tokio_util::task::TaskTracker;

use crate::audience::Audience;
use crate::delivery::record::DeliveryRecord;
use crate::delivery::worker::Deliverer;
use crate::delivery::{DEFAULT_ACK_WINDOW, MAX_ACK_WINDOW};
use crate::device::{Device, InboxCursor, Platform};
use crate::logs::{PushLogs, APP_LOG, DEVICE_LOG};
use crate::push::{broadcast_admit, collapse, direct_admit, Push, Target};
use crate::push_events::{DeviceFacts, PushEvent, PushEventKind, PushEvents, PushObserver};
use crate::registry::{Ack, DeviceRegistry, Receipt};

/// Most messages one acknowledgement may cover; a device further behind acks in steps.
pub const MAX_ACK_SPAN: u64 = 100_000;

/// Which of a device's two logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    /// The app's broadcast log (`$app`).
    App,
    /// The device's own log (`$device`).
    Device,
}

impl LogKind {
    /// Parses a log's public name (`$app` or `$device`).
    pub fn parse(name: &str) -> Result<Self, HeraldError> {
        match name {
            APP_LOG => Ok(LogKind::App),
            DEVICE_LOG => Ok(LogKind::Device),
            other => Err(HeraldError::bad_request(format!(
                "acks are for \"$app\" or \"$device\", not {other:?}"
            ))),
        }
    }
}

/// What a push was accepted as.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// The push id (the idempotency key, or generated).
    pub id: String,
    /// Devices it was stored for, when known at once (device and user targets).
    pub targeted: Option<u64>,
    /// The id was stored already (a retried push): nothing new was stored or counted.
    pub duplicate: bool,
}

/// A device's inbox, ready to subscribe: its two logs with where to start and what to keep.
pub struct InboxPlan {
    /// The app.
    pub app: AppId,
    /// The device.
    pub device: String,
    /// The app's broadcast log, then the device's own log.
    pub logs: [ChannelName; 2],
    /// The acknowledged cursor.
    pub cursor: InboxCursor,
    filters: [Filter; 2],
}

/// Sends pushes and serves device inboxes.
pub struct Inbox {
    engine: Arc<Engine>,
    /// Stores pushes and counts them, under the same rule as channel publishes.
    publisher: Arc<Publisher>,
    registry: Arc<dyn DeviceRegistry>,
    usage: Arc<UsageMeter>,
    /// Work a push leaves running after it is answered (counting a broadcast's audience);
    /// [`Inbox::close`] waits for it.
    background: TaskTracker,
    /// Runs provider jobs; `None`: provider pushes are stored but never sent (tests of the
    /// live path only).
    delivery: Option<Arc<Deliverer>>,
    /// Told of devices registered and pushes acknowledged ([`Inbox::observe`]).
    events: PushEvents,
}

/// Counts what a device's subscriptions are sent as the app's deliveries.
fn deliveries(usage: Arc<AppUsage>) -> Tally {
    Arc::new(move |n| usage.delivered(n))
}

impl Inbox {
    /// An inbox service storing through `publisher` and reading the device registry. The
    /// engine's namespaces must hold the push logs' registration ([`crate::logs::register`]).
    pub fn new(
        publisher: Arc<Publisher>,
        registry: Arc<dyn DeviceRegistry>,
        usage: Arc<UsageMeter>,
    ) -> Self {
        Inbox {
            engine: publisher.engine().clone(),
            publisher,
            registry,
            usage,
            background: TaskTracker::new(),
            delivery: None,
            events: PushEvents::default(),
        }
    }

    /// Tells `observer` of devices registered and pushes acknowledged from now on; `false` if
    /// an observer was already set (it stays).
    pub fn observe(&self, observer: Arc<dyn PushObserver>) -> bool {
        self.events.observe(observer)
    }

    /// Tells the observer of the devices a registration created, once stored: `stored` is what
    /// [`DeviceRegistry::upsert_devices`] answered (a device updated in place is not told).
    pub fn devices_registered(&self, app: &AppId, stored: &[(Device, bool)]) {
        let Some(observer) = self.events.wanting(app, PushEventKind::DeviceRegistered) else {
            return;
        };
        for (device, _) in stored.iter().filter(|(_, created)| *created) {
            observer.on_push_event(&PushEvent::DeviceRegistered {
                app: app.clone(),
                device: DeviceFacts::of(device),
            });
        }
    }

    /// Queues provider pushes with `deliverer`.
    pub fn with_delivery(mut self, deliverer: Arc<Deliverer>) -> Self {
        self.delivery = Some(deliverer);
        self
    }

    /// Waits for the work pushes left running (audience counts) to finish; call it before
    /// closing the store. Pushes sent meanwhile are still counted and waited for.
    pub async fn close(&self) {
        self.background.close();
        self.background.wait().await;
    }

    /// The cursor a new device of `app` starts from: the broadcast log's head (it receives
    /// broadcasts from now on) and the start of its own log.
    pub async fn start_cursor(&self, app: &AppId) -> Result<InboxCursor, HeraldError> {
        let state = self.engine.state(&app.app_log()).await?;
        Ok(InboxCursor {
            app: Cursor {
                epoch: state.epoch,
                seq: state.last_seq,
            },
            device: Cursor::default(),
        })
    }

    /// Stores a push for its target, records its receipt and, for a provider push, queues its
    /// provider jobs. Returns once all of that is durable; delivery happens after.
    pub async fn send(&self, app: &AppId, push: Push) -> Result<Accepted, HeraldError> {
        let id = push.id.clone();
        let devices: Option<Vec<Device>> = match &push.target {
            Target::Device(d) => {
                let (device, _) = self
                    .registry
                    .device(app, d)
                    .await
                    .map_err(HeraldError::from)?
                    .ok_or_else(|| {
                        HeraldError::new(
                            ErrorCode::NotFound,
                            format!("no device {d:?} in this app"),
                        )
                    })?;
                if !device.active {
                    return Err(HeraldError::new(
                        ErrorCode::Conflict,
                        format!("device {d:?} is deactivated; activate it to push to it"),
                    ));
                }
                Some(vec![device])
            }
            Target::User(u) => {
                let ids = self
                    .registry
                    .user_devices(app, u)
                    .await
                    .map_err(HeraldError::from)?;
                Some(
                    self.registry
                        .devices_by_id(app, &ids)
                        .await
                        .map_err(HeraldError::from)?
                        .into_iter()
                        .map(|(d, _)| d)
                        .collect(),
                )
            }
            Target::Tags(_) | Target::App => None,
        };
        let record = push.payloads.clone().map(|payloads| DeliveryRecord {
            delivery: push.delivery,
            ack_window_ms: push
                .ack_window_ms
                .or(self.usage.app(app).limits().ack_window_ms)
                .unwrap_or(DEFAULT_ACK_WINDOW.as_millis() as u64)
                .min(MAX_ACK_WINDOW.as_millis() as u64),
            broadcast: devices.is_none(),
            audience: Ok(push.target.audience().unwrap_or(Audience::All)),
            expires: push.expires,
            payloads,
        });
        let receipt = Receipt {
            id: id.clone(),
            targeted: devices.as_ref().map(|d| d.len() as u64),
            created: push.created,
            expires: push.expires,
            delivery: Some(push.delivery.as_str().to_string()),
            ..Receipt::default()
        };
        let message = NewMessage {
            id: Some(id.clone()),
            data: push.envelope.clone(),
            retain: Default::default(),
            hold: None,
        };
        let logs = match &devices {
            Some(devices) => devices.iter().map(|d| app.device_log(&d.id)).collect(),
            None => vec![app.app_log()],
        };
        // Issued together, the receipt and the appends share one group commit (one fsync).
        let encoded = record.as_ref().map(DeliveryRecord::encode);
        let (recorded, stored) = tokio::join!(
            self.registry.record_push(app, &receipt, encoded.as_deref()),
            self.publisher.publish_to_each(app, &logs, message)
        );
        recorded.map_err(HeraldError::from)?;
        let (all_duplicates, seqs) = stored?;
        // Queued after the appends (a job needs its push's seq), and idempotent: a publisher
        // retrying a push whose answer it lost queues whatever the first attempt did not.
        if let (Some(record), Some(deliverer)) = (&record, &self.delivery) {
            let jobs =
                deliverer.plan_jobs(app, &id, record, devices.as_deref(), &seqs, now_millis());
            if !jobs.is_empty() {
                deliverer
                    .queue()
                    .enqueue(jobs)
                    .await
                    .map_err(HeraldError::from)?;
                deliverer.wake();
            }
        }
        let duplicate = match &devices {
            Some(_) => all_duplicates,
            None => {
                if all_duplicates {
                    return Ok(Accepted {
                        id,
                        targeted: None,
                        duplicate: true,
                    });
                }
                let audience = push.target.audience().unwrap_or(Audience::All);
                // Counting a million devices takes a while; the push does not wait for it.
                let (registry, app, id) = (self.registry.clone(), app.clone(), id.clone());
                self.background.spawn(async move {
                    match registry.count_audience(&app, &audience).await {
                        Ok(n) => {
                            if let Err(e) = registry.set_targeted(&app, &id, n).await {
                                audience_not_recorded(&app, &e);
                            }
                        }
                        Err(e) => audience_not_recorded(&app, &e),
                    }
                });
                false
            }
        };
        Ok(Accepted {
            id,
            targeted: receipt.targeted,
            duplicate,
        })
    }

    /// Looks up the device a device token names and plans its inbox.
    pub async fn plan(&self, client: &Client) -> Result<InboxPlan, HeraldError> {
        let Some(device) = client.device.as_deref() else {
            return Err(HeraldError::forbidden("only a device token has an inbox"));
        };
        let app = &client.app;
        let (d, cursor) = self
            .registry
            .device(app, device)
            .await
            .map_err(HeraldError::from)?
            .ok_or_else(|| {
                HeraldError::new(
                    ErrorCode::NotFound,
                    format!("the token's device {device:?} is not registered"),
                )
            })?;
        if !d.active {
            return Err(HeraldError::forbidden(format!(
                "device {device:?} is deactivated"
            )));
        }
        let usage = self.usage.app(app);
        Ok(InboxPlan {
            app: app.clone(),
            device: d.id.clone(),
            logs: [app.app_log(), app.device_log(&d.id)],
            cursor,
            filters: [
                Filter {
                    admit: Some(broadcast_admit(Arc::new(d.tags))),
                    tally: Some(deliveries(usage.clone())),
                },
                Filter {
                    admit: Some(direct_admit()),
                    tally: Some(deliveries(usage)),
                },
            ],
        })
    }

    /// Subscribes `outbox` to log `i` of the plan from `since`: everything retained after it
    /// that is for this device, unexpired, and not replaced by a later push with the same
    /// collapse key, then live pushes.
    pub async fn subscribe(
        &self,
        plan: &InboxPlan,
        i: usize,
        since: Cursor,
        outbox: &Arc<Outbox>,
    ) -> Result<Catchup, HeraldError> {
        let request = SubscribeRequest {
            since: Some(since),
            last: Some(false),
            replay_retained_if_lost: true,
        };
        let mut catchup = self
            .engine
            .subscribe_with(&plan.logs[i], outbox, &request, plan.filters[i].clone())
            .await?;
        // Paged: each page is collapsed on its own, so a push a later one replaces may still
        // arrive when the two fall on different pages (best effort, as providers' collapse is).
        catchup.shape_pages(collapse);
        Ok(catchup)
    }

    /// Acknowledges everything up to `upto` in one of a device's logs: moves its cursor and
    /// counts each push for this device in between as delivered. Acknowledging a position
    /// already acknowledged changes nothing. Returns the cursor now stored.
    pub async fn ack(
        &self,
        app: &AppId,
        device: &str,
        kind: LogKind,
        upto: Cursor,
    ) -> Result<InboxCursor, HeraldError> {
        for _ in 0..5 {
            let (d, from) = self
                .registry
                .device(app, device)
                .await
                .map_err(HeraldError::from)?
                .ok_or_else(|| {
                    HeraldError::new(ErrorCode::NotFound, format!("no device {device:?}"))
                })?;
            let (log, admit) = match kind {
                LogKind::App => (app.app_log(), broadcast_admit(Arc::new(d.tags))),
                LogKind::Device => (app.device_log(device), direct_admit()),
            };
            let state = self.engine.state(&log).await?;
            if !upto.epoch.as_str().is_empty() && upto.epoch != state.epoch {
                return Err(HeraldError::bad_request(format!(
                    "ack for epoch {:?}, but the log is in epoch {:?}",
                    upto.epoch.as_str(),
                    state.epoch.as_str()
                )));
            }
            if upto.seq > state.last_seq {
                return Err(HeraldError::bad_request(format!(
                    "ack for seq {} beyond the newest message ({})",
                    upto.seq, state.last_seq
                )));
            }
            let current = match kind {
                LogKind::App => &from.app,
                LogKind::Device => &from.device,
            };
            let done = if current.epoch == state.epoch || current.epoch.as_str().is_empty() {
                current.seq
            } else {
                0
            };
            if upto.seq <= done {
                return Ok(from);
            }
            if upto.seq - done > MAX_ACK_SPAN {
                return Err(HeraldError::bad_request(format!(
                    "one ack may cover at most {MAX_ACK_SPAN} messages; ack up to seq {} first",
                    done + MAX_ACK_SPAN
                )));
            }
            let mut pushes = Vec::new();
            let mut after = done;
            while after < upto.seq {
                let slice = self.engine.read(&log, ReadFrom::After(after), 1000).await?;
                let Some(last) = slice.messages.last() else {
                    break;
                };
                after = last.seq;
                pushes.extend(
                    slice
                        .messages
                        .iter()
                        .filter(|m| m.seq <= upto.seq && admit(m))
                        .map(|m| m.id()),
                );
            }
            let moved = Cursor {
                epoch: state.epoch.clone(),
                seq: upto.seq,
            };
            let mut to = from.clone();
            match kind {
                LogKind::App => to.app = moved,
                LogKind::Device => to.device = moved,
            }
            let n = pushes.len() as u64;
            let provider_device = d.platform != Platform::Herald && d.token.is_some();
            let ack = Ack {
                from,
                to: to.clone(),
                pushes,
            };
            if self
                .registry
                .ack(app, device, &ack)
                .await
                .map_err(HeraldError::from)?
            {
                self.usage.app(app).acked(n);
                if let Some(observer) = self.events.wanting(app, PushEventKind::DeliveryAcked) {
                    let device = DeviceFacts {
                        id: d.id.clone(),
                        platform: d.platform,
                        user: d.user.clone(),
                    };
                    for push in &ack.pushes {
                        observer.on_push_event(&PushEvent::DeliveryAcked {
                            app: app.clone(),
                            device: device.clone(),
                            push: push.clone(),
                        });
                    }
                }
                if let (true, Some(deliverer)) = (provider_device, &self.delivery) {
                    deliverer.settle_acked(app, device, &ack.pushes).await;
                }
                return Ok(to);
            }
            // Another ack of this device moved the cursor meanwhile: start again from it.
        }
        Err(HeraldError::new(
            ErrorCode::Conflict,
            "the device's cursor kept moving; retry the ack",
        ))
    }
}

/// A push's audience count could not be stored: worth a warning, unless the server is
/// stopping (the count was running when the store closed).
fn audience_not_recorded(app: &AppId, e: &StoreError) {
    match e {
        StoreError::Closed => tracing::debug!(%app, "audience count dropped at shutdown"),
        StoreError::Backend { .. }
        | StoreError::Unavailable { .. }
        | StoreError::Full { .. }
        | StoreError::Halted { .. } => {
            tracing::warn!(%app, error = %e, "cannot record a push's audience")
        }
    }
}
