//! The Grafana dashboard in `docs/grafana/herald-dashboard.json` against a real server: the file
//! is importable as is (one datasource input, every panel and query using it, unique panel ids),
//! and every metric its queries name is one the server really exports once it has done the work
//! the dashboard watches (connections, publishes, deliveries, acks, provider sends and retries,
//! HTTP answers), each family with its `# HELP` line.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use herald_mock::apns::test_key;
use serde_json::{json, Value};

use crate::support::{Server, Ws};

fn dashboard() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana/herald-dashboard.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"))
}

/// Every panel, rows' nested panels included.
fn panels(d: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        all.push(p);
        if let Some(inner) = p["panels"].as_array() {
            all.extend(inner);
        }
    }
    all
}

/// The queries of every panel and template variable.
fn queries(d: &Value) -> Vec<String> {
    let mut q: Vec<String> = panels(d)
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| {
            t["expr"]
                .as_str()
                .expect("a target without expr")
                .to_string()
        })
        .collect();
    for v in d["templating"]["list"].as_array().expect("templating") {
        q.push(v["definition"].as_str().expect("definition").to_string());
    }
    q
}

/// The `herald_*` metric names a query reads, with a histogram's `_bucket` series named by its
/// family.
fn metric_names(query: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = query;
    while let Some(at) = rest.find("herald_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        names.push(name.strip_suffix("_bucket").unwrap_or(name).to_string());
        rest = &tail[end..];
    }
    names
}

#[test]
fn the_dashboard_imports_with_one_datasource_input_and_unique_panels() {
    let d = dashboard();
    let inputs = d["__inputs"].as_array().expect("__inputs");
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    assert_eq!(inputs[0]["name"], "DS_PROMETHEUS");
    assert_eq!(inputs[0]["pluginId"], "prometheus");
    let mut ids = HashSet::new();
    for p in panels(&d) {
        let id = p["id"].as_u64().expect("a panel without id");
        assert!(ids.insert(id), "panel id {id} used twice");
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${DS_PROMETHEUS}", "{p}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "a panel without queries: {p}");
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${DS_PROMETHEUS}", "{t}");
        }
        let pos = &p["gridPos"];
        assert!(
            pos["x"].as_u64().unwrap() + pos["w"].as_u64().unwrap() <= 24,
            "panel wider than the grid: {p}"
        );
    }
    for q in queries(&d) {
        assert!(
            !metric_names(&q).is_empty(),
            "a query reading no herald metric: {q}"
        );
    }
}

/// Whether the Prometheus text has a sample of the family `name`.
fn exports(text: &str, name: &str) -> bool {
    text.lines().any(|l| {
        !l.starts_with('#')
            && l.strip_prefix(name).is_some_and(|rest| {
                rest.starts_with(['{', ' '])
                    || rest.starts_with("_bucket{")
                    || rest.starts_with("_count")
                    || rest.starts_with("_sum")
            })
    })
}

#[tokio::test]
async fn every_metric_the_dashboard_reads_is_exported_by_a_working_server() {
    let wanted: BTreeSet<String> = queries(&dashboard())
        .iter()
        .flat_map(|q| metric_names(q))
        .collect();
    // An APNs that refuses connections: a push's job is sent, fails, and waits for its retry,
    // so the provider's send counter, send time and queue gauges all have samples.
    let mut server = Server::builder()
        .arg("--apns-url")
        .arg("https://127.0.0.1:1")
        .start()
        .await;
    let (p8, _) = test_key();
    let (status, r) = server
        .post_as(
            "PUT",
            "/v1/apps/default/providers/apns",
            json!({"topic":"com.example.app","key":p8,"key_id":"KEYID00001","team_id":"TEAMID0001"}),
        )
        .await;
    assert_eq!(status, 201, "{r}");
    let (status, r) = server
        .post(
            "/v1/devices",
            json!({"id":"phone","platform":"apns","token":"ab".repeat(32)}),
        )
        .await;
    assert_eq!(status, 201, "{r}");
    let (status, r) = server
        .post(
            "/v1/push",
            json!({"target":{"device":"phone"},"delivery":"provider","notification":{"title":"hi"}}),
        )
        .await;
    assert_eq!(status, 202, "{r}");

    // A live subscriber that receives a publish, and a device that acks an inbox message.
    let token = server.token(&["news"], &[]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    let subscribed = ws.request("subscribe", json!({"channel":"news"})).await;
    assert!(subscribed.get("subscribe").is_some(), "{subscribed}");
    server.publish("news", json!({"n":1})).await;
    let message = ws.recv().await.expect("no message");
    assert!(message.get("message").is_some(), "{message}");
    let (status, r) = server
        .post("/v1/tokens", json!({"sub":"pat","device":"phone"}))
        .await;
    assert_eq!(status, 200, "{r}");
    let device_token = r["token"].as_str().unwrap().to_string();
    let (status, r) = server
        .post(
            "/v1/push",
            json!({"target":{"device":"phone"},"data":{"n":2}}),
        )
        .await;
    assert_eq!(status, 202, "{r}");
    let http = reqwest::Client::new();
    let inbox: Value = http
        .get(server.url("/v1/poll?timeout=1"))
        .bearer_auth(&device_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(!inbox["messages"].as_array().unwrap().is_empty(), "{inbox}");
    let acked = http
        .post(server.url("/v1/ack"))
        .bearer_auth(&device_token)
        .json(&json!({"cursor": inbox["cursor"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(acked.status(), 200, "{}", acked.text().await.unwrap());

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = server.metrics().await;
        let missing: Vec<&String> = wanted.iter().filter(|n| !exports(&text, n)).collect();
        if missing.is_empty() {
            break text;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("the dashboard reads metrics the server does not export: {missing:?}\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Every family on the page, the provider ones included, says what it is.
    for family in text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
    {
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family} has no # HELP line:\n{text}"
        );
    }
    drop(ws);
    server.terminate();
}
