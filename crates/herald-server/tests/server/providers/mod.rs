//! Provider delivery end to end, in process: a server whose provider endpoints point at the
//! real mock providers (TLS, HTTP/2) of `herald-mock`, credentials set through the API, devices
//! registered, pushes sent, and what the mocks received and the receipts say checked. Covers
//! the `auto` state machine (acknowledged in the window: no provider push; not acknowledged:
//! exactly one; offline: one at once), broadcasts, every provider, retries and dead letters,
//! a gone token deactivating its device, and one app's credentials never serving another's.

use std::path::Path;
use std::time::Duration;

use herald_client::ws::WsClient;
use herald_mock::apns::{test_key, ApnsMock, ApnsMockOptions, Scripted};
use herald_mock::fcm::{test_account, FcmMock, FcmMockOptions};
use herald_mock::webpush::{WebPushMock, WebPushMockOptions};
use herald_server::vocabulary::{Destinations, RetryPolicy};
use herald_server::{RunningServer, ServerSettings};
use serde_json::{json, Value};

use crate::support::{self, API_KEY};

mod background;
mod destinations;
mod push_hooks;

const KEY_ID: &str = "ABC123DEFG";
const TEAM_ID: &str = "DEF123GHIJ";
const ADMIN_KEY: &str = "admin-key-0123456789abcdef";

/// Loopback addresses, allowed as outbound destinations (where the mocks listen).
fn loopback() -> Destinations {
    Destinations::allowing(vec![
        "127.0.0.0/8".parse().unwrap(),
        "::1/128".parse().unwrap(),
    ])
}

/// The three mock providers and the APNs key they accept.
struct Mocks {
    apns: ApnsMock,
    fcm: FcmMock,
    webpush: WebPushMock,
    p8: String,
}

impl Mocks {
    async fn start() -> Mocks {
        let (p8, public) = test_key();
        let apns = ApnsMock::start(ApnsMockOptions {
            keys: vec![(KEY_ID.into(), TEAM_ID.into(), public)],
            ..ApnsMockOptions::default()
        })
        .await
        .unwrap();
        let fcm = FcmMock::start(FcmMockOptions::default()).await.unwrap();
        let webpush = WebPushMock::start(WebPushMockOptions::default())
            .await
            .unwrap();
        Mocks {
            apns,
            fcm,
            webpush,
            p8,
        }
    }

    /// Server settings pointing every provider at the mocks, with quick retries.
    fn settings(&self, data: &Path) -> ServerSettings {
        let mut s = support::settings(data);
        s.admin_key = Some(ADMIN_KEY.into());
        self.point_at_mocks(&mut s);
        s
    }

    /// Points every provider of `s` at the mocks, with quick retries.
    fn point_at_mocks(&self, s: &mut ServerSettings) {
        let p = &mut s.providers;
        p.endpoints.apns_url = Some(self.apns.url());
        p.endpoints.fcm_url = Some(self.fcm.url());
        p.endpoints.extra_ca_pem = Some(
            [
                &self.apns.cert_pem,
                &self.fcm.cert_pem,
                &self.webpush.cert_pem,
            ]
            .map(|s| s.as_str())
            .concat()
            .into_bytes(),
        );
        p.endpoints.connections = 1;
        p.delivery.poll = Duration::from_millis(20);
        p.delivery.retry = RetryPolicy {
            max_attempts: 3,
            base: Duration::from_millis(20),
            cap: Duration::from_millis(100),
        };
        // The mocks listen on loopback, which tenant-given Web Push endpoints reach only when
        // the operator allows it.
        s.outbound = loopback();
    }

    fn apns_credentials(&self) -> Value {
        json!({"topic":"com.example.app","key":self.p8,"key_id":KEY_ID,"team_id":TEAM_ID})
    }
}

async fn call(
    server: &RunningServer,
    method: &str,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let url = format!("http://{}{path}", server.http_addr());
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = reqwest::Client::new().request(method, url).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn ok(server: &RunningServer, method: &str, path: &str, body: Value) -> Value {
    let (status, answer) = call(server, method, path, API_KEY, Some(body)).await;
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {answer}"
    );
    answer
}

/// Sets all three providers' credentials of the default app.
async fn set_credentials(server: &RunningServer, mocks: &Mocks) {
    ok(
        server,
        "PUT",
        "/v1/apps/default/providers/apns",
        mocks.apns_credentials(),
    )
    .await;
    let account: Value = serde_json::from_str(&test_account(&mocks.fcm.url())).unwrap();
    ok(
        server,
        "PUT",
        "/v1/apps/default/providers/fcm",
        json!({ "service_account": account }),
    )
    .await;
    ok(
        server,
        "PUT",
        "/v1/apps/default/providers/webpush",
        json!({"subject":"mailto:ops@example.com","generate":true}),
    )
    .await;
}

fn apns_token(n: u8) -> String {
    format!("{:064x}", n as u128 * 7919)
}

async fn register(server: &RunningServer, device: Value) {
    ok(server, "POST", "/v1/devices", device).await;
}

async fn push(server: &RunningServer, body: Value) -> String {
    ok(server, "POST", "/v1/push", body).await["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Polls the receipt until `done` holds (bounded: 10 s).
async fn receipt_when(server: &RunningServer, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let path = format!("/v1/push/{id}?devices=true");
    for _ in 0..500 {
        let (status, r) = call(server, "GET", &path, API_KEY, None).await;
        assert_eq!(status, 200, "{r}");
        if done(&r) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, r) = call(server, "GET", &path, API_KEY, None).await;
    panic!("receipt of {id} never reached the expected state: {r}");
}

fn settled(r: &Value) -> bool {
    let p = &r["providers"];
    p["queued"] == 0 && p["expanding"] == false
}

async fn device_token(server: &RunningServer, device: &str) -> String {
    ok(
        server,
        "POST",
        "/v1/tokens",
        json!({"sub":"u","device":device}),
    )
    .await["token"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Opens the device's inbox over WebSocket; returns the client once both logs are subscribed.
async fn connect_device(server: &RunningServer, device: &str) -> WsClient {
    let token = device_token(server, device).await;
    let base = format!("ws://{}", server.http_addr());
    WsClient::connect(&base, Some(&token)).await.unwrap()
}

async fn start(mocks: &Mocks) -> (tempfile::TempDir, RunningServer) {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start(mocks.settings(dir.path())).await;
    set_credentials(&server, mocks).await;
    (dir, server)
}

#[tokio::test]
async fn an_offline_device_gets_exactly_one_provider_push_at_once() {
    let mocks = Mocks::start().await;
    let (_dir, server) = start(&mocks).await;
    register(
        &server,
        json!({"id":"phone","platform":"apns","token":apns_token(1)}),
    )
    .await;
    let id = push(
        &server,
        json!({"target":{"device":"phone"},"notification":{"title":"Hi","body":"there"},"data":{"n":1},"ack_window":3600}),
    )
    .await;
    let r = receipt_when(&server, &id, settled).await;
    assert_eq!(r["delivery"], "auto", "{r}");
    assert_eq!(r["providers"]["accepted"], 1, "{r}");
    assert_eq!(r["devices"][0]["result"], "accepted", "{r}");
    let got = mocks.apns.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].token, apns_token(1));
    assert_eq!(got[0].topic.as_deref(), Some("com.example.app"));
    let payload: Value = serde_json::from_slice(&got[0].payload).unwrap();
    assert_eq!(payload["aps"]["alert"]["title"], "Hi", "{payload}");
    server.shutdown().await.unwrap();
}

/// Reads frames until the device's two inbox subscriptions are confirmed.
async fn inbox_opened(ws: &mut WsClient) {
    let mut opened = 0;
    while opened < 2 {
        let frame = ws.next_frame().await.unwrap().expect("connection open");
        let v: Value = serde_json::from_str(frame.text()).unwrap();
        if v.get("subscribe").is_some() {
            opened += 1;
        }
        assert!(v.get("error").is_none(), "inbox did not open: {v}");
    }
}

#[tokio::test]
async fn a_device_that_acknowledges_within_the_window_gets_no_provider_push() {
    let mocks = Mocks::start().await;
    let (_dir, server) = start(&mocks).await;
    register(
        &server,
        json!({"id":"phone","platform":"apns","token":apns_token(2)}),
    )
    .await;
    let mut ws = connect_device(&server, "phone").await;
    inbox_opened(&mut ws).await;
    let id = push(
        &server,
        json!({"target":{"device":"phone"},"notification":{"title":"Hi"},"ack_window":3600}),
    )
    .await;
    let m = ws.next_message().await.unwrap().unwrap();
    assert_eq!(m.id, id);
    ws.ack(&m.channel, m.seq, Some(&m.epoch)).await.unwrap();
    let r = receipt_when(&server, &id, settled).await;
    assert_eq!(r["delivered"], 1, "{r}");
    assert_eq!(r["providers"]["live"], 1, "{r}");
    assert_eq!(r["providers"]["sent"], 0, "{r}");
    assert_eq!(r["devices"][0]["result"], "live", "{r}");
    assert_eq!(mocks.apns.received_count(), 0);
    ws.close().await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_connected_device_that_does_not_acknowledge_gets_exactly_one_provider_push() {
    let mocks = Mocks::start().await;
    let (_dir, server) = start(&mocks).await;
    register(
        &server,
        json!({"id":"phone","platform":"apns","token":apns_token(3)}),
    )
    .await;
    let mut ws = connect_device(&server, "phone").await;
    inbox_opened(&mut ws).await;
    let id = push(
        &server,
        json!({"target":{"device":"phone"},"notification":{"title":"Hi"},"ack_window":0.2}),
    )
    .await;
    let m = ws.next_message().await.unwrap().unwrap();
    assert_eq!(m.id, id, "the live connection got it first");
    let r = receipt_when(&server, &id, settled).await;
    assert_eq!(r["providers"]["accepted"], 1, "{r}");
    assert_eq!(r["delivered"], 0, "{r}");
    assert_eq!(mocks.apns.received_count(), 1);
    // A late ack still counts as delivered, and sends nothing more.
    ws.ack(&m.channel, m.seq, Some(&m.epoch)).await.unwrap();
    let r = receipt_when(&server, &id, |r| r["delivered"] == 1).await;
    assert_eq!(r["providers"]["accepted"], 1, "{r}");
    assert_eq!(mocks.apns.received_count(), 1);
    ws.close().await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_broadcast_reaches_every_provider_once_and_web_push_is_decrypted_by_the_service() {
    let mocks = Mocks::start().await;
    let (_dir, server) = start(&mocks).await;
    let sub = mocks.webpush.subscription();
    register(
        &server,
        json!({"id":"a1","platform":"apns","token":apns_token(4),"tags":["news"]}),
    )
    .await;
    register(
        &server,
        json!({"id":"a2","platform":"apns","token":apns_token(5),"tags":["sport"]}),
    )
    .await;
    register(
        &server,
        json!({"id":"f1","platform":"fcm","token":"fcm-registration-token-0001","tags":["news"]}),
    )
    .await;
    register(
        &server,
        json!({"id":"w1","platform":"webpush","token":sub.endpoint,
               "keys":{"p256dh":sub.p256dh,"auth":sub.auth},"tags":["news"]}),
    )
    .await;
    register(
        &server,
        json!({"id":"h1","platform":"herald","tags":["news"]}),
    )
    .await;
    let id = push(
        &server,
        json!({"target":{"tags":"news"},"notification":{"title":"Extra"},"data":{"story":7},
               "delivery":"provider"}),
    )
    .await;
    let r = receipt_when(&server, &id, settled).await;
    assert_eq!(r["providers"]["accepted"], 3, "{r}");
    let devices: Vec<&str> = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["device"].as_str().unwrap())
        .collect();
    assert_eq!(
        devices,
        ["a1", "f1", "w1"],
        "tag filter applied, herald device has no job"
    );
    let apns: Vec<String> = mocks.apns.received().into_iter().map(|r| r.token).collect();
    assert_eq!(apns, [apns_token(4)]);
    let fcm = mocks.fcm.received();
    assert_eq!(fcm.len(), 1);
    let plain = mocks.webpush.received(&sub.id);
    assert_eq!(plain.len(), 1, "one push, decrypted by the mock");
    let body: Value = serde_json::from_slice(&plain[0]).unwrap();
    assert_eq!(body["id"], id.as_str(), "{body}");
    assert_eq!(body["data"]["story"], 7, "{body}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_gone_token_deactivates_its_device_and_says_why() {
    let mocks = Mocks::start().await;
    let (_dir, server) = start(&mocks).await;
    let token = apns_token(6);
    mocks
        .apns
        .script(&token, Scripted::always(410, "Unregistered"));
    register(&server, json!({"id":"old","platform":"apns","token":token})).await;
    let id = push(
        &server,
        json!({"target":{"device":"old"},"notification":{"title":"x"}}),
    )
    .await;
    let r = receipt_when(&server, &id, settled).await;
    assert_eq!(
        r["providers"]["failed"]["unregistered:Unregistered"], 1,
        "{r}"
    );
    let (status, device) = call(&server, "GET", "/v1/devices/old", API_KEY, None).await;
    assert_eq!(status, 200);
    assert_eq!(device["active"], false, "{device}");
    assert_eq!(device["inactive_reason"], "apns: Unregistered", "{device}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn failures_are_retried_then_dead_lettered_and_can_be_dropped() {
    let mocks = Mocks::start().await;
    let (_dir, server) = start(&mocks).await;
    let flaky = apns_token(7);
    let broken = apns_token(8);
    mocks
        .apns
        .script(&flaky, Scripted::once(503, "ServiceUnavailable"));
    mocks
        .apns
        .script(&broken, Scripted::always(500, "InternalServerError"));
    register(
        &server,
        json!({"id":"flaky","platform":"apns","token":flaky}),
    )
    .await;
    register(
        &server,
        json!({"id":"broken","platform":"apns","token":broken}),
    )
    .await;
    let a = push(
        &server,
        json!({"target":{"device":"flaky"},"notification":{"title":"x"}}),
    )
    .await;
    let b = push(
        &server,
        json!({"target":{"device":"broken"},"notification":{"title":"x"}}),
    )
    .await;
    let r = receipt_when(&server, &a, settled).await;
    assert_eq!(r["providers"]["accepted"], 1, "{r}");
    assert_eq!(r["devices"][0]["attempts"], 2, "{r}");
    let r = receipt_when(&server, &b, |r| r["providers"]["dead"] == 1).await;
    assert_eq!(r["devices"][0]["state"], "dead", "{r}");
    assert_eq!(r["devices"][0]["attempts"], 3, "{r}");
    let (_, dead) = call(&server, "GET", "/v1/jobs/dead", API_KEY, None).await;
    let jobs = dead["jobs"].as_array().unwrap_or_else(|| panic!("{dead}"));
    assert_eq!(jobs.len(), 1, "{dead}");
    assert_eq!(jobs[0]["device"], "broken");
    assert_eq!(jobs[0]["push"], b.as_str());
    let job = jobs[0]["id"].as_i64().unwrap();
    let (status, stats) = call(&server, "GET", "/v1/jobs/stats", API_KEY, None).await;
    assert_eq!(status, 200);
    assert_eq!(stats["providers"]["apns"]["dead"], 1, "{stats}");
    assert_eq!(stats["providers"]["apns"]["successes"], 1, "{stats}");
    assert!(
        stats["providers"]["apns"]["retries"].as_u64().unwrap() >= 3,
        "{stats}"
    );
    let (status, _) = call(&server, "DELETE", &format!("/v1/jobs/{job}"), API_KEY, None).await;
    assert_eq!(status, 204);
    let (status, _) = call(&server, "DELETE", &format!("/v1/jobs/{job}"), API_KEY, None).await;
    assert_eq!(status, 404);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn one_apps_credentials_never_send_for_another_app() {
    let mocks = Mocks::start().await;
    let (_dir, server) = start(&mocks).await;
    let (status, created) = call(
        &server,
        "POST",
        "/v1/apps",
        ADMIN_KEY,
        Some(json!({"id":"other"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let other_key = created["key"].as_str().unwrap().to_string();
    let token = apns_token(9);
    let (status, _) = call(
        &server,
        "POST",
        "/v1/devices",
        &other_key,
        Some(json!({"id":"p","platform":"apns","token":token})),
    )
    .await;
    assert_eq!(status, 201);
    let (status, answer) = call(
        &server,
        "POST",
        "/v1/push",
        &other_key,
        Some(json!({"target":{"device":"p"},"notification":{"title":"x"}})),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["id"].as_str().unwrap();
    let path = format!("/v1/push/{id}?devices=true");
    let mut r = Value::Null;
    for _ in 0..500 {
        r = call(&server, "GET", &path, &other_key, None).await.1;
        if settled(&r) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(r["devices"][0]["result"], "no_credentials", "{r}");
    assert_eq!(
        mocks.apns.received_count(),
        0,
        "the default app's key was not used"
    );
    // Its credentials are its own business: the default app's are not visible to it.
    let (status, _) = call(
        &server,
        "GET",
        "/v1/apps/default/providers/apns",
        &other_key,
        None,
    )
    .await;
    assert_eq!(status, 404);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn credentials_are_checked_shown_without_secrets_and_bad_pushes_queue_nothing() {
    let mocks = Mocks::start().await;
    let (_dir, server) = start(&mocks).await;
    let (status, shown) = call(&server, "GET", "/v1/apps/default/providers", API_KEY, None).await;
    assert_eq!(status, 200);
    let text = shown.to_string();
    assert!(
        !text.contains("PRIVATE KEY") && !text.contains("private_key"),
        "{text}"
    );
    let names: Vec<&str> = shown["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["provider"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["apns", "fcm", "webpush"]);
    let (status, key) = reqwest::get(format!(
        "http://{}/v1/apps/default/vapid-public-key",
        server.http_addr()
    ))
    .await
    .map(|r| (r.status().as_u16(), r))
    .unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        key.headers()["access-control-allow-origin"],
        "*",
        "a page on another origin may read the VAPID key"
    );
    let key: Value = key.json().await.unwrap();
    assert_eq!(key["public_key"].as_str().unwrap().len(), 87, "{key}");

    let (status, e) = call(&server, "DELETE", "/v1/jobs/not-a-number", API_KEY, None).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (400, Some("bad_request")),
        "{e}"
    );
    let (status, e) = call(&server, "GET", "/v1/jobs/dead?limit=many", API_KEY, None).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (400, Some("bad_request")),
        "{e}"
    );
    let (status, e) = call(
        &server,
        "PATCH",
        "/v1/apps/default",
        ADMIN_KEY,
        Some(json!({"limits":{"ack_window_ms":0}})),
    )
    .await;
    assert_eq!(status, 400, "{e}");

    let mut rsa = mocks.apns_credentials();
    rsa["key"] = json!("-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n");
    let (status, e) = call(
        &server,
        "PUT",
        "/v1/apps/default/providers/apns",
        API_KEY,
        Some(rsa),
    )
    .await;
    assert_eq!(status, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("apns credentials"),
        "{e}"
    );
    let (status, e) = call(
        &server,
        "PUT",
        "/v1/apps/default/providers/fcm",
        API_KEY,
        Some(json!({"service_account":{"type":"service_account"}})),
    )
    .await;
    assert_eq!(status, 400, "{e}");

    register(
        &server,
        json!({"id":"phone","platform":"apns","token":apns_token(10)}),
    )
    .await;
    let big = "x".repeat(5000);
    let (status, e) = call(
        &server,
        "POST",
        "/v1/push",
        API_KEY,
        Some(json!({"target":{"device":"phone"},"notification":{"title":"t"},"data":big,"id":"big-1"})),
    )
    .await;
    assert_eq!(status, 413, "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().starts_with("apns"),
        "{e}"
    );
    let (status, _) = call(&server, "GET", "/v1/push/big-1", API_KEY, None).await;
    assert_eq!(status, 404, "nothing was stored or queued");
    let (status, e) = call(
        &server,
        "POST",
        "/v1/push",
        API_KEY,
        Some(json!({"target":{"device":"phone"},"notification":{"title":"t"},"apns":{"push_type":"telepathy"}})),
    )
    .await;
    assert_eq!(status, 400, "{e}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_broadcast_sent_from_its_pages_lists_and_counts_every_device() {
    let mocks = Mocks::start().await;
    let (_dir, server) = start(&mocks).await;
    mocks
        .apns
        .script(&apns_token(21), Scripted::always(400, "BadDeviceToken"));
    mocks
        .apns
        .script(&apns_token(22), Scripted::once(503, "ServiceUnavailable"));
    for (id, n) in [("bad", 21), ("flaky", 22), ("ok1", 23), ("ok2", 24)] {
        register(
            &server,
            json!({"id":id,"platform":"apns","token":apns_token(n)}),
        )
        .await;
    }
    register(&server, json!({"id":"h1","platform":"herald"})).await;
    let id = push(
        &server,
        json!({"target":{"app":true},"notification":{"title":"All"},"delivery":"provider"}),
    )
    .await;
    let r = receipt_when(&server, &id, |r| {
        settled(r) && r["providers"]["accepted"] == 3
    })
    .await;
    let p = &r["providers"];
    assert_eq!(p["sent"], 4, "{r}");
    assert_eq!(p["failed"]["rejected:BadDeviceToken"], 1, "{r}");
    assert_eq!(p["in_doubt"], 0, "{r}");
    // A device registered after the push was never sent it, and is not listed.
    register(
        &server,
        json!({"id":"late","platform":"apns","token":apns_token(25)}),
    )
    .await;
    let r = receipt_when(&server, &id, settled).await;
    let listed: Vec<(String, String, u64)> = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["device"].as_str().unwrap().to_string(),
                d["result"].as_str().unwrap().to_string(),
                d["attempts"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("bad", "rejected:BadDeviceToken", 1),
        ("flaky", "accepted", 2),
        ("ok1", "accepted", 1),
        ("ok2", "accepted", 1),
    ]
    .map(|(d, r, a)| (d.to_string(), r.to_string(), a));
    assert_eq!(listed, expected, "{r}");
    // Paged one at a time, the same list.
    let mut paged = Vec::new();
    let mut after = String::new();
    loop {
        let path = format!("/v1/push/{id}?devices=true&limit=1&after={after}");
        let (status, page) = call(&server, "GET", &path, API_KEY, None).await;
        assert_eq!(status, 200, "{page}");
        let Some(device) = page["devices"][0]["device"].as_str() else {
            break;
        };
        after = device.to_string();
        paged.push(after.clone());
        assert!(paged.len() <= 4, "{paged:?}");
    }
    assert_eq!(paged, ["bad", "flaky", "ok1", "ok2"]);
    // The direct sends are sends in the worker's figures.
    let (status, stats) = call(&server, "GET", "/v1/jobs/stats", API_KEY, None).await;
    assert_eq!(status, 200);
    let apns = &stats["providers"]["apns"];
    assert_eq!(apns["successes"], 3, "{stats}");
    assert_eq!(apns["failures"]["rejected:BadDeviceToken"], 1, "{stats}");
    assert_eq!(apns["retries"], 1, "{stats}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_auto_broadcast_sends_offline_devices_at_once_and_spares_one_that_acknowledges() {
    let mocks = Mocks::start().await;
    let (_dir, server) = start(&mocks).await;
    for (id, n) in [("phone", 31), ("tablet", 32)] {
        register(
            &server,
            json!({"id":id,"platform":"apns","token":apns_token(n)}),
        )
        .await;
    }
    let mut ws = connect_device(&server, "phone").await;
    inbox_opened(&mut ws).await;
    let id = push(
        &server,
        json!({"target":{"app":true},"notification":{"title":"All"},"ack_window":3600}),
    )
    .await;
    let m = ws.next_message().await.unwrap().unwrap();
    assert_eq!(m.id, id);
    // The offline tablet is sent to from the page at once; the connected phone waits.
    let r = receipt_when(&server, &id, |r| {
        r["providers"]["accepted"] == 1 && r["providers"]["expanding"] == false
    })
    .await;
    assert_eq!(r["providers"]["queued"], 1, "the phone waits: {r}");
    ws.ack(&m.channel, m.seq, Some(&m.epoch)).await.unwrap();
    let r = receipt_when(&server, &id, settled).await;
    assert_eq!(r["providers"]["live"], 1, "{r}");
    assert_eq!(r["providers"]["accepted"], 1, "{r}");
    let received: Vec<String> = mocks.apns.received().into_iter().map(|r| r.token).collect();
    assert_eq!(
        received,
        [apns_token(32)],
        "only the tablet got a provider push"
    );
    ws.close().await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_broadcast_page_slower_than_a_lease_keeps_its_lease_and_sends_once() {
    let mocks = Mocks::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut settings = mocks.settings(dir.path());
    settings.providers.delivery.lease = Duration::from_millis(300);
    let server = support::start(settings).await;
    set_credentials(&server, &mocks).await;
    for n in 41..44u8 {
        register(
            &server,
            json!({"id":format!("d{n}"),"platform":"apns","token":apns_token(n)}),
        )
        .await;
    }
    // A first push opens the client (APNs allows one stream until a token is accepted).
    let warm = push(
        &server,
        json!({"target":{"device":"d41"},"notification":{"title":"w"},"delivery":"provider"}),
    )
    .await;
    receipt_when(&server, &warm, settled).await;
    mocks.apns.hold();
    let id = push(
        &server,
        json!({"target":{"app":true},"notification":{"title":"All"},"delivery":"provider"}),
    )
    .await;
    tokio::time::timeout(Duration::from_secs(10), mocks.apns.wait_in_flight(3))
        .await
        .expect("the page's sends in flight");
    // The provider holds the page for several leases; the expansion renews its own, so no
    // second expansion takes the push over and nothing is sent twice.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    mocks.apns.release();
    let r = receipt_when(&server, &id, |r| {
        settled(r) && r["providers"]["accepted"] == 3
    })
    .await;
    assert_eq!(r["providers"]["in_doubt"], 0, "{r}");
    assert_eq!(
        mocks.apns.received_count(),
        4,
        "one push per device, and the warm-up"
    );
    server.shutdown().await.unwrap();
}
