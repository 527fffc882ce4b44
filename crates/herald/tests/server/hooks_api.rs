//! Webhook endpoints through the API (`/v1/apps/{id}/hooks...`), against the real binary: the
//! signing secret is answered once, at creation, and never shown again (listings, reads, the
//! audit log); one app's key never sees or touches another app's endpoints; bad input is
//! refused naming the field, with nothing stored; a loopback URL is refused unless the
//! operator's `outbound_allow` allows it; `PATCH` and `DELETE` do what they say.

use serde_json::{json, Value};

use crate::support::{call, Server, API_KEY};

const ADMIN: &str = "hooks-api-admin-key-0123456789";

/// A server with the admin key, reaching loopback (`127.0.0.1`) when `allow_loopback`.
async fn server(allow_loopback: bool) -> Server {
    let mut builder = Server::builder().arg("--admin-key").arg(ADMIN);
    if allow_loopback {
        builder = builder.arg("--outbound-allow").arg("127.0.0.1");
    }
    builder.start().await
}

/// Creates app `id` with the admin key; its publisher key.
async fn create_app(s: &Server, id: &str) -> String {
    let (status, body) = call(s, "POST", "/v1/apps", ADMIN, Some(json!({ "id": id }))).await;
    assert_eq!(status, 201, "{body}");
    body["key"].as_str().unwrap().to_owned()
}

/// A valid endpoint body (loopback: the server must allow it).
fn endpoint(url: &str) -> Value {
    json!({
        "url": url,
        "events": ["user.online", "user.offline"],
        "channels": ["rooms/*"],
        "description": "presence",
    })
}

/// Creates an endpoint of `app` with `key`: its id and secret.
async fn create_hook(s: &Server, app: &str, key: &str) -> (i64, String) {
    let path = format!("/v1/apps/{app}/hooks");
    let body = endpoint("http://127.0.0.1:9/hooks");
    let (status, created) = call(s, "POST", &path, key, Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["hook"]["id"].as_i64().expect("an id");
    (id, created["secret"].as_str().unwrap().to_owned())
}

/// The app's endpoints as the admin key lists them.
async fn hooks_of(s: &Server, app: &str) -> Vec<Value> {
    let path = format!("/v1/apps/{app}/hooks");
    let (status, body) = call(s, "GET", &path, ADMIN, None).await;
    assert_eq!(status, 200, "{body}");
    body["hooks"].as_array().expect("hooks").clone()
}

#[tokio::test]
async fn the_secret_is_answered_once_and_never_shown_again_then_patch_and_delete() {
    let s = server(true).await;
    let (status, created) = call(
        &s,
        "POST",
        "/v1/apps/default/hooks",
        API_KEY,
        Some(endpoint("http://127.0.0.1:9/hooks")),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let secret = created["secret"].as_str().expect("the secret").to_owned();
    assert!(
        secret.starts_with("whsec_") && secret.len() > 40,
        "{secret}"
    );
    let hook = &created["hook"];
    let id = hook["id"].as_i64().expect("an id");
    assert_eq!(hook["url"], "http://127.0.0.1:9/hooks");
    assert_eq!(hook["events"], json!(["user.online", "user.offline"]));
    assert_eq!(hook["channels"], json!(["rooms/*"]));
    assert_eq!(hook["description"], "presence");
    assert_eq!(hook["enabled"], true);
    assert_eq!(hook["offline_delay_ms"], 3000);
    assert_eq!(hook["state"], "ok");
    assert_eq!((&hook["queued"], &hook["dead"]), (&json!(0), &json!(0)));
    assert!(
        hook["created"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{hook}"
    );
    assert!(hook.get("secret").is_none(), "{hook}");

    // Never again: not in the listing, the endpoint's read, or the audit log.
    let (status, listed) = call(&s, "GET", "/v1/apps/default/hooks", API_KEY, None).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["hooks"], json!([hook]));
    let path = format!("/v1/apps/default/hooks/{id}");
    let (status, read) = call(&s, "GET", &path, ADMIN, None).await;
    assert_eq!((status, &read), (200, hook));
    let (status, audit) = call(&s, "GET", "/v1/audit?action=hook.create", ADMIN, None).await;
    assert_eq!(status, 200, "{audit}");
    assert_eq!(
        audit["entries"].as_array().map(Vec::len),
        Some(1),
        "{audit}"
    );
    assert_eq!(audit["entries"][0]["result"], "ok", "{audit}");
    let secret_body = secret.trim_start_matches("whsec_");
    for answer in [&listed, &read, &audit] {
        assert!(!answer.to_string().contains(secret_body), "{answer}");
    }

    // PATCH changes what it names and nothing else.
    let patch = json!({"enabled": false, "events": ["*"], "offline_delay_ms": 0});
    let (status, patched) = call(&s, "PATCH", &path, API_KEY, Some(patch)).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["enabled"], false);
    assert_eq!(patched["state"], "disabled");
    // `*` is the types an endpoint may ask for (the listing names them), those asked for by
    // name only aside: every lifecycle type at least.
    let types = listed["event_types"].as_array().expect("event_types");
    let events = patched["events"].as_array().expect("events");
    assert!(events.iter().all(|e| types.contains(e)), "{patched}");
    for kind in [
        "client.connected",
        "client.disconnected",
        "client.subscribed",
        "client.unsubscribed",
        "user.online",
        "user.offline",
        "channel.occupied",
        "channel.vacated",
    ] {
        assert!(events.contains(&json!(kind)), "{kind}: {patched}");
    }
    assert_eq!(patched["offline_delay_ms"], 0);
    assert_eq!(patched["url"], hook["url"]);
    assert_eq!(patched["channels"], hook["channels"]);
    assert_eq!(patched["description"], hook["description"]);
    let (_, read) = call(&s, "GET", &path, API_KEY, None).await;
    assert_eq!(read, patched);

    let (status, body) = call(&s, "DELETE", &path, API_KEY, None).await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = call(&s, "GET", &path, API_KEY, None).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "not_found");
    let (status, _) = call(&s, "DELETE", &path, API_KEY, None).await;
    assert_eq!(status, 404);
    assert!(hooks_of(&s, "default").await.is_empty());
}

#[tokio::test]
async fn one_apps_key_never_sees_or_touches_another_apps_endpoints() {
    let s = server(true).await;
    let shop = create_app(&s, "shop").await;
    let other = create_app(&s, "other").await;
    let (id, _) = create_hook(&s, "shop", &shop).await;
    let before = hooks_of(&s, "shop").await;

    let hook = format!("/v1/apps/shop/hooks/{id}");
    let theirs = format!("/v1/apps/other/hooks/{id}");
    let attempts: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", "/v1/apps/shop/hooks".into(), None),
        (
            "POST",
            "/v1/apps/shop/hooks".into(),
            Some(endpoint("http://127.0.0.1:9/x")),
        ),
        ("GET", hook.clone(), None),
        ("PATCH", hook.clone(), Some(json!({"enabled": false}))),
        ("POST", format!("{hook}/rotate-secret"), Some(json!({}))),
        ("POST", format!("{hook}/test"), None),
        ("GET", format!("{hook}/dead"), None),
        ("DELETE", hook.clone(), None),
        // Its own app's path with shop's endpoint id: not its endpoint either.
        ("GET", theirs.clone(), None),
        ("PATCH", theirs.clone(), Some(json!({"enabled": false}))),
        ("POST", format!("{theirs}/rotate-secret"), Some(json!({}))),
        ("POST", format!("{theirs}/test"), None),
        ("DELETE", theirs.clone(), None),
    ];
    for (method, path, body) in attempts {
        let (status, answer) = call(&s, method, &path, &other, body).await;
        assert_eq!(status, 404, "{method} {path}: {answer}");
        assert_eq!(answer["error"]["code"], "not_found", "{method} {path}");
    }
    assert_eq!(hooks_of(&s, "shop").await, before, "nothing changed");
    assert!(hooks_of(&s, "other").await.is_empty());
    // The app's own key and the admin key see it.
    let (status, _) = call(&s, "GET", &hook, &shop, None).await;
    assert_eq!(status, 200);
    let (status, _) = call(&s, "GET", &hook, ADMIN, None).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field_and_nothing_is_stored() {
    let s = server(true).await;
    let valid = endpoint("http://127.0.0.1:9/hooks");
    let with = |field: &str, value: Value| {
        let mut body = valid.clone();
        body[field] = value;
        body
    };
    let cases = [
        (with("secret", json!("whsec_mine")), "secret"),
        (
            with("events", json!(["user.online", "user.gone"])),
            "user.gone",
        ),
        (with("events", json!([])), "events"),
        (with("channels", json!(["rooms//x"])), "channels[0]"),
        (with("channels", json!(["rooms/%"])), "channels[0]"),
        (with("url", json!("not a url")), "url"),
        (with("url", json!("ftp://127.0.0.1/hooks")), "url"),
        (with("url", json!(null)), "url"),
        (with("offline_delay_ms", json!(600_001)), "offline_delay_ms"),
        (with("description", json!("x".repeat(201))), "description"),
        (json!({"events": ["*"]}), "url"),
        (json!({"url": "http://127.0.0.1:9/hooks"}), "events"),
        (json!([valid.clone()]), "not an array"),
    ];
    for (body, named) in cases {
        let (status, answer) = call(
            &s,
            "POST",
            "/v1/apps/default/hooks",
            API_KEY,
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "bad_request", "{body}");
        let message = answer["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains(named),
            "{body}: {message:?} does not name {named}"
        );
    }
    assert!(
        hooks_of(&s, "default").await.is_empty(),
        "nothing was stored"
    );

    // A PATCH refused changes nothing.
    let (id, _) = create_hook(&s, "default", API_KEY).await;
    let before = hooks_of(&s, "default").await;
    let path = format!("/v1/apps/default/hooks/{id}");
    for (body, named) in [
        (json!({"events": ["user.gone"]}), "user.gone"),
        (
            json!({"enabled": false, "channels": ["a//b"]}),
            "channels[0]",
        ),
        (json!({"url": "http://169.254.169.254/latest"}), "url"),
        (json!({"colour": "red"}), "colour"),
    ] {
        let (status, answer) = call(&s, "PATCH", &path, API_KEY, Some(body.clone())).await;
        assert_eq!(status, 400, "{body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains(named),
            "{body}: {message:?} does not name {named}"
        );
    }
    assert_eq!(hooks_of(&s, "default").await, before, "nothing changed");
    let (status, answer) = call(&s, "GET", "/v1/apps/default/hooks/x", API_KEY, None).await;
    assert_eq!(status, 400, "{answer}");
}

#[tokio::test]
async fn a_loopback_or_metadata_url_is_refused_unless_outbound_allow_allows_it() {
    let s = server(false).await;
    for url in [
        "http://127.0.0.1:9/hooks",
        "http://[::1]:9/hooks",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.7/hooks",
    ] {
        let (status, answer) = call(
            &s,
            "POST",
            "/v1/apps/default/hooks",
            ADMIN,
            Some(endpoint(url)),
        )
        .await;
        assert_eq!(status, 400, "{url}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.starts_with("url: ") && message.contains("outbound_allow"),
            "{url}: {message}"
        );
    }
    assert!(
        hooks_of(&s, "default").await.is_empty(),
        "nothing was stored"
    );

    // The operator allows loopback: the same URL is taken.
    let allowed = server(true).await;
    let (status, answer) = call(
        &allowed,
        "POST",
        "/v1/apps/default/hooks",
        ADMIN,
        Some(endpoint("http://127.0.0.1:9/hooks")),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
}

#[tokio::test]
async fn rotation_answers_a_new_secret_and_dead_letters_of_a_missing_row_are_not_found() {
    let s = server(true).await;
    let (id, first) = create_hook(&s, "default", API_KEY).await;
    let path = format!("/v1/apps/default/hooks/{id}");
    let (status, rotated) = call(
        &s,
        "POST",
        &format!("{path}/rotate-secret"),
        API_KEY,
        Some(json!({"overlap_seconds": 60})),
    )
    .await;
    assert_eq!(status, 200, "{rotated}");
    let second = rotated["secret"].as_str().unwrap();
    assert!(second.starts_with("whsec_") && second != first, "{rotated}");
    assert!(rotated["previous_valid_until"].is_string(), "{rotated}");
    let (status, rotated) = call(
        &s,
        "POST",
        &format!("{path}/rotate-secret"),
        API_KEY,
        Some(json!({"overlap_seconds": 0})),
    )
    .await;
    assert_eq!(status, 200, "{rotated}");
    assert!(rotated["previous_valid_until"].is_null(), "{rotated}");
    let (status, answer) = call(
        &s,
        "POST",
        &format!("{path}/rotate-secret"),
        API_KEY,
        Some(json!({"overlap_seconds": 604_801})),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("overlap_seconds"));

    let (status, dead) = call(&s, "GET", &format!("{path}/dead"), API_KEY, None).await;
    assert_eq!(status, 200, "{dead}");
    assert_eq!(dead, json!({"dead": [], "next": null}));
    for (method, row) in [
        ("POST", format!("{path}/dead/1/replay")),
        ("DELETE", format!("{path}/dead/1")),
    ] {
        let (status, answer) = call(&s, method, &row, API_KEY, None).await;
        assert_eq!(status, 404, "{method} {row}: {answer}");
    }
}
