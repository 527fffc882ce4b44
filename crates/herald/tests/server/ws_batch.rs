//! Several commands in one WebSocket message (a batch: a JSON array of command objects, for a
//! client whose library writes each message at once): each command is answered as if it had
//! come in a message of its own, with its own id and in the same order as separate messages
//! would be, each one counted against the command limit; a batch that is no array of commands
//! is refused as a malformed message, and a message holding one object is read as before.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{Server, Ws};

/// Reads frames until every id in `ids` has its answer and `messages` pushes have come; the
/// answers without an id and the pushes (in order) are returned beside them.
async fn answers(
    ws: &mut Ws,
    ids: &[u64],
    unnamed: usize,
    messages: usize,
) -> (HashMap<u64, Value>, Vec<Value>, Vec<Value>) {
    let mut by_id = HashMap::new();
    let mut without_id = Vec::new();
    let mut pushes = Vec::new();
    while by_id.len() < ids.len() || without_id.len() < unnamed || pushes.len() < messages {
        let frame = ws.frame().await;
        if let Some(m) = frame.get("message") {
            pushes.push(m.clone());
        } else if let Some(id) = frame["id"].as_u64() {
            assert!(ids.contains(&id), "an answer for {id}, not asked: {frame}");
            assert!(
                by_id.insert(id, frame.clone()).is_none(),
                "two answers for {id}: {frame}"
            );
        } else {
            without_id.push(frame);
        }
    }
    (by_id, without_id, pushes)
}

#[tokio::test]
async fn a_batch_runs_each_command_as_a_message_of_its_own() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let s = Server::start().await;
        s.publish("room-2", json!({ "n": 1 })).await;
        s.publish("room-2", json!({ "n": 2 })).await;
        let url = s.ws_url(&format!("?token={}", s.token(&["room-*"], &[])));
        let mut ws = Ws::connect(&url).await;

        let batch = json!([
            {"id": 1, "subscribe": {"channel": "room-1"}},
            {"id": 2, "subscribe": {"channel": "room-2", "since": {"seq": 0}}},
            {"id": 3, "subscribe": {"channel": "room-1"}},
            {"id": 4, "fly": {}},
            7,
            {"id": 5, "subscribe": {"channel": "secret"}},
            {"id": 6, "unsubscribe": {"channel": "room-1"}},
            {"id": 8, "ping": {}}
        ]);
        // Pretty-printed, as a client's JSON library may write it.
        ws.send_raw(&serde_json::to_string_pretty(&batch).unwrap())
            .await;
        let (by_id, without_id, pushes) = answers(&mut ws, &[1, 2, 3, 4, 5, 6, 8], 1, 2).await;
        let code = |id: u64| by_id[&id]["error"]["code"].clone();
        assert_eq!(by_id[&1]["subscribe"]["channel"], "room-1", "{}", by_id[&1]);
        assert_eq!(by_id[&2]["subscribe"]["seq"], 2, "{}", by_id[&2]);
        assert_eq!(code(3), "already_subscribed", "{}", by_id[&3]);
        assert_eq!(code(4), "unknown_command", "{}", by_id[&4]);
        assert_eq!(code(5), "forbidden", "{}", by_id[&5]);
        assert_eq!(
            by_id[&6]["unsubscribe"]["channel"], "room-1",
            "the unsubscribe runs after the subscribes before it: {}",
            by_id[&6]
        );
        assert!(by_id[&8].get("pong").is_some(), "{}", by_id[&8]);
        assert_eq!(
            without_id[0]["error"]["code"], "bad_request",
            "the element that is no object: {}",
            without_id[0]
        );
        let replayed: Vec<(Value, Value)> = pushes
            .iter()
            .map(|m| (m["channel"].clone(), m["seq"].clone()))
            .collect();
        assert_eq!(
            replayed,
            [(json!("room-2"), json!(1)), (json!("room-2"), json!(2))],
            "room-2's catch-up, once, in order"
        );

        // The subscriptions are live (room-2) or gone (room-1, unsubscribed in the batch).
        s.publish("room-1", json!("not for us")).await;
        s.publish("room-2", json!("live")).await;
        let (_, _, live) = answers(&mut ws, &[], 0, 1).await;
        assert_eq!(
            (live[0]["channel"].clone(), live[0]["seq"].clone()),
            (json!("room-2"), json!(3)),
            "{}",
            live[0]
        );

        // An empty batch, or one that is no JSON array, is one malformed message: one
        // bad_request without an id, and nothing in it runs.
        ws.send_raw("[]").await;
        ws.send_raw(r#"[{"id":9,"ping":{}}"#).await;
        ws.send_raw(r#"[{"id":10,"ping":{}}] {"id":11,"ping":{}}"#)
            .await;
        // One object, with whitespace before it, is one command as always.
        ws.send_raw(" \n\t{\"id\":12,\"ping\":{}}").await;
        let (by_id, without_id, _) = answers(&mut ws, &[12], 3, 0).await;
        assert!(by_id[&12].get("pong").is_some(), "{}", by_id[&12]);
        for e in &without_id {
            assert_eq!(e["error"]["code"], "bad_request", "{e}");
        }
        let r = ws.request("ping", json!({})).await;
        assert!(
            r.get("pong").is_some(),
            "the connection is still usable: {r}"
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn each_command_of_a_batch_counts_against_the_command_limit() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let s = Server::builder()
            .env("HERALD_LIMITS_COMMAND", "1/h burst 3")
            .start()
            .await;
        let url = s.ws_url(&format!("?token={}", s.token(&["news"], &[])));
        let mut ws = Ws::connect(&url).await;
        // A burst's worth in one batch: all three run.
        ws.send_raw(r#"[{"id":1,"ping":{}},{"id":2,"ping":{}},{"id":3,"ping":{}}]"#)
            .await;
        let (by_id, _, _) = answers(&mut ws, &[1, 2, 3], 0, 0).await;
        for id in 1..=3 {
            assert!(by_id[&id].get("pong").is_some(), "{}", by_id[&id]);
        }
        // Over the budget: each refused with its own id, up to a burst's worth of refusals;
        // the next one closes the connection and nothing after it in the batch runs.
        ws.send_raw(
            r#"[{"id":100,"ping":{}},{"id":101,"ping":{}},{"id":102,"ping":{}},{"id":200,"ping":{}},{"id":300,"ping":{}}]"#,
        )
        .await;
        for id in 100..103 {
            let e = ws.frame().await;
            assert_eq!(e["id"], id, "{e}");
            assert_eq!(e["error"]["code"], "rate_limited", "{e}");
        }
        let bye = ws.frame().await;
        assert_eq!(bye["disconnect"]["code"], "rate_limited", "{bye}");
        assert!(
            ws.recv().await.is_none(),
            "closed after the disconnect frame, nothing answered after it: {}",
            ws.why_closed()
        );
    })
    .await
    .unwrap();
}
