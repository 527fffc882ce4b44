//! The billing counter `published` counts a message once, however often its publisher retries
//! it with the same idempotency key: on every path that publishes (HTTP single and batch,
//! WebSocket `publish`, `POST /v1/push`, Meteor's controller `ADDMESSAGE`).

use crate::support;

use serde_json::{json, Value};
use support::{Server, Ws};

/// The default app's `published` counter, as `GET /v1/apps/default/stats` tells it.
async fn published(s: &Server) -> u64 {
    let (status, stats) = s.get("/v1/apps/default/stats").await;
    assert_eq!(status, 200, "{stats}");
    stats["usage"]["published"]
        .as_u64()
        .unwrap_or_else(|| panic!("no usage.published in {stats}"))
}

/// Runs `send` twice and checks that `published` moved by exactly one.
async fn counts_once(s: &Server, path: &str, first: Value, second: Value, before: u64) -> u64 {
    let after = published(s).await;
    assert_eq!(
        after,
        before + 1,
        "{path}: one message sent twice must count once (answers: {first} then {second})"
    );
    after
}

#[tokio::test]
async fn a_retried_publish_counts_once_on_every_path() {
    let s = Server::start().await;
    let start = published(&s).await;

    // HTTP, one message: the retry is answered as a duplicate.
    let body = json!({ "id": "http-1", "data": { "n": 1 } });
    let (_, a) = s.post("/v1/channels/news/messages", body.clone()).await;
    let (_, b) = s.post("/v1/channels/news/messages", body).await;
    assert_eq!(b["duplicate"], true, "{b}");
    let n = counts_once(&s, "POST /v1/channels/{name}/messages", a, b, start).await;

    // HTTP batch.
    let batch = json!({ "messages": [{ "channel": "news", "id": "batch-1", "data": 2 }] });
    let (_, a) = s.post("/v1/batch", batch.clone()).await;
    let (_, b) = s.post("/v1/batch", batch).await;
    assert_eq!(b["results"][0]["duplicate"], true, "{b}");
    let n = counts_once(&s, "POST /v1/batch", a, b, n).await;

    // WebSocket `publish`.
    let token = s.token(&["news"], &["news"]);
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
    let cmd = json!({ "channel": "news", "id": "ws-1", "data": 3 });
    let a = ws.request("publish", cmd.clone()).await;
    let b = ws.request("publish", cmd).await;
    assert_eq!(b["publish"]["duplicate"], true, "{b}");
    let n = counts_once(&s, "WebSocket publish", a, b, n).await;

    // A push to the whole app, retried with the same id.
    let push = json!({ "id": "push-1", "target": { "app": true }, "data": { "n": 4 } });
    let (status, a) = s.post("/v1/push", push.clone()).await;
    assert!(status == 200 || status == 202, "{status} {a}");
    let (_, b) = s.post("/v1/push", push).await;
    counts_once(&s, "POST /v1/push", a, b, n).await;
}
