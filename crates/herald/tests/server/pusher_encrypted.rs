//! Pusher's encrypted channels (`private-encrypted-`) against the real binary: the Node SDK
//! seals a trigger's data with its `encryptionMasterKeyBase64`, Herald stores and relays the
//! ciphertext untouched, and pusher-js 8.6.0 (`client.mjs`, authorised by the same SDK, whose
//! answer carries the channel's `shared_secret`) decrypts it; a client event on an encrypted
//! channel and a trigger naming one beside other channels are refused as Pusher refuses them.

use serde_json::{json, Value};

use crate::pusher_api::Sdk;
use crate::pusher_api::{history, now, raw_post, run, trigger};
use crate::pusher_client::{established, event, event_of, server_with_credentials, PusherJs};
use crate::support::API_KEY;

/// 32 bytes, base64: the master key the SDKs derive each channel's key from.
const MASTER_KEY: &str = "dGhpcnR5LXR3by1ieXRlcy1tYXN0ZXIta2V5LTAwMDA=";

#[tokio::test]
async fn an_encrypted_channel_round_trips_from_the_node_sdk_to_pusher_js() {
    let (s, creds) = server_with_credentials(None).await;
    let channel = "private-encrypted-vault";
    let extra = json!({ "encryptionMasterKeyBase64": MASTER_KEY });
    let mut js = PusherJs::start_with(&s, &creds, &[channel], extra).await;
    js.subscribed(&[channel]).await;

    let mut order = trigger(&[channel], "secret", r#"{"pin":1234}"#);
    order["encryptionMasterKeyBase64"] = json!(MASTER_KEY);
    let (status, body) = run(Sdk::Node, &s, &creds, order).await;
    assert_eq!(status, 200, "{body}");
    // pusher-js decrypted what Herald relayed: the SDK sealed the data's JSON text.
    assert_eq!(
        event_of(&js.next_event().await),
        event(channel, "secret", json!(r#"{"pin":1234}"#))
    );
    // Herald kept the ciphertext as the SDK sent it, never the plain text.
    let stored = history(&s, channel, API_KEY).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    let sealed: Value =
        serde_json::from_str(stored[0]["$pusher"]["data"].as_str().unwrap()).unwrap();
    assert!(
        sealed["nonce"].is_string() && sealed["ciphertext"].is_string(),
        "{sealed}"
    );
    assert!(!stored[0].to_string().contains("1234"), "{stored:?}");
    js.exit().await;
}

#[tokio::test]
async fn client_events_and_triggers_with_other_channels_are_refused_on_encrypted_channels() {
    let (s, creds) = server_with_credentials(None).await;
    let channel = "private-encrypted-x";
    let (mut ws, socket) = established(&s, &creds).await;
    let auth = herald_pusher::signature::key_signature(
        &creds.key,
        creds.secret.as_bytes(),
        &format!("{socket}:{channel}"),
    );
    ws.send(json!({ "event": "pusher:subscribe", "data": { "channel": channel, "auth": auth } }))
        .await;
    let ok = ws.frame().await;
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    ws.send(json!({ "event": "client-x", "channel": channel, "data": {} }))
        .await;
    let e = ws.frame().await;
    assert_eq!(e["event"], "pusher:error", "{e}");
    assert!(
        e["data"]["message"]
            .as_str()
            .unwrap()
            .contains("client events are not supported on encrypted channels"),
        "{e}"
    );
    assert!(history(&s, channel, API_KEY).await.is_empty());

    // Pusher's SDKs refuse this before sending; Herald refuses it too.
    let path = format!("/apps/{}/events", creds.app_id);
    let body = json!({ "name": "e", "data": "{}", "channels": [channel, "news"] }).to_string();
    let (status, text) = raw_post(&s, &path, &creds, &body, &body, now()).await;
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("You cannot trigger to multiple channels when using encrypted channels"),
        "{text}"
    );
    assert!(history(&s, "news", API_KEY).await.is_empty());
}
