//! Apps, devices, tags and inboxes, end to end against the real binary: pushes to a device, a
//! user, a tag expression and the whole app; offline devices catching up over SSE and
//! long-poll; TTL expiry and collapse keys; acks, receipts and usage; acknowledged cursors
//! surviving `kill -9`; tenant isolation; and bad input refused with a code.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{call, Server, Sse, Ws, API_KEY};

const ADMIN: &str = "admin-key-0123456789abcdef";

async fn server() -> Server {
    Server::builder()
        .arg("--admin-key")
        .arg(ADMIN)
        .start()
        .await
}

async fn register(s: &Server, key: &str, device: Value) -> Value {
    let (status, body) = call(s, "POST", "/v1/devices", key, Some(device)).await;
    assert!(status == 201 || status == 200, "{status} {body}");
    body
}

async fn device_token(s: &Server, key: &str, device: &str) -> String {
    let (status, body) = call(
        s,
        "POST",
        "/v1/tokens",
        key,
        Some(json!({ "sub": "tester", "device": device })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["token"].as_str().unwrap().to_string()
}

async fn push(s: &Server, key: &str, body: Value) -> String {
    let (status, reply) = call(s, "POST", "/v1/push", key, Some(body)).await;
    assert_eq!(status, 202, "{reply}");
    reply["id"].as_str().unwrap().to_string()
}

/// Reads WebSocket frames until `n` inbox messages arrived; returns them.
async fn messages(ws: &mut Ws, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    while out.len() < n {
        let v = ws.frame().await;
        if let Some(m) = v.get("message") {
            out.push(m.clone());
        }
    }
    out
}

/// The two unsolicited subscribe replies a device connection starts with.
async fn inbox_opened(ws: &mut Ws) -> Vec<Value> {
    let mut replies = Vec::new();
    while replies.len() < 2 {
        let v = ws.frame().await;
        if let Some(s) = v.get("subscribe") {
            replies.push(s.clone());
        } else if v.get("error").is_some() {
            panic!("inbox did not open: {v}");
        }
    }
    replies
}

async fn receipt_when(s: &Server, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..200 {
        let (status, r) = call(s, "GET", &format!("/v1/push/{id}"), API_KEY, None).await;
        assert_eq!(status, 200, "{r}");
        if done(&r) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("receipt of {id} never reached the expected state");
}

#[tokio::test]
async fn device_push_over_websocket_then_ack_settles_the_receipt() {
    let s = server().await;
    register(
        &s,
        API_KEY,
        json!({"platform":"herald","id":"d1","user":"alice","tags":["sports"]}),
    )
    .await;
    let token = device_token(&s, API_KEY, "d1").await;
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
    let opened = inbox_opened(&mut ws).await;
    let names: Vec<&str> = opened
        .iter()
        .map(|r| r["channel"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["$app", "$device"]);

    let id = push(
        &s,
        API_KEY,
        json!({"target":{"device":"d1"},"data":{"n":1},"notification":{"title":"hi"}}),
    )
    .await;
    let got = messages(&mut ws, 1).await;
    assert_eq!(got[0]["channel"], "$device");
    assert_eq!(got[0]["id"], id.as_str());
    assert_eq!(got[0]["data"]["data"], json!({"n":1}));
    assert_eq!(got[0]["data"]["notification"]["title"], "hi");

    let r = receipt_when(&s, &id, |_| true).await;
    assert_eq!(
        (
            r["targeted"].as_u64(),
            r["delivered"].as_u64(),
            r["pending"].as_u64()
        ),
        (Some(1), Some(0), Some(1))
    );

    let ack = ws
        .request("ack", json!({"channel":"$device","seq":got[0]["seq"]}))
        .await;
    assert_eq!(ack["ack"]["seq"], got[0]["seq"], "{ack}");
    let r = receipt_when(&s, &id, |_| true).await;
    assert_eq!(
        (r["delivered"].as_u64(), r["pending"].as_u64()),
        (Some(1), Some(0)),
        "{r}"
    );
    // acking again changes nothing
    ws.request("ack", json!({"channel":"$device","seq":got[0]["seq"]}))
        .await;
    let r = receipt_when(&s, &id, |_| true).await;
    assert_eq!(r["delivered"], 1);

    let (_, stats) = call(&s, "GET", "/v1/apps/default/stats", API_KEY, None).await;
    let u = &stats["usage"];
    assert_eq!(u["published"], 1, "{stats}");
    assert_eq!(u["acks"], 1, "{stats}");
    assert!(u["deliveries"].as_u64().unwrap() >= 1, "{stats}");
    assert!(u["peak_connections"].as_u64().unwrap() >= 1, "{stats}");
    // a plain channel token cannot ack
    let mut plain = Ws::connect(&s.ws_url(&format!("?token={}", s.token(&["**"], &[])))).await;
    let r = plain
        .request("ack", json!({"channel":"$device","seq":1}))
        .await;
    assert_eq!(r["error"]["code"], "forbidden", "{r}");
}

#[tokio::test]
async fn offline_device_catches_up_over_sse_with_targets_ttl_and_collapse() {
    let s = server().await;
    register(
        &s,
        API_KEY,
        json!({"platform":"herald","id":"phone","user":"bob","tags":["sports","uk"]}),
    )
    .await;
    register(
        &s,
        API_KEY,
        json!({"platform":"herald","id":"tablet","user":"bob","tags":["news"]}),
    )
    .await;
    let token = device_token(&s, API_KEY, "phone").await;
    // While the phone is offline:
    let user = push(
        &s,
        API_KEY,
        json!({"target":{"user":"bob"},"data":"to bob"}),
    )
    .await;
    push(
        &s,
        API_KEY,
        json!({"target":{"tags":"sports AND (uk OR ie) AND NOT muted"},"data":"tagged"}),
    )
    .await;
    push(
        &s,
        API_KEY,
        json!({"target":{"tags":"news"},"data":"not for the phone"}),
    )
    .await;
    push(
        &s,
        API_KEY,
        json!({"target":{"app":true},"data":"everyone"}),
    )
    .await;
    push(
        &s,
        API_KEY,
        json!({"target":{"device":"phone"},"data":"short-lived","ttl":1}),
    )
    .await;
    push(
        &s,
        API_KEY,
        json!({"target":{"app":true},"data":"score 1-0","collapse_key":"score"}),
    )
    .await;
    push(
        &s,
        API_KEY,
        json!({"target":{"app":true},"data":"score 2-0","collapse_key":"score"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1100)).await; // let the TTL pass
    let r = receipt_when(&s, &user, |_| true).await;
    assert_eq!(r["targeted"], 2, "both of bob's devices: {r}");

    let mut sse = Sse::open(&s, &format!("?token={token}"), None)
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut last_id = None;
    while seen.len() < 4 {
        let ev = sse.next().await.expect("stream ended");
        if ev.event != "message" {
            continue;
        }
        let m = ev.json();
        seen.push(m["data"]["data"].as_str().unwrap().to_string());
        last_id = ev.id.clone();
    }
    seen.sort();
    assert_eq!(seen, vec!["everyone", "score 2-0", "tagged", "to bob"]);

    // Live after catch-up.
    push(
        &s,
        API_KEY,
        json!({"target":{"device":"phone"},"data":"live"}),
    )
    .await;
    let ev = loop {
        let ev = sse.next().await.unwrap();
        if ev.event == "message" {
            break ev;
        }
    };
    assert_eq!(ev.json()["data"]["data"], "live");
    let cursor = ev.id.clone().or(last_id).unwrap();
    drop(sse);

    // Ack over HTTP with the stream's cursor; a long-poll from the stored cursor then has
    // nothing old to give.
    let (status, acked) = call(
        &s,
        "POST",
        "/v1/ack",
        &token,
        Some(json!({ "cursor": cursor })),
    )
    .await;
    assert_eq!(status, 200, "{acked}");
    let (status, poll) = call(
        &s,
        "GET",
        &format!("/v1/poll?token={token}&timeout=0"),
        &token,
        None,
    )
    .await;
    assert_eq!(status, 200, "{poll}");
    assert_eq!(poll["messages"], json!([]), "{poll}");
    let r = receipt_when(&s, &user, |_| true).await;
    assert_eq!(
        (r["delivered"].as_u64(), r["pending"].as_u64()),
        (Some(1), Some(1)),
        "phone acked, tablet did not: {r}"
    );
}

#[tokio::test]
async fn acknowledged_cursor_survives_kill9() {
    let mut s = server().await;
    register(&s, API_KEY, json!({"platform":"herald","id":"d9"})).await;
    let token = device_token(&s, API_KEY, "d9").await;
    for n in 1..=3 {
        push(&s, API_KEY, json!({"target":{"device":"d9"},"data":n})).await;
    }
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
    inbox_opened(&mut ws).await;
    let got = messages(&mut ws, 3).await;
    let r = ws
        .request("ack", json!({"channel":"$device","seq":got[1]["seq"]}))
        .await;
    assert!(r.get("ack").is_some(), "{r}");
    drop(ws);
    s.kill9();
    s.restart().await;
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
    inbox_opened(&mut ws).await;
    let got = messages(&mut ws, 1).await;
    assert_eq!(
        got[0]["data"]["data"], 3,
        "only the unacknowledged push comes back"
    );
    push(&s, API_KEY, json!({"target":{"device":"d9"},"data":4})).await;
    let got = messages(&mut ws, 1).await;
    assert_eq!(got[0]["data"]["data"], 4);
}

#[tokio::test]
async fn tenants_are_isolated() {
    let s = server().await;
    let (status, created) = call(
        &s,
        "POST",
        "/v1/apps",
        ADMIN,
        Some(json!({"id":"shop","name":"Shop"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let shop_key = created["key"].as_str().unwrap().to_string();
    let (status, _) = call(&s, "POST", "/v1/apps", ADMIN, Some(json!({"id":"shop"}))).await;
    assert_eq!(status, 409);
    // publisher keys cannot administer
    let (status, _) = call(&s, "GET", "/v1/apps", &shop_key, None).await;
    assert_eq!(status, 401);

    // Same channel name, two apps, two logs.
    s.publish("news", json!("default news")).await;
    let (status, _) = call(
        &s,
        "POST",
        "/v1/channels/news/messages",
        &shop_key,
        Some(json!({"data":"shop news"})),
    )
    .await;
    assert_eq!(status, 200);
    let (_, h) = call(&s, "GET", "/v1/channels/news/messages", &shop_key, None).await;
    assert_eq!(h["messages"].as_array().unwrap().len(), 1, "{h}");
    assert_eq!(h["messages"][0]["data"], "shop news");
    assert_eq!(h["messages"][0]["channel"], "news");
    let (_, list) = call(&s, "GET", "/v1/channels", &shop_key, None).await;
    let names: Vec<&str> = list["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["channel"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["news"], "{list}");
    let (_, list) = call(&s, "GET", "/v1/channels", API_KEY, None).await;
    assert_eq!(list["channels"].as_array().unwrap().len(), 1, "{list}");

    // Devices, receipts and stats of one app are invisible to the other.
    register(&s, API_KEY, json!({"platform":"herald","id":"mine"})).await;
    let (status, _) = call(&s, "GET", "/v1/devices/mine", &shop_key, None).await;
    assert_eq!(status, 404);
    let (status, _) = call(
        &s,
        "POST",
        "/v1/push",
        &shop_key,
        Some(json!({"target":{"device":"mine"},"data":1})),
    )
    .await;
    assert_eq!(status, 404);
    let id = push(&s, API_KEY, json!({"target":{"device":"mine"},"data":1})).await;
    let (status, _) = call(&s, "GET", &format!("/v1/push/{id}"), &shop_key, None).await;
    assert_eq!(status, 404);
    let (status, _) = call(&s, "GET", "/v1/apps/default/stats", &shop_key, None).await;
    assert_eq!(status, 404);
    let (status, stats) = call(&s, "GET", "/v1/apps/shop/stats", &shop_key, None).await;
    assert_eq!(
        (status, stats["usage"]["published"].as_u64()),
        (200, Some(1)),
        "{stats}"
    );

    // A shop device receives shop broadcasts only; a WebSocket client of the shop sees shop news.
    register(&s, &shop_key, json!({"platform":"herald","id":"till-1"})).await;
    let token = device_token(&s, &shop_key, "till-1").await;
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
    inbox_opened(&mut ws).await;
    push(
        &s,
        API_KEY,
        json!({"target":{"app":true},"data":"default broadcast"}),
    )
    .await;
    push(
        &s,
        &shop_key,
        json!({"target":{"app":true},"data":"shop broadcast"}),
    )
    .await;
    let got = messages(&mut ws, 1).await;
    assert_eq!(got[0]["data"]["data"], "shop broadcast");
    let (_, minted) = call(
        &s,
        "POST",
        "/v1/tokens",
        &shop_key,
        Some(json!({"channels":["news"]})),
    )
    .await;
    let mut client =
        Ws::connect(&s.ws_url(&format!("?token={}", minted["token"].as_str().unwrap()))).await;
    let r = client
        .request("subscribe", json!({"channel":"news","last":true}))
        .await;
    assert_eq!(r["subscribe"]["channel"], "news", "{r}");
    let m = client.recv().await.unwrap();
    assert_eq!(m["message"]["data"], "shop news", "{m}");

    // A token claiming the shop but signed with another secret is refused.
    let forged = herald_proto::token::mint_for_app(
        support::SECRET.as_bytes(),
        "shop",
        &herald_proto::token::ClientClaims {
            channels: vec!["**".into()],
            ..Default::default()
        },
    );
    assert_eq!(
        Ws::try_connect(&s.ws_url(&format!("?token={forged}")))
            .await
            .err(),
        Some(401)
    );

    // Keys rotate: a second key works, the first is deleted by its exact key id.
    let (status, second) = call(
        &s,
        "POST",
        "/v1/apps/shop/keys",
        ADMIN,
        Some(json!({"label":"v2"})),
    )
    .await;
    assert_eq!(status, 201, "{second}");
    let second_key = second["key"].as_str().unwrap().to_string();
    let first_id = created["key_id"].as_str().unwrap().to_string();
    // (A key id is 12 hex digits of a hash: about one in 280 has no letter to change case.)
    if first_id.to_uppercase() != first_id {
        let upper = format!("/v1/apps/shop/keys/{}", first_id.to_uppercase());
        let (status, _) = call(&s, "DELETE", &upper, ADMIN, None).await;
        assert_eq!(status, 404, "key ids are exact");
    }
    let prefix = format!("/v1/apps/shop/keys/{}", &first_id[..8]);
    let (status, _) = call(&s, "DELETE", &prefix, ADMIN, None).await;
    assert_eq!(status, 404, "no prefixes");
    let exact = format!("/v1/apps/shop/keys/{first_id}");
    let (status, _) = call(&s, "DELETE", &exact, ADMIN, None).await;
    assert_eq!(status, 204);
    let (status, _) = call(&s, "GET", "/v1/channels", &shop_key, None).await;
    assert_eq!(status, 401, "the deleted key no longer works");
    let (status, _) = call(&s, "GET", "/v1/channels", &second_key, None).await;
    assert_eq!(status, 200);
    let shop_key = second_key;

    // Deleting the app revokes its keys.
    let (status, _) = call(&s, "DELETE", "/v1/apps/shop", ADMIN, None).await;
    assert_eq!(status, 204);
    let (status, _) = call(&s, "GET", "/v1/channels", &shop_key, None).await;
    assert_eq!(status, 401);
    // Its id is not given to a new tenant, who would otherwise see the old channels.
    let (status, _) = call(&s, "POST", "/v1/apps", ADMIN, Some(json!({"id":"shop"}))).await;
    assert_eq!(status, 409);
    let (_, apps) = call(&s, "GET", "/v1/apps", ADMIN, None).await;
    assert_eq!(apps["apps"].as_array().unwrap().len(), 1, "{apps}");
}

#[tokio::test]
async fn bad_input_is_refused_with_a_code_and_stores_nothing() {
    let s = server().await;
    let cases = [
        (
            "/v1/push",
            json!({"target":{"device":"ghost"},"data":1}),
            404,
            "not_found",
        ),
        (
            "/v1/push",
            json!({"target":{"tags":"sports AND"},"data":1}),
            400,
            "tag_expression_invalid",
        ),
        (
            "/v1/push",
            json!({"target":{"tags":"a","user":"b"},"data":1}),
            400,
            "bad_request",
        ),
        (
            "/v1/push",
            json!({"target":{"app":true},"data":"x".repeat(70_000)}),
            413,
            "too_large",
        ),
        (
            "/v1/devices",
            json!({"platform":"apns","token":"not-hex"}),
            400,
            "device_invalid",
        ),
        (
            "/v1/devices",
            json!({"platform":"pager","token":"x"}),
            400,
            "bad_request",
        ),
        (
            "/v1/devices",
            json!({"platform":"herald","id":"ok","tags":["bad tag"]}),
            400,
            "tag_invalid",
        ),
        (
            "/v1/devices/batch",
            json!({"devices":[{"platform":"herald","id":"a"},{"platform":"fcm","token":"x"}]}),
            400,
            "device_invalid",
        ),
    ];
    for (path, body, status, code) in cases {
        let (got, reply) = call(&s, "POST", path, API_KEY, Some(body)).await;
        assert_eq!(
            (got, reply["error"]["code"].as_str()),
            (status, Some(code)),
            "{path}: {reply}"
        );
    }
    let (_, list) = call(&s, "GET", "/v1/devices", API_KEY, None).await;
    assert_eq!(list["devices"], json!([]), "nothing stored: {list}");
    // no admin key configured: administration is off, and says so
    let plain = Server::start().await;
    let (status, r) = call(&plain, "GET", "/v1/apps", "anything", None).await;
    assert_eq!(
        (status, r["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
}

#[tokio::test]
async fn devices_register_idempotently_list_by_tag_and_user_and_deactivate() {
    let s = server().await;
    let apns = "ab".repeat(32);
    let first = register(
        &s,
        API_KEY,
        json!({"platform":"apns","token":apns,"user":"u1","tags":["b","a"]}),
    )
    .await;
    let again = register(
        &s,
        API_KEY,
        json!({"platform":"apns","token":apns,"user":"u1","tags":["c"]}),
    )
    .await;
    assert_eq!(first["id"], again["id"], "same token, same device");
    assert_eq!(again["tags"], json!(["c"]));
    let (status, batch) = call(&s, "POST", "/v1/devices/batch", API_KEY, Some(json!({"devices": (0..50).map(|i| json!({"platform":"herald","id":format!("b{i:02}"),"tags":[if i % 2 == 0 {"even"} else {"odd"}]})).collect::<Vec<_>>()}))).await;
    assert_eq!(
        (status, batch["created"].as_u64()),
        (200, Some(50)),
        "{batch}"
    );
    let (_, page) = call(&s, "GET", "/v1/devices?tag=even&limit=10", API_KEY, None).await;
    assert_eq!(page["devices"].as_array().unwrap().len(), 10);
    let next = page["next"].as_str().unwrap().to_string();
    let (_, rest) = call(
        &s,
        "GET",
        &format!("/v1/devices?tag=even&limit=100&after={next}"),
        API_KEY,
        None,
    )
    .await;
    assert_eq!(rest["devices"].as_array().unwrap().len(), 15);
    let (_, by_user) = call(&s, "GET", "/v1/devices?user=u1", API_KEY, None).await;
    assert_eq!(by_user["devices"].as_array().unwrap().len(), 1);
    let (_, old_tag) = call(&s, "GET", "/v1/devices?tag=a", API_KEY, None).await;
    assert_eq!(
        old_tag["devices"],
        json!([]),
        "re-registration replaced the tags"
    );

    let (status, d) = call(&s, "POST", "/v1/devices/b00/deactivate", API_KEY, None).await;
    assert_eq!((status, d["active"].as_bool()), (200, Some(false)));
    let (status, r) = call(
        &s,
        "POST",
        "/v1/push",
        API_KEY,
        Some(json!({"target":{"device":"b00"},"data":1})),
    )
    .await;
    assert_eq!(
        (status, r["error"]["code"].as_str()),
        (409, Some("conflict"))
    );
    // Registering it again without "active" leaves it inactive: activation is explicit.
    let again = register(
        &s,
        API_KEY,
        json!({"platform":"herald","id":"b00","tags":["even"]}),
    )
    .await;
    assert_eq!(again["active"], false, "{again}");
    let body = json!({"target":{"tags":"even"},"data":1,"id":"even-1"});
    let id = push(&s, API_KEY, body.clone()).await;
    let (status, retried) = call(&s, "POST", "/v1/push", API_KEY, Some(body)).await;
    assert_eq!(
        (status, retried["duplicate"].as_bool()),
        (202, Some(true)),
        "{retried}"
    );
    assert_eq!(retried["id"], id.as_str());
    let r = receipt_when(&s, &id, |r| !r["targeted"].is_null()).await;
    assert_eq!(r["targeted"], 24, "25 even devices, one deactivated: {r}");
    // Counted from the tag index, with devices holding none of the named tags as well.
    for (expr, want) in [("NOT even", 26), ("even OR c", 25), ("c AND NOT even", 1)] {
        let id = push(&s, API_KEY, json!({"target":{"tags":expr},"data":1})).await;
        let r = receipt_when(&s, &id, |r| !r["targeted"].is_null()).await;
        assert_eq!(r["targeted"], want, "{expr}: {r}");
    }
    // What is broadcast while a device is inactive is not delivered after it is activated.
    push(
        &s,
        API_KEY,
        json!({"target":{"app":true},"data":"while inactive"}),
    )
    .await;
    let (status, d) = call(&s, "POST", "/v1/devices/b00/activate", API_KEY, None).await;
    assert_eq!((status, d["active"].as_bool()), (200, Some(true)));
    let token = device_token(&s, API_KEY, "b00").await;
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
    inbox_opened(&mut ws).await;
    push(
        &s,
        API_KEY,
        json!({"target":{"device":"b00"},"data":"after activation"}),
    )
    .await;
    let got = messages(&mut ws, 1).await;
    assert_eq!(got[0]["data"]["data"], "after activation");
    drop(ws);
    let (status, d) = call(
        &s,
        "PATCH",
        "/v1/devices/b01",
        API_KEY,
        Some(json!({"add_tags":["vip"],"user":"u9"})),
    )
    .await;
    assert_eq!(
        (status, d["tags"].clone(), d["user"].clone()),
        (200, json!(["odd", "vip"]), json!("u9"))
    );
    let (status, _) = call(&s, "DELETE", "/v1/devices/b01", API_KEY, None).await;
    assert_eq!(status, 204);
    let (status, _) = call(&s, "GET", "/v1/devices/b01", API_KEY, None).await;
    assert_eq!(status, 404);

    // A device deleted and registered again under its id does not inherit what was pushed to
    // the old one.
    push(
        &s,
        API_KEY,
        json!({"target":{"device":"b02"},"data":"for the old b02"}),
    )
    .await;
    let (status, _) = call(&s, "DELETE", "/v1/devices/b02", API_KEY, None).await;
    assert_eq!(status, 204);
    register(&s, API_KEY, json!({"platform":"herald","id":"b02"})).await;
    let token = device_token(&s, API_KEY, "b02").await;
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
    inbox_opened(&mut ws).await;
    push(
        &s,
        API_KEY,
        json!({"target":{"device":"b02"},"data":"for the new b02"}),
    )
    .await;
    let got = messages(&mut ws, 1).await;
    assert_eq!(got[0]["data"]["data"], "for the new b02");
}

#[tokio::test]
async fn herald_push_and_token_commands_reach_a_device() {
    let s = server().await;
    register(
        &s,
        API_KEY,
        json!({"platform":"herald","id":"cli-dev","user":"carol"}),
    )
    .await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args([
            "token",
            "--sub",
            "carol",
            "--device",
            "cli-dev",
            "--token-secret",
            support::SECRET,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
    inbox_opened(&mut ws).await;

    let herald = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(args)
            .env("HERALD_URL", s.url(""))
            .env("HERALD_API_KEY", API_KEY)
            .output()
            .unwrap()
    };
    let out = herald(&[
        "push",
        "--user",
        "carol",
        "--title",
        "Shipped",
        r#"{"order":7}"#,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["targeted"], 1, "{answer}");
    let got = messages(&mut ws, 1).await;
    assert_eq!(got[0]["id"], answer["id"]);
    assert_eq!(got[0]["data"]["data"]["order"], 7);
    assert_eq!(got[0]["data"]["notification"]["title"], "Shipped");

    let out = herald(&["push", "--tags", "a AND", "\"x\""]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tag_expression_invalid"));
    let out = herald(&["push", "x"]);
    assert_eq!(out.status.code(), Some(2), "a target is required");
}

#[tokio::test]
async fn app_limits_are_enforced_and_can_be_raised() {
    let s = server().await;
    let (status, created) = call(
        &s,
        "POST",
        "/v1/apps",
        ADMIN,
        Some(json!({"id":"tiny","limits":{"max_devices":2,"max_connections":1,"max_message_bytes":100}})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    // A message limit above the server's max_frame_bytes (65536 by default) could never hold.
    for limits in [
        json!({"max_message_bytes":65537}),
        json!({"max_message_bytes":0}),
    ] {
        let (status, r) = call(
            &s,
            "PATCH",
            "/v1/apps/tiny",
            ADMIN,
            Some(json!({"limits":limits})),
        )
        .await;
        assert_eq!(status, 400, "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("1 to 65536"),
            "{r}"
        );
    }
    let key = created["key"].as_str().unwrap().to_string();
    register(&s, &key, json!({"platform":"herald","id":"one"})).await;
    register(&s, &key, json!({"platform":"herald","id":"two"})).await;
    register(
        &s,
        &key,
        json!({"platform":"herald","id":"two","tags":["x"]}),
    )
    .await; // an update is fine
    let (status, r) = call(
        &s,
        "POST",
        "/v1/devices",
        &key,
        Some(json!({"platform":"herald","id":"three"})),
    )
    .await;
    assert_eq!(
        (status, r["error"]["code"].as_str()),
        (429, Some("limit_exceeded")),
        "{r}"
    );
    let (status, _) = call(
        &s,
        "POST",
        "/v1/devices/batch",
        &key,
        Some(
            json!({"devices":[{"platform":"herald","id":"two"},{"platform":"herald","id":"four"}]}),
        ),
    )
    .await;
    assert_eq!(status, 429);
    let (status, r) = call(
        &s,
        "POST",
        "/v1/push",
        &key,
        Some(json!({"target":{"app":true},"data":"x".repeat(200)})),
    )
    .await;
    assert_eq!(
        (status, r["error"]["code"].as_str()),
        (413, Some("too_large")),
        "{r}"
    );

    let token = device_token(&s, &key, "one").await;
    let first = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
    assert_eq!(
        Ws::try_connect(&s.ws_url(&format!("?token={token}")))
            .await
            .err(),
        Some(429)
    );
    drop(first);

    // Below the limit's count, existing devices can still be changed.
    let (status, _) = call(
        &s,
        "PATCH",
        "/v1/apps/tiny",
        ADMIN,
        Some(json!({"limits":{"max_devices":1}})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, d) = call(
        &s,
        "PATCH",
        "/v1/devices/two",
        &key,
        Some(json!({"add_tags":["y"]})),
    )
    .await;
    assert_eq!(status, 200, "{d}");
    let (status, app) = call(
        &s,
        "PATCH",
        "/v1/apps/tiny",
        ADMIN,
        Some(json!({"limits":{"max_devices":3}})),
    )
    .await;
    assert_eq!(
        (status, app["limits"]["max_devices"].as_u64()),
        (200, Some(3)),
        "{app}"
    );
    register(&s, &key, json!({"platform":"herald","id":"three"})).await;
    let (_, stats) = call(&s, "GET", "/v1/apps/tiny/stats", &key, None).await;
    assert_eq!(stats["devices"], 3, "{stats}");
    // the default app is not limited by another app's limits
    register(&s, API_KEY, json!({"platform":"herald","id":"three"})).await;
}

#[tokio::test]
async fn usage_is_exported_as_metrics_and_kept_across_a_restart() {
    let mut s = server().await;
    register(&s, API_KEY, json!({"platform":"herald","id":"m1"})).await;
    push(&s, API_KEY, json!({"target":{"device":"m1"},"data":1})).await;
    s.publish("news", json!(1)).await;
    let metrics = s.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("herald_app_published_total{app=\"default\"} 2")),
        "{metrics}"
    );
    // A graceful stop writes the totals; a restart reads them back.
    assert!(s.terminate().success());
    s.restart().await;
    let (_, stats) = call(&s, "GET", "/v1/apps/default/stats", API_KEY, None).await;
    assert_eq!(stats["usage"]["published"], 2, "{stats}");
    assert_eq!(stats["devices"], 1, "{stats}");
    let (status, app) = call(&s, "GET", "/v1/apps/default", API_KEY, None).await;
    assert_eq!(
        (status, app["id"].as_str()),
        (200, Some("default")),
        "{app}"
    );
}
