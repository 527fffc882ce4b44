//! Rate limits against the real binary (docs/security.md, "7. Rate limits"): each limit trips
//! at a low configured rate and answers as documented (`429 rate_limited` with `Retry-After`
//! and a body naming the limit; a WebSocket error frame, then a `rate_limited` disconnect; a
//! refused or closed connection), limits do not leak across apps, keys or addresses, a limit
//! recovers after the `Retry-After` the server gave, `/metrics` counts refusals, and an app's
//! own rate (set through `PATCH /v1/apps/{id}`, kept across a restart) replaces the default.
//! Rates are per hour where a test must not see a refill, so no assertion depends on speed.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::{call, Server, Ws, API_KEY};

const ADMIN: &str = "admin-key-0123456789abcdef";

/// A request with `key`: status, `Retry-After` (whole seconds) and JSON body.
async fn send(
    s: &Server,
    method: &str,
    path: &str,
    key: &str,
    body: Value,
) -> (u16, Option<u64>, Value) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let r = s
        .http
        .request(m, s.url(path))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
    (status, retry, r.json().await.unwrap_or(Value::Null))
}

async fn publish_with(s: &Server, key: &str, channel: &str) -> (u16, Option<u64>, Value) {
    let path = format!("/v1/channels/{channel}/messages");
    send(s, "POST", &path, key, json!({"data": {"n": 1}})).await
}

/// Asserts a `429 rate_limited` answer naming `limit`.
fn assert_limited(answer: &(u16, Option<u64>, Value), limit: &str) {
    let (status, retry, body) = answer;
    assert_eq!(*status, 429, "{body}");
    assert!(retry.is_some_and(|r| r >= 1), "Retry-After: {retry:?}");
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(limit), "{message} should name {limit}");
}

/// The value of `herald_rate_limited_total` with these labels (0 if absent).
async fn refused(s: &Server, labels: &str) -> u64 {
    let text = s.metrics().await;
    text.lines()
        .find(|l| l.starts_with("herald_rate_limited_total{") && labels_match(l, labels))
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0, |v| v.parse::<f64>().unwrap() as u64)
}

fn labels_match(line: &str, labels: &str) -> bool {
    let inside = &line[line.find('{').unwrap() + 1..line.find('}').unwrap()];
    let mut got: Vec<&str> = inside.split(',').collect();
    let mut want: Vec<&str> = labels.split(',').collect();
    got.sort();
    want.sort();
    got == want
}

/// A second app with its own publisher key (admin API).
async fn create_app(s: &Server, id: &str) -> String {
    let (status, body) = call(s, "POST", "/v1/apps", ADMIN, Some(json!({"id": id}))).await;
    assert_eq!(status, 201, "{body}");
    body["key"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn an_apps_publishes_are_limited_apart_from_other_apps_and_recover_after_retry_after() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let s = Server::builder()
            .arg("--admin-key")
            .arg(ADMIN)
            .env("HERALD_LIMITS_PUBLISH", "1/s burst 3")
            .start()
            .await;
        let other = create_app(&s, "other").await;
        // Publish until refused (at most burst + a refill or two, whatever the speed).
        let mut answer = publish_with(&s, API_KEY, "news").await;
        let mut accepted = 0;
        while answer.0 == 200 {
            accepted += 1;
            assert!(accepted < 50, "never refused");
            answer = publish_with(&s, API_KEY, "news").await;
        }
        assert!(accepted >= 3, "the burst of 3 passed: {accepted}");
        assert_limited(&answer, "limits.publish");
        // Another app's budget is its own.
        assert_eq!(publish_with(&s, &other, "news").await.0, 200);
        // Wait as the server says, then retry until accepted.
        while answer.0 == 429 {
            let wait = answer.1.expect("a refusal carries Retry-After");
            tokio::time::sleep(Duration::from_secs(wait)).await;
            answer = publish_with(&s, API_KEY, "news").await;
        }
        assert_eq!(answer.0, 200, "{}", answer.2);
        assert!(refused(&s, "limit=\"publish\",app=\"default\"").await >= 1);
        assert_eq!(refused(&s, "limit=\"publish\",app=\"other\"").await, 0);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_batch_counts_its_messages_and_a_publisher_key_is_limited_on_its_own() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let s = Server::builder()
            .arg("--admin-key")
            .arg(ADMIN)
            .env("HERALD_LIMITS_PUBLISH", "off")
            .env("HERALD_LIMITS_KEY_PUBLISH", "1/h burst 4")
            .start()
            .await;
        let (status, body) =
            call(&s, "POST", "/v1/apps/default/keys", ADMIN, Some(json!({}))).await;
        assert_eq!(status, 201, "{body}");
        let second = body["key"].as_str().unwrap().to_string();
        let batch = json!({"messages": [
            {"channel": "a", "data": 1}, {"channel": "a", "data": 2}, {"channel": "b", "data": 3}
        ]});
        let (status, _, body) = send(&s, "POST", "/v1/batch", API_KEY, batch.clone()).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(publish_with(&s, API_KEY, "a").await.0, 200);
        // Four used: the next publish, and the next batch, are refused.
        assert_limited(&publish_with(&s, API_KEY, "a").await, "limits.key_publish");
        assert_limited(
            &send(&s, "POST", "/v1/batch", API_KEY, batch).await,
            "limits.key_publish",
        );
        // The app's other key has its own budget.
        assert_eq!(publish_with(&s, &second, "a").await.0, 200);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn pushes_and_device_registrations_are_limited() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let s = Server::builder()
            .env("HERALD_LIMITS_PUSH", "1/h burst 1")
            .env("HERALD_LIMITS_REGISTRATION", "1/h burst 2")
            .start()
            .await;
        let device = json!({"platform": "herald", "id": "phone-1"});
        let (status, _, body) = send(&s, "POST", "/v1/devices", API_KEY, device).await;
        assert_eq!(status, 201, "{body}");
        let patch = json!({"tags": ["sports"]});
        let (status, _, body) = send(&s, "PATCH", "/v1/devices/phone-1", API_KEY, patch).await;
        assert_eq!(status, 200, "{body}");
        let answer = send(
            &s,
            "POST",
            "/v1/devices/phone-1/deactivate",
            API_KEY,
            json!(null),
        )
        .await;
        assert_limited(&answer, "limits.registration");
        let push = json!({"target": {"device": "phone-1"}, "data": {"n": 1}});
        let (status, _, body) = send(&s, "POST", "/v1/push", API_KEY, push.clone()).await;
        assert_eq!(status, 202, "{body}");
        assert_limited(
            &send(&s, "POST", "/v1/push", API_KEY, push).await,
            "limits.push",
        );
        assert_eq!(refused(&s, "limit=\"push\",app=\"default\"").await, 1);
        assert_eq!(
            refused(&s, "limit=\"registration\",app=\"default\"").await,
            1
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn an_apps_own_rate_replaces_the_default_and_is_kept_across_a_restart() {
    tokio::time::timeout(Duration::from_secs(90), async {
        let mut s = Server::builder()
            .arg("--admin-key")
            .arg(ADMIN)
            .env("HERALD_LIMITS_PUBLISH", "off")
            .start()
            .await;
        let shop = create_app(&s, "shop").await;
        let limits = json!({"limits": {"publish_rate": "1/h burst 2"}});
        let (status, body) = call(&s, "PATCH", "/v1/apps/shop", ADMIN, Some(limits)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["limits"]["publish_rate"], "1/h burst 2", "{body}");
        for _ in 0..2 {
            assert_eq!(publish_with(&s, &shop, "x").await.0, 200);
        }
        assert_limited(&publish_with(&s, &shop, "x").await, "limits.publish_rate");
        // The default app keeps the server's setting (off).
        for _ in 0..5 {
            assert_eq!(publish_with(&s, API_KEY, "x").await.0, 200);
        }
        // A malformed rate is refused with guidance.
        let bad = json!({"limits": {"publish_rate": "fast"}});
        let (status, body) = call(&s, "PATCH", "/v1/apps/shop", ADMIN, Some(bad)).await;
        assert_eq!(status, 400, "{body}");
        s.restart().await;
        let (status, body) = call(&s, "GET", "/v1/apps/shop", ADMIN, None).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["limits"]["publish_rate"], "1/h burst 2", "{body}");
        // A fresh process starts with a full bucket, and the stored rate applies.
        for _ in 0..2 {
            assert_eq!(publish_with(&s, &shop, "x").await.0, 200);
        }
        assert_limited(&publish_with(&s, &shop, "x").await, "limits.publish_rate");
        // "off" turns the app's limit off.
        let off = json!({"limits": {"publish_rate": "off"}});
        let (status, body) = call(&s, "PATCH", "/v1/apps/shop", ADMIN, Some(off)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(publish_with(&s, &shop, "x").await.0, 200);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_websocket_flooding_commands_gets_rate_limited_errors_then_a_disconnect() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let s = Server::builder()
            .env("HERALD_LIMITS_COMMAND", "1/h burst 3")
            .start()
            .await;
        let url = s.ws_url(&format!("?token={}", s.token(&["news"], &[])));
        let mut ws = Ws::connect(&url).await;
        let mut quiet = Ws::connect(&url).await;
        for _ in 0..3 {
            let pong = ws.request("ping", json!({})).await;
            assert!(pong.get("pong").is_some(), "{pong}");
        }
        // Over the budget: each command is answered with its own id and rate_limited, up to a
        // burst's worth of refusals; the next one closes the connection.
        for id in 100..103 {
            ws.send(json!({"id": id, "ping": {}})).await;
            let e = ws.recv().await.unwrap();
            assert_eq!(e["id"], id, "{e}");
            assert_eq!(e["error"]["code"], "rate_limited", "{e}");
            let message = e["error"]["message"].as_str().unwrap();
            assert!(message.contains("limits.command"), "{message}");
        }
        ws.send(json!({"id": 200, "ping": {}})).await;
        let bye = ws.recv().await.unwrap();
        assert_eq!(bye["disconnect"]["code"], "rate_limited", "{bye}");
        assert!(
            ws.recv().await.is_none(),
            "closed after the disconnect frame"
        );
        // Another connection's budget is its own.
        let pong = quiet.request("ping", json!({})).await;
        assert!(pong.get("pong").is_some(), "{pong}");
        assert_eq!(refused(&s, "limit=\"command\"").await, 4);
    })
    .await
    .unwrap();
}

/// A TCP connection to `to` from the loopback address `from`.
async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(from.parse::<IpAddr>().unwrap(), 0))
        .unwrap();
    socket.connect(to).await.unwrap()
}

/// An HTTP `GET /healthz` over a fresh connection from `from`: the raw answer.
async fn healthz_from(from: &str, to: SocketAddr) -> String {
    let mut tcp = connect_from(from, to).await;
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn new_connections_are_limited_per_source_address_on_every_listener() {
    tokio::time::timeout(Duration::from_secs(60), async {
        // 127.0.0.1 (the harness's own requests) is exempt; the test connects from others.
        let s = Server::builder()
            .arg("--meteor")
            .arg("127.0.0.1:0")
            .env("HERALD_LIMITS_CONNECTION", "1/h burst 2")
            .env("HERALD_LIMITS_EXEMPT", "127.0.0.1/32, 127.0.0.9")
            .start()
            .await;
        for _ in 0..2 {
            let ok = healthz_from("127.0.0.2", s.addr).await;
            assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        }
        let refused_answer = healthz_from("127.0.0.2", s.addr).await;
        assert!(
            refused_answer.starts_with("HTTP/1.1 429"),
            "{refused_answer}"
        );
        let lower = refused_answer.to_ascii_lowercase();
        let retry = lower
            .lines()
            .find_map(|l| l.strip_prefix("retry-after: "))
            .expect("a Retry-After header");
        assert!(retry.trim().parse::<u64>().unwrap() >= 1);
        let body: Value =
            serde_json::from_str(refused_answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(body["error"]["code"], "rate_limited");
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limits.connection"));
        // The Meteor port counts the same address and closes at once.
        let mut meteor = connect_from("127.0.0.2", s.meteor.unwrap()).await;
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(10), meteor.read(&mut buf))
            .await
            .expect("a refused Meteor connection is closed");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        // Another address, and an exempt one, are not held back.
        assert!(healthz_from("127.0.0.3", s.addr)
            .await
            .starts_with("HTTP/1.1 200"));
        for _ in 0..5 {
            assert!(healthz_from("127.0.0.9", s.addr)
                .await
                .starts_with("HTTP/1.1 200"));
        }
        assert_eq!(refused(&s, "limit=\"connection\"").await, 2);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_websocket_upgrade_over_the_address_limit_is_refused_with_429() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let s = Server::builder()
            .env("HERALD_LIMITS_CONNECTION", "1/h burst 1")
            .start()
            .await;
        let url = s.ws_url(&format!("?token={}", s.token(&["news"], &[])));
        let _first = Ws::connect(&url).await;
        assert_eq!(Ws::try_connect(&url).await.err(), Some(429));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn admin_log_ins_are_limited_per_source_address() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let s = Server::builder()
            .arg("--admin-key")
            .arg(ADMIN)
            .env("HERALD_LIMITS_LOGIN", "1/h burst 2")
            .start()
            .await;
        let login = |key: &str| {
            s.http
                .post(s.url("/admin/session"))
                .header("x-herald-session", "1")
                .json(&json!({ "key": key }))
                .send()
        };
        for _ in 0..2 {
            let r = login("not-the-key-0123456789").await.unwrap();
            assert_eq!(r.status().as_u16(), 401);
        }
        // Refused before the key is looked at: the right key is refused too.
        let r = login(ADMIN).await.unwrap();
        assert_eq!(r.status().as_u16(), 429);
        let retry: u64 = r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(retry >= 1);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "rate_limited", "{body}");
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limits.login"));
        assert_eq!(refused(&s, "limit=\"login\"").await, 1);
    })
    .await
    .unwrap();
}
