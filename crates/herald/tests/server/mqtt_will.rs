//! Will messages (herald-mqtt's `will.rs`) with Paho: published when the client's connection
//! drops, not after a normal DISCONNECT, after DISCONNECT 0x04; a Will Delay Interval waited
//! for, cancelled by a reconnect of the session, cut short by the session's end; a pending will
//! published when the server shuts down; a will of a persistent session surviving a `kill -9`
//! (published once after its delay, counted from the restart; dropped by its client coming
//! back first). Each will is a normal publish: a WebSocket subscriber gets it, with the
//! channel's next seq.
//!
//! No test waits for something not to happen: a will that must not be published would have
//! been stored before a later one that must (the same client identifier's next CONNECT, or a
//! Clean Start that ends the session, comes only once the earlier will was dealt with), so
//! the first message a subscriber gets says which.

use serde_json::{json, Value};

use crate::mqtt_session::history;
use crate::support::mqtt::{paho, PahoRun};
use crate::support::{Server, Ws};

/// A Paho v5 client's instructions: `client_id`, with `extra` fields (a will, a session, an
/// end) merged in.
pub(crate) fn client(token: &str, client_id: &str, extra: Value) -> Value {
    let mut spec = json!({
        "version": "5", "username": "default", "password": token, "client_id": client_id,
        "timeout": 15
    });
    for (k, v) in extra.as_object().expect("an object") {
        spec[k] = v.clone();
    }
    spec
}

/// A WebSocket subscriber of `channel`.
async fn subscriber(server: &Server, token: &str, channel: &str) -> Ws {
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    let r = ws.request("subscribe", json!({ "channel": channel })).await;
    assert!(r.get("error").is_none(), "{r}");
    ws
}

/// The next message the WebSocket subscriber gets, as (seq, data).
async fn next_message(ws: &mut Ws) -> (u64, Value) {
    loop {
        let frame = ws.frame().await;
        if let Some(m) = frame.get("message") {
            return (m["seq"].as_u64().unwrap(), m["data"].clone());
        }
    }
}

async fn run_ok(server: &Server, spec: Value) {
    let out = paho(server.mqtt_addr(), spec).await;
    assert_eq!(out.code, Some(0), "{}", out.describe());
}

#[tokio::test]
async fn a_will_is_published_when_the_connection_drops_and_not_after_a_normal_disconnect() {
    let server = Server::builder().mqtt().start().await;
    let token = server.token(&["wills/*"], &["wills/*"]);
    let mut ws = subscriber(&server, &token, "wills/w").await;
    let mut mqtt_sub = PahoRun::start(
        server.mqtt_addr(),
        client(
            &token,
            "watcher",
            json!({ "subscribe": [{ "topic": "wills/w", "qos": 2 }], "expect": 1 }),
        ),
    );
    mqtt_sub.until("subscribed").await;
    let will = |payload: &str| json!({ "topic": "wills/w", "payload": payload, "qos": 1 });
    // DISCONNECT 0x00: the will is discarded.
    run_ok(
        &server,
        client(&token, "w", json!({ "will": will("\"discarded\"") })),
    )
    .await;
    // The same client identifier again, and its socket just closes.
    let dropped = json!({ "will": will("\"dropped\""), "end": "drop" });
    run_ok(&server, client(&token, "w", dropped)).await;
    assert_eq!(
        next_message(&mut ws).await,
        (1, json!("dropped")),
        "the dropped connection's will, the first message of the channel"
    );
    let (code, events) = mqtt_sub.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    let message = events.iter().find(|e| e["event"] == "message").unwrap();
    assert_eq!(message["payload"], "\"dropped\"");
    assert_eq!(message["qos"], 1, "the will's QoS, below the granted 2");

    // DISCONNECT 0x04 Disconnect with Will Message publishes it.
    let with_will = json!({ "will": will("\"asked\""), "disconnect_reason": 4 });
    run_ok(&server, client(&token, "w", with_will)).await;
    assert_eq!(next_message(&mut ws).await, (2, json!("asked")));
    assert_eq!(
        history(&server, "wills/w").await,
        [(1, json!("dropped")), (2, json!("asked"))]
    );
}

#[tokio::test]
async fn a_will_delay_is_cancelled_by_a_reconnect_and_cut_short_by_the_sessions_end() {
    let server = Server::builder().mqtt().start().await;
    let token = server.token(&["wills/*"], &["wills/*"]);
    let mut ws = subscriber(&server, &token, "wills/d").await;
    let delayed = |payload: &str, delay: u32| {
        json!({
            "clean": false, "session_expiry": 3600, "end": "drop",
            "will": { "topic": "wills/d", "payload": payload, "qos": 1, "delay": delay }
        })
    };
    // A will waiting an hour; the session comes back (Clean Start 0) and so it is never
    // published, not even when the session then ends (Clean Start 1).
    run_ok(&server, client(&token, "d", delayed("\"cancelled\"", 3600))).await;
    let resumed = json!({ "clean": false, "session_expiry": 3600 });
    run_ok(&server, client(&token, "d", resumed)).await;
    run_ok(&server, client(&token, "d", json!({ "clean": true }))).await;
    // A will waiting an hour, whose session ends (Clean Start 1): published then.
    run_ok(
        &server,
        client(&token, "e", delayed("\"session ended\"", 3600)),
    )
    .await;
    run_ok(&server, client(&token, "e", json!({ "clean": true }))).await;
    assert_eq!(
        next_message(&mut ws).await,
        (1, json!("session ended")),
        "the ended session's will, not the cancelled one"
    );
    // A will waiting a second, and nobody comes back: published once the second passed.
    run_ok(&server, client(&token, "f", delayed("\"delayed\"", 1))).await;
    assert_eq!(next_message(&mut ws).await, (2, json!("delayed")));
}

#[tokio::test]
async fn a_server_shutting_down_publishes_the_wills_still_waiting() {
    let mut server = Server::builder().mqtt().start().await;
    let token = server.token(&["wills/*"], &["wills/*"]);
    let waiting = json!({
        "clean": false, "session_expiry": 3600, "end": "drop",
        "will": { "topic": "wills/s", "payload": "\"at shutdown\"", "qos": 1, "delay": 3600 }
    });
    run_ok(&server, client(&token, "s", waiting)).await;
    // Its connection is held open meanwhile: its will waits for the delay too once the
    // shutdown closes it.
    let held = json!({
        "clean": false, "session_expiry": 3600, "expect": 1, "timeout": 30,
        "subscribe": [{ "topic": "wills/none", "qos": 0 }],
        "will": { "topic": "wills/s", "payload": "\"cut\"", "qos": 1, "delay": 3600 }
    });
    let mut open = PahoRun::start(server.mqtt_addr(), client(&token, "t", held));
    open.until("subscribed").await;
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    let _ = open.finish().await;
    server.restart().await;
    let mut kept: Vec<Value> = history(&server, "wills/s")
        .await
        .into_iter()
        .map(|(_, data)| data)
        .collect();
    kept.sort_by_key(|v| v.to_string());
    assert_eq!(kept, [json!("at shutdown"), json!("cut")]);
}

/// The channel's history once it holds a message (read for up to 20 s).
async fn first_kept(server: &Server, channel: &str) -> Vec<(u64, Value)> {
    for _ in 0..200 {
        let (status, body) = server
            .get(&format!("/v1/channels/{channel}/messages"))
            .await;
        let empty = body["messages"].as_array().is_none_or(|m| m.is_empty());
        if status == 200 && !empty {
            return history(server, channel).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("nothing was published to {channel}");
}

#[tokio::test]
async fn a_waiting_will_survives_kill_9_published_once_unless_its_client_comes_back() {
    let mut server = Server::builder().mqtt().start().await;
    let token = server.token(&["wills/*"], &["wills/*"]);
    // Two persistent sessions' connections held open, each with a will to `wills/k`: one
    // delayed 2 s, one delayed an hour.
    let held = |payload: &str, delay: u32| {
        json!({
            "clean": false, "session_expiry": 3600, "expect": 1, "timeout": 30,
            "subscribe": [{ "topic": "wills/none", "qos": 0 }],
            "will": { "topic": "wills/k", "payload": payload, "qos": 1, "delay": delay }
        })
    };
    let mut killed = PahoRun::start(server.mqtt_addr(), client(&token, "k", held("\"k\"", 2)));
    killed.until("subscribed").await;
    let mut back = PahoRun::start(server.mqtt_addr(), client(&token, "r", held("\"r\"", 3600)));
    back.until("subscribed").await;
    // kill -9 with both connected: their wills were stored with their sessions at CONNECT.
    server.restart().await;
    let _ = killed.finish().await;
    let _ = back.finish().await;
    // `r` comes back within its delay (Clean Start 0): its will is dropped, so not even its
    // session's end (Clean Start 1, which publishes a waiting will at once) publishes it.
    let resumed = json!({ "clean": false, "session_expiry": 3600 });
    run_ok(&server, client(&token, "r", resumed)).await;
    run_ok(&server, client(&token, "r", json!({ "clean": true }))).await;
    // `k` does not: its will is published, 2 s after the restart, as the channel's first
    // message.
    assert_eq!(first_kept(&server, "wills/k").await, [(1, json!("k"))]);
    // Once.
    server.publish("wills/k", json!("after")).await;
    assert_eq!(
        history(&server, "wills/k").await,
        [(1, json!("k")), (2, json!("after"))]
    );
}

#[tokio::test]
async fn a_will_the_credential_may_not_publish_is_refused_at_connect() {
    let server = Server::builder().mqtt().start().await;
    let token = server.token(&["wills/*"], &["wills/*"]);
    for version in ["5", "3.1.1"] {
        let mut spec = client(
            &token,
            "nosy",
            json!({ "will": { "topic": "elsewhere/x", "payload": "\"no\"", "qos": 0 } }),
        );
        spec["version"] = version.into();
        let out = paho(server.mqtt_addr(), spec).await;
        assert_eq!(out.code, Some(3), "refused: {}", out.describe());
        let connack = &out.events("connack")[0];
        // 0x87 Not authorized; Paho 2 reports 3.1.1's return code 5 as the same code.
        assert_eq!(connack["reason_code"], 0x87, "MQTT {version}: {connack}");
    }
}
