//! The usage writer: every few seconds, and once more when the server shuts down, what this
//! process counted for each app since its last write is added to the store's figures
//! (`published`, `deliveries`, `acks` as increments, the peak of connections as a max), so
//! counters survive a restart and several nodes add up rather than overwrite each other.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use herald_core::tenancy::{Tenancy, Usage};
use herald_core::tenant::AppId;
use herald_core::usage::UsageMeter;
use tokio_util::sync::CancellationToken;

/// How often usage counts are added to the store.
const WRITE_INTERVAL: Duration = Duration::from_secs(5);

/// Adds every app's new usage counts to the store every few seconds, and once more after
/// `stop` is cancelled, then returns.
pub(crate) async fn write_usage(
    usage: Arc<UsageMeter>,
    registry: Arc<dyn Tenancy>,
    stop: CancellationToken,
) {
    let mut written = Written::default();
    let mut every = tokio::time::interval(WRITE_INTERVAL);
    loop {
        let stopping = tokio::select! {
            _ = every.tick() => false,
            _ = stop.cancelled() => true,
        };
        written.write(&usage, registry.as_ref()).await;
        if stopping {
            return;
        }
    }
}

/// What this process's counts stood at when last stored, per app.
#[derive(Default)]
struct Written {
    stored: HashMap<AppId, Usage>,
}

impl Written {
    /// Adds each app's counts since the last successful write to the store. A write that fails
    /// is not marked written, so its increment goes with the next write.
    async fn write(&mut self, usage: &UsageMeter, registry: &dyn Tenancy) {
        let counted: HashMap<AppId, Usage> = usage.counted().into_iter().collect();
        // Forget apps the meter no longer has (deleted).
        self.stored.retain(|app, _| counted.contains_key(app));
        for (app, now) in counted {
            let before = self.stored.get(&app).copied().unwrap_or_default();
            let Some(increment) = increment(before, now) else {
                continue;
            };
            match registry.add_usage(&app, increment).await {
                Ok(()) => {
                    self.stored.insert(app, now);
                }
                Err(e) => tracing::warn!(%app, error = %e.chain(), "cannot store usage counters"),
            }
        }
    }
}

/// What to add to the store to go from `before` (already stored) to `now`; `None` if nothing
/// changed.
fn increment(before: Usage, now: Usage) -> Option<Usage> {
    let increment = Usage {
        published: now.published.saturating_sub(before.published),
        deliveries: now.deliveries.saturating_sub(before.deliveries),
        acks: now.acks.saturating_sub(before.acks),
        peak_connections: now.peak_connections,
    };
    let changed = increment.published > 0
        || increment.deliveries > 0
        || increment.acks > 0
        || now.peak_connections > before.peak_connections;
    changed.then_some(increment)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::usage_store::UsageOnly;

    use super::*;

    #[tokio::test]
    async fn a_failed_write_keeps_its_increment_for_the_next() {
        let meter = UsageMeter::new();
        let store = UsageOnly::default();
        let app = AppId::parse("shop").unwrap();
        let mut written = Written::default();
        meter.app(&app).published(3);
        written.write(&meter, &store).await;
        assert_eq!(store.usage(&app).await.unwrap().published, 3);
        written.write(&meter, &store).await;
        assert_eq!(
            store.usage(&app).await.unwrap().published,
            3,
            "written once"
        );

        meter.app(&app).published(2);
        store.failing.store(true, Ordering::Relaxed);
        written.write(&meter, &store).await;
        assert_eq!(store.usage(&app).await.unwrap().published, 3);
        meter.app(&app).published(1);
        store.failing.store(false, Ordering::Relaxed);
        written.write(&meter, &store).await;
        assert_eq!(
            store.usage(&app).await.unwrap().published,
            6,
            "nothing lost"
        );
    }

    fn usage(published: u64, peak_connections: u64) -> Usage {
        Usage {
            published,
            deliveries: published * 2,
            acks: 1,
            peak_connections,
        }
    }

    #[test]
    fn the_increment_is_what_was_counted_since_the_last_write() {
        assert_eq!(increment(Usage::default(), Usage::default()), None);
        assert_eq!(
            increment(usage(3, 2), usage(5, 2)),
            Some(Usage {
                published: 2,
                deliveries: 4,
                acks: 0,
                peak_connections: 2,
            })
        );
        assert_eq!(increment(usage(5, 2), usage(5, 2)), None);
        assert_eq!(
            increment(usage(5, 2), usage(5, 3)).map(|u| (u.published, u.peak_connections)),
            Some((0, 3)),
            "a new peak alone is written"
        );
    }
}
