//! Device and delivery webhooks end to end, in process: a webhook endpoint on a receiver in
//! this test (axum on loopback), the server's provider endpoints pointing at `herald-mock`;
//! devices registered, pushes accepted, refused with `Unregistered`, failing until they are
//! dead letters, and acknowledged; each event received once with its exact `data`. In a
//! cluster of three nodes (PostgreSQL and Redis), each event told once, by the node where it
//! happened.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use herald_mock::apns::Scripted;
use serde_json::{json, Value};

use super::{
    apns_token, call, connect_device, inbox_opened, ok, push, receipt_when, register, settled,
    Mocks,
};
use crate::cluster::Cluster;
use crate::support::{self, API_KEY};

/// Every event a receiver was sent, in the order received.
type Received = Arc<Mutex<Vec<Value>>>;

/// A webhook receiver on loopback answering 204; its URL and what it received.
async fn receiver() -> (String, Received) {
    async fn take(State(received): State<Received>, Json(body): Json<Value>) -> StatusCode {
        let events = body["events"].as_array().cloned().unwrap_or_default();
        received.lock().unwrap().extend(events);
        StatusCode::NO_CONTENT
    }
    let received = Received::default();
    let app = Router::new()
        .route("/hooks", post(take))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// The events of `kind` received so far.
fn of_kind(received: &Received, kind: &str) -> Vec<Value> {
    received
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == kind)
        .cloned()
        .collect()
}

/// Waits (bounded: 20 s) until `done` holds of what was received; panics with it otherwise.
async fn received_when(received: &Received, done: impl Fn(&[Value]) -> bool) {
    for _ in 0..1000 {
        if done(&received.lock().unwrap()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "the receiver never got the expected events: {:#?}",
        received.lock().unwrap()
    );
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_and_delivery_events_reach_an_endpoint_once_each() {
    let mocks = Mocks::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut settings = mocks.settings(dir.path());
    settings.hooks.batch_delay = Duration::from_millis(20);
    let server = support::start(settings).await;
    super::set_credentials(&server, &mocks).await;
    let (url, received) = receiver().await;
    let (status, created) = call(
        &server,
        "POST",
        "/v1/apps/default/hooks",
        API_KEY,
        Some(json!({"url": url, "events": [
            "device.registered", "device.deactivated", "delivery.acked",
            "delivery.provider_accepted", "delivery.failed", "delivery.dead_lettered"
        ]})),
    )
    .await;
    assert_eq!(status, 201, "{created}");

    let (good, gone, broken) = (apns_token(40), apns_token(41), apns_token(42));
    mocks
        .apns
        .script(&gone, Scripted::always(410, "Unregistered"));
    mocks
        .apns
        .script(&broken, Scripted::always(500, "InternalServerError"));
    register(
        &server,
        json!({"id":"good","platform":"apns","token":good,"user":"alice"}),
    )
    .await;
    // Registered again: an update, not told.
    register(
        &server,
        json!({"id":"good","platform":"apns","token":good,"user":"alice"}),
    )
    .await;
    register(
        &server,
        json!({"id":"gone","platform":"apns","token":gone,"user":"bob"}),
    )
    .await;
    register(
        &server,
        json!({"id":"broken","platform":"apns","token":broken}),
    )
    .await;
    register(
        &server,
        json!({"id":"web","platform":"herald","user":"dave"}),
    )
    .await;

    let accepted = push(
        &server,
        json!({"target":{"device":"good"},"notification":{"title":"x"}}),
    )
    .await;
    let refused = push(
        &server,
        json!({"target":{"device":"gone"},"notification":{"title":"x"}}),
    )
    .await;
    let dead = push(
        &server,
        json!({"target":{"device":"broken"},"notification":{"title":"x"}}),
    )
    .await;
    receipt_when(&server, &accepted, settled).await;
    receipt_when(&server, &refused, settled).await;
    receipt_when(&server, &dead, |r| r["providers"]["dead"] == 1).await;

    // An acknowledgement over a live connection.
    let mut ws = connect_device(&server, "web").await;
    inbox_opened(&mut ws).await;
    let live = push(&server, json!({"target":{"device":"web"},"data":{"n":1}})).await;
    let m = ws.next_message().await.unwrap().unwrap();
    assert_eq!(m.id, live);
    ws.ack(&m.channel, m.seq, Some(&m.epoch)).await.unwrap();

    received_when(&received, |events| {
        count(events, "device.registered") >= 4
            && count(events, "device.deactivated") >= 1
            && count(events, "delivery.acked") >= 1
            && count(events, "delivery.provider_accepted") >= 1
            && count(events, "delivery.failed") >= 3
            && count(events, "delivery.dead_lettered") >= 1
    })
    .await;
    ws.close().await;

    let registered = of_kind(&received, "device.registered");
    let mut ids: Vec<&str> = registered
        .iter()
        .map(|e| e["data"]["device"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["broken", "gone", "good", "web"], "once per device");
    let first = &registered[0];
    assert_eq!(first["app"], "default");
    assert!(first["id"].as_str().unwrap().starts_with("evt_"), "{first}");
    assert_eq!(
        first["data"],
        json!({"device":"good","platform":"apns","user":"alice"})
    );

    let deactivated = of_kind(&received, "device.deactivated");
    assert_eq!(deactivated.len(), 1, "{deactivated:#?}");
    assert_eq!(
        deactivated[0]["data"],
        json!({"device":"gone","platform":"apns","user":"bob","reason":"apns: Unregistered"})
    );

    let acked = of_kind(&received, "delivery.acked");
    assert_eq!(acked.len(), 1, "{acked:#?}");
    assert_eq!(
        acked[0]["data"],
        json!({"push": live, "device":"web","platform":"herald","user":"dave"})
    );

    let provider_accepted = of_kind(&received, "delivery.provider_accepted");
    assert_eq!(provider_accepted.len(), 1, "{provider_accepted:#?}");
    let data = &provider_accepted[0]["data"];
    assert!(data["job"].as_i64().is_some(), "{data}");
    assert_eq!(
        data,
        &json!({"push": accepted, "job": data["job"], "broadcast": false, "device": "good",
                "platform": "apns", "user": "alice", "attempts": 1})
    );

    let failed = of_kind(&received, "delivery.failed");
    assert_eq!(failed.len(), 3, "one refused, two retried: {failed:#?}");
    let unregistered: Vec<&Value> = failed
        .iter()
        .filter(|e| e["data"]["device"] == "gone")
        .collect();
    assert_eq!(unregistered.len(), 1, "{failed:#?}");
    let data = &unregistered[0]["data"];
    assert_eq!(data["push"], refused.as_str());
    assert_eq!(data["result"], "unregistered:Unregistered", "{data}");
    assert_eq!(data["reason"], "Unregistered", "{data}");
    assert_eq!(data["final"], true, "{data}");
    assert_eq!(data["retry_at"], Value::Null, "{data}");
    assert_eq!(data["user"], "bob");
    let retried: Vec<&Value> = failed
        .iter()
        .map(|e| &e["data"])
        .filter(|d| d["device"] == "broken")
        .collect();
    let mut attempts: Vec<i64> = retried
        .iter()
        .map(|d| d["attempts"].as_i64().unwrap())
        .collect();
    attempts.sort_unstable();
    assert_eq!(attempts, [1, 2], "{retried:#?}");
    for d in &retried {
        assert_eq!(d["final"], false, "{d}");
        assert_eq!(d["result"], Value::Null, "{d}");
        assert!(d["retry_at"].as_str().is_some(), "{d}");
        assert_eq!(d["user"], Value::Null, "{d}");
    }

    let dead_lettered = of_kind(&received, "delivery.dead_lettered");
    assert_eq!(dead_lettered.len(), 1, "{dead_lettered:#?}");
    let data = &dead_lettered[0]["data"];
    assert_eq!(data["push"], dead.as_str());
    assert_eq!(data["device"], "broken");
    assert_eq!(data["attempts"], 3, "{data}");
    assert!(
        data["reason"]
            .as_str()
            .unwrap()
            .contains("InternalServerError"),
        "the provider's answer: {data}"
    );
    assert!(!data["host"].as_str().unwrap().is_empty(), "{data}");
    let arguments = &data["arguments"];
    assert_eq!(arguments["push"], dead.as_str(), "{arguments}");
    assert_eq!(arguments["device"], "broken");
    assert_eq!(arguments["provider"], "apns");
    assert_eq!(arguments["delivery"], "auto");
    assert!(
        arguments["payload_bytes"].as_u64().unwrap() > 0,
        "{arguments}"
    );
    assert!(arguments["expires"].as_str().is_some(), "{arguments}");
    let hint = arguments["token"].as_str().unwrap();
    assert!(
        hint.starts_with('…') && broken.ends_with(hint.trim_start_matches('…')),
        "a hint of the token, never all of it: {hint}"
    );
    assert!(
        !data.to_string().contains(&broken),
        "the token is never whole in an event: {data}"
    );
    // The job is the one `herald jobs dead` lists.
    let (_, jobs) = call(&server, "GET", "/v1/jobs/dead", API_KEY, None).await;
    assert_eq!(jobs["jobs"][0]["id"], data["job"], "{jobs}");

    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_wants_no_device_or_delivery_event_gets_none() {
    let mocks = Mocks::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut settings = mocks.settings(dir.path());
    settings.hooks.batch_delay = Duration::from_millis(20);
    let server = support::start(settings).await;
    super::set_credentials(&server, &mocks).await;
    let (url, received) = receiver().await;
    ok(
        &server,
        "POST",
        "/v1/apps/default/hooks",
        json!({"url": url, "events": ["device.registered"]}),
    )
    .await;
    register(
        &server,
        json!({"id":"good","platform":"apns","token":apns_token(43)}),
    )
    .await;
    let id = push(
        &server,
        json!({"target":{"device":"good"},"notification":{"title":"x"}}),
    )
    .await;
    receipt_when(&server, &id, settled).await;
    // A second registration is the marker: events are queued in order, so once it arrives
    // anything the push had been told as would have arrived before it.
    register(
        &server,
        json!({"id":"later","platform":"apns","token":apns_token(44)}),
    )
    .await;
    received_when(&received, |events| count(events, "device.registered") == 2).await;
    let kinds: Vec<String> = received
        .lock()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["device.registered", "device.registered"]);
    server.shutdown().await.unwrap();
}

/// Whether a device registration with this id was received.
fn registered(received: &Received, id: &str) -> bool {
    received
        .lock()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "device.registered" && e["data"]["device"] == id)
}

/// Waits until node `k` tells the endpoint's events: registers probe devices on it until one
/// is received (a node learns of an endpoint made on another within its snapshot's reload).
async fn node_tells(cluster: &Cluster, k: usize, received: &Received) {
    for attempt in 0..200 {
        let probe = format!("probe-{k}-{attempt}");
        register(cluster.node(k), json!({"id": probe, "platform": "herald"})).await;
        for _ in 0..10 {
            if registered(received, &probe) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    panic!("node {k} never told its events");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_cluster_each_event_is_told_once_by_the_node_where_it_happens() {
    let mocks = Mocks::start().await;
    let cluster = Cluster::start_with(3, |_, s| {
        mocks.point_at_mocks(s);
        s.hooks.batch_delay = Duration::from_millis(20);
    })
    .await;
    super::set_credentials(cluster.node(0), &mocks).await;
    let (url, received) = receiver().await;
    let (status, created) = cluster
        .call(
            1,
            "POST",
            "/v1/apps/default/hooks",
            API_KEY,
            Some(json!({"url": url, "events": ["*"]})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    for k in 0..3 {
        node_tells(&cluster, k, &received).await;
    }

    let (good, gone) = (apns_token(45), apns_token(46));
    mocks
        .apns
        .script(&gone, Scripted::always(410, "Unregistered"));
    register(
        cluster.node(0),
        json!({"id":"good","platform":"apns","token":good,"user":"alice"}),
    )
    .await;
    register(
        cluster.node(1),
        json!({"id":"gone","platform":"apns","token":gone,"user":"bob"}),
    )
    .await;
    register(
        cluster.node(2),
        json!({"id":"web","platform":"herald","user":"dave"}),
    )
    .await;
    // `provider`: sent at once (in a cluster an `auto` push waits the ack window).
    let accepted = push(
        cluster.node(1),
        json!({"target":{"device":"good"},"notification":{"title":"x"},"delivery":"provider"}),
    )
    .await;
    let refused = push(
        cluster.node(2),
        json!({"target":{"device":"gone"},"notification":{"title":"x"},"delivery":"provider"}),
    )
    .await;
    receipt_when(cluster.node(0), &accepted, settled).await;
    receipt_when(cluster.node(0), &refused, settled).await;
    let mut ws = connect_device(cluster.node(2), "web").await;
    inbox_opened(&mut ws).await;
    let live = push(
        cluster.node(0),
        json!({"target":{"device":"web"},"data":{"n":1}}),
    )
    .await;
    let m = ws.next_message().await.unwrap().unwrap();
    assert_eq!(m.id, live);
    ws.ack(&m.channel, m.seq, Some(&m.epoch)).await.unwrap();
    received_when(&received, |events| {
        count(events, "delivery.acked") >= 1
            && count(events, "delivery.provider_accepted") >= 1
            && count(events, "delivery.failed") >= 1
            && count(events, "device.deactivated") >= 1
    })
    .await;
    ws.close().await;
    // A last registration on each node: what was told before it has arrived by then.
    for k in 0..3 {
        let marker = format!("marker-{k}");
        register(cluster.node(k), json!({"id": marker, "platform": "herald"})).await;
        received_when(&received, |events| {
            events
                .iter()
                .any(|e| e["type"] == "device.registered" && e["data"]["device"] == *marker)
        })
        .await;
    }

    let told: Vec<Value> = received
        .lock()
        .unwrap()
        .iter()
        .filter(|e| {
            let device = e["data"]["device"].as_str().unwrap_or_default();
            e["type"].as_str().unwrap().starts_with("de")
                && !device.starts_with("probe-")
                && !device.starts_with("marker-")
        })
        .cloned()
        .collect();
    let mut seen: Vec<(String, String)> = told
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["data"]["device"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    seen.sort();
    let expected: Vec<(String, String)> = [
        ("delivery.acked", "web"),
        ("delivery.failed", "gone"),
        ("delivery.provider_accepted", "good"),
        ("device.deactivated", "gone"),
        ("device.registered", "gone"),
        ("device.registered", "good"),
        ("device.registered", "web"),
    ]
    .map(|(t, d)| (t.to_owned(), d.to_owned()))
    .to_vec();
    assert_eq!(seen, expected, "each once, from one node: {told:#?}");
    let acked = told.iter().find(|e| e["type"] == "delivery.acked").unwrap();
    assert_eq!(acked["data"]["push"], live.as_str());
    let accepted_event = told
        .iter()
        .find(|e| e["type"] == "delivery.provider_accepted")
        .unwrap();
    assert_eq!(accepted_event["data"]["push"], accepted.as_str());
    assert_eq!(accepted_event["data"]["user"], "alice");
    let sent = mocks.apns.received();
    assert_eq!(
        sent.iter().filter(|r| r.token == good).count(),
        1,
        "good's one push"
    );
    cluster.shutdown().await;
}
