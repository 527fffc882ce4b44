//! The runtime HTTP requests are served on (`http_workers`, docs/config.md): its threads exist,
//! a publish answered there reaches a WebSocket subscriber (one that opened its connection with
//! the handshake, which stays on the main runtime, and one upgraded on a connection that served
//! a request first, which moves there from the HTTP runtime), and the server still tells every
//! client `shutdown` and exits cleanly; `http_workers = 0` serves everything on one runtime;
//! `workers` sizes the main runtime, and the HTTP one follows it unless told otherwise.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::{Server, Ws};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Threads of process `pid` named `herald-http` (the HTTP runtime's workers, and its blocking
/// threads while it has any).
fn http_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the server's threads")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "herald-http")
        .count()
}

/// A WebSocket handshake on a connection that has first been answered a plain HTTP request
/// (so it is served on the HTTP runtime, and its WebSocket connection moves to the main one).
async fn upgrade_after_a_request(server: &Server) -> Ws {
    let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: herald\r\n\r\n")
        .await
        .unwrap();
    // The whole answer, and nothing more: the server sends nothing else until asked.
    let mut answer = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = tcp.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&answer).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .expect("a content-length");
            if answer.len() >= end + 4 + length {
                assert!(text.starts_with("HTTP/1.1 200"), "{text}");
                break;
            }
        }
    }
    Ws::upgrade(tcp, &server.ws_url("")).await
}

/// A WebSocket subscriber gets what is published over HTTP (several publishes on one kept-alive
/// connection), then, at SIGTERM, its `shutdown` disconnect; the server exits with success.
async fn publish_deliver_and_shut_down(mut server: Server, mut ws: Ws) {
    let token = server.token(&["news"], &[]);
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
    // The runtime's own count: tokio names the HTTP runtime's blocking threads `herald-http`
    // too, so the threads of that name may be more than its workers.
    assert_eq!(runtime_workers(&server, "http").await, 3);
    assert!(http_threads(server.pid()) >= 3);
    tokio::time::timeout(Duration::from_secs(30), async {
        let ws = Ws::connect(&server.ws_url("")).await;
        publish_deliver_and_shut_down(server, ws).await
    })
    .await
    .expect("within 30 s");
}

#[tokio::test]
async fn a_websocket_upgraded_on_the_http_runtime_moves_to_the_main_one_and_still_works() {
    let server = Server::start().await;
    assert!(http_threads(server.pid()) > 0);
    tokio::time::timeout(Duration::from_secs(30), async {
        let ws = upgrade_after_a_request(&server).await;
        publish_deliver_and_shut_down(server, ws).await
    })
    .await
    .expect("within 30 s");
}

/// The worker threads `/metrics` says runtime `runtime` has (`herald_runtime_workers`).
async fn runtime_workers(server: &Server, runtime: &str) -> u64 {
    let text = server.metrics().await;
    let prefix = format!("herald_runtime_workers{{runtime=\"{runtime}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix}in /metrics:\n{text}"))
        .trim()
        .parse()
        .expect("a whole number")
}

#[tokio::test]
async fn workers_sizes_the_main_runtime_and_the_http_one_follows_it() {
    let server = Server::builder().env("HERALD_WORKERS", "1").start().await;
    assert_eq!(runtime_workers(&server, "main").await, 1);
    assert_eq!(runtime_workers(&server, "http").await, 1);
    tokio::time::timeout(Duration::from_secs(30), async {
        let ws = Ws::connect(&server.ws_url("")).await;
        publish_deliver_and_shut_down(server, ws).await
    })
    .await
    .expect("within 30 s");
    let server = Server::builder()
        .env("HERALD_WORKERS", "3")
        .env("HERALD_HTTP_WORKERS", "2")
        .start()
        .await;
    assert_eq!(runtime_workers(&server, "main").await, 3);
    assert_eq!(runtime_workers(&server, "http").await, 2);
}

#[tokio::test]
async fn zero_http_workers_serves_everything_on_one_runtime() {
    let server = Server::builder()
        .env("HERALD_HTTP_WORKERS", "0")
        .start()
        .await;
    assert_eq!(http_threads(server.pid()), 0);
    tokio::time::timeout(Duration::from_secs(30), async {
        let ws = upgrade_after_a_request(&server).await;
        publish_deliver_and_shut_down(server, ws).await
    })
    .await
    .expect("within 30 s");
}
