//! The process's Prometheus recorder. The `metrics` crate takes one global recorder per
//! process, so the first server to start installs it (with its histogram buckets and upkeep
//! thread) and every later server in the same process shares its handle: `/metrics` of each
//! shows the process's totals.

use std::sync::Mutex;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::error::ServerError;

/// How often histogram samples are folded into their buckets.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Bucket bounds of every `*_seconds` histogram.
const SECONDS_BUCKETS: [f64; 13] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// The recorder installed by this crate, once installed.
static INSTALLED: Mutex<Option<PrometheusHandle>> = Mutex::new(None);

/// The process's recorder handle, installing the recorder on first use.
pub(crate) fn recorder() -> Result<PrometheusHandle, ServerError> {
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(handle) = installed.as_ref() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)
        .map_err(ServerError::Metrics)?
        .install_recorder()
        .map_err(ServerError::Metrics)?;
    // Histograms keep raw samples until upkeep folds them into buckets: at a million
    // deliveries a second, folding five seconds' worth took 7-21 ms. On its own thread, every
    // second, that never holds up a connection's task.
    let upkeep = handle.clone();
    std::thread::Builder::new()
        .name("herald-metrics".into())
        .spawn(move || loop {
            std::thread::sleep(UPKEEP_INTERVAL);
            upkeep.run_upkeep();
        })
        .map_err(ServerError::MetricsUpkeep)?;
    *installed = Some(handle.clone());
    Ok(handle)
}
