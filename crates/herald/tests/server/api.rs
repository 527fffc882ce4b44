//! The HTTP publisher API against the real server: auth, idempotency, batch, history, channel
//! info and listing, operational endpoints, and bad input on every route.

use crate::support;

use serde_json::json;
use support::{Server, Ws};

#[tokio::test]
async fn publish_requires_a_valid_key() {
    let server = Server::start().await;
    let url = server.url("/v1/channels/news/messages");
    let r = server
        .http
        .post(&url)
        .json(&json!({"data": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");
    let r = server
        .http
        .post(&url)
        .bearer_auth("hk_wrong")
        .json(&json!({"data": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let (status, _) = server.get("/v1/channels/news").await;
    assert_eq!(status, 200);
    let r = server
        .http
        .get(server.url("/v1/channels"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn idempotency_key_stores_once() {
    let server = Server::start().await;
    let url = server.url("/v1/channels/orders/messages");
    let mut seqs = Vec::new();
    for _ in 0..3 {
        let r = server
            .http
            .post(&url)
            .bearer_auth(support::API_KEY)
            .header("Idempotency-Key", "order-17")
            .json(&json!({"data": {"total": 5}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let b: serde_json::Value = r.json().await.unwrap();
        assert_eq!(b["id"], "order-17");
        seqs.push((b["seq"].clone(), b["duplicate"].clone()));
    }
    assert_eq!(seqs[0], (json!(1), json!(false)));
    assert_eq!(seqs[1], (json!(1), json!(true)));
    let (_, b) = server
        .post(
            "/v1/channels/orders/messages",
            json!({"data": 2, "id": "order-17"}),
        )
        .await;
    assert_eq!(b["duplicate"], true);
    let (_, b) = server
        .post("/v1/channels/orders/messages", json!({"data": 2}))
        .await;
    assert_eq!(b["seq"], 2);
    // header and body id that disagree
    let r = server
        .http
        .post(&url)
        .bearer_auth(support::API_KEY)
        .header("Idempotency-Key", "a")
        .json(&json!({"data": 1, "id": "b"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn batch_history_info_and_list() {
    let server = Server::start().await;
    let mut ws =
        Ws::connect(&server.ws_url(&format!("?token={}", server.token(&["**"], &[])))).await;
    ws.request("subscribe", json!({"channel": "b/one"})).await;
    let messages: Vec<_> = (1..=5)
        .map(|i| json!({"channel": if i % 2 == 0 { "b/two" } else { "b/one" }, "data": i}))
        .collect();
    let (status, r) = server
        .post("/v1/batch", json!({"messages": messages}))
        .await;
    assert_eq!(status, 200, "{r}");
    let results = r["results"].as_array().unwrap();
    let got: Vec<_> = results
        .iter()
        .map(|x| (x["channel"].clone(), x["seq"].clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (json!("b/one"), json!(1)),
            (json!("b/two"), json!(1)),
            (json!("b/one"), json!(2)),
            (json!("b/two"), json!(2)),
            (json!("b/one"), json!(3)),
        ]
    );
    let (_, h) = server
        .get("/v1/channels/b/one/messages?since=1&limit=10")
        .await;
    let data: Vec<_> = h["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"].clone())
        .collect();
    assert_eq!(data, vec![json!(3), json!(5)]);
    assert_eq!(h["seq"], 3);
    assert!(h["epoch"].as_str().unwrap().len() >= 4);
    let (_, h) = server.get("/v1/channels/b/one/messages?last=1").await;
    assert_eq!(h["messages"][0]["seq"], 3);
    let (_, info) = server.get("/v1/channels/b/one").await;
    assert_eq!(info["seq"], 3);
    assert_eq!(info["subscribers"], 1);
    assert_eq!(info["epoch"], h["epoch"]);
    let (_, list) = server.get("/v1/channels?limit=1").await;
    assert_eq!(list["channels"][0]["channel"], "b/one");
    assert_eq!(list["next"], "b/one");
    let (_, list) = server.get("/v1/channels?after=b/one").await;
    assert_eq!(list["channels"][0]["channel"], "b/two");
    assert_eq!(list["next"], serde_json::Value::Null);
    // unknown channel: empty state, not an error
    let (status, info) = server.get("/v1/channels/never").await;
    assert_eq!((status, info["seq"].clone()), (200, json!(0)));
}

#[tokio::test]
async fn bad_input_on_every_route() {
    let server = Server::builder()
        .env("HERALD_MAX_FRAME_BYTES", "2048")
        .start()
        .await;
    let post_raw = |path: &str, body: &'static str| {
        server
            .http
            .post(server.url(path))
            .bearer_auth(support::API_KEY)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    for (path, body, status, code) in [
        ("/v1/channels/news/messages", "{nope", 400, "bad_request"),
        ("/v1/channels/news/messages", "{}", 400, "bad_request"),
        (
            "/v1/channels/news/messages",
            r#"{"data":1,"extra":2}"#,
            400,
            "bad_request",
        ),
        (
            "/v1/channels/bad%20name/messages",
            r#"{"data":1}"#,
            400,
            "channel_invalid",
        ),
        ("/v1/channels/news", r#"{"data":1}"#, 404, "not_found"),
        ("/v1/batch", r#"{"messages":[]}"#, 400, "bad_request"),
        (
            "/v1/batch",
            r#"{"messages":[{"channel":"ok","data":1},{"channel":"","data":2}]}"#,
            400,
            "channel_invalid",
        ),
    ] {
        let r = post_raw(path, body).await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{path} {body}");
        let b: serde_json::Value = r.json().await.unwrap();
        assert_eq!(b["error"]["code"], code, "{path} {body}: {b}");
    }
    // nothing was stored by the rejected batch
    let (_, info) = server.get("/v1/channels/ok").await;
    assert_eq!(info["seq"], 0);
    let big = json!({"data": "x".repeat(4000)});
    let (status, b) = server.post("/v1/channels/news/messages", big).await;
    assert_eq!(
        (status, b["error"]["code"].clone()),
        (413, json!("too_large"))
    );
    for (path, code) in [
        ("/v1/channels/news/messages?limit=0", "bad_request"),
        ("/v1/channels/news/messages?since=-1", "bad_request"),
        ("/v1/channels/news/messages?since=1&last=1", "bad_request"),
        ("/v1/channels?limit=99999", "bad_request"),
        ("/v1/nothing-here", "not_found"),
    ] {
        let (status, b) = server.get(path).await;
        assert!(status >= 400, "{path}");
        assert_eq!(b["error"]["code"], code, "{path}: {b}");
    }
    let (status, _) = server.get("/healthz").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn metrics_and_openapi_are_served() {
    let server = Server::start().await;
    let mut ws =
        Ws::connect(&server.ws_url(&format!("?token={}", server.token(&["m"], &[])))).await;
    ws.request("subscribe", json!({"channel": "m"})).await;
    server.publish("m", json!(1)).await;
    let delivered = ws.recv().await.unwrap();
    assert_eq!(delivered["message"]["data"], 1);
    let text = server.metrics().await;
    for name in [
        "herald_published_messages_total",
        "herald_publish_seconds",
        "herald_store_commit_seconds",
        "herald_store_batch_messages",
        "herald_deliveries_total",
        "herald_delivery_lag_seconds",
        "herald_messages_written_total",
        "herald_connections",
        "herald_subscriptions",
    ] {
        assert!(text.contains(name), "{name} missing from /metrics:\n{text}");
    }
    assert!(
        !text.contains("channel=\"m\""),
        "no channel names as labels"
    );
    // The checkpoint thread reports the write-ahead log's size after its first pass (1 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = server.metrics().await;
        let wal = text
            .lines()
            .find_map(|l| l.strip_prefix("herald_store_wal_bytes "))
            .map(|v| v.trim().parse::<f64>().unwrap());
        if let Some(bytes) = wal {
            assert!(bytes >= 0.0 && bytes.fract() == 0.0, "{bytes}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "herald_store_wal_bytes missing from /metrics:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let spec = server
        .http
        .get(server.url("/v1/openapi.yaml"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(spec.contains("/v1/channels/{name}/messages"));
}

/// Every error is `{"error":{"code","message"}}`, the ones axum's extractors answer included,
/// a body that is not a JSON object is refused (an array is not read as the fields in order),
/// and no message names the server's own types.
#[tokio::test]
async fn every_error_is_json_and_speaks_to_the_client() {
    let s = Server::start().await;
    let post = |path: &str, body: &'static str| {
        s.http
            .post(s.url(path))
            .bearer_auth(support::API_KEY)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let r = s
        .http
        .get(s.url("/v1/channels/%FF/messages"))
        .bearer_auth(support::API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_request", "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("UTF-8"),
        "{body}"
    );

    for (body, says) in [
        ("[1]", "must be a JSON object"),
        ("\"x\"", "must be a JSON object"),
        ("", "empty"),
        ("{\"dat\":1}", "unknown field"),
    ] {
        let r = post("/v1/channels/news/messages", body).await.unwrap();
        assert_eq!(r.status(), 400, "{body}");
        let answer: serde_json::Value = r.json().await.unwrap();
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {answer}");
        assert!(!message.contains("PublishBody"), "{body}: {answer}");
    }
    let (_, history) = s.get("/v1/channels/news/messages").await;
    assert_eq!(
        history["messages"],
        json!([]),
        "a refused body was published"
    );
}

/// With `metrics_token` set, `/metrics` answers only that bearer token (it lists every app id);
/// a publisher key shorter than 16 bytes is refused at start.
#[tokio::test]
async fn metrics_can_require_a_token_and_publisher_keys_have_a_minimum_length() {
    let s = Server::builder()
        .env("HERALD_METRICS_TOKEN", "metrics-token-0123456789")
        .start()
        .await;
    let get = |token: Option<&str>| {
        let mut r = s.http.get(s.url("/metrics"));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    for token in [None, Some(support::API_KEY), Some("metrics-token-wrong")] {
        let r = get(token).await.unwrap();
        assert_eq!(r.status(), 401, "{token:?}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("metrics token"),
            "{body}"
        );
    }
    s.publish("news", json!(1)).await;
    let r = get(Some("metrics-token-0123456789")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r
        .text()
        .await
        .unwrap()
        .contains("herald_published_messages_total"));

    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["config", "check", "--api-key", "hk_short"])
        .current_dir(dir.path())
        .env_remove("HERALD_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid api_key (from --api-key): must be at least 16 bytes"),
        "{err}"
    );
}

/// A configured publisher key replaces the one configured before it, which stops working at
/// once, unless it is kept as `previous_api_key` while clients move over.
#[tokio::test]
async fn a_configured_publisher_key_replaces_the_previous_one() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let start = |key: &str, previous: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_herald"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--api-key", key])
            .arg("--data")
            .arg(dir.path())
            .args(["--token-secret", support::SECRET])
            .env_remove("HERALD_CONFIG")
            .env_remove("HERALD_PREVIOUS_API_KEY")
            .env("HERALD_LOG", "error")
            .stdout(std::process::Stdio::piped());
        if let Some(p) = previous {
            cmd.env("HERALD_PREVIOUS_API_KEY", p);
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let addr = stdout
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("herald listening on ").map(str::to_owned))
            .expect("the server did not start");
        (child, addr)
    };
    let status = |addr: &str, key: &str| {
        let (addr, key) = (addr.to_owned(), key.to_owned());
        async move {
            reqwest::Client::new()
                .post(format!("{addr}/v1/channels/news/messages"))
                .bearer_auth(key)
                .json(&json!({"data": 1}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let (one, two, three) = (
        "hk_first_configured_key_0001",
        "hk_second_configured_key_002",
        "hk_third_configured_key_0003",
    );
    let (mut child, addr) = start(one, None);
    assert_eq!(status(&addr, one).await, 200);
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut child, addr) = start(two, None);
    assert_eq!(
        (status(&addr, one).await, status(&addr, two).await),
        (401, 200)
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut child, addr) = start(three, Some(two));
    assert_eq!(
        (status(&addr, two).await, status(&addr, three).await),
        (200, 200)
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut child, addr) = start(three, None);
    assert_eq!(
        (status(&addr, two).await, status(&addr, three).await),
        (401, 200)
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn channels_are_listed_by_prefix_in_pages_and_only_the_apps_own() {
    const ADMIN: &str = "prefix-admin-key-0123456789abcdef";
    let server = Server::builder()
        .arg("--admin-key")
        .arg(ADMIN)
        .start()
        .await;
    for name in [
        "ch", "chat", "chat-x", "chat/a", "chat/b", "chatter", "news", "shop",
    ] {
        server.publish(name, json!(1)).await;
    }
    // Another app's channels sort among the default app's names ("shop~chat/c"): never listed.
    let r = server
        .http
        .post(server.url("/v1/apps"))
        .bearer_auth(ADMIN)
        .json(&json!({ "id": "shop" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let shop_key = r.json::<serde_json::Value>().await.unwrap()["key"]
        .as_str()
        .unwrap()
        .to_owned();
    for name in ["chat/c", "chat/d"] {
        let r = server
            .http
            .post(server.url(&format!("/v1/channels/{name}/messages")))
            .bearer_auth(&shop_key)
            .json(&json!({ "data": 1 }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let names = |list: &serde_json::Value| -> Vec<String> {
        list["channels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["channel"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, list) = server.get("/v1/channels?prefix=chat/").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(names(&list), ["chat/a", "chat/b"]);
    let (_, list) = server.get("/v1/channels?prefix=chat").await;
    assert_eq!(
        names(&list),
        ["chat", "chat-x", "chat/a", "chat/b", "chatter"]
    );
    // Pages of two, with the same prefix.
    let (_, page) = server.get("/v1/channels?prefix=chat&limit=2").await;
    assert_eq!(names(&page), ["chat", "chat-x"]);
    assert_eq!(page["next"], "chat-x");
    let (_, page) = server
        .get("/v1/channels?prefix=chat&limit=2&after=chat-x")
        .await;
    assert_eq!(names(&page), ["chat/a", "chat/b"]);
    let (_, page) = server
        .get("/v1/channels?prefix=chat&limit=2&after=chat/b")
        .await;
    assert_eq!(names(&page), ["chatter"]);
    assert_eq!(page["next"], serde_json::Value::Null);
    // `after` before the prefix starts at the prefix; nothing matches: an empty page.
    let (_, list) = server.get("/v1/channels?prefix=chat/&after=a").await;
    assert_eq!(names(&list), ["chat/a", "chat/b"]);
    let (_, list) = server.get("/v1/channels?prefix=zzz").await;
    assert!(names(&list).is_empty(), "{list}");
    let (_, list) = server.get("/v1/channels?prefix=").await;
    assert_eq!(names(&list).len(), 8);
    // The other app sees its own, by the same prefix.
    let r = server
        .http
        .get(server.url("/v1/channels?prefix=chat/"))
        .bearer_auth(&shop_key)
        .send()
        .await
        .unwrap();
    let list: serde_json::Value = r.json().await.unwrap();
    assert_eq!(names(&list), ["chat/c", "chat/d"]);
}
