//! A push that shows nothing on an APNs device: sent as a background push, which wakes the app
//! (Apple: `apns-push-type: background`, `apns-priority: 5`, `aps` holding `content-available`
//! alone), not as an `alert` push with an empty `aps`, which Apple neither shows nor wakes for.

use serde_json::{json, Value};

use super::{apns_token, call, push, receipt_when, register, settled, start, Mocks};
use crate::support::API_KEY;

#[tokio::test]
async fn a_data_only_provider_push_reaches_an_apns_device_as_a_background_push() {
    let mocks = Mocks::start().await;
    let (_dir, server) = start(&mocks).await;
    register(
        &server,
        json!({"id":"quiet","platform":"apns","token":apns_token(31)}),
    )
    .await;
    let id = push(
        &server,
        json!({"target":{"device":"quiet"},"data":{"sync":"inbox"},"priority":"high",
               "delivery":"provider"}),
    )
    .await;
    let r = receipt_when(&server, &id, settled).await;
    assert_eq!(r["providers"]["accepted"], 1, "{r}");
    let got = mocks.apns.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].push_type.as_deref(), Some("background"));
    assert_eq!(got[0].priority.as_deref(), Some("5"));
    let payload: Value = serde_json::from_slice(&got[0].payload).unwrap();
    assert_eq!(payload["aps"], json!({"content-available": 1}), "{payload}");
    assert_eq!(payload["data"]["sync"], "inbox", "{payload}");
    assert_eq!(payload["herald_id"], id.as_str(), "{payload}");

    // A badge alone is shown: an alert push.
    let id = push(
        &server,
        json!({"target":{"device":"quiet"},"notification":{"badge":4},"delivery":"provider"}),
    )
    .await;
    receipt_when(&server, &id, settled).await;
    let got = mocks.apns.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].push_type.as_deref(), Some("alert"));
    let payload: Value = serde_json::from_slice(&got[1].payload).unwrap();
    assert_eq!(payload["aps"], json!({"badge": 4}), "{payload}");

    // A priority a background push cannot have is refused when the push is given, saying why.
    let (status, answer) = call(
        &server,
        "POST",
        "/v1/push",
        API_KEY,
        Some(
            json!({"target":{"device":"quiet"},"data":{"n":1},"delivery":"provider",
                    "apns":{"priority":10}}),
        ),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], "bad_request", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("apns:") && message.contains("background"),
        "{message}"
    );
    assert_eq!(mocks.apns.received().len(), 2, "nothing more was sent");
    server.shutdown().await.unwrap();
}
