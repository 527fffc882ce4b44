//! The process's Prometheus recorder. The `metrics` crate takes one global recorder per
//! process, so the first server to start installs it (with its histogram buckets, upkeep
//! thread and every metric's description, the `# HELP` lines) and every later server in the
//! same process shares its handle: `/metrics` of each shows the process's totals.
//!
//! A deleted app's series leave `/metrics` with it ([`render`]): the exporter cannot forget a
//! series, so the page is rendered without the series whose `app` label names an app this
//! server saw deleted. App ids are never reused, so a hidden series never has to come back;
//! what stays behind is the exporter's few bytes per hidden series until the process ends.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use herald_core::tenant::AppId;
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
    describe_metrics();
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

/// Every crate's metric descriptions, given to the process's recorder (a description given
/// before a recorder is installed goes nowhere; given twice, the first stays).
pub(crate) fn describe_metrics() {
    herald_core::telemetry::describe_metrics();
    herald_edge::parking::describe_metrics();
    herald_push::delivery::stats::describe_metrics();
    herald_store::describe_metrics();
    herald_hooks::worker::describe_metrics();
    crate::http_metrics::describe_metrics();
    metrics::describe_gauge!(
        RUNTIME_WORKERS,
        "Worker threads of the main runtime (runtime=main) and of the HTTP one (runtime=http), \
         as the `workers` and `http_workers` settings made them."
    );
}

/// The gauge of each runtime's worker threads, set once as the server starts.
pub(crate) const RUNTIME_WORKERS: &str = "herald_runtime_workers";

/// `/metrics`: what the recorder holds, without the series of the apps in `deleted`.
pub(crate) fn render(handle: &PrometheusHandle, deleted: &[AppId]) -> String {
    let text = handle.render();
    if deleted.is_empty() {
        return text;
    }
    let deleted: HashSet<&str> = deleted.iter().map(AppId::as_str).collect();
    without_apps(&text, &deleted)
}

/// The exposition `text` without the samples whose `app` label is in `deleted`, and without
/// the `# HELP` and `# TYPE` lines of a family none of whose samples is left.
fn without_apps(text: &str, deleted: &HashSet<&str>) -> String {
    let kept = |line: &str| app_label(line).is_none_or(|app| !deleted.contains(app));
    // The families that keep a sample (a histogram's samples are NAME_bucket, _sum, _count).
    let families: HashSet<&str> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#') && kept(l))
        .map(sample_name)
        .flat_map(|name| {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix));
            [Some(name), base].into_iter().flatten()
        })
        .collect();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let keep = if line.is_empty() {
            !out.is_empty() && !out.ends_with("\n\n")
        } else if let Some(comment) = line.strip_prefix("# ") {
            let name = comment.split(' ').nth(1).unwrap_or("");
            families.contains(name)
        } else {
            kept(line)
        };
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The metric name a sample line starts with.
fn sample_name(line: &str) -> &str {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    &line[..end]
}

/// The value of a sample line's `app` label, as written (app ids need no escaping).
fn app_label(line: &str) -> Option<&str> {
    let mut rest = line.strip_prefix(sample_name(line))?.strip_prefix('{')?;
    loop {
        let (name, after) = rest.split_once("=\"")?;
        // The value ends at the first quote not escaped by a backslash.
        let bytes = after.as_bytes();
        let mut end = 0;
        while end < bytes.len() && bytes[end] != b'"' {
            end += if bytes[end] == b'\\' { 2 } else { 1 };
        }
        let value = after.get(..end)?;
        if name == "app" {
            return Some(value);
        }
        rest = after.get(end + 1..)?;
        rest = rest.strip_prefix(',')?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "\
# HELP herald_app_published_total Messages an app published.
# TYPE herald_app_published_total counter
herald_app_published_total{app=\"gone\"} 3
herald_app_published_total{app=\"shop\"} 5

# TYPE herald_provider_sends_total counter
herald_provider_sends_total{app=\"gone\",provider=\"apns\",result=\"accepted\"} 1

# TYPE herald_http_responses_total counter
herald_http_responses_total{route=\"/v1/apps/{id}\",status=\"2xx\"} 2
herald_http_responses_total{route=\"a\\\"app=\\\"gone\",status=\"2xx\"} 1

# TYPE herald_provider_send_seconds histogram
herald_provider_send_seconds_bucket{provider=\"apns\",le=\"+Inf\"} 1
herald_provider_send_seconds_sum{provider=\"apns\"} 0.5
herald_provider_send_seconds_count{provider=\"apns\"} 1

# TYPE herald_subscriptions gauge
herald_subscriptions 4

";

    #[test]
    fn a_deleted_apps_samples_and_emptied_families_are_left_out() {
        let deleted = HashSet::from(["gone"]);
        let page = without_apps(PAGE, &deleted);
        assert!(!page.contains("app=\"gone\"}"), "{page}");
        assert!(!page.contains("gone\",provider"), "{page}");
        assert!(!page.contains("herald_provider_sends_total"), "{page}");
        for kept in [
            "# HELP herald_app_published_total Messages an app published.",
            "herald_app_published_total{app=\"shop\"} 5",
            "herald_http_responses_total{route=\"a\\\"app=\\\"gone\",status=\"2xx\"} 1",
            "# TYPE herald_provider_send_seconds histogram",
            "herald_provider_send_seconds_count{provider=\"apns\"} 1",
            "herald_subscriptions 4",
        ] {
            assert!(page.contains(kept), "{kept} missing:\n{page}");
        }
        assert!(!page.contains("\n\n\n"), "{page}");
        assert_eq!(without_apps(PAGE, &HashSet::from(["other"])), PAGE);
    }

    #[test]
    fn the_app_label_is_found_wherever_it_is() {
        assert_eq!(app_label("m{app=\"a\"} 1"), Some("a"));
        assert_eq!(app_label("m{limit=\"publish\",app=\"b-2\"} 1"), Some("b-2"));
        assert_eq!(app_label("m{x=\"app=\\\"c\\\"\"} 1"), None);
        assert_eq!(app_label("m 1"), None);
        assert_eq!(app_label("m{} 1"), None);
    }
}
