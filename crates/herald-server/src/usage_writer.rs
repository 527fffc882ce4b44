//! The usage writer: every app's usage totals go back to the store every few seconds, and once
//! more when the server shuts down, so counters survive a restart.

use std::sync::Arc;
use std::time::Duration;

use herald_core::tenancy::Tenancy;
use herald_core::usage::UsageMeter;
use tokio_util::sync::CancellationToken;

/// How often usage totals are written back to the store.
const WRITE_INTERVAL: Duration = Duration::from_secs(5);

/// Writes every app's usage totals to the store every few seconds, and once more after `stop`
/// is cancelled, then returns.
pub(crate) async fn write_usage(
    usage: Arc<UsageMeter>,
    registry: Arc<dyn Tenancy>,
    stop: CancellationToken,
) {
    let mut every = tokio::time::interval(WRITE_INTERVAL);
    loop {
        let stopping = tokio::select! {
            _ = every.tick() => false,
            _ = stop.cancelled() => true,
        };
        for (app, totals) in usage.snapshot() {
            if let Err(e) = registry.set_usage(&app, totals).await {
                tracing::warn!(%app, error = %e, "cannot store usage counters");
            }
        }
        if stopping {
            return;
        }
    }
}
