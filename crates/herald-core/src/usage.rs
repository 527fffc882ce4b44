//! Per-app usage counters (the billing figures): messages published, deliveries to devices,
//! acknowledgements, and the most connections held at once.
//!
//! Counting is a few atomic adds on the hot path. The totals are the stored figures loaded at
//! start plus what this process counted; they are written back every few seconds and at
//! shutdown, so a crash loses at most the last few seconds of counts. Each counter is also a
//! Prometheus metric labelled with the app id (never a channel or device id).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::registry::Usage;
use crate::tenant::AppId;

/// One app's counters.
pub struct AppUsage {
    base: Mutex<Usage>,
    published: AtomicU64,
    deliveries: AtomicU64,
    acks: AtomicU64,
    connections: AtomicU64,
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
            published: AtomicU64::new(0),
            deliveries: AtomicU64::new(0),
            acks: AtomicU64::new(0),
            connections: AtomicU64::new(0),
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

    /// Takes back deliveries counted for messages that were then not sent (replaced by a
    /// later push with the same collapse key).
    pub fn undelivered(&self, n: u64) {
        self.deliveries.fetch_sub(n, Ordering::Relaxed);
    }

    /// Counts acknowledged pushes.
    pub fn acked(&self, n: u64) {
        self.acks.fetch_add(n, Ordering::Relaxed);
        self.metrics.acks.increment(n);
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

    /// Forgets a deleted app.
    pub fn remove(&self, app: &AppId) {
        self.apps.write().remove(app);
    }

    /// Counts a live connection of `app` until the guard is dropped.
    pub fn connect(&self, app: &AppId) -> ConnectionGuard {
        let usage = self.app(app);
        let now = usage.connections.fetch_add(1, Ordering::Relaxed) + 1;
        usage.peak.fetch_max(now, Ordering::Relaxed);
        usage.metrics.connections.increment(1.0);
        ConnectionGuard(usage)
    }

    /// Every app's totals, to write back to the store.
    pub fn snapshot(&self) -> Vec<(AppId, Usage)> {
        self.apps
            .read()
            .iter()
            .map(|(app, u)| (app.clone(), u.totals()))
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
        let a = meter.connect(&app);
        let b = meter.connect(&app);
        let c = meter.connect(&app);
        let d = meter.connect(&app);
        drop((a, b, c, d));
        let _e = meter.connect(&app);
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
    }
}
