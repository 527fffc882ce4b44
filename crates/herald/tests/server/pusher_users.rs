//! Pusher user sign-in, the server-to-user channel, `terminate_connections`, and connections
//! closed when their app's Pusher key goes, against the real binary: pusher-js 8.6.0 in Node
//! (`tests/pusher/client.mjs`) signs in with a `userAuthentication.customHandler` that signs
//! with the `pusher` Node SDK's `authenticateUser`; the Node and Python server SDKs
//! (`tests/pusher/trigger.mjs`, `trigger.py`) call `sendToUser` / `send_to_user` and
//! `terminateUserConnections` / `terminate_user_connections`. Raw WebSockets check what
//! pusher-js does not show: the close codes and the last frames.

use serde_json::{json, Value};

use crate::pusher_api::{history, run, Credentials, Sdk};
use crate::pusher_client::{established, server_with_credentials, PusherJs};
use crate::support::{Server, Ws, API_KEY};

/// pusher-js connected and signed in as `id` (waits for the sign-in to end).
async fn signed_in(s: &Server, creds: &Credentials, id: &str) -> PusherJs {
    let user = json!({ "id": id, "user_info": { "name": id } });
    let mut js = PusherJs::start_with(s, creds, &[], json!({ "signin": user })).await;
    let done = js.until(|l| l["type"] == "signin_done").await;
    assert_eq!(done["user_data"], user, "{done}");
    js
}

/// The next event of the user's server-to-user channel a pusher-js client is given; panics if a
/// frame of another `#` channel than `own` comes first.
async fn next_user_event(js: &mut PusherJs, own: &str) -> Value {
    loop {
        let line = js
            .until(|l| l["type"] == "user_event" || l["type"] == "user_frame")
            .await;
        if line["type"] == "user_frame" {
            assert_eq!(line["channel"], own, "another user's frame: {line}");
            continue;
        }
        return line;
    }
}

fn send_to_user(sdk: Sdk, user: &str, event: &str, data: &str) -> Value {
    match sdk {
        Sdk::Node => json!({ "sendToUser": { "userId": user, "event": event, "data": data } }),
        Sdk::Python => json!({ "send_to_user": { "user_id": user, "event": event, "data": data } }),
    }
}

fn terminate(sdk: Sdk, user: &str) -> Value {
    match sdk {
        Sdk::Node => json!({ "terminateUser": user }),
        Sdk::Python => json!({ "terminate_user": user }),
    }
}

/// A raw connection signed in as `id`, signed as `authenticateUser` signs (`secret`): the
/// `pusher:signin_success` frame.
async fn raw_signed_in(s: &Server, creds: &Credentials, id: &str, secret: &str) -> (Ws, Value) {
    let (mut ws, socket_id) = established(s, creds).await;
    let user_data = json!({ "id": id }).to_string();
    let signed = herald_pusher::signature::signin_string(&socket_id, &user_data);
    let auth = herald_pusher::signature::key_signature(&creds.key, secret.as_bytes(), &signed);
    ws.send(json!({ "event": "pusher:signin", "data": { "auth": auth, "user_data": user_data } }))
        .await;
    let answer = ws.frame().await;
    (ws, answer)
}

/// What ends a raw connection: its frames until the close, and the close (code, last frame).
async fn frames_until_closed(ws: &mut Ws) -> (Vec<Value>, String) {
    let mut frames = Vec::new();
    while let Some(frame) = ws.recv().await {
        frames.push(frame);
    }
    (frames, ws.why_closed())
}

#[tokio::test]
async fn send_to_user_reaches_every_connection_of_the_user_and_no_other() {
    let (s, creds) = server_with_credentials(None).await;
    let mut ann1 = signed_in(&s, &creds, "ann").await;
    let mut ann2 = signed_in(&s, &creds, "ann").await;
    let mut bob = signed_in(&s, &creds, "bob").await;

    for (sdk, user, event) in [
        (Sdk::Node, "ann", "for-ann"),
        (Sdk::Python, "bob", "for-bob"),
        (Sdk::Python, "ann", "again-ann"),
    ] {
        let (status, body) = run(
            sdk,
            &s,
            &creds,
            send_to_user(sdk, user, event, r#"{"n":1}"#),
        )
        .await;
        assert_eq!(status, 200, "{sdk:?} {user}: {body}");
    }
    for ann in [&mut ann1, &mut ann2] {
        for wanted in ["for-ann", "again-ann"] {
            let e = next_user_event(ann, "#server-to-user-ann").await;
            assert_eq!(e["event"], wanted, "{e}");
            assert_eq!(e["data"], json!({ "n": 1 }), "{e}");
        }
    }
    let e = next_user_event(&mut bob, "#server-to-user-bob").await;
    assert_eq!(
        (e["event"].clone(), e["data"].clone()),
        (json!("for-bob"), json!({"n": 1}))
    );

    // The user's channel is a Herald channel, with its history.
    let kept = history(&s, "server-to-user:ann", API_KEY).await;
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(kept[0]["$pusher"]["event"], "for-ann", "{kept:?}");
    ann1.exit().await;
    ann2.exit().await;
    bob.exit().await;
}

#[tokio::test]
async fn a_bad_signin_signature_is_refused_with_4009_and_hash_channels_are_not_for_clients() {
    let (s, creds) = server_with_credentials(None).await;
    // pusher-js signed with the wrong secret: Pusher's error 4009, then no sign-in.
    let user = json!({ "id": "ann" });
    let mut js = PusherJs::start_with(
        &s,
        &creds,
        &[],
        json!({ "signin": user, "badSecret": true }),
    )
    .await;
    let error = js.until(|l| l["type"] == "error").await;
    assert_eq!(error["error"]["data"]["code"], 4009, "{error}");
    let done = js.until(|l| l["type"] == "signin_done").await;
    assert!(done["user_data"].is_null(), "{done}");
    js.exit().await;

    // Raw: the error frame, then the close frame with 4009.
    let (mut ws, answer) = raw_signed_in(&s, &creds, "ann", "wrong-secret").await;
    assert_eq!(answer["event"], "pusher:error", "{answer}");
    assert_eq!(answer["data"]["code"], 4009, "{answer}");
    assert!(
        answer["data"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Invalid signature"),
        "{answer}"
    );
    let (frames, closed) = frames_until_closed(&mut ws).await;
    assert!(frames.is_empty(), "{frames:?}");
    assert!(closed.contains("close code 4009"), "{closed}");

    // Signed in right: signin_success with the user_data as signed.
    let (mut ws, answer) = raw_signed_in(&s, &creds, "ann", &creds.secret).await;
    assert_eq!(answer["event"], "pusher:signin_success", "{answer}");
    let data: Value = serde_json::from_str(answer["data"].as_str().unwrap()).unwrap();
    assert_eq!(
        data["user_data"],
        json!({ "id": "ann" }).to_string(),
        "{answer}"
    );
    // Its own channel is answered as subscribed; another user's is refused.
    for (channel, wanted) in [
        (
            "#server-to-user-ann",
            "pusher_internal:subscription_succeeded",
        ),
        ("#server-to-user-bob", "pusher:subscription_error"),
    ] {
        ws.send(json!({ "event": "pusher:subscribe", "data": { "channel": channel } }))
            .await;
        let answer = ws.frame().await;
        assert_eq!(answer["event"], wanted, "{channel}: {answer}");
        assert_eq!(answer["channel"], channel, "{answer}");
    }
    // A connection not signed in cannot subscribe to any user's channel.
    let (mut anonymous, _) = established(&s, &creds).await;
    anonymous
        .send(json!({ "event": "pusher:subscribe", "data": { "channel": "#server-to-user-ann" } }))
        .await;
    let answer = anonymous.frame().await;
    assert_eq!(answer["event"], "pusher:subscription_error", "{answer}");
    assert_eq!(answer["data"]["type"], "InvalidChannel", "{answer}");
}

#[tokio::test]
async fn terminate_connections_closes_exactly_that_users_connections_with_4009() {
    let (s, creds) = server_with_credentials(None).await;
    let mut ann = signed_in(&s, &creds, "ann").await;
    let mut bob = signed_in(&s, &creds, "bob").await;
    let (mut ann_raw, answer) = raw_signed_in(&s, &creds, "ann", &creds.secret).await;
    assert_eq!(answer["event"], "pusher:signin_success", "{answer}");
    let (mut bob_raw, answer) = raw_signed_in(&s, &creds, "bob", &creds.secret).await;
    assert_eq!(answer["event"], "pusher:signin_success", "{answer}");
    let (mut anonymous, _) = established(&s, &creds).await;

    let (status, body) = run(Sdk::Node, &s, &creds, terminate(Sdk::Node, "ann")).await;
    assert_eq!((status, body.trim()), (200, "{}"));

    // Ann's connections: Pusher's error 4009 and the close with it.
    let (frames, closed) = frames_until_closed(&mut ann_raw).await;
    let last = frames.last().cloned().unwrap_or_default();
    assert_eq!(last["event"], "pusher:error", "{frames:?}; {closed}");
    assert_eq!(last["data"]["code"], 4009, "{frames:?}; {closed}");
    assert!(closed.contains("close code 4009"), "{closed}");
    let error = ann.until(|l| l["type"] == "error").await;
    assert_eq!(error["error"]["data"]["code"], 4009, "{error}");

    // Bob's and the anonymous connection go on.
    let (status, body) = run(
        Sdk::Python,
        &s,
        &creds,
        send_to_user(Sdk::Python, "bob", "still", "1"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let e = next_user_event(&mut bob, "#server-to-user-bob").await;
    assert_eq!(e["event"], "still", "{e}");
    let e = bob_raw.frame().await;
    assert_eq!(e["event"], "still", "{e}");
    anonymous
        .send(json!({ "event": "pusher:ping", "data": {} }))
        .await;
    let pong = anonymous.frame().await;
    assert_eq!(pong["event"], "pusher:pong", "{pong}");

    // The Python SDK terminates Bob's.
    let (status, body) = run(Sdk::Python, &s, &creds, terminate(Sdk::Python, "bob")).await;
    assert_eq!(status, 200, "{body}");
    let (_, closed) = frames_until_closed(&mut bob_raw).await;
    assert!(closed.contains("close code 4009"), "{closed}");
    ann.exit().await;
    bob.exit().await;
}

#[tokio::test]
async fn deleting_an_apps_pusher_credentials_closes_its_connections_with_4001() {
    let (s, creds) = server_with_credentials(None).await;
    let mut js = PusherJs::start(&s, &creds, &["news"], false).await;
    js.subscribed(&["news"]).await;
    let (mut raw, _) = established(&s, &creds).await;

    // A rotation keeps the key: the connections stay.
    let (status, body) =
        crate::support::call(&s, "POST", "/v1/apps/default/pusher/rotate", API_KEY, None).await;
    assert_eq!(status, 200, "{body}");
    raw.send(json!({ "event": "pusher:ping", "data": {} }))
        .await;
    let pong = raw.frame().await;
    assert_eq!(pong["event"], "pusher:pong", "{pong}; {}", raw.why_closed());

    let (status, body) =
        crate::support::call(&s, "DELETE", "/v1/apps/default/pusher", API_KEY, None).await;
    assert!(status == 200 || status == 204, "{status}: {body}");
    let (frames, closed) = frames_until_closed(&mut raw).await;
    let last = frames.last().cloned().unwrap_or_default();
    assert_eq!(last["event"], "pusher:error", "{frames:?}; {closed}");
    assert_eq!(last["data"]["code"], 4001, "{frames:?}; {closed}");
    assert!(closed.contains("close code 4001"), "{closed}");
    let error = js.until(|l| l["type"] == "error").await;
    assert_eq!(error["error"]["data"]["code"], 4001, "{error}");
    js.exit().await;
}
