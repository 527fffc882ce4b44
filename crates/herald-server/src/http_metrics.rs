//! `herald_http_responses_total{route, status}`: the HTTP answers this server gives, by route
//! template and status class (`2xx`, `4xx`, ...), so an operator sees error rates per route.
//! The route is the router's template (`/v1/devices/{id}`), never what the request named: no
//! channel, device or app id becomes a label, and requests no route matched share the label
//! `unmatched`. `/v1/channels/{*path}` is told apart as `/v1/channels/{name}/messages` and
//! `/v1/channels/{name}`, as the API documents them. One-message publishes answered without
//! hyper (`herald_edge::direct_publish`) are counted as the router would count them.
//! Requests refused before they are routed (a head over the limit or cut short, bytes that are
//! not HTTP) are not counted.
//!
//! Each route's counters are registered once and kept (a recorder lookup per answer would make
//! the labels' strings each time).

use std::collections::HashMap;
use std::sync::LazyLock;

use axum::extract::{MatchedPath, Request};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use metrics::Counter;
use parking_lot::RwLock;

/// The route label of requests no route matched.
const UNMATCHED: &str = "unmatched";
/// The route of one-message publishes and of a channel's history.
pub(crate) const CHANNEL_MESSAGES: &str = "/v1/channels/{name}/messages";
/// The route of a channel's info.
const CHANNEL: &str = "/v1/channels/{name}";
/// The router's one route for both.
const CHANNEL_PATHS: &str = "/v1/channels/{*path}";
/// The status classes, in the order of the counters kept per route.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Each route's counters, one per status class.
static COUNTERS: LazyLock<RwLock<HashMap<String, [Counter; 5]>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));

/// Describes the metric, so `/metrics` has its `# HELP` line. Call it once the recorder is
/// installed.
pub(crate) fn describe_metrics() {
    metrics::describe_counter!(
        "herald_http_responses_total",
        "HTTP answers by route template and status class (1xx to 5xx); unmatched: no route."
    );
}

/// Middleware around the whole router: counts each answer under its route.
pub(crate) async fn count(request: Request, next: Next) -> Response {
    let route = match request.extensions().get::<MatchedPath>() {
        Some(path) if path.as_str() == CHANNEL_PATHS => {
            if request.uri().path().ends_with("/messages") {
                RouteLabel::Static(CHANNEL_MESSAGES)
            } else {
                RouteLabel::Static(CHANNEL)
            }
        }
        Some(path) => RouteLabel::Matched(path.clone()),
        None => RouteLabel::Static(UNMATCHED),
    };
    let response = next.run(request).await;
    record(route.as_str(), response.status());
    response
}

/// A route label, borrowed from the router's matched path or one of the constants above.
enum RouteLabel {
    Static(&'static str),
    Matched(MatchedPath),
}

impl RouteLabel {
    fn as_str(&self) -> &str {
        match self {
            RouteLabel::Static(s) => s,
            RouteLabel::Matched(path) => path.as_str(),
        }
    }
}

/// Counts one answer of `status` under `route` (a template).
pub(crate) fn record(route: &str, status: StatusCode) {
    let class = usize::from(status.as_u16() / 100)
        .clamp(1, CLASSES.len())
        .saturating_sub(1);
    if let Some(counters) = COUNTERS.read().get(route) {
        counters[class].increment(1);
        return;
    }
    let mut counters = COUNTERS.write();
    let by_class = counters.entry(route.to_owned()).or_insert_with(|| {
        CLASSES.map(|status| {
            metrics::counter!("herald_http_responses_total",
                "route" => route.to_owned(), "status" => status)
        })
    });
    by_class[class].increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_fall_in_their_class() {
        let class = |code: u16| {
            let status = StatusCode::from_u16(code).unwrap();
            CLASSES[usize::from(status.as_u16() / 100)
                .clamp(1, CLASSES.len())
                .saturating_sub(1)]
        };
        assert_eq!(class(101), "1xx");
        assert_eq!(class(200), "2xx");
        assert_eq!(class(204), "2xx");
        assert_eq!(class(304), "3xx");
        assert_eq!(class(413), "4xx");
        assert_eq!(class(503), "5xx");
        assert_eq!(class(599), "5xx");
    }
}
