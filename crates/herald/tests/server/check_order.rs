//! Which of a request's checks the API answers first, as each handler's signature states it
//! (herald-api's extractors, `auth/extract.rs`): each case sends a request that fails two checks
//! and asserts that the earlier one is answered, with its status, code and message.

use serde_json::json;

use crate::support::{call, Server, API_KEY};

const ADMIN: &str = "order-admin-key-0123456789abcdef";

/// One request with an optional bearer key, optional headers and a raw JSON body: its status,
/// error code and error message.
async fn send(
    s: &Server,
    method: &str,
    path: &str,
    key: Option<&str>,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut r = s
        .http
        .request(m, s.url(path))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(key) = key {
        r = r.bearer_auth(key);
    }
    for (name, value) in headers {
        r = r.header(*name, *value);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let b: serde_json::Value = r.json().await.unwrap_or_default();
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    (
        status,
        text(&b["error"]["code"]),
        text(&b["error"]["message"]),
    )
}

fn answer(status: u16, code: &str, message: &str) -> (u16, String, String) {
    (status, code.to_owned(), message.to_owned())
}

const BAD_APP_ID: &str =
    "invalid app id \"Bad\": use 1 to 32 of a-z 0-9 and '-', not starting with '-'";

#[tokio::test]
async fn an_apps_path_is_checked_before_its_key_and_the_key_before_the_body() {
    let s = Server::builder()
        .arg("--admin-key")
        .arg(ADMIN)
        .start()
        .await;
    let (status, created) = call(&s, "POST", "/v1/apps", ADMIN, Some(json!({"id": "shop"}))).await;
    assert_eq!(status, 201, "{created}");
    // Routes of one app (its own key or the admin key): the app id, then the provider, are
    // answered before a missing key.
    for (method, path) in [
        ("GET", "/v1/apps/Bad"),
        ("GET", "/v1/apps/Bad/stats"),
        ("POST", "/v1/apps/Bad/revoke"),
        ("PUT", "/v1/apps/Bad/token-keys"),
        ("POST", "/v1/apps/Bad/token-secret"),
        ("GET", "/v1/apps/Bad/providers"),
        ("PUT", "/v1/apps/Bad/providers/nope"),
    ] {
        let got = send(&s, method, path, None, &[], "[").await;
        assert_eq!(
            got,
            answer(400, "bad_request", BAD_APP_ID),
            "{method} {path}"
        );
    }
    let no_provider = "no provider \"nope\": use apns, fcm or webpush";
    for method in ["GET", "PUT", "DELETE"] {
        let got = send(&s, method, "/v1/apps/shop/providers/nope", None, &[], "[").await;
        assert_eq!(got, answer(404, "not_found", no_provider), "{method}");
    }
    // Then the key: another app's key is told the app does not exist, before the body is read.
    for (method, path) in [
        ("POST", "/v1/apps/shop/revoke"),
        ("PUT", "/v1/apps/shop/token-keys"),
        ("PUT", "/v1/apps/shop/providers/apns"),
    ] {
        let got = send(&s, method, path, Some(API_KEY), &[], "[").await;
        assert_eq!(
            got,
            answer(404, "not_found", "no app shop"),
            "{method} {path}"
        );
    }
    // Admin routes check the admin key first, before the path's app id and the body.
    let not_admin = "send the admin key as Authorization: Bearer <key>";
    for (method, path) in [
        ("POST", "/v1/apps"),
        ("PATCH", "/v1/apps/Bad"),
        ("DELETE", "/v1/apps/Bad"),
        ("POST", "/v1/apps/Bad/keys"),
        ("DELETE", "/v1/apps/Bad/keys/abc"),
    ] {
        let got = send(&s, method, path, Some(API_KEY), &[], "[").await;
        assert_eq!(
            got,
            answer(401, "unauthorized", not_admin),
            "{method} {path}"
        );
    }
    // A publisher route: the key before the body; the admin key names its app first.
    let invalid = "the API key is not valid";
    for path in [
        "/v1/push",
        "/v1/devices",
        "/v1/devices/batch",
        "/v1/tokens",
        "/v1/batch",
    ] {
        let got = send(&s, "POST", path, Some("hk_wrong"), &[], "[").await;
        assert_eq!(got, answer(401, "unauthorized", invalid), "{path}");
    }
    let names_no_app = "the admin key is not a publisher key: name the app it acts for in the \
                        X-Herald-App header";
    let got = send(&s, "POST", "/v1/push", Some(ADMIN), &[], "[").await;
    assert_eq!(got, answer(401, "unauthorized", names_no_app));
    let acting = [("x-herald-app", "nope")];
    let got = send(&s, "POST", "/v1/push", Some(ADMIN), &acting, "[").await;
    assert_eq!(got, answer(404, "not_found", "no app nope"));
    // An ack wants a device token before its body: none, then one that names no device.
    let no_token = "send the device token as Authorization: Bearer <token>";
    let got = send(&s, "POST", "/v1/ack", None, &[], "[").await;
    assert_eq!(got, answer(401, "unauthorized", no_token));
    let not_device = "only a device token can acknowledge pushes";
    let token = s.token(&["news"], &[]);
    let got = send(&s, "POST", "/v1/ack", Some(&token), &[], "[").await;
    assert_eq!(got, answer(403, "forbidden", not_device));
    // The dashboard's session routes want their header before anything else.
    let login = r#"{"key":"order-admin-key-0123456789abcdef"}"#;
    let header = "requests to /admin/session carry the X-Herald-Session: 1 header";
    let got = send(&s, "POST", "/admin/session", None, &[], login).await;
    assert_eq!(got, answer(400, "bad_request", header));
}

#[tokio::test]
async fn a_rate_is_counted_after_the_key_and_before_a_single_requests_body() {
    let s = Server::builder()
        .env("HERALD_LIMITS_PUSH", "1/h burst 1")
        .env("HERALD_LIMITS_REGISTRATION", "1/h burst 1")
        .env("HERALD_LIMITS_PUBLISH", "1/h burst 1")
        .start()
        .await;
    let device = r#"{"id":"dev-1","platform":"herald"}"#;
    let got = send(&s, "POST", "/v1/devices", Some(API_KEY), &[], device).await;
    assert!(matches!(got.0, 200 | 201), "{got:?}");
    let push = r#"{"target":{"device":"dev-1"},"data":1}"#;
    let got = send(&s, "POST", "/v1/push", Some(API_KEY), &[], push).await;
    assert_eq!(got.0, 202, "{got:?}");
    let got = send(
        &s,
        "POST",
        "/v1/channels/news/messages",
        Some(API_KEY),
        &[],
        "{}",
    )
    .await;
    assert_eq!(got.1, "bad_request", "the one publish was counted: {got:?}");
    // Each budget is spent: a push, a registration and a publish with a body that is not one
    // are refused for their rate, before their body is read.
    for (method, path) in [
        ("POST", "/v1/push"),
        ("POST", "/v1/devices"),
        ("PATCH", "/v1/devices/dev-1"),
        ("POST", "/v1/devices/dev-1/activate"),
        ("POST", "/v1/channels/news/messages"),
    ] {
        let got = send(&s, method, path, Some(API_KEY), &[], "[").await;
        assert_eq!(got.0, 429, "{method} {path}: {got:?}");
        assert_eq!(got.1, "rate_limited", "{method} {path}: {got:?}");
    }
    // A batch counts what it holds, so its body is read first; a publish to a path that is
    // not a channel's messages is answered before the rate.
    for path in ["/v1/batch", "/v1/devices/batch"] {
        let got = send(&s, "POST", path, Some(API_KEY), &[], "[").await;
        assert_eq!(got.1, "bad_request", "{path}: {got:?}");
    }
    let got = send(&s, "POST", "/v1/channels/news", Some(API_KEY), &[], "[").await;
    let messages = "publish with POST /v1/channels/{name}/messages";
    assert_eq!(got, answer(404, "not_found", messages));
}
