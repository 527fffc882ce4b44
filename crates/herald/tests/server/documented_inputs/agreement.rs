//! Values the server accepted although docs/openapi.yaml rules them out, found by
//! scripts/schemathesis.sh: each is refused with `400` now and changes nothing.
//!
//! - an app's `max_devices` or `max_connections` past int64 (the document's integers are
//!   int64; the server read them as unsigned 64-bit numbers and stored 2^63);
//! - a Web Push endpoint with characters other than visible ASCII (the document's pattern, and
//!   what a browser's `PushSubscription.endpoint` is: a serialized URL, percent-encoded), whose
//!   length in bytes was not its length in characters.

use serde_json::json;

use super::{spec, Fixture, ADMIN};
use crate::support;

#[tokio::test]
async fn app_limits_past_int64_are_refused() {
    let fixture = Fixture::start().await;
    let server = &fixture.server;
    let (_, before) = support::call(server, "GET", "/v1/apps/a1", ADMIN, None).await;
    for field in ["max_devices", "max_connections"] {
        let past = json!({"limits": {field: 9_223_372_036_854_775_808u64}});
        let (status, body) = support::call(server, "PATCH", "/v1/apps/a1", ADMIN, Some(past)).await;
        assert_eq!(status, 400, "{field}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(field), "{field}: {body}");
        let at_most = json!({"limits": {field: i64::MAX}});
        let (status, body) =
            support::call(server, "PATCH", "/v1/apps/a1", ADMIN, Some(at_most)).await;
        assert_eq!(status, 200, "{field} at int64's maximum: {body}");
        let (status, body) = support::call(
            server,
            "PATCH",
            "/v1/apps/a1",
            ADMIN,
            Some(json!({
                "limits": before["limits"].clone()
            })),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    // The document says int64 for both, with no larger maximum.
    let spec = spec();
    let limits = &spec["components"]["schemas"]["AppLimits"]["properties"];
    for field in ["max_devices", "max_connections"] {
        assert_eq!(limits[field]["format"].as_str(), Some("int64"), "{field}");
    }
}

#[tokio::test]
async fn a_web_push_endpoint_is_visible_ascii() {
    let fixture = Fixture::start().await;
    let server = &fixture.server;
    let keys = json!({"p256dh": "B".repeat(87), "auth": "a".repeat(22)});
    for endpoint in [
        "https://push.example.com/send/caf\u{e9}",
        "https://push.example.com/send/a\u{85}b",
        "https://push.example.com/send/a\u{a0}b",
    ] {
        let device = json!({"platform": "webpush", "id": "wp-1", "token": endpoint, "keys": keys});
        let (status, body) = server.post("/v1/devices", device).await;
        assert_eq!(status, 400, "{endpoint:?}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains("visible ASCII"), "{endpoint:?}: {body}");
    }
    let (status, body) =
        support::call(server, "GET", "/v1/devices/wp-1", support::API_KEY, None).await;
    assert_eq!(status, 404, "nothing was registered: {body}");
}
