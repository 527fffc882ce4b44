//! What the delivery workers did, per app and provider, as Urban Airship's queue workers
//! reported it: sends, successes, failures by reason, retries, and the time a send took
//! (average and 95th percentile, from a log-scale histogram kept in memory since start: the
//! outbound queue's `Figures`).
//! Each event is also a Prometheus metric labelled by app, provider and result (never by
//! device or token). Queue depth and the oldest job's age come from the queue itself
//! ([`crate::jobs::JobQueue::depth`]).

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;

use herald_core::tenant::AppId;
use herald_outbound::{Ended, Figures};

use crate::device::Platform;

#[derive(Default)]
struct Counters {
    /// This app and provider's Prometheus series, registered at its first send: looking a
    /// labelled series up (and making its `app` label) per send was a cost of its own.
    series: Option<Series>,
    /// Its figures (the outbound queue's).
    figures: Figures,
}

/// The Prometheus series one app and provider's sends are counted in.
struct Series {
    accepted: metrics::Counter,
    failed: metrics::Counter,
    retry: metrics::Counter,
    seconds: metrics::Histogram,
}

impl Series {
    fn register(app: &AppId, provider: Platform) -> Series {
        let counter = |result: &'static str| {
            metrics::counter!("herald_provider_sends_total",
                "app" => app.as_str().to_string(), "provider" => provider.as_str(), "result" => result)
        };
        Series {
            accepted: counter("accepted"),
            failed: counter("failed"),
            retry: counter("retry"),
            seconds: metrics::histogram!("herald_provider_send_seconds", "provider" => provider.as_str()),
        }
    }
}

/// One app and provider's figures: sends, successes, failures by reason, retries, mean and
/// 95th percentile time of a send.
pub type ProviderFigures = herald_outbound::Summary;

/// How one send ended, for the figures: `Success`, `Failure(reason)` (failed for good), `Retry`.
pub type SendEnd<'a> = Ended<'a>;

/// Worker figures for every app and provider.
#[derive(Default)]
pub struct WorkerStats {
    by: Mutex<HashMap<(AppId, Platform), Counters>>,
}

impl WorkerStats {
    /// Records one send of `app` to `provider` that took `took`.
    pub fn record(&self, app: &AppId, provider: Platform, took: Duration, result: SendEnd<'_>) {
        let mut by = self.by.lock();
        let c = by.entry((app.clone(), provider)).or_default();
        let series = c
            .series
            .get_or_insert_with(|| Series::register(app, provider));
        match result {
            Ended::Success => series.accepted.increment(1),
            Ended::Failure(_) => series.failed.increment(1),
            Ended::Retry => series.retry.increment(1),
        }
        series.seconds.record(took.as_secs_f64());
        c.figures.record(took, result);
    }

    /// The figures of every provider of `app` (or of every app).
    pub fn figures(&self, app: Option<&AppId>) -> Vec<(AppId, Platform, ProviderFigures)> {
        let by = self.by.lock();
        let mut out: Vec<_> = by
            .iter()
            .filter(|((a, _), _)| app.is_none_or(|app| app == a))
            .map(|((a, p), c)| (a.clone(), *p, c.figures.summary()))
            .collect();
        out.sort_by(|x, y| (x.0.as_str(), x.1.as_str()).cmp(&(y.0.as_str(), y.1.as_str())));
        out
    }
}

/// Describes the delivery metrics: the sends counted here and the queue gauges the worker sets
/// (`Deliverer::export_depth`), so `/metrics` has a `# HELP` line for each. Call it once the
/// recorder is installed.
pub fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "herald_provider_sends_total",
        "Provider sends by app, provider and result (accepted, failed, retry)."
    );
    describe_histogram!(
        "herald_provider_send_seconds",
        "Time one provider send took, seconds, by provider."
    );
    describe_gauge!(
        "herald_provider_jobs_queued",
        "Provider jobs waiting to be sent, by app and provider (expand: broadcast pages)."
    );
    describe_gauge!(
        "herald_provider_jobs_dead",
        "Provider jobs that failed every attempt (dead letters), by app and provider."
    );
    describe_gauge!(
        "herald_provider_oldest_job_seconds",
        "Age of the oldest queued provider job, seconds, by app and provider."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_percentiles() {
        let stats = WorkerStats::default();
        let app = AppId::parse("a").unwrap();
        for _ in 0..95 {
            stats.record(
                &app,
                Platform::Apns,
                Duration::from_millis(1),
                SendEnd::Success,
            );
        }
        for _ in 0..5 {
            stats.record(
                &app,
                Platform::Apns,
                Duration::from_millis(100),
                SendEnd::Failure("rejected:BadDeviceToken"),
            );
        }
        stats.record(
            &app,
            Platform::Fcm,
            Duration::from_millis(3),
            SendEnd::Retry,
        );
        let all = stats.figures(Some(&app));
        assert_eq!(all.len(), 2);
        let (_, p, f) = &all[0];
        assert_eq!(*p, Platform::Apns);
        assert_eq!((f.sends, f.successes, f.retries), (100, 95, 0));
        assert_eq!(f.failures["rejected:BadDeviceToken"], 5);
        assert!(f.p95_ms >= 1.0 && f.p95_ms < 1.25, "{}", f.p95_ms);
        assert!((f.avg_ms - 5.95).abs() < 0.01, "{}", f.avg_ms);
        assert_eq!(all[1].2.retries, 1);
        assert!(stats.figures(Some(&AppId::parse("b").unwrap())).is_empty());
    }
}
