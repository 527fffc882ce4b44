//! The runtime HTTP requests are served on (`http_workers`, docs/config.md): its threads exist,
//! a publish answered there reaches a WebSocket subscriber whose connection was upgraded there
//! and moved back to the main runtime, and the server still tells every client `shutdown` and
//! exits cleanly with it; `http_workers = 0` serves everything on one runtime as before.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::{Server, Ws};

/// Threads of process `pid` named `herald-http` (the HTTP runtime's workers).
fn http_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the server's threads")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "herald-http")
        .count()
}

/// A WebSocket subscriber gets what is published over HTTP (several publishes on one kept-alive
/// connection), then, at SIGTERM, its `shutdown` disconnect; the server exits with success.
async fn publish_deliver_and_shut_down(mut server: Server) {
    let token = server.token(&["news"], &[]);
    let mut ws = Ws::connect(&server.ws_url("")).await;
    let r = ws.request("connect", json!({ "token": token })).await;
    assert_eq!(r["connect"]["sub"], "tester", "{r}");
    let r = ws.request("subscribe", json!({ "channel": "news" })).await;
    assert_eq!(r["subscribe"]["seq"], 0, "{r}");
    let publisher = server.publisher();
    for n in 1..=3u64 {
        let published = publisher
            .publish("news", &json!({ "n": n }), None)
            .await
            .expect("publish");
        assert_eq!(published.seq, n);
        let frame = loop {
            let frame = ws.recv().await.expect("the subscriber is connected");
            if frame.get("message").is_some() {
                break frame;
            }
        };
        assert_eq!(frame["message"]["seq"], n, "{frame}");
        assert_eq!(frame["message"]["data"], json!({ "n": n }));
    }
    // The WebSocket connection still answers commands on its own runtime.
    let r = ws.request("ping", json!({})).await;
    assert!(r.get("pong").is_some(), "{r}");
    assert!(server.terminate().success());
    let mut last = None;
    while let Some(frame) = ws.recv().await {
        last = Some(frame);
    }
    let last = last.expect("a frame before the close");
    assert_eq!(last["disconnect"]["code"], "shutdown", "{last}");
}

#[tokio::test]
async fn http_is_served_on_its_own_runtime_and_the_server_still_shuts_down_cleanly() {
    let server = Server::builder()
        .env("HERALD_HTTP_WORKERS", "3")
        .start()
        .await;
    assert_eq!(http_threads(server.pid()), 3);
    tokio::time::timeout(
        Duration::from_secs(30),
        publish_deliver_and_shut_down(server),
    )
    .await
    .expect("within 30 s");
}

#[tokio::test]
async fn zero_http_workers_serves_everything_on_one_runtime() {
    let server = Server::builder()
        .env("HERALD_HTTP_WORKERS", "0")
        .start()
        .await;
    assert_eq!(http_threads(server.pid()), 0);
    tokio::time::timeout(
        Duration::from_secs(30),
        publish_deliver_and_shut_down(server),
    )
    .await
    .expect("within 30 s");
}
