//! `/metrics` as Prometheus reads it: every family has a `# HELP` line (the webhook families
//! too, once a webhook endpoint has failed and dropped events), HTTP answers are counted by
//! route template and status class (on both the router's and the direct publish path, never
//! with a channel name as a label), and a deleted app's series leave the page with the app.

use crate::support;

use std::collections::BTreeSet;

use serde_json::json;
use support::raw::Raw;
use support::{call, Server, Ws, API_KEY};

const ADMIN: &str = "metrics-admin-key-0123456789abcdef";

/// The sample lines of `text` (not comments, not blank).
fn samples(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// The value of the sample written exactly `series` (name and labels as the exporter writes
/// them), if there is one.
fn value(text: &str, series: &str) -> Option<f64> {
    samples(text).find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .map(|v| v.trim().parse().unwrap())
    })
}

/// `herald_http_responses_total` for `route` and `status`, 0 when absent.
fn answers(text: &str, route: &str, status: &str) -> f64 {
    let series = format!("herald_http_responses_total{{route=\"{route}\",status=\"{status}\"}}");
    value(text, &series).unwrap_or(0.0)
}

#[tokio::test]
async fn every_family_has_help_and_http_answers_are_counted_by_route_and_class() {
    let server = Server::start().await;
    // Some work, so most families have samples: a subscriber, publishes, a push.
    let token = server.token(&["room-42"], &[]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    ws.request("subscribe", json!({"channel": "room-42"})).await;
    server.publish("room-42", json!({"n": 1})).await;
    ws.recv().await.expect("the message");
    let (status, _) = server
        .post("/v1/push", json!({"target": {"app": true}, "data": 1}))
        .await;
    assert_eq!(status, 202);
    let before = server.metrics().await;

    // Through hyper (reqwest's connection carried other requests): two publishes, a history
    // read, a refused publish, a channel's info, a path that is no route.
    for n in 0..2 {
        server.publish("room-42", json!({"n": n})).await;
    }
    assert_eq!(server.get("/v1/channels/room-42/messages").await.0, 200);
    assert_eq!(
        server
            .post("/v1/channels/room-42/messages", json!({}))
            .await
            .0,
        400
    );
    assert_eq!(server.get("/v1/channels/room-42").await.0, 200);
    assert_eq!(server.get("/v1/no/such/route").await.0, 404);
    // On the direct publish path: a fresh connection whose request is a whole publish.
    let mut raw = Raw::connect(&server).await;
    let body = r#"{"data":3}"#;
    raw.send(
        format!(
            "POST /v1/channels/room-42/messages HTTP/1.1\r\nHost: herald\r\n\
             Authorization: Bearer {API_KEY}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await;
    let head = raw.head().await;
    assert_eq!(head.status, 200);
    raw.body(&head).await;

    let text = server.metrics().await;
    let messages = "/v1/channels/{name}/messages";
    let moved =
        |route: &str, status: &str| answers(&text, route, status) - answers(&before, route, status);
    assert_eq!(
        moved(messages, "2xx"),
        4.0,
        "3 publishes and a read:\n{text}"
    );
    assert_eq!(moved(messages, "4xx"), 1.0, "{text}");
    assert_eq!(moved("/v1/channels/{name}", "2xx"), 1.0, "{text}");
    assert_eq!(moved("unmatched", "4xx"), 1.0, "{text}");
    assert!(answers(&text, "/v1/push", "2xx") >= 1.0, "{text}");
    assert!(
        answers(&text, "/v1/ws", "1xx") >= 1.0,
        "the upgrade: {text}"
    );
    assert!(
        !text.contains("room-42") && !text.contains("no/such"),
        "no channel name or raw path as a label:\n{text}"
    );

    // Every family the page has is described.
    let typed: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let described: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# HELP "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert!(typed.len() > 20, "{text}");
    let undescribed: Vec<&&str> = typed.difference(&described).collect();
    assert!(
        undescribed.is_empty(),
        "families without # HELP: {undescribed:?}"
    );
    drop(ws);
}

/// An endpoint nothing answers, with room for one queued event: the first connection's event
/// is queued and tried (failed), the others are dropped; every webhook family is described.
#[tokio::test]
async fn the_webhook_families_have_help() {
    let server = Server::builder()
        .arg("--outbound-allow")
        .arg("127.0.0.1")
        .env("HERALD_HOOKS_MAX_QUEUED_PER_ENDPOINT", "1")
        .start()
        .await;
    let hook = json!({"url": "http://127.0.0.1:9/hooks", "events": ["client.connected"]});
    let (status, body) = call(
        &server,
        "POST",
        "/v1/apps/default/hooks",
        API_KEY,
        Some(hook),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let families = [
        "herald_hook_events_total",
        "herald_hook_requests_total",
        "herald_hook_request_seconds",
        "herald_hook_queue_depth",
        "herald_hook_events_dropped_total",
    ];
    let token = server.token(&["room-1"], &[]);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let text = loop {
        // More connections, so more events than the endpoint's queue holds.
        let ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
        drop(ws);
        let text = server.metrics().await;
        let typed = |f: &str| text.contains(&format!("# TYPE {f} "));
        if families.iter().all(|f| typed(f)) {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "webhook families missing:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    for family in families {
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family} has no # HELP line:\n{text}"
        );
    }
    assert!(
        text.contains(r#"herald_hook_events_dropped_total{reason="endpoint_full"}"#),
        "{text}"
    );
}

#[tokio::test]
async fn a_deleted_apps_series_leave_the_page_with_it() {
    let server = Server::builder()
        .arg("--admin-key")
        .arg(ADMIN)
        .start()
        .await;
    let mut keys = Vec::new();
    for app in ["doomed", "kept"] {
        let (status, created) =
            call(&server, "POST", "/v1/apps", ADMIN, Some(json!({"id": app}))).await;
        assert_eq!(status, 201, "{created}");
        let key = created["key"].as_str().unwrap().to_string();
        let (status, r) = call(
            &server,
            "POST",
            "/v1/channels/news/messages",
            &key,
            Some(json!({"data": app})),
        )
        .await;
        assert_eq!(status, 200, "{r}");
        keys.push(key);
    }
    let text = server.metrics().await;
    for app in ["doomed", "kept"] {
        let series = format!("herald_app_published_total{{app=\"{app}\"}}");
        assert_eq!(value(&text, &series), Some(1.0), "{series}:\n{text}");
    }

    let (status, r) = call(&server, "DELETE", "/v1/apps/doomed", ADMIN, None).await;
    assert_eq!(status, 204, "{r}");
    let text = server.metrics().await;
    let left: Vec<&str> = samples(&text)
        .filter(|l| l.contains("app=\"doomed\""))
        .collect();
    assert!(left.is_empty(), "series of the deleted app: {left:?}");
    assert_eq!(
        value(&text, "herald_app_published_total{app=\"kept\"}"),
        Some(1.0),
        "{text}"
    );
    // The page is still whole: each family's HELP and TYPE lines precede its samples.
    assert!(
        text.contains("# TYPE herald_app_published_total counter"),
        "{text}"
    );
    // The other app goes on counting.
    let (status, _) = call(
        &server,
        "POST",
        "/v1/channels/news/messages",
        &keys[1],
        Some(json!({"data": 2})),
    )
    .await;
    assert_eq!(status, 200);
    let text = server.metrics().await;
    assert_eq!(
        value(&text, "herald_app_published_total{app=\"kept\"}"),
        Some(2.0),
        "{text}"
    );
}
