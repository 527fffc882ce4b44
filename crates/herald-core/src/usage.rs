//! Per-app usage counters (the billing figures): messages published, deliveries to devices,
//! acknowledgements, and the most connections held at once; and the app's limits, checked
//! against what it uses (registered devices, live connections, payload size).
//!
//! Beside them, not billed and not stored, each app's channel messages delivered by this node
//! since it started ([`AppUsage::messages_delivered`]): the hub tells the meter of each run it
//! delivers ([`DeliveryMeter`]), so a dashboard can show messages reaching subscribers, which
//! the `deliveries` figure (pushes to devices) leaves out.
//!
//! Counting is a few atomic adds on the hot path. The totals are the stored figures loaded at
//! start plus what this process counted; what it counted is added to the stored figures every
//! few seconds and at shutdown (as increments, so several nodes add up), and a crash loses at
//! most the last few seconds of counts. Each counter is also a
//! Prometheus metric labelled with the app id (never a channel or device id).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::{ErrorCode, HeraldError};
use crate::hub::DeliveryMeter;
use crate::name::ChannelName;
use crate::tenancy::{AppLimits, Usage};
use crate::tenant::{split_app, AppId, RESERVED};

/// One app's counters.
pub struct AppUsage {
    base: Mutex<Usage>,
    limits: Mutex<AppLimits>,
    devices: AtomicU64,
    published: AtomicU64,
    deliveries: AtomicU64,
    acks: AtomicU64,
    /// Channel messages delivered by this node (see the module doc); not stored.
    messages_delivered: AtomicU64,
    connections: AtomicU64,
    /// Connections other nodes of a cluster hold, as last learned (0 on one node).
    elsewhere: AtomicU64,
    peak: AtomicU64,
    metrics: AppMetrics,
}

struct AppMetrics {
    published: metrics::Counter,
    deliveries: metrics::Counter,
    acks: metrics::Counter,
    connections: metrics::Gauge,
}

impl AppUsage {
    fn new(app: &AppId, base: Usage) -> Self {
        let label = app.as_str().to_string();
        AppUsage {
            base: Mutex::new(base),
            limits: Mutex::new(AppLimits::default()),
            devices: AtomicU64::new(0),
            published: AtomicU64::new(0),
            deliveries: AtomicU64::new(0),
            acks: AtomicU64::new(0),
            messages_delivered: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            elsewhere: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            metrics: AppMetrics {
                published: metrics::counter!("herald_app_published_total", "app" => label.clone()),
                deliveries: metrics::counter!("herald_app_deliveries_total", "app" => label.clone()),
                acks: metrics::counter!("herald_app_acks_total", "app" => label.clone()),
                connections: metrics::gauge!("herald_app_connections", "app" => label),
            },
        }
    }

    /// Counts published messages.
    pub fn published(&self, n: u64) {
        self.published.fetch_add(n, Ordering::Relaxed);
        self.metrics.published.increment(n);
    }

    /// Counts messages delivered to devices.
    pub fn delivered(&self, n: u64) {
        self.deliveries.fetch_add(n, Ordering::Relaxed);
        self.metrics.deliveries.increment(n);
    }

    /// Counts acknowledged pushes.
    pub fn acked(&self, n: u64) {
        self.acks.fetch_add(n, Ordering::Relaxed);
        self.metrics.acks.increment(n);
    }

    /// Messages of the app's channels this node queued to their subscribers since it started
    /// (a message to 3 subscribers counts 3; pushes are counted in `deliveries` instead).
    pub fn messages_delivered(&self) -> u64 {
        self.messages_delivered.load(Ordering::Relaxed)
    }

    /// The app's limits.
    pub fn limits(&self) -> AppLimits {
        *self.limits.lock()
    }

    /// Replaces the app's limits.
    pub fn set_limits(&self, limits: AppLimits) {
        *self.limits.lock() = limits;
    }

    /// Registered devices.
    pub fn devices(&self) -> u64 {
        self.devices.load(Ordering::Relaxed)
    }

    /// Records devices registered (`+`) or deleted (`-`).
    pub fn devices_changed(&self, added: u64, removed: u64) {
        self.devices.fetch_add(added, Ordering::Relaxed);
        let _ = self
            .devices
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(removed))
            });
    }

    /// Sets the device count to what the store holds (a cluster node learning the devices
    /// other nodes registered).
    pub fn set_devices(&self, stored: u64) {
        self.devices.store(stored, Ordering::Relaxed);
    }

    /// Refuses registering `adding` more devices past `max_devices`.
    pub fn check_devices(&self, adding: u64) -> Result<(), HeraldError> {
        match self.limits().max_devices {
            Some(max) if adding > 0 && self.devices() + adding > max => Err(HeraldError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "the app may register at most {max} devices; it has {}",
                    self.devices()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The largest payload this app may send, within the server's `server_max`.
    pub fn max_message_bytes(&self, server_max: usize) -> usize {
        self.limits()
            .max_message_bytes
            .map_or(server_max, |m| m.min(server_max))
    }

    /// What this process counted (not the stored figures): `peak_connections` is its own peak.
    pub fn counted(&self) -> Usage {
        Usage {
            published: self.published.load(Ordering::Relaxed),
            deliveries: self.deliveries.load(Ordering::Relaxed),
            acks: self.acks.load(Ordering::Relaxed),
            peak_connections: self.peak.load(Ordering::Relaxed),
        }
    }

    /// The totals: stored figures plus this process's counts.
    pub fn totals(&self) -> Usage {
        let base = *self.base.lock();
        Usage {
            published: base.published + self.published.load(Ordering::Relaxed),
            deliveries: base.deliveries + self.deliveries.load(Ordering::Relaxed),
            acks: base.acks + self.acks.load(Ordering::Relaxed),
            peak_connections: base.peak_connections.max(self.peak.load(Ordering::Relaxed)),
        }
    }
}

/// Counts each app's channel deliveries as the hub makes them. The push logs (`$app`, `$dev/`)
/// are left out: what a device receives from them is counted in the app's `deliveries`, by its
/// subscription. An app the meter does not know (deleted) is not counted, nor made again: a
/// subscriber's connection made its app's counters when it connected.
impl DeliveryMeter for UsageMeter {
    fn delivered(&self, channel: &ChannelName, n: u64) {
        let (app, local) = split_app(channel.as_str());
        if local.starts_with(RESERVED) {
            return;
        }
        if let Some(usage) = self.apps.read().get(app) {
            usage.messages_delivered.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// Holds one live connection in its app's count until dropped.
pub struct ConnectionGuard(Arc<AppUsage>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
        self.0.metrics.connections.decrement(1.0);
    }
}

/// Every app's counters.
#[derive(Default)]
pub struct UsageMeter {
    apps: RwLock<HashMap<AppId, Arc<AppUsage>>>,
    /// Apps deleted while this process ran, whose metric series `/metrics` leaves out (app ids
    /// are never reused).
    deleted: RwLock<std::collections::HashSet<AppId>>,
}

impl UsageMeter {
    /// An empty meter.
    pub fn new() -> Arc<Self> {
        Arc::new(UsageMeter::default())
    }

    /// Sets the stored figures an app's totals start from (at start, from the store).
    pub fn load(&self, app: &AppId, stored: Usage) {
        *self.app(app).base.lock() = stored;
    }

    /// An app's counters, created at zero if new.
    pub fn app(&self, app: &AppId) -> Arc<AppUsage> {
        if let Some(u) = self.apps.read().get(app) {
            return u.clone();
        }
        self.apps
            .write()
            .entry(app.clone())
            .or_insert_with(|| Arc::new(AppUsage::new(app, Usage::default())))
            .clone()
    }

    /// Forgets a deleted app, and remembers it was deleted ([`UsageMeter::deleted_apps`]).
    pub fn remove(&self, app: &AppId) {
        self.apps.write().remove(app);
        self.deleted.write().insert(app.clone());
    }

    /// The apps deleted while this process ran: `/metrics` leaves out the series labelled with
    /// them (the exporter keeps every series it was given).
    pub fn deleted_apps(&self) -> Vec<AppId> {
        self.deleted.read().iter().cloned().collect()
    }

    /// Counts a live connection of `app` until the guard is dropped; refused past the app's
    /// `max_connections`, counting the connections other nodes hold as last learned
    /// ([`UsageMeter::set_elsewhere`]).
    pub fn connect(&self, app: &AppId) -> Result<ConnectionGuard, HeraldError> {
        let usage = self.app(app);
        let now = usage.connections.fetch_add(1, Ordering::Relaxed) + 1;
        let guard = ConnectionGuard(usage.clone());
        usage.metrics.connections.increment(1.0);
        if let Some(max) = usage.limits().max_connections {
            if now + usage.elsewhere.load(Ordering::Relaxed) > max {
                return Err(HeraldError::new(
                    ErrorCode::LimitExceeded,
                    format!("the app may hold at most {max} connections at once"),
                ));
            }
        }
        usage.peak.fetch_max(now, Ordering::Relaxed);
        Ok(guard)
    }

    /// Live connections of `app` on this node right now.
    pub fn live_connections(&self, app: &AppId) -> u64 {
        self.apps
            .read()
            .get(app)
            .map_or(0, |u| u.connections.load(Ordering::Relaxed))
    }

    /// Tells the meter how many connections of `app` the other nodes of a cluster hold (from
    /// the bus's presence), so `max_connections` holds for the cluster.
    pub fn set_elsewhere(&self, app: &AppId, connections: u64) {
        self.app(app)
            .elsewhere
            .store(connections, Ordering::Relaxed);
    }

    /// The apps with a `max_connections` limit (those whose counts other nodes must learn).
    pub fn limited_apps(&self) -> Vec<AppId> {
        self.apps_where(|l| l.max_connections.is_some())
    }

    /// The apps with a `max_devices` limit.
    pub fn device_limited_apps(&self) -> Vec<AppId> {
        self.apps_where(|l| l.max_devices.is_some())
    }

    fn apps_where(&self, limited: impl Fn(&AppLimits) -> bool) -> Vec<AppId> {
        self.apps
            .read()
            .iter()
            .filter(|(_, u)| limited(&u.limits()))
            .map(|(app, _)| app.clone())
            .collect()
    }

    /// Every app's live connections on this node right now.
    pub fn connections(&self) -> Vec<(AppId, u64)> {
        self.apps
            .read()
            .iter()
            .map(|(app, u)| (app.clone(), u.connections.load(Ordering::Relaxed)))
            .collect()
    }

    /// Every app's totals.
    pub fn snapshot(&self) -> Vec<(AppId, Usage)> {
        self.apps
            .read()
            .iter()
            .map(|(app, u)| (app.clone(), u.totals()))
            .collect()
    }

    /// What this process counted for every app ([`AppUsage::counted`]), to add to the store.
    pub fn counted(&self) -> Vec<(AppId, Usage)> {
        self.apps
            .read()
            .iter()
            .map(|(app, u)| (app.clone(), u.counted()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_to_the_stored_base_and_peaks_are_kept() {
        let meter = UsageMeter::new();
        let app = AppId::parse("shop").unwrap();
        meter.load(
            &app,
            Usage {
                published: 10,
                deliveries: 0,
                acks: 1,
                peak_connections: 3,
            },
        );
        let u = meter.app(&app);
        u.published(2);
        u.delivered(5);
        u.acked(1);
        let a = meter.connect(&app).unwrap();
        let b = meter.connect(&app).unwrap();
        let c = meter.connect(&app).unwrap();
        let d = meter.connect(&app).unwrap();
        drop((a, b, c, d));
        let _e = meter.connect(&app).unwrap();
        assert_eq!(
            meter.app(&app).totals(),
            Usage {
                published: 12,
                deliveries: 5,
                acks: 2,
                peak_connections: 4,
            }
        );
        assert_eq!(meter.snapshot().len(), 1);
        assert_eq!(
            meter.counted(),
            vec![(
                app.clone(),
                Usage {
                    published: 2,
                    deliveries: 5,
                    acks: 1,
                    peak_connections: 4,
                }
            )]
        );
    }

    #[test]
    fn channel_deliveries_are_counted_per_app_and_push_logs_are_not() {
        let meter = UsageMeter::new();
        let shop = AppId::parse("shop").unwrap();
        let default = AppId::default_app();
        let news = ChannelName::parse("news").unwrap();
        let (shop_usage, default_usage) = (meter.app(&shop), meter.app(&default));
        meter.delivered(&shop.channel(&news), 3);
        meter.delivered(&shop.channel(&news), 2);
        meter.delivered(&news, 7);
        meter.delivered(&shop.reserved_log("$app"), 100);
        meter.delivered(&shop.reserved_log("$dev/phone-1"), 100);
        meter.delivered(&default.reserved_log("$app"), 100);
        let gone = AppId::parse("gone").unwrap();
        meter.delivered(&gone.channel(&news), 4);
        assert_eq!(shop_usage.messages_delivered(), 5);
        assert_eq!(default_usage.messages_delivered(), 7);
        assert_eq!(
            meter.snapshot().len(),
            2,
            "an app the meter does not know is not made"
        );
        assert_eq!(
            shop_usage.totals(),
            Usage::default(),
            "not billed: published, deliveries and acks are unchanged"
        );
    }

    #[test]
    fn limits_refuse_connections_and_devices_past_the_maximum() {
        let meter = UsageMeter::new();
        let app = AppId::parse("tiny").unwrap();
        meter.app(&app).set_limits(AppLimits {
            max_devices: Some(2),
            max_connections: Some(1),
            max_message_bytes: Some(10),
            ..AppLimits::default()
        });
        let first = meter.connect(&app).unwrap();
        let e = meter.connect(&app).err().unwrap();
        assert_eq!(e.code, ErrorCode::LimitExceeded);
        drop(first);
        assert!(
            meter.connect(&app).is_ok(),
            "a freed slot can be used again"
        );
        let u = meter.app(&app);
        assert!(u.check_devices(2).is_ok());
        u.devices_changed(2, 0);
        assert_eq!(
            u.check_devices(1).unwrap_err().code,
            ErrorCode::LimitExceeded
        );
        u.devices_changed(0, 1);
        assert!(u.check_devices(1).is_ok());
        assert_eq!(u.max_message_bytes(65536), 10);
        assert_eq!(u.totals().peak_connections, 1);
    }

    #[test]
    fn connections_other_nodes_hold_count_against_the_limit() {
        let meter = UsageMeter::new();
        let app = AppId::parse("shared").unwrap();
        meter.app(&app).set_limits(AppLimits {
            max_connections: Some(3),
            ..AppLimits::default()
        });
        assert_eq!(meter.limited_apps(), vec![app.clone()]);
        meter.set_elsewhere(&app, 2);
        let here = meter.connect(&app).unwrap();
        assert_eq!(
            meter.connect(&app).err().unwrap().code,
            ErrorCode::LimitExceeded,
            "1 here + 2 elsewhere is the limit"
        );
        meter.set_elsewhere(&app, 0);
        let again = meter.connect(&app);
        assert!(again.is_ok(), "the others left");
        drop((here, again));
    }
}
