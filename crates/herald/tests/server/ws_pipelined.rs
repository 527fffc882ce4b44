//! Commands a WebSocket client sends at once, read by the server together: a run of
//! subscribes is opened side by side (`ClientSession::subscribe_all`), yet each is answered as
//! if run one after another (a channel named twice is refused the second time, the
//! per-connection limit counts the ones before it), a command after the run sees every
//! subscribe of it done, and a channel's reply still comes before its catch-up.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::SinkExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{Server, Ws};

/// Subscribes sent in one write: more than one run's worth (256), so two runs.
const ROOMS: u64 = 280;
/// The per-connection limit: room for ten more after the first 280.
const LIMIT: u64 = 290;

#[tokio::test]
async fn pipelined_subscribes_are_answered_as_if_run_in_order() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let s = Server::builder()
            .env("HERALD_MAX_SUBSCRIPTIONS", &LIMIT.to_string())
            .start()
            .await;
        for n in 1..=3 {
            s.publish("room-7", json!({ "n": n })).await;
        }
        let url = s.ws_url(&format!("?token={}", s.token(&["room-*"], &[])));
        let mut ws = Ws::connect(&url).await;

        let mut frames: Vec<Value> = (1..=ROOMS)
            .map(|i| json!({"id": i, "subscribe": {"channel": format!("room-{i}"), "since": {"seq": 0}}}))
            .collect();
        // room-3 again within the same run.
        frames.insert(10, json!({"id": 500, "subscribe": {"channel": "room-3"}}));
        frames.push(json!({"id": 281, "subscribe": {"channel": "room-5"}}));
        frames.push(json!({"id": 282, "subscribe": {"channel": "secret"}}));
        // Runs only after every subscribe before it: room-1 is held by then.
        frames.push(json!({"id": 283, "unsubscribe": {"channel": "room-1"}}));
        frames.push(json!({"id": 284, "subscribe": {"channel": "room-1"}}));
        for id in 285..=300u64 {
            let channel = format!("room-{}", 1000 + id);
            frames.push(json!({"id": id, "subscribe": {"channel": channel}}));
        }
        for frame in &frames {
            ws.stream
                .feed(Message::Text(frame.to_string().into()))
                .await
                .unwrap();
        }
        ws.stream.flush().await.unwrap();

        let mut replies: HashMap<u64, Value> = HashMap::new();
        let mut room7: Vec<Value> = Vec::new();
        while replies.len() < 301 {
            let frame = ws.frame().await;
            if frame.get("message").is_some() {
                assert!(
                    replies.contains_key(&7),
                    "room-7's catch-up before its reply: {frame}"
                );
                room7.push(frame);
                continue;
            }
            let id = frame["id"].as_u64().unwrap_or_else(|| panic!("no id: {frame}"));
            assert!(
                replies.insert(id, frame.clone()).is_none(),
                "two answers for {id}: {frame}"
            );
        }
        let ok = |id: u64, kind: &str| {
            let reply = &replies[&id];
            assert!(reply.get(kind).is_some(), "{id}: {reply}");
        };
        let refused = |id: u64, code: &str| {
            let reply = &replies[&id];
            assert_eq!(reply["error"]["code"], code, "{id}: {reply}");
        };
        for id in 1..=ROOMS {
            ok(id, "subscribe");
            assert_eq!(replies[&id]["subscribe"]["channel"], format!("room-{id}"));
        }
        assert_eq!(replies[&7]["subscribe"]["seq"], 3, "room-7 stands at 3");
        refused(500, "already_subscribed");
        refused(281, "already_subscribed");
        refused(282, "forbidden");
        ok(283, "unsubscribe");
        ok(284, "subscribe");
        // 280 held, then room-1 again: ten more fit under the limit of 290.
        for id in 285..=294 {
            ok(id, "subscribe");
        }
        for id in 295..=300 {
            refused(id, "too_many_subscriptions");
        }
        let seqs: Vec<u64> = room7
            .iter()
            .map(|m| m["message"]["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, [1, 2, 3], "room-7's catch-up, once, in order");

        // Every subscription is live: a message to the last room and to room-1 arrives.
        s.publish("room-1294", json!("last")).await;
        s.publish("room-1", json!("first")).await;
        let mut live = Vec::new();
        while live.len() < 2 {
            let frame = ws.frame().await;
            if let Some(m) = frame.get("message") {
                live.push(m["channel"].as_str().unwrap().to_owned());
            }
        }
        assert_eq!(live, ["room-1294", "room-1"]);
    })
    .await
    .unwrap();
}
