//! The admin dashboard against a running server: its pages served with the security headers,
//! and its sessions (log in with the admin key or a publisher key, a wrong key refused, an
//! expired or forged cookie refused with a clear error, a revoked key ending its session, the
//! cookie refused without the session header), and `/v1/overview` for both roles.

use std::time::Duration;

use herald_admin::session::SessionKey;
use herald_core::auth::hash_api_key;
use herald_server::RunningServer;
use reqwest::header::{HeaderMap, HeaderValue, COOKIE};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::support::{publish, settings, start, Ws, API_KEY, SECRET};

const ADMIN_KEY: &str = "hk_admin_dashboard_test_key_0123";

/// Every test's bound.
const BOUND: Duration = Duration::from_secs(30);

async fn admin_server(data: &TempDir) -> RunningServer {
    let mut settings = settings(data.path());
    settings.admin_key = Some(ADMIN_KEY.into());
    start(settings).await
}

fn url(server: &RunningServer, path: &str) -> String {
    format!("http://{}{path}", server.http_addr())
}

/// A request's answer: status, headers and JSON body (`Null` when there is none).
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: Value,
}

async fn send(request: reqwest::RequestBuilder) -> Answer {
    let r = request.send().await.expect("request sent");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap_or_default();
    Answer {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
    }
}

/// Logs in with `key`; the answer and the cookie (`name=value`) it set, if any.
async fn login(server: &RunningServer, key: &str) -> (Answer, Option<String>) {
    let answer = send(
        reqwest::Client::new()
            .post(url(server, "/admin/session"))
            .header("x-herald-session", "1")
            .json(&json!({ "key": key })),
    )
    .await;
    let cookie = answer
        .headers
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::to_owned);
    (answer, cookie)
}

/// `GET path` with the session cookie and, if `header`, the session header.
async fn with_session(server: &RunningServer, path: &str, cookie: &str, header: bool) -> Answer {
    let mut request = reqwest::Client::new()
        .get(url(server, path))
        .header(COOKIE, HeaderValue::from_str(cookie).unwrap());
    if header {
        request = request.header("x-herald-session", "1");
    }
    send(request).await
}

fn error_code(answer: &Answer) -> &str {
    answer.body["error"]["code"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_served_with_a_strict_policy() {
    tokio::time::timeout(BOUND, async {
        let data = TempDir::new().unwrap();
        let server = admin_server(&data).await;
        let index = reqwest::get(url(&server, "/admin")).await.unwrap();
        assert_eq!(index.status().as_u16(), 200);
        let h = index.headers().clone();
        assert_eq!(h["content-type"], "text/html; charset=utf-8");
        assert_eq!(h["cache-control"], "no-cache");
        let csp = h["content-security-policy"].to_str().unwrap();
        for part in [
            "default-src 'none'",
            "script-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(part), "{csp} lacks {part}");
        }
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(h["x-content-type-options"], "nosniff");
        let html = index.text().await.unwrap();
        let script = html
            .split("src=\"/admin/assets/")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("index.html names its script");
        let js = reqwest::get(url(&server, &format!("/admin/assets/{script}")))
            .await
            .unwrap();
        assert_eq!(js.status().as_u16(), 200);
        assert_eq!(
            js.headers()["content-type"],
            "text/javascript; charset=utf-8"
        );
        assert_eq!(
            js.headers()["cache-control"],
            "public, max-age=31536000, immutable"
        );
        assert!(js.headers().contains_key("content-security-policy"));
        let missing = reqwest::get(url(&server, "/admin/assets/nothing.js"))
            .await
            .unwrap();
        assert_eq!(missing.status().as_u16(), 404);
        server.shutdown().await.unwrap();
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_of_the_admin_key_and_of_a_publisher_key() {
    tokio::time::timeout(BOUND, async {
        let data = TempDir::new().unwrap();
        let server = admin_server(&data).await;

        // The admin key: the whole server.
        let (answer, cookie) = login(&server, ADMIN_KEY).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.body["role"], "admin");
        let set_cookie = answer.headers["set-cookie"].to_str().unwrap();
        for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=3600"] {
            assert!(set_cookie.contains(attribute), "{set_cookie}");
        }
        assert!(!set_cookie.contains("Secure"), "no https option set");
        assert!(
            !set_cookie.contains(ADMIN_KEY),
            "the key itself is never in the cookie"
        );
        let cookie = cookie.expect("a cookie");
        let me = with_session(&server, "/admin/session", &cookie, true).await;
        assert_eq!((me.status, &me.body["role"]), (200, &json!("admin")));
        let apps = with_session(&server, "/v1/apps", &cookie, true).await;
        assert_eq!(apps.status, 200, "{}", apps.body);
        let overview = with_session(&server, "/v1/overview", &cookie, true).await;
        assert_eq!(overview.status, 200, "{}", overview.body);
        assert_eq!(overview.body["role"], "admin");
        assert!(overview.body["server"]["connections"]["ws"].is_u64());
        assert!(overview.body["server"]["delivery_lag"]["buckets"].is_array());
        assert_eq!(overview.body["apps"][0]["app"], "default");
        // Acting for an app on the publisher routes: named in X-Herald-App.
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("x-herald-session", HeaderValue::from_static("1"));
        headers.insert(COOKIE, HeaderValue::from_str(&cookie).unwrap());
        let publish = send(
            reqwest::Client::new()
                .post(url(&server, "/v1/channels/news/messages"))
                .headers(headers.clone())
                .header("x-herald-app", "default")
                .json(&json!({ "data": { "t": 1 } })),
        )
        .await;
        assert_eq!(publish.status, 200, "{}", publish.body);
        let unnamed = with_session(&server, "/v1/channels", &cookie, true).await;
        assert_eq!(
            (unnamed.status, error_code(&unnamed)),
            (401, "unauthorized")
        );
        let unknown = send(
            reqwest::Client::new()
                .get(url(&server, "/v1/channels"))
                .headers(headers.clone())
                .header("x-herald-app", "nope"),
        )
        .await;
        assert_eq!((unknown.status, error_code(&unknown)), (404, "not_found"));

        // A publisher key: its own app, no admin routes.
        let (answer, cookie) = login(&server, API_KEY).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(
            (&answer.body["role"], &answer.body["app"]),
            (&json!("publisher"), &json!("default"))
        );
        let cookie = cookie.expect("a cookie");
        let channels = with_session(&server, "/v1/channels", &cookie, true).await;
        assert_eq!(channels.status, 200, "{}", channels.body);
        let apps = with_session(&server, "/v1/apps", &cookie, true).await;
        assert_eq!((apps.status, error_code(&apps)), (401, "unauthorized"));
        let overview = with_session(&server, "/v1/overview", &cookie, true).await;
        assert_eq!(overview.status, 200, "{}", overview.body);
        assert_eq!(overview.body["role"], "publisher");
        assert_eq!(overview.body["server"], Value::Null);
        assert_eq!(overview.body["apps"].as_array().unwrap().len(), 1);
        assert!(overview.body["apps"][0]["usage"]["published"].as_u64() >= Some(1));

        // Logging out clears the cookie.
        let out = send(
            reqwest::Client::new()
                .delete(url(&server, "/admin/session"))
                .header("x-herald-session", "1"),
        )
        .await;
        assert_eq!(out.status, 204);
        assert!(out.headers["set-cookie"]
            .to_str()
            .unwrap()
            .starts_with("herald_admin=; Path=/; Max-Age=0"));
        server.shutdown().await.unwrap();
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_expired_forged_and_headerless_sessions_are_refused() {
    tokio::time::timeout(BOUND, async {
        let data = TempDir::new().unwrap();
        let server = admin_server(&data).await;

        let (wrong, cookie) = login(&server, "hk_not_a_key").await;
        assert_eq!((wrong.status, error_code(&wrong)), (401, "unauthorized"));
        assert_eq!(wrong.body["error"]["message"], "the key is not valid");
        assert!(cookie.is_none());
        // Logging in needs the session header too (no login CSRF).
        let headerless = send(
            reqwest::Client::new()
                .post(url(&server, "/admin/session"))
                .json(&json!({ "key": ADMIN_KEY })),
        )
        .await;
        assert_eq!(headerless.status, 400);
        assert!(!headerless.headers.contains_key("set-cookie"));

        // A valid cookie without the custom header is not a credential.
        let (_, cookie) = login(&server, ADMIN_KEY).await;
        let cookie = cookie.unwrap();
        let refused = with_session(&server, "/v1/apps", &cookie, false).await;
        assert_eq!(
            (refused.status, error_code(&refused)),
            (401, "unauthorized")
        );
        assert!(
            refused.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("X-Herald-Session"),
            "{}",
            refused.body
        );

        // Expired: signed by this server's key, ended a second ago.
        let key = SessionKey::derive(SECRET.as_bytes());
        let past = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            - 1;
        let expired = format!("herald_admin={}", key.seal(&hash_api_key(ADMIN_KEY), past));
        let answer = with_session(&server, "/v1/apps", &expired, true).await;
        assert_eq!((answer.status, error_code(&answer)), (401, "unauthorized"));
        assert_eq!(
            answer.body["error"]["message"],
            "the session has expired: log in again"
        );

        // Forged: signed with another secret.
        let other = SessionKey::derive(b"some-other-token-secret-0123456");
        let forged = format!(
            "herald_admin={}",
            other.seal(&hash_api_key(ADMIN_KEY), past + 3600)
        );
        let answer = with_session(&server, "/v1/apps", &forged, true).await;
        assert_eq!((answer.status, error_code(&answer)), (401, "unauthorized"));
        assert!(answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("signature"));
        let garbage = with_session(&server, "/admin/session", "herald_admin=v1.zz", true).await;
        assert_eq!(
            (garbage.status, error_code(&garbage)),
            (401, "unauthorized")
        );
        server.shutdown().await.unwrap();
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_key_ends_its_sessions_at_once() {
    tokio::time::timeout(BOUND, async {
        let data = TempDir::new().unwrap();
        let server = admin_server(&data).await;
        let created = send(
            reqwest::Client::new()
                .post(url(&server, "/v1/apps"))
                .bearer_auth(ADMIN_KEY)
                .json(&json!({ "id": "shop" })),
        )
        .await;
        assert_eq!(created.status, 201, "{}", created.body);
        let key = created.body["key"].as_str().unwrap().to_owned();
        let key_id = created.body["key_id"].as_str().unwrap().to_owned();

        let (answer, cookie) = login(&server, &key).await;
        assert_eq!(answer.body["app"], "shop");
        let cookie = cookie.unwrap();
        let before = with_session(&server, "/v1/apps/shop/stats", &cookie, true).await;
        assert_eq!(before.status, 200, "{}", before.body);

        let revoked = send(
            reqwest::Client::new()
                .delete(url(&server, &format!("/v1/apps/shop/keys/{key_id}")))
                .bearer_auth(ADMIN_KEY),
        )
        .await;
        assert!(revoked.status < 300, "{}", revoked.body);
        let after = with_session(&server, "/v1/apps/shop/stats", &cookie, true).await;
        assert_eq!((after.status, error_code(&after)), (401, "unauthorized"));
        let me = with_session(&server, "/admin/session", &cookie, true).await;
        assert_eq!(me.status, 401);
        assert!(me.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no longer valid"));
        server.shutdown().await.unwrap();
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_lifetime_and_secure_flag_come_from_the_settings() {
    tokio::time::timeout(BOUND, async {
        let data = TempDir::new().unwrap();
        let mut settings = settings(data.path());
        settings.admin_key = Some(ADMIN_KEY.into());
        settings.admin.session_ttl = Duration::from_secs(90);
        settings.admin.secure_cookie = true;
        let server = start(settings).await;
        let (answer, _) = login(&server, ADMIN_KEY).await;
        let set_cookie = answer.headers["set-cookie"].to_str().unwrap();
        assert!(set_cookie.contains("Max-Age=90"), "{set_cookie}");
        assert!(set_cookie.ends_with("; Secure"), "{set_cookie}");
        server.shutdown().await.unwrap();
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_devices_inbox_shows_its_position_and_recent_pushes() {
    tokio::time::timeout(BOUND, async {
        let data = TempDir::new().unwrap();
        let server = admin_server(&data).await;
        let client = reqwest::Client::new();
        let registered = send(
            client
                .post(url(&server, "/v1/devices"))
                .bearer_auth(API_KEY)
                .json(&json!({ "platform": "herald", "id": "phone-1", "tags": ["sports"] })),
        )
        .await;
        assert!(registered.status < 300, "{}", registered.body);
        let direct = send(
            client
                .post(url(&server, "/v1/push"))
                .bearer_auth(API_KEY)
                .json(&json!({ "target": { "device": "phone-1" }, "data": { "n": 1 } })),
        )
        .await;
        assert!(direct.status < 300, "{}", direct.body);
        let broadcast = send(
            client
                .post(url(&server, "/v1/push"))
                .bearer_auth(API_KEY)
                .json(&json!({ "target": { "tags": "news" }, "data": { "n": 2 } })),
        )
        .await;
        assert!(broadcast.status < 300, "{}", broadcast.body);
        let inbox = send(
            client
                .get(url(&server, "/v1/devices/phone-1/inbox"))
                .bearer_auth(API_KEY),
        )
        .await;
        assert_eq!(inbox.status, 200, "{}", inbox.body);
        assert_eq!(inbox.body["device_log"]["unacked"], 1);
        assert_eq!(inbox.body["device_log"]["acked"]["seq"], 0);
        let recent = inbox.body["recent"].as_array().unwrap();
        // The broadcast to `news` does not reach a `sports` device.
        assert_eq!(recent.len(), 1, "{}", inbox.body);
        assert_eq!(recent[0]["id"], direct.body["id"]);
        assert_eq!(recent[0]["acked"], false);
        assert_eq!(recent[0]["receipt"]["targeted"], 1);
        let missing = send(
            client
                .get(url(&server, "/v1/devices/nope/inbox"))
                .bearer_auth(API_KEY),
        )
        .await;
        assert_eq!((missing.status, error_code(&missing)), (404, "not_found"));
        server.shutdown().await.unwrap();
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_counts_each_apps_channel_messages_delivered() {
    tokio::time::timeout(BOUND, async {
        let data = TempDir::new().unwrap();
        let server = admin_server(&data).await;
        let client = reqwest::Client::new();
        let created = send(
            client
                .post(url(&server, "/v1/apps"))
                .bearer_auth(ADMIN_KEY)
                .json(&json!({ "id": "shop" })),
        )
        .await;
        assert_eq!(created.status, 201, "{}", created.body);
        // A push to a device is counted in `deliveries`, not as a channel message delivered.
        let registered = send(
            client
                .post(url(&server, "/v1/devices"))
                .bearer_auth(API_KEY)
                .json(&json!({ "platform": "herald", "id": "phone-1" })),
        )
        .await;
        assert!(registered.status < 300, "{}", registered.body);
        let mut first = Ws::connect(&server, &["news"]).await;
        let mut second = Ws::connect(&server, &["news"]).await;
        first.subscribe("news", None).await;
        second.subscribe("news", None).await;
        for n in 0..3 {
            publish(&server, "news", json!({ "n": n })).await;
        }
        assert_eq!(first.message_seqs(3).await, vec![1, 2, 3]);
        assert_eq!(second.message_seqs(3).await, vec![1, 2, 3]);
        let pushed = send(
            client
                .post(url(&server, "/v1/push"))
                .bearer_auth(API_KEY)
                .json(&json!({ "target": { "device": "phone-1" }, "data": { "n": 1 } })),
        )
        .await;
        assert!(pushed.status < 300, "{}", pushed.body);

        let delivered = |overview: &Answer, app: &str| {
            overview.body["apps"]
                .as_array()
                .and_then(|apps| apps.iter().find(|a| a["app"] == app))
                .map(|a| a["messages_delivered"].clone())
        };
        let admin = send(
            client
                .get(url(&server, "/v1/overview"))
                .bearer_auth(ADMIN_KEY),
        )
        .await;
        assert_eq!(admin.status, 200, "{}", admin.body);
        assert_eq!(
            delivered(&admin, "default"),
            Some(json!(6)),
            "3 messages to 2 subscribers: {}",
            admin.body
        );
        assert_eq!(delivered(&admin, "shop"), Some(json!(0)), "{}", admin.body);
        let publisher = send(
            client
                .get(url(&server, "/v1/overview"))
                .bearer_auth(API_KEY),
        )
        .await;
        assert_eq!(publisher.status, 200, "{}", publisher.body);
        assert_eq!(delivered(&publisher, "default"), Some(json!(6)));
        server.shutdown().await.unwrap();
    })
    .await
    .expect("bounded");
}
