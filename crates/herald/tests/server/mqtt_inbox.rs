//! A device's inbox over MQTT (herald-mqtt's `inbox.rs`), with Eclipse Paho: a client with a
//! device token subscribes to `$device` and receives the pushes to the device, its user, its
//! tags and its app, from the device's acknowledged cursor; its PUBACK acknowledges the push
//! (the receipt counts it delivered, nothing pending); a reconnect, over MQTT or the WebSocket,
//! resumes after what was acknowledged, with what was pushed while offline; an `auto` push
//! acknowledged by PUBACK is settled `live` with no provider push (a mock APNs counts none); and
//! a client without a device token is refused the topic.

use herald_mock::apns::{test_key, ApnsMock, ApnsMockOptions};
use serde_json::{json, Value};

use crate::support::mqtt::{paho, PahoRun};
use crate::support::{call, Server, Ws, API_KEY};

async fn register(s: &Server, device: Value) {
    let (status, body) = call(s, "POST", "/v1/devices", API_KEY, Some(device)).await;
    assert!(status == 201 || status == 200, "{status} {body}");
}

async fn device_token(s: &Server, device: &str) -> String {
    let body = json!({ "sub": "tester", "device": device });
    let (status, body) = call(s, "POST", "/v1/tokens", API_KEY, Some(body)).await;
    assert_eq!(status, 200, "{body}");
    body["token"].as_str().unwrap().to_owned()
}

async fn push(s: &Server, body: Value) -> String {
    let (status, reply) = call(s, "POST", "/v1/push", API_KEY, Some(body)).await;
    assert_eq!(status, 202, "{reply}");
    reply["id"].as_str().unwrap().to_owned()
}

/// The push's receipt once `done` says it is in the state the test waits for.
async fn receipt_when(s: &Server, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..400 {
        let (status, r) = call(s, "GET", &format!("/v1/push/{id}"), API_KEY, None).await;
        assert_eq!(status, 200, "{r}");
        if done(&r) {
            return r;
        }
        last = r;
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the receipt of {id} never reached the expected state: {last}");
}

fn acknowledged(r: &Value) -> bool {
    r["delivered"] == 1 && r["pending"] == 0
}

/// The messages a Paho run received: (topic, QoS, the push envelope parsed from the payload).
fn inbox_messages(events: &[Value]) -> Vec<(String, u64, Value)> {
    events
        .iter()
        .filter(|e| e["event"] == "message")
        .map(|e| {
            let payload = e["payload"].as_str().unwrap_or_default();
            let envelope = serde_json::from_str(payload)
                .unwrap_or_else(|_| panic!("an inbox payload is JSON: {e}"));
            let topic = e["topic"].as_str().unwrap_or_default().to_owned();
            (topic, e["qos"].as_u64().unwrap_or(99), envelope)
        })
        .collect()
}

/// A Paho client of `token` subscribed to `$device` at QoS 1, waiting for `expect` messages.
fn inbox_client(token: &str, version: &str, expect: u64, manual_ack: bool) -> Value {
    json!({
        "version": version, "username": "default", "password": token,
        "subscribe": [{ "topic": "$device", "qos": 1 }],
        "expect": expect, "manual_ack": manual_ack, "timeout": 15
    })
}

#[tokio::test]
async fn a_device_gets_its_pushes_on_device_and_its_puback_settles_them() {
    let s = Server::builder().mqtt().start().await;
    register(
        &s,
        json!({"platform":"herald","id":"d1","user":"alice","tags":["sports"]}),
    )
    .await;
    let token = device_token(&s, "d1").await;
    let mut client = PahoRun::start(s.mqtt_addr(), inbox_client(&token, "5", 4, false));
    let suback = client.until("suback").await;
    assert_eq!(suback["reason_codes"], json!([1]), "granted QoS 1");
    let mut ids = Vec::new();
    for (n, target) in [
        json!({"device":"d1"}),
        json!({"user":"alice"}),
        json!({"tags":"sports"}),
        json!({"app":true}),
    ]
    .into_iter()
    .enumerate()
    {
        ids.push(push(&s, json!({"target": target, "data": {"n": n}})).await);
    }
    let (code, events) = client.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    let got = inbox_messages(&events);
    let mut ns: Vec<u64> = got
        .iter()
        .map(|(_, _, e)| e["data"]["n"].as_u64().unwrap())
        .collect();
    ns.sort_unstable();
    assert_eq!(ns, [0, 1, 2, 3], "every kind of push: {events:?}");
    for (topic, qos, envelope) in &got {
        assert_eq!((topic.as_str(), *qos), ("$device", 1), "{events:?}");
        assert!(
            envelope["expires"].is_u64(),
            "the push envelope: {envelope}"
        );
    }
    // Each PUBACK was the push's ack: delivered, nothing pending (so no provider push).
    for id in &ids {
        let r = receipt_when(&s, id, acknowledged).await;
        assert_eq!(r["delivered"], 1, "{r}");
    }
}

#[tokio::test]
async fn a_puback_settles_an_auto_push_so_no_provider_push_follows() {
    let (p8, public) = test_key();
    let mock = ApnsMock::start(ApnsMockOptions {
        keys: vec![("KEYID00001".into(), "TEAMID0001".into(), public)],
        ..ApnsMockOptions::default()
    })
    .await
    .unwrap();
    let s = Server::builder()
        .mqtt()
        .env("HERALD_APNS_URL", &mock.url())
        .file_arg("--provider-ca-file", "ca.pem", &mock.cert_pem)
        .start()
        .await;
    let credentials = json!({
        "topic": "com.example.app", "key": p8, "key_id": "KEYID00001", "team_id": "TEAMID0001"
    });
    let (status, r) = s
        .post_as("PUT", "/v1/apps/default/providers/apns", credentials)
        .await;
    assert_eq!(status, 201, "{r}");
    let token = format!("{:064x}", 7);
    register(&s, json!({"platform":"apns","id":"phone","token":token})).await;
    let device = device_token(&s, "phone").await;
    let mut client = PahoRun::start(s.mqtt_addr(), inbox_client(&device, "5", 1, false));
    client.until("subscribed").await;
    // Connected, so the provider push waits for the ack window (long: only an ack ends it).
    let id = push(
        &s,
        json!({"target":{"device":"phone"},"notification":{"title":"hi"},"ack_window":600}),
    )
    .await;
    let (code, events) = client.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    assert_eq!(inbox_messages(&events)[0].2["notification"]["title"], "hi");
    let r = receipt_when(&s, &id, |r| {
        r["providers"]["live"] == 1 && r["providers"]["queued"] == 0
    })
    .await;
    assert_eq!(
        (r["delivered"].as_u64(), r["pending"].as_u64()),
        (Some(1), Some(0)),
        "{r}"
    );
    assert_eq!(r["providers"]["sent"], 0, "{r}");
    assert_eq!(
        mock.received_count(),
        0,
        "no provider push after the MQTT ack"
    );
}

#[tokio::test]
async fn a_reconnect_resumes_after_the_acknowledged_cursor_over_mqtt_and_websocket() {
    let s = Server::builder().mqtt().start().await;
    register(&s, json!({"platform":"herald","id":"d2"})).await;
    let token = device_token(&s, "d2").await;
    let to_d2 = |n: u64| json!({"target":{"device":"d2"},"data":{"n":n}});
    let received = |events: &[Value]| -> Vec<u64> {
        inbox_messages(events)
            .iter()
            .map(|(_, _, e)| e["data"]["n"].as_u64().unwrap())
            .collect()
    };

    // 1 is received and PUBACKed (v5).
    let mut first = PahoRun::start(s.mqtt_addr(), inbox_client(&token, "5", 1, false));
    first.until("subscribed").await;
    let one = push(&s, to_d2(1)).await;
    let (code, events) = first.finish().await;
    assert_eq!((code, received(&events)), (Some(0), vec![1]), "{events:?}");
    receipt_when(&s, &one, acknowledged).await;

    // 2 is received and never acknowledged (3.1.1, no PUBACK): 1 is not sent again.
    let mut second = PahoRun::start(s.mqtt_addr(), inbox_client(&token, "3.1.1", 1, true));
    second.until("subscribed").await;
    let two = push(&s, to_d2(2)).await;
    let (code, events) = second.finish().await;
    assert_eq!((code, received(&events)), (Some(0), vec![2]), "{events:?}");
    let r = receipt_when(&s, &two, |_| true).await;
    assert_eq!(r["pending"], 1, "no PUBACK, no ack: {r}");

    // 3 is pushed while the device is offline: the next connection gets 2 again, then 3.
    let three = push(&s, to_d2(3)).await;
    let finished = paho(s.mqtt_addr(), inbox_client(&token, "5", 2, false))
        .await
        .ok();
    let events = finished.json_lines();
    assert_eq!(received(&events), [2, 3], "{events:?}");
    receipt_when(&s, &two, acknowledged).await;
    receipt_when(&s, &three, acknowledged).await;

    // The WebSocket inbox starts after the MQTT acks: the next push is the first it gets.
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
    push(&s, to_d2(4)).await;
    let first_message = loop {
        let frame = ws.frame().await;
        if let Some(m) = frame.get("message") {
            break m.clone();
        }
    };
    assert_eq!(first_message["data"]["data"]["n"], 4, "{first_message}");
}

#[tokio::test]
async fn a_filter_that_also_matches_device_changes_neither_the_qos_nor_the_ack() {
    let s = Server::builder().mqtt().start().await;
    register(&s, json!({"platform":"herald","id":"d3"})).await;
    // A device token that may also read every channel: `$device/#` (QoS 2) is granted too,
    // and would match the topic `$device` [MQTT-4.7.1-2] were the inbox a channel; push logs
    // match no filter, so the push comes once, as `$device` was granted, and its PUBACK acks it.
    let body = json!({ "sub": "tester", "device": "d3", "channels": ["**"] });
    let (status, body) = call(&s, "POST", "/v1/tokens", API_KEY, Some(body)).await;
    assert_eq!(status, 200, "{body}");
    let token = body["token"].as_str().unwrap();
    let spec = json!({
        "version": "5", "username": "default", "password": token,
        "subscribe": [{ "topic": "$device", "qos": 1 }, { "topic": "$device/#", "qos": 2 }],
        "expect": 1, "timeout": 15
    });
    let mut client = PahoRun::start(s.mqtt_addr(), spec);
    client.until("subscribed").await;
    let id = push(&s, json!({"target":{"device":"d3"},"data":{"n":1}})).await;
    let (code, events) = client.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    let codes: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "suback")
        .flat_map(|e| e["reason_codes"].as_array().unwrap())
        .collect();
    assert_eq!(codes, [&json!(1), &json!(2)], "{events:?}");
    let got = inbox_messages(&events);
    assert_eq!((got[0].0.as_str(), got[0].1), ("$device", 1), "{events:?}");
    receipt_when(&s, &id, acknowledged).await;
}

#[tokio::test]
async fn a_client_without_a_device_token_is_refused_the_inbox_and_nobody_publishes_to_it() {
    let s = Server::builder().mqtt().start().await;
    let token = s.token(&["**"], &["**"]);
    for (version, refused) in [("5", 0x87), ("3.1.1", 0x80)] {
        let spec = json!({
            "version": version, "username": "default", "password": token,
            "subscribe": [{ "topic": "$device", "qos": 1 }, { "topic": "news", "qos": 1 }],
        });
        let finished = paho(s.mqtt_addr(), spec).await.ok();
        let codes: Vec<Value> = finished
            .events("suback")
            .iter()
            .flat_map(|suback| {
                suback["reason_codes"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(codes, [json!(refused), json!(1)], "MQTT {version}");
    }
    // A PUBLISH to the inbox's topic is refused (v5: 0x87 in its PUBACK).
    let spec = json!({
        "version": "5", "username": "default", "password": token,
        "publish": [{ "topic": "$device", "payload": "{}", "qos": 1 }],
    });
    let finished = paho(s.mqtt_addr(), spec).await.ok();
    let published = &finished.events("published")[0];
    assert_eq!(published["reason_code"], 0x87, "{published}");
}
