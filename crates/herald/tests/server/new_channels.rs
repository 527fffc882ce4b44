//! Channels subscribed before their first message, against the real binary: the store answers
//! where such a channel stands without reading it, and that must never lose or repeat a message,
//! on a fresh server and after a restart, over WebSocket and SSE.

use crate::support;

use serde_json::{json, Value};
use support::{Server, Sse, Ws};

async fn messages(ws: &mut Ws, n: usize) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    while out.len() < n {
        let v = ws.frame().await;
        if let Some(m) = v.get("message") {
            out.push((
                m["channel"].as_str().unwrap().to_string(),
                m["seq"].as_u64().unwrap(),
            ));
        }
    }
    out
}

fn reply(r: &Value) -> (u64, &str, bool) {
    let s = &r["subscribe"];
    (
        s["seq"].as_u64().unwrap(),
        s["epoch"].as_str().unwrap(),
        s["recovered"].as_bool().unwrap(),
    )
}

#[tokio::test]
async fn a_channel_published_after_its_first_subscribe_is_delivered_and_resumed_after_a_restart() {
    let mut server = Server::start().await;
    let token = server.token(&["fresh/*"], &[]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    let r = ws
        .request("subscribe", json!({ "channel": "fresh/a" }))
        .await;
    assert_eq!(reply(&r), (0, "", false), "a channel with no message: {r}");
    let r = ws
        .request(
            "subscribe",
            json!({ "channel": "fresh/b", "since": { "seq": 0 }, "last": true }),
        )
        .await;
    assert_eq!(reply(&r), (0, "", true), "{r}");
    server.publish("fresh/a", json!(1)).await;
    server.publish("fresh/a", json!(2)).await;
    server.publish("fresh/b", json!(1)).await;
    let mut got = messages(&mut ws, 3).await;
    got.sort();
    assert_eq!(
        got,
        [
            ("fresh/a".to_string(), 1),
            ("fresh/a".to_string(), 2),
            ("fresh/b".to_string(), 1)
        ],
        "each message once, live"
    );
    let (_, info) = server.get("/v1/channels/fresh/a").await;
    let epoch = info["epoch"].as_str().unwrap().to_string();
    drop(ws);

    server.restart().await;
    let token = server.token(&["fresh/*"], &[]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    let r = ws
        .request(
            "subscribe",
            json!({ "channel": "fresh/a", "since": { "seq": 0, "epoch": epoch } }),
        )
        .await;
    assert_eq!(reply(&r), (2, epoch.as_str(), true), "{r}");
    assert_eq!(
        messages(&mut ws, 2).await,
        [("fresh/a".to_string(), 1), ("fresh/a".to_string(), 2)],
        "replayed from the log after the restart"
    );
    let r = ws
        .request("subscribe", json!({ "channel": "fresh/b" }))
        .await;
    assert_eq!(reply(&r).0, 1, "a channel stored before the restart: {r}");
    let r = ws
        .request("subscribe", json!({ "channel": "fresh/c" }))
        .await;
    assert_eq!(reply(&r), (0, "", false), "{r}");
    server.publish("fresh/c", json!("first")).await;
    assert_eq!(messages(&mut ws, 1).await, [("fresh/c".to_string(), 1)]);
}

#[tokio::test]
async fn an_sse_stream_naming_new_channels_gets_their_first_messages() {
    let server = Server::start().await;
    let token = server.token(&["sse/*"], &[]);
    let names: Vec<String> = (0..20).map(|i| format!("sse/{i}")).collect();
    let query: String = names.iter().map(|n| format!("channel={n}&")).collect();
    let mut sse = Sse::open(&server, &format!("?{query}token={token}"), None)
        .await
        .unwrap();
    for name in &names {
        let e = sse.next().await.unwrap();
        assert_eq!(e.event, "subscribed");
        assert_eq!(e.json()["channel"], json!(name));
        assert_eq!(e.json()["seq"], 0);
    }
    for name in names.iter().rev() {
        server.publish(name, json!(name)).await;
    }
    for name in names.iter().rev() {
        let e = sse.next().await.unwrap();
        assert_eq!(e.event, "message");
        assert_eq!(e.json()["data"], json!(name), "{e:?}");
    }
}
