//! Pusher's HTTP API against the real binary, driven by Pusher's official server SDKs (npm
//! `pusher` in `tests/pusher/trigger.mjs`, PyPI `pusher` in `tests/pusher/trigger.py`,
//! installed by `scripts/install-pusher-clients.sh`, which `scripts/test.sh` runs): credentials
//! made through Herald's admin API (`/v1/apps/{id}/pusher`); a trigger and a batch from either
//! SDK reach a Herald WebSocket subscriber of the mapped channel (and its history) as the
//! `$pusher` envelope; a wrong secret, an old timestamp, a tampered body and an unknown key are
//! 401s that say what was wrong; Pusher's limits are its answers; a rotated-out secret works
//! during its overlap and not after one of none; one app's credentials never publish to
//! another's channels; imported values (soketi's) work as given; `herald pusher` creates,
//! shows, rotates and deletes them.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::{call, Server, Ws, API_KEY};

const ADMIN: &str = "pusher-api-admin-key-0123456789";

/// Where the SDKs are installed.
pub(crate) fn clients() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/pusher")
}

/// A set of Pusher credentials as the API answered them.
#[derive(Clone, Debug)]
pub(crate) struct Credentials {
    pub(crate) app_id: String,
    pub(crate) key: String,
    pub(crate) secret: String,
}

/// Creates `app`'s credentials with `key` (its publisher key or the admin key), from `body`.
pub(crate) async fn create(s: &Server, app: &str, key: &str, body: Option<Value>) -> Credentials {
    let path = format!("/v1/apps/{app}/pusher");
    let (status, created) = call(s, "POST", &path, key, body).await;
    assert_eq!(status, 201, "{created}");
    Credentials {
        app_id: created["app_id"].as_str().expect("app_id").into(),
        key: created["key"].as_str().expect("key").into(),
        secret: created["secret"].as_str().expect("secret").into(),
    }
}

/// Which SDK runs an order.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Sdk {
    Node,
    Python,
}

/// Runs `order` (a `trigger` or a `batch`, and maybe `clock_offset_ms`) through `sdk` with
/// `creds` against `s`: the answer's status and body text.
pub(crate) async fn run(sdk: Sdk, s: &Server, creds: &Credentials, order: Value) -> (u16, String) {
    let mut order = order;
    let fields = order.as_object_mut().expect("an order object");
    fields.insert("host".into(), json!(s.addr.ip().to_string()));
    fields.insert("port".into(), json!(s.addr.port()));
    fields.insert("appId".into(), json!(creds.app_id));
    fields.insert("key".into(), json!(creds.key));
    fields.insert("secret".into(), json!(creds.secret));
    let dir = clients();
    let mut command = match sdk {
        Sdk::Node => {
            assert!(
                dir.join("node_modules/pusher").is_dir(),
                "tests/pusher/node_modules is missing: run scripts/install-pusher-clients.sh"
            );
            let mut c = tokio::process::Command::new("node");
            c.arg(dir.join("trigger.mjs"));
            c
        }
        Sdk::Python => {
            let python = dir.join(".venv/bin/python");
            assert!(
                python.is_file(),
                "tests/pusher/.venv is missing: run scripts/install-pusher-clients.sh"
            );
            let mut c = tokio::process::Command::new(python);
            c.arg(dir.join("trigger.py"));
            c
        }
    };
    let output = command
        .arg(order.to_string())
        .current_dir(&dir)
        .output()
        .await
        .expect("run the SDK");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{sdk:?} SDK failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{sdk:?} SDK printed {stdout:?}: {e}"));
    (
        answer["status"].as_u64().expect("a status") as u16,
        answer["body"].as_str().unwrap_or_default().to_owned(),
    )
}

/// A trigger of `event` with `data` to `channels`.
pub(crate) fn trigger(channels: &[&str], event: &str, data: &str) -> Value {
    json!({ "trigger": { "channels": channels, "event": event, "data": data } })
}

/// The envelope a trigger is stored as.
fn envelope(event: &str, data: &str) -> Value {
    json!({ "$pusher": { "event": event, "data": data } })
}

/// A WebSocket subscriber of the default app's `channel`.
pub(crate) async fn subscriber(s: &Server, channel: &str) -> Ws {
    let mut ws = Ws::connect(&s.ws_url("")).await;
    let token = s.token(&[channel], &[]);
    let r = ws.request("connect", json!({ "token": token })).await;
    assert!(r.get("connect").is_some(), "{r}");
    let r = ws.request("subscribe", json!({ "channel": channel })).await;
    assert_eq!(r["subscribe"]["channel"], channel, "{r}");
    ws
}

/// The data of the next message `ws` receives.
pub(crate) async fn next_data(ws: &mut Ws) -> Value {
    loop {
        let frame = ws.frame().await;
        if let Some(message) = frame.get("message") {
            return message["data"].clone();
        }
    }
}

/// The data of every message in `channel`'s history, read with `key` (the default app's
/// publisher key, or another app's).
pub(crate) async fn history(s: &Server, channel: &str, key: &str) -> Vec<Value> {
    let path = format!("/v1/channels/{channel}/messages");
    let (status, body) = call(s, "GET", &path, key, None).await;
    assert_eq!(status, 200, "{body}");
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["data"].clone())
        .collect()
}

/// A request signed as Pusher's SDKs sign it, with the auth parameters given (so a test can
/// make one of them wrong); the body is sent as `body`, whatever was signed.
pub(crate) async fn raw_post(
    s: &Server,
    path: &str,
    creds: &Credentials,
    signed_body: &str,
    body: &str,
    timestamp: i64,
) -> (u16, String) {
    use herald_pusher::signature::{body_md5, hmac_sha256_hex, request_string};
    let timestamp = timestamp.to_string();
    let md5 = body_md5(signed_body.as_bytes());
    let params = [
        ("auth_key", creds.key.as_str()),
        ("auth_timestamp", timestamp.as_str()),
        ("auth_version", "1.0"),
        ("body_md5", md5.as_str()),
    ];
    let signed = request_string("POST", path, params);
    let signature = hmac_sha256_hex(creds.secret.as_bytes(), signed.as_bytes());
    let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let url = s.url(&format!(
        "{path}?{}&auth_signature={signature}",
        query.join("&")
    ));
    let r = s
        .http
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn both_sdks_trigger_and_batch_to_herald_subscribers_as_the_envelope() {
    let s = Server::builder()
        .arg("--admin-key")
        .arg(ADMIN)
        .start()
        .await;
    let creds = create(&s, "default", API_KEY, None).await;
    assert!(
        creds.app_id.len() == 7 && creds.app_id.bytes().all(|b| b.is_ascii_digit()),
        "{creds:?}"
    );
    for hex in [&creds.key, &creds.secret] {
        assert!(
            hex.len() == 20 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "{creds:?}"
        );
    }
    let mut orders = subscriber(&s, "orders").await;

    // Node: one event to two channels, one socket excluded.
    let mut order = trigger(&["orders", "private-audit"], "order-placed", r#"{"id":1}"#);
    order["trigger"]["socket_id"] = json!("123.456");
    let (status, body) = run(Sdk::Node, &s, &creds, order).await;
    assert_eq!((status, body.as_str()), (200, "{}"));
    let mut with_socket = envelope("order-placed", r#"{"id":1}"#);
    with_socket["$pusher"]["socket_id"] = json!("123.456");
    assert_eq!(next_data(&mut orders).await, with_socket);
    assert_eq!(
        history(&s, "private-audit", API_KEY).await,
        vec![with_socket.clone()]
    );

    // Python: the same through PyPI's SDK.
    let (status, body) = run(
        Sdk::Python,
        &s,
        &creds,
        trigger(&["orders"], "order-shipped", "plain text"),
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "{}"));
    assert_eq!(
        next_data(&mut orders).await,
        envelope("order-shipped", "plain text")
    );

    // Batches from both, one to a Pusher name that is not a Herald name by itself (`,`):
    // core's topic encoding, `=a=2Cb`.
    let batch = json!({ "batch": [
        { "channel": "orders", "name": "b1", "data": "1" },
        { "channel": "a,b", "name": "b2", "data": "2" },
    ]});
    let (status, body) = run(Sdk::Node, &s, &creds, batch).await;
    assert_eq!((status, body.as_str()), (200, "{}"));
    assert_eq!(next_data(&mut orders).await, envelope("b1", "1"));
    let batch = json!({ "batch": [{ "channel": "orders", "name": "b3", "data": "3" }] });
    let (status, _) = run(Sdk::Python, &s, &creds, batch).await;
    assert_eq!(status, 200);
    assert_eq!(next_data(&mut orders).await, envelope("b3", "3"));
    assert_eq!(
        history(&s, "=a=2Cb", API_KEY).await,
        vec![envelope("b2", "2")]
    );
    assert_eq!(history(&s, "orders", API_KEY).await.len(), 4);

    // `info` asks for the channels' subscription counts.
    let mut order = trigger(&["orders"], "counted", "x");
    order["trigger"]["info"] = json!("subscription_count");
    let (status, body) = run(Sdk::Node, &s, &creds, order).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer,
        json!({"channels": {"orders": {"subscription_count": 1}}})
    );
}

#[tokio::test]
async fn refusals_are_401s_and_pushers_limits_saying_what_was_wrong() {
    let s = Server::start().await;
    let creds = create(&s, "default", API_KEY, None).await;
    let events = format!("/apps/{}/events", creds.app_id);

    // A wrong secret, through both SDKs.
    let wrong = Credentials {
        secret: "0000000000ffffffffff".into(),
        ..creds.clone()
    };
    for sdk in [Sdk::Node, Sdk::Python] {
        let (status, body) = run(sdk, &s, &wrong, trigger(&["news"], "e", "d")).await;
        assert_eq!(status, 401, "{sdk:?}: {body}");
        assert!(body.contains("Invalid signature"), "{sdk:?}: {body}");
        assert!(body.contains(&format!("POST\\n{events}\\n")), "{body}");
    }
    // A timestamp 700 s old (the SDK's clock set back).
    let mut old = trigger(&["news"], "e", "d");
    old["clock_offset_ms"] = json!(-700_000);
    let (status, body) = run(Sdk::Node, &s, &creds, old).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("Timestamp expired"), "{body}");

    // A body other than the one signed.
    let signed = r#"{"name":"e","data":"d","channels":["news"]}"#;
    let tampered = r#"{"name":"e","data":"evil","channels":["news"]}"#;
    let (status, body) = raw_post(&s, &events, &creds, signed, signed, now()).await;
    assert_eq!((status, body.as_str()), (200, "{}"));
    let (status, body) = raw_post(&s, &events, &creds, signed, tampered, now()).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.starts_with("Invalid body_md5"), "{body}");
    // Timestamps too far ahead count as well.
    let (status, body) = raw_post(&s, &events, &creds, signed, signed, now() + 700).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("Timestamp expired"), "{body}");
    // An unknown key.
    let unknown = Credentials {
        key: "ffffffffffffffffffff".into(),
        ..creds.clone()
    };
    let (status, body) = raw_post(&s, &events, &unknown, signed, signed, now()).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.starts_with("Unknown auth_key"), "{body}");
    // No signature at all.
    let r = s
        .http
        .post(s.url(&events))
        .body(signed)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.text().await.unwrap().starts_with("Missing auth_key"));

    // Pusher's limits, answered as Pusher answers them.
    let big = json!({"name": "e", "data": "x".repeat(10 * 1024 + 1), "channels": ["news"]});
    let channels: Vec<String> = (0..101).map(|i| format!("c{i}")).collect();
    let many = json!({"name": "e", "data": "d", "channels": channels});
    let bad_name = json!({"name": "e", "data": "d", "channels": ["a b"]});
    let batch: Vec<Value> = (0..11)
        .map(|_| json!({"channel": "news", "name": "e", "data": "d"}))
        .collect();
    let batch = json!({ "batch": batch });
    let batch_path = format!("/apps/{}/batch_events", creds.app_id);
    for (path, body, status, says) in [
        (&events, big, 413, "Payload too large"),
        (&events, many, 400, "Too many channels: 101"),
        (&events, bad_name, 400, "Invalid channel name"),
        (&batch_path, batch, 400, "Batch too large: 11 events"),
    ] {
        let text = body.to_string();
        let (got, answer) = raw_post(&s, path, &creds, &text, &text, now()).await;
        assert_eq!(got, status, "{answer}");
        assert!(answer.contains(says), "{answer}");
    }
    // Only the one trigger that was signed right was stored.
    assert_eq!(history(&s, "news", API_KEY).await, vec![envelope("e", "d")]);
}

#[tokio::test]
async fn a_rotated_out_secret_works_during_its_overlap_only() {
    let s = Server::start().await;
    let first = create(&s, "default", API_KEY, None).await;
    let (status, rotated) = call(
        &s,
        "POST",
        "/v1/apps/default/pusher/rotate",
        API_KEY,
        Some(json!({"overlap_seconds": 3600})),
    )
    .await;
    assert_eq!(status, 200, "{rotated}");
    assert!(rotated["previous_valid_until"].is_string(), "{rotated}");
    let second = Credentials {
        secret: rotated["secret"].as_str().unwrap().into(),
        ..first.clone()
    };
    assert_ne!(first.secret, second.secret);
    for creds in [&first, &second] {
        let (status, body) = run(Sdk::Node, &s, creds, trigger(&["news"], "e", "d")).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, shown) = call(&s, "GET", "/v1/apps/default/pusher", API_KEY, None).await;
    assert_eq!(status, 200, "{shown}");
    assert!(shown["previous_secret_valid_until"].is_string(), "{shown}");
    assert!(shown.get("secret").is_none(), "{shown}");

    // A rotation without overlap: only the newest secret works.
    let (status, rotated) = call(
        &s,
        "POST",
        "/v1/apps/default/pusher/rotate",
        API_KEY,
        Some(json!({"overlap_seconds": 0})),
    )
    .await;
    assert_eq!(status, 200, "{rotated}");
    assert_eq!(rotated["previous_valid_until"], Value::Null);
    let third = Credentials {
        secret: rotated["secret"].as_str().unwrap().into(),
        ..first.clone()
    };
    for creds in [&first, &second] {
        let (status, body) = run(Sdk::Python, &s, creds, trigger(&["news"], "e", "d")).await;
        assert_eq!(status, 401, "{body}");
        assert!(body.contains("Invalid signature"), "{body}");
    }
    let (status, body) = run(Sdk::Python, &s, &third, trigger(&["news"], "e", "d")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(history(&s, "news", API_KEY).await.len(), 3);
}

#[tokio::test]
async fn one_apps_credentials_never_publish_to_another_app() {
    let s = Server::builder()
        .arg("--admin-key")
        .arg(ADMIN)
        .start()
        .await;
    let (status, app) = call(&s, "POST", "/v1/apps", ADMIN, Some(json!({"id": "shop"}))).await;
    assert_eq!(status, 201, "{app}");
    let shop_key = app["key"].as_str().unwrap().to_owned();
    let default = create(&s, "default", ADMIN, None).await;
    let shop = create(&s, "shop", &shop_key, None).await;
    assert_ne!(default.app_id, shop.app_id);

    // Shop's key and secret with the default app's id in the path.
    let crossed = Credentials {
        app_id: default.app_id.clone(),
        ..shop.clone()
    };
    let (status, body) = run(Sdk::Node, &s, &crossed, trigger(&["news"], "e", "d")).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("is not a key of app"), "{body}");
    // The default app's id with shop's secret: the signature is wrong.
    let wrong = Credentials {
        secret: shop.secret.clone(),
        ..default.clone()
    };
    let (status, _) = run(Sdk::Python, &s, &wrong, trigger(&["news"], "e", "d")).await;
    assert_eq!(status, 401);
    assert_eq!(history(&s, "news", API_KEY).await, Vec::<Value>::new());

    // Shop's own credentials publish to shop's channel only.
    let (status, _) = run(Sdk::Node, &s, &shop, trigger(&["news"], "e", "shop's")).await;
    assert_eq!(status, 200);
    assert_eq!(
        history(&s, "news", &shop_key).await,
        vec![envelope("e", "shop's")]
    );
    assert_eq!(history(&s, "news", API_KEY).await, Vec::<Value>::new());

    // One app's key does not see or change another's credentials.
    let (status, _) = call(&s, "GET", "/v1/apps/default/pusher", &shop_key, None).await;
    assert_eq!(status, 404);
    let (status, _) = call(&s, "DELETE", "/v1/apps/default/pusher", &shop_key, None).await;
    assert_eq!(status, 404);
    let (status, shown) = call(&s, "GET", "/v1/apps/default/pusher", ADMIN, None).await;
    assert_eq!((status, &shown["key"]), (200, &json!(default.key)));
}

#[tokio::test]
async fn imported_credentials_work_as_given_and_deleting_ends_them() {
    let s = Server::builder()
        .arg("--admin-key")
        .arg(ADMIN)
        .start()
        .await;
    // soketi's defaults, kept as they are.
    let given = json!({"app_id": "app-id", "key": "app-key", "secret": "app-secret"});
    let creds = create(&s, "default", API_KEY, Some(given.clone())).await;
    assert_eq!(
        (
            creds.app_id.as_str(),
            creds.key.as_str(),
            creds.secret.as_str()
        ),
        ("app-id", "app-key", "app-secret")
    );
    // (Pusher's Python SDK takes numeric app ids only; the Node SDK any.)
    let (status, body) = run(Sdk::Node, &s, &creds, trigger(&["news"], "e", "d")).await;
    assert_eq!(status, 200, "{body}");

    // A second set, or another app with the same values, is a conflict; bad values are named.
    let (status, again) = call(&s, "POST", "/v1/apps/default/pusher", API_KEY, None).await;
    assert_eq!(status, 409, "{again}");
    let (status, app) = call(&s, "POST", "/v1/apps", ADMIN, Some(json!({"id": "shop"}))).await;
    assert_eq!(status, 201, "{app}");
    let (status, taken) = call(&s, "POST", "/v1/apps/shop/pusher", ADMIN, Some(given)).await;
    assert_eq!(status, 409, "{taken}");
    assert!(
        taken["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("app_id"),
        "{taken}"
    );
    let bad = json!({"key": "has space"});
    let (status, refused) = call(&s, "POST", "/v1/apps/shop/pusher", ADMIN, Some(bad)).await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("key:"),
        "{refused}"
    );
    let (status, refused) = call(
        &s,
        "POST",
        "/v1/apps/shop/pusher",
        ADMIN,
        Some(json!({"appId": "1"})),
    )
    .await;
    assert_eq!(status, 400, "{refused}");

    // Deleted: the key stops working at once; the audit log has the three actions, without
    // the secret.
    let (status, _) = call(&s, "DELETE", "/v1/apps/default/pusher", API_KEY, None).await;
    assert_eq!(status, 204);
    let (status, _) = call(&s, "DELETE", "/v1/apps/default/pusher", API_KEY, None).await;
    assert_eq!(status, 404);
    let (status, body) = run(Sdk::Node, &s, &creds, trigger(&["news"], "e", "d")).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("Unknown auth_key"), "{body}");
    let (status, audit) = call(&s, "GET", "/v1/audit?app=default", ADMIN, None).await;
    assert_eq!(status, 200, "{audit}");
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .filter(|a| a.starts_with("pusher."))
        .collect();
    assert_eq!(
        actions.iter().filter(|a| **a == "pusher.create").count(),
        2,
        "{audit}"
    );
    assert!(actions.contains(&"pusher.delete"), "{audit}");
    assert!(!audit.to_string().contains("app-secret"), "{audit}");
}

/// `herald ARGS` against `s` with the default app's publisher key: exit code, stdout, stderr.
fn herald(s: &Server, args: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .env("HERALD_URL", format!("http://{}", s.addr))
        .env("HERALD_API_KEY", API_KEY)
        .env_remove("HERALD_CONFIG")
        .output()
        .expect("run herald");
    (
        output.status.code().expect("exit code"),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// The value of the `name: value` line of `out`.
fn line_value(out: &str, name: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {name} line in {out}"))
        .trim()
        .to_owned()
}

#[tokio::test]
async fn herald_pusher_creates_shows_rotates_and_deletes() {
    let s = Server::start().await;
    // A refusal is printed as the server words it, with a failing exit code.
    let (code, _, err) = herald(&s, &["pusher", "create", "--key", "a b"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("key: ' ' is not allowed"), "{err}");

    let (code, out, err) = herald(
        &s,
        &[
            "pusher",
            "create",
            "--app-id",
            "1234567",
            "--key",
            "278d425bdf160c739803",
            "--secret",
            "7ad3773142a6692b25b8",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(line_value(&out, "app_id"), "1234567");
    assert_eq!(line_value(&out, "secret"), "7ad3773142a6692b25b8");
    assert!(out.contains("shown only this once"), "{out}");
    let first = Credentials {
        app_id: "1234567".into(),
        key: "278d425bdf160c739803".into(),
        secret: "7ad3773142a6692b25b8".into(),
    };
    let (status, body) = run(Sdk::Python, &s, &first, trigger(&["news"], "e", "d")).await;
    assert_eq!(status, 200, "{body}");

    let (code, out, _) = herald(&s, &["pusher", "show"]);
    assert_eq!(code, 0);
    assert_eq!(line_value(&out, "key"), "278d425bdf160c739803");
    assert!(!out.contains("7ad3773142a6692b25b8"), "{out}");

    let (code, out, _) = herald(&s, &["pusher", "rotate", "--overlap", "0"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("the previous secret no longer works"), "{out}");
    let second = Credentials {
        secret: line_value(&out, "secret"),
        ..first.clone()
    };
    let (status, _) = run(Sdk::Node, &s, &first, trigger(&["news"], "e", "d")).await;
    assert_eq!(status, 401);
    let (status, _) = run(Sdk::Node, &s, &second, trigger(&["news"], "e", "d")).await;
    assert_eq!(status, 200);

    let (code, out, _) = herald(&s, &["pusher", "delete"]);
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = herald(&s, &["pusher", "show"]);
    assert_eq!(code, 1);
    assert!(err.contains("has no Pusher credentials"), "{err}");
}
