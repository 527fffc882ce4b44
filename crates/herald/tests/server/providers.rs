//! Provider delivery with the real binaries: a user's journey (`herald mock apns`, `herald
//! serve` pointed at it, `herald providers set`, `herald push`, the receipt), and `kill -9` in
//! the middle of a batch of provider sends (a broadcast's page, sent directly from its
//! expansion, with every send of the batch in flight; and a page some of whose devices were
//! accepted before the kill): after the restart no device is skipped, and a device receives a
//! second provider push only where the receipt says its send was in doubt, by the mock's own
//! count per device.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use herald_mock::apns::{test_key, ApnsMock, ApnsMockOptions};
use serde_json::{json, Value};

use crate::support::{Server, API_KEY};

fn apns_token(n: usize) -> String {
    format!("{:064x}", n as u128 * 104_729 + 1)
}

/// Polls `GET path` until `done` holds (bounded: 30 s).
async fn until(server: &Server, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..1500 {
        let (status, v) = server.get(path).await;
        if status == 200 && done(&v) {
            return v;
        }
        last = v;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{path} never reached the expected state: {last}");
}

fn settled(r: &Value) -> bool {
    r["providers"]["queued"] == 0 && r["providers"]["expanding"] == false
}

/// Runs a `herald` CLI command against `server`; returns its stdout (it must succeed).
fn cli(server: &Server, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .env("HERALD_URL", format!("http://{}", server.addr))
        .env("HERALD_API_KEY", API_KEY)
        .env_remove("HERALD_CONFIG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "herald {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test]
async fn a_user_sets_apns_credentials_and_pushes_through_the_cli_to_a_mock_apns() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mock");
    let mut mock = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["mock", "apns", "--listen", "127.0.0.1:0", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(mock.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first
        .strip_prefix("herald mock apns listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    let ca = out.join("ca.pem");
    let key = out.join("AuthKey.p8");
    let mut server = Server::builder()
        .arg("--apns-url")
        .arg(&url)
        .arg("--provider-ca-file")
        .arg(ca.to_str().unwrap())
        .start()
        .await;
    let shown = cli(
        &server,
        &[
            "providers",
            "set",
            "apns",
            "--key-file",
            key.to_str().unwrap(),
            "--key-id",
            "MOCKKEY001",
            "--team-id",
            "MOCKTEAM01",
            "--topic",
            "com.example.app",
        ],
    );
    let shown: Value = serde_json::from_str(shown.trim()).unwrap();
    assert_eq!(shown["auth"], "token", "{shown}");
    assert!(!shown.to_string().contains("PRIVATE"), "{shown}");
    let (status, r) = server
        .post(
            "/v1/devices",
            json!({"id":"phone","platform":"apns","token":apns_token(1)}),
        )
        .await;
    assert_eq!(status, 201, "{r}");
    let answer = cli(
        &server,
        &[
            "push", "--device", "phone", "--title", "Shipped", "--body", "Tuesday",
        ],
    );
    let answer: Value = serde_json::from_str(answer.trim()).unwrap();
    let id = answer["id"].as_str().unwrap();
    let r = until(&server, &format!("/v1/push/{id}"), settled).await;
    assert_eq!(r["providers"]["accepted"], 1, "{r}");
    let table = cli(&server, &["jobs", "stats"]);
    assert!(table.lines().any(|l| l.starts_with("apns")), "{table}");
    let metrics = server.metrics().await;
    let sent = metrics
        .lines()
        .find(|l| {
            l.starts_with("herald_provider_sends_total{") && l.contains("result=\"accepted\"")
        })
        .unwrap_or_else(|| panic!("no provider send metric in {metrics}"));
    assert!(
        sent.contains("app=\"default\"") && sent.ends_with(" 1"),
        "{sent}"
    );
    assert!(
        !metrics.contains(&apns_token(1)),
        "a device token in a metric label"
    );
    server.terminate();
    let _ = mock.kill();
    let _ = mock.wait();
}

#[tokio::test]
async fn kill_9_in_the_middle_of_a_batch_skips_no_device_and_duplicates_only_sends_in_doubt() {
    const DEVICES: usize = 500;
    const BATCH: usize = 200;
    let (p8, public) = test_key();
    let mock = ApnsMock::start(ApnsMockOptions {
        keys: vec![("KEYID00001".into(), "TEAMID0001".into(), public)],
        ..ApnsMockOptions::default()
    })
    .await
    .unwrap();
    let mut server = Server::builder()
        .env("HERALD_APNS_URL", &mock.url())
        .file_arg("--provider-ca-file", "ca.pem", &mock.cert_pem)
        .env("HERALD_PROVIDER_BATCH", &BATCH.to_string())
        .env("HERALD_PROVIDER_LEASE", "1s")
        // One round at a time, so exactly one batch is in flight when the server is killed.
        .env("HERALD_PROVIDER_ROUNDS", "1")
        .start()
        .await;
    let (status, r) = server
        .post_as(
            "PUT",
            "/v1/apps/default/providers/apns",
            json!({"topic":"com.example.app","key":p8,"key_id":"KEYID00001","team_id":"TEAMID0001"}),
        )
        .await;
    assert_eq!(status, 201, "{r}");
    let devices: Vec<Value> = (0..DEVICES)
        .map(|i| json!({"id": format!("d{i:04}"), "platform":"apns", "token": apns_token(i)}))
        .collect();
    let (status, r) = server
        .post("/v1/devices/batch", json!({ "devices": devices }))
        .await;
    assert_eq!(status, 200, "{r}");
    // A first push opens the client (APNs allows one stream until a token is accepted).
    let (_, warm) = server
        .post(
            "/v1/push",
            json!({"target":{"device":"d0000"},"notification":{"title":"w"}}),
        )
        .await;
    until(
        &server,
        &format!("/v1/push/{}", warm["id"].as_str().unwrap()),
        settled,
    )
    .await;

    mock.hold();
    let (status, answer) = server
        .post(
            "/v1/push",
            json!({"target":{"app":true},"notification":{"title":"all"},"delivery":"provider"}),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["id"].as_str().unwrap().to_string();
    tokio::time::timeout(Duration::from_secs(30), mock.wait_in_flight(BATCH))
        .await
        .expect("a whole batch in flight");
    server.kill9();
    mock.release();
    server.restart().await;

    let path = format!("/v1/push/{id}?devices=true&limit=1000");
    let r = until(&server, &path, |r| {
        settled(r) && r["providers"]["accepted"] == DEVICES
    })
    .await;
    let in_doubt: Vec<&str> = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["in_doubt"] == true)
        .map(|d| d["device"].as_str().unwrap())
        .collect();
    assert_eq!(
        in_doubt.len(),
        BATCH,
        "the batch in flight at the crash is in doubt: {r}"
    );
    assert_eq!(r["providers"]["in_doubt"], BATCH, "{r}");

    let mut sends: HashMap<String, usize> = HashMap::new();
    for received in mock.received() {
        let payload: Value = serde_json::from_slice(&received.payload).unwrap();
        if payload["herald_id"] == id.as_str() {
            *sends.entry(received.token).or_default() += 1;
        }
    }
    for i in 0..DEVICES {
        let token = apns_token(i);
        let n = sends.get(&token).copied().unwrap_or(0);
        let device = format!("d{i:04}");
        let doubted = in_doubt.contains(&device.as_str());
        assert!(n >= 1, "{device} was skipped");
        assert!(
            n == 1 || doubted,
            "{device} got {n} pushes but was not in doubt"
        );
    }
    server.terminate();
}

#[tokio::test]
async fn kill_9_in_the_middle_of_a_direct_broadcast_page_after_some_sends_were_accepted() {
    const DEVICES: usize = 600;
    const BATCH: usize = 100;
    let (p8, public) = test_key();
    let mock = ApnsMock::start(ApnsMockOptions {
        keys: vec![("KEYID00001".into(), "TEAMID0001".into(), public)],
        ..ApnsMockOptions::default()
    })
    .await
    .unwrap();
    let mut server = Server::builder()
        .env("HERALD_APNS_URL", &mock.url())
        .file_arg("--provider-ca-file", "ca.pem", &mock.cert_pem)
        .env("HERALD_PROVIDER_BATCH", &BATCH.to_string())
        .env("HERALD_PROVIDER_LEASE", "1s")
        .start()
        .await;
    let (status, r) = server
        .post_as(
            "PUT",
            "/v1/apps/default/providers/apns",
            json!({"topic":"com.example.app","key":p8,"key_id":"KEYID00001","team_id":"TEAMID0001"}),
        )
        .await;
    assert_eq!(status, 201, "{r}");
    let devices: Vec<Value> = (0..DEVICES)
        .map(|i| json!({"id": format!("d{i:04}"), "platform":"apns", "token": apns_token(i)}))
        .collect();
    let (status, r) = server
        .post("/v1/devices/batch", json!({ "devices": devices }))
        .await;
    assert_eq!(status, 200, "{r}");
    let (_, warm) = server
        .post(
            "/v1/push",
            json!({"target":{"device":"d0000"},"notification":{"title":"w"}}),
        )
        .await;
    until(
        &server,
        &format!("/v1/push/{}", warm["id"].as_str().unwrap()),
        settled,
    )
    .await;
    let warm_accepted = mock.accepted();

    // An `auto` broadcast: no device holds a connection, so every device is due at once and
    // sent directly from the expansion's page.
    let (status, answer) = server
        .post(
            "/v1/push",
            json!({"target":{"app":true},"notification":{"title":"all"},"ack_window":5}),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["id"].as_str().unwrap().to_string();
    tokio::time::timeout(Duration::from_secs(30), async {
        while mock.accepted() < warm_accepted + 30 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("some of the broadcast accepted");
    mock.hold();
    tokio::time::timeout(Duration::from_secs(30), mock.wait_in_flight(BATCH / 2))
        .await
        .expect("sends in flight");
    server.kill9();
    mock.release();
    server.restart().await;

    let path = format!("/v1/push/{id}?devices=true&limit=1000");
    let r = until(&server, &path, |r| {
        settled(r) && r["providers"]["accepted"] == DEVICES
    })
    .await;
    let listed = r["devices"].as_array().unwrap();
    assert_eq!(listed.len(), DEVICES, "every device listed: {r}");
    let in_doubt: Vec<&str> = listed
        .iter()
        .filter(|d| d["in_doubt"] == true)
        .map(|d| d["device"].as_str().unwrap())
        .collect();
    assert!(!in_doubt.is_empty(), "the page in flight is in doubt: {r}");
    assert_eq!(r["providers"]["in_doubt"], in_doubt.len(), "{r}");

    let received = mock.received();
    assert!(
        (mock.received_count() as usize) <= received.len(),
        "the mock kept every request it received"
    );
    let mut sends: HashMap<String, usize> = HashMap::new();
    for received in received {
        let payload: Value = serde_json::from_slice(&received.payload).unwrap();
        if payload["herald_id"] == id.as_str() {
            *sends.entry(received.token).or_default() += 1;
        }
    }
    for i in 0..DEVICES {
        let n = sends.get(&apns_token(i)).copied().unwrap_or(0);
        let device = format!("d{i:04}");
        assert!(n >= 1, "{device} was skipped");
        assert!(
            n == 1 || in_doubt.contains(&device.as_str()),
            "{device} got {n} pushes but was not in doubt"
        );
    }
    server.terminate();
}
