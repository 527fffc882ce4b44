//! URLs that tenants give lead only where the operator allows: a Web Push endpoint or a JWKS
//! URL on a loopback, private, link-local or metadata address is refused when it is given; an
//! allowed endpoint that cannot be reached is reported in the same words whether its port is
//! closed or open (no port scanner for tenants); and one failing push service holds only its
//! own origin's sends, not the app's whole Web Push.

use herald_mock::webpush::{MockSubscription, Scripted, WebPushMock, WebPushMockOptions};
use serde_json::{json, Value};

use super::{call, ok, push, receipt_when, start, Mocks};
use crate::support::{self, API_KEY};

/// A Web Push registration of `endpoint` with a subscription's keys.
fn webpush_device(id: &str, endpoint: &str, sub: &MockSubscription) -> Value {
    json!({"id": id, "platform": "webpush", "token": endpoint,
           "keys": {"p256dh": sub.p256dh, "auth": sub.auth}})
}

#[tokio::test]
async fn tenant_urls_that_lead_inside_the_network_are_refused_when_given() {
    let mocks = Mocks::start().await;
    let dir = tempfile::tempdir().unwrap();
    // The operator allows nothing beyond public addresses (the default).
    let server = support::start(support::settings(dir.path())).await;
    let sub = mocks.webpush.subscription();
    let inside = [
        ("https://169.254.169.254/latest/meta-data", "link-local"),
        ("https://100.100.100.200/latest/meta-data", "shared"),
        (sub.endpoint.as_str(), "loopback"),
        ("https://localhost/push/x", "loopback"),
        ("https://[::1]:8443/push/x", "loopback"),
        ("https://[::ffff:127.0.0.1]/push/x", "loopback"),
        ("https://10.1.2.3/push/x", "private"),
        ("https://[fd00:ec2::254]/push/x", "unique-local"),
    ];
    for (endpoint, class) in inside {
        let (status, answer) = call(
            &server,
            "POST",
            "/v1/devices",
            API_KEY,
            Some(webpush_device("w", endpoint, &sub)),
        )
        .await;
        assert_eq!(status, 400, "{endpoint}: {answer}");
        assert_eq!(answer["error"]["code"], "bad_request", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("token: "), "{message}");
        assert!(message.contains(class), "{endpoint}: {message}");
        assert!(message.contains("outbound_allow"), "{message}");
    }
    let (status, _) = call(&server, "GET", "/v1/devices/w", API_KEY, None).await;
    assert_eq!(status, 404, "nothing refused was stored");
    // In a batch, the refused device is named and none is stored.
    let (status, answer) = call(
        &server,
        "POST",
        "/v1/devices/batch",
        API_KEY,
        Some(json!({"devices": [
            webpush_device("public", "https://8.8.8.8/push/x", &sub),
            webpush_device("metadata", "https://169.254.169.254/x", &sub),
        ]})),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("devices[1].token: "), "{message}");
    let (status, _) = call(&server, "GET", "/v1/devices/public", API_KEY, None).await;
    assert_eq!(status, 404, "a refused batch stores nothing");
    // A public address is accepted.
    ok(
        &server,
        "POST",
        "/v1/devices",
        webpush_device("public", "https://8.8.8.8/push/x", &sub),
    )
    .await;
    // A JWKS URL is one too.
    let (status, answer) = call(
        &server,
        "PUT",
        "/v1/apps/default/token-keys",
        API_KEY,
        Some(json!({"jwks_url": "http://127.0.0.1:9/.well-known/jwks.json"})),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("jwks_url: ") && message.contains("loopback"),
        "{message}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_push_service_says_so_without_telling_an_open_port_from_a_closed_one() {
    let mocks = Mocks::start().await;
    // Allowed (loopback), but no push service: one port closed, one open that drops every
    // connection before TLS.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let open = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let open_port = open.local_addr().unwrap().port();
    let dropper = tokio::spawn(async move {
        while let Ok((socket, _)) = open.accept().await {
            drop(socket);
        }
    });
    let (_dir, server) = start(&mocks).await;
    let sub = mocks.webpush.subscription();
    let mut results = Vec::new();
    for (id, port) in [("closed", closed), ("open", open_port)] {
        let endpoint = format!("https://127.0.0.1:{port}/push/{id}");
        ok(
            &server,
            "POST",
            "/v1/devices",
            webpush_device(id, &endpoint, &sub),
        )
        .await;
        let push_id = push(
            &server,
            json!({"target": {"device": id}, "delivery": "provider",
                   "notification": {"title": "x"}}),
        )
        .await;
        let r = receipt_when(&server, &push_id, |r| r["devices"][0]["result"].is_string()).await;
        results.push(r["devices"][0]["result"].as_str().unwrap().to_string());
    }
    dropper.abort();
    assert!(
        results[0].contains("the push service could not be reached"),
        "{results:?}"
    );
    assert_eq!(results[0], results[1], "closed and open ports read alike");
    for result in &results {
        let lower = result.to_lowercase();
        assert!(
            !lower.contains("refused") && !lower.contains("tls") && !lower.contains("eof"),
            "{result}"
        );
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_failing_push_service_holds_only_its_own_origin() {
    let mocks = Mocks::start().await;
    let failing = WebPushMock::start(WebPushMockOptions::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut settings = mocks.settings(dir.path());
    if let Some(pem) = settings.providers.endpoints.extra_ca_pem.as_mut() {
        pem.extend_from_slice(failing.cert_pem.as_bytes());
    }
    let server = support::start(settings).await;
    super::set_credentials(&server, &mocks).await;
    let down = failing.subscription();
    // The failing service asks for a minute's rest: with the whole app's Web Push paused, the
    // healthy service's push below would wait that long.
    failing.script(&down.id, Scripted::always(503).with_retry_after(60));
    ok(
        &server,
        "POST",
        "/v1/devices",
        webpush_device("down", &down.endpoint, &down),
    )
    .await;
    let first = push(
        &server,
        json!({"target": {"device": "down"}, "delivery": "provider",
               "notification": {"title": "x"}}),
    )
    .await;
    receipt_when(&server, &first, |r| r["devices"][0]["result"].is_string()).await;
    let up = mocks.webpush.subscription();
    ok(
        &server,
        "POST",
        "/v1/devices",
        webpush_device("up", &up.endpoint, &up),
    )
    .await;
    let second = push(
        &server,
        json!({"target": {"device": "up"}, "delivery": "provider",
               "notification": {"title": "y"}}),
    )
    .await;
    let r = receipt_when(&server, &second, |r| r["providers"]["accepted"] == 1).await;
    assert_eq!(r["devices"][0]["state"], "done", "{r}");
    assert_eq!(mocks.webpush.received(&up.id).len(), 1);
    server.shutdown().await.unwrap();
}
