//! SSE streams served without hyper: a fresh connection whose first request is `GET /v1/sse`
//! is served by the transport's own loop; any other request, or `/v1/sse` after another request
//! on a kept-alive connection, goes through hyper. Both must look the same to clients. These
//! tests speak HTTP over raw sockets, so which path serves a request is under their control.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::raw::{data, event_name, Head, Raw};
use support::Server;

fn get(target: &str, extra: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: herald\r\nAccept: text/event-stream\r\n{extra}\r\n")
        .into_bytes()
}

/// A connection on which `GET /v1/sse...` goes through hyper: it already carried a request.
async fn through_hyper(server: &Server) -> Raw {
    let mut raw = Raw::connect(server).await;
    raw.send(&get("/v1/nothing-here", "")).await;
    let head = raw.head().await;
    assert_eq!(head.status, 404);
    raw.body(&head).await;
    raw
}

const STREAM_HEADERS: [&str; 5] = [
    "content-type",
    "cache-control",
    "x-accel-buffering",
    "access-control-allow-origin",
    "vary",
];
const ERROR_HEADERS: [&str; 3] = ["content-type", "access-control-allow-origin", "vary"];

fn headers<'a>(head: &'a Head, names: &[&str]) -> Vec<Option<&'a str>> {
    names.iter().map(|n| head.get(n)).collect()
}

#[tokio::test]
async fn both_paths_answer_alike() {
    let server = Server::start().await;
    let token = server.token(&["news"], &[]);
    let bad = [
        "/v1/sse?channel=news&token=not-a-token".to_string(),
        format!("/v1/sse?token={token}"),
        format!("/v1/sse?channel=a//b&token={token}"),
    ];
    for target in &bad {
        let mut direct = Raw::connect(&server).await;
        direct.send(&get(target, "")).await;
        let d = direct.head().await;
        let mut hyper = through_hyper(&server).await;
        hyper.send(&get(target, "")).await;
        let h = hyper.head().await;
        assert_eq!(
            d.get("connection"),
            Some("close"),
            "{target}: served directly"
        );
        assert_eq!(h.get("connection"), None, "{target}: served by hyper");
        assert_eq!(d.status, h.status, "{target}");
        assert!(d.status == 400 || d.status == 401, "{target}: {}", d.status);
        assert_eq!(headers(&d, &ERROR_HEADERS), headers(&h, &ERROR_HEADERS));
        assert_eq!(d.get("access-control-allow-origin"), Some("*"));
        let (db, hb) = (direct.body(&d).await, hyper.body(&h).await);
        assert_eq!(db, hb, "{target}");
        assert!(db["error"]["code"].is_string(), "{db}");
    }

    let target = format!("/v1/sse?channel=news&token={token}");
    let mut direct = Raw::connect(&server).await;
    direct
        .send(&get(&target, "Origin: http://app.example\r\n"))
        .await;
    let d = direct.head().await;
    let mut hyper = through_hyper(&server).await;
    hyper
        .send(&get(&target, "Origin: http://app.example\r\n"))
        .await;
    let h = hyper.head().await;
    assert_eq!((d.status, h.status), (200, 200));
    assert_eq!(headers(&d, &STREAM_HEADERS), headers(&h, &STREAM_HEADERS));
    assert_eq!(d.get("content-type"), Some("text/event-stream"));
    assert_eq!(
        (d.get("transfer-encoding"), h.get("transfer-encoding")),
        (None, Some("chunked")),
        "the direct stream ends with its connection; hyper's is chunked"
    );
    for raw in [&mut direct, &mut hyper] {
        assert_eq!(raw.event().await.unwrap(), "retry: 1000");
        assert_eq!(raw.until("subscribed").await["channel"], "news");
    }
    server.publish("news", json!({"n": 1})).await;
    let (dm, hm) = (direct.until("message").await, hyper.until("message").await);
    assert_eq!(dm, hm);
    assert_eq!(dm["data"]["n"], 1);
}

#[tokio::test]
async fn a_request_arriving_in_pieces_is_served() {
    let server = Server::builder().arg("--allow-anonymous").start().await;
    // A silent client and one that stops half-way hold up no one else.
    let _silent = Raw::connect(&server).await;
    let mut stalled = Raw::connect(&server).await;
    stalled
        .send(b"GET /v1/sse?channel=pieces HTTP/1.1\r\nHo")
        .await;
    let mut raw = Raw::connect(&server).await;
    let request = get("/v1/sse?channel=pieces", "Last-Event-ID: \r\n");
    for piece in request.chunks(9) {
        raw.send(piece).await;
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let head = raw.head().await;
    assert_eq!(head.status, 200);
    assert_eq!(head.get("connection"), Some("close"));
    assert_eq!(raw.until("subscribed").await["channel"], "pieces");
    server.publish("pieces", json!("whole")).await;
    assert_eq!(raw.until("message").await["data"], "whole");
}

#[tokio::test]
async fn a_stream_after_another_request_goes_through_hyper() {
    let server = Server::builder().arg("--allow-anonymous").start().await;
    let mut raw = through_hyper(&server).await;
    raw.send(&get("/v1/sse?channel=later", "")).await;
    let head = raw.head().await;
    assert_eq!(head.status, 200);
    assert_eq!(head.get("transfer-encoding"), Some("chunked"));
    assert_eq!(raw.until("subscribed").await["channel"], "later");
    server.publish("later", json!(7)).await;
    assert_eq!(raw.until("message").await["data"], 7);
}

#[tokio::test]
async fn a_header_block_over_the_bound_goes_to_hyper() {
    let server = Server::start().await;
    let pad = format!("X-Pad: {}\r\n", "p".repeat(9 * 1024));
    let mut raw = Raw::connect(&server).await;
    raw.send(&get("/v1/sse?channel=news&token=bad", &pad)).await;
    let head = raw.head().await;
    assert_eq!(head.status, 401);
    assert_eq!(head.get("connection"), None, "hyper answered");
    assert_eq!(raw.body(&head).await["error"]["code"], "unauthorized");

    let token = server.token(&["news"], &[]);
    let mut raw = Raw::connect(&server).await;
    raw.send(&get(&format!("/v1/sse?channel=news&token={token}"), &pad))
        .await;
    let head = raw.head().await;
    assert_eq!(head.status, 200);
    assert_eq!(head.get("transfer-encoding"), Some("chunked"));
    assert_eq!(raw.until("subscribed").await["channel"], "news");
}

#[tokio::test]
async fn other_methods_on_a_fresh_connection_go_to_hyper() {
    let server = Server::builder().arg("--allow-anonymous").start().await;
    let mut raw = Raw::connect(&server).await;
    raw.send(b"POST /v1/sse?channel=x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}")
        .await;
    let head = raw.head().await;
    assert_eq!(head.status, 405);
    assert_eq!(raw.body(&head).await["error"]["code"], "method_not_allowed");
    // The same connection goes on to serve a stream, through hyper.
    raw.send(&get("/v1/sse?channel=x", "")).await;
    assert_eq!(raw.head().await.get("transfer-encoding"), Some("chunked"));
    assert_eq!(raw.until("subscribed").await["channel"], "x");
}

#[tokio::test]
async fn keepalive_pings_reach_a_direct_stream() {
    let server = Server::builder()
        .arg("--allow-anonymous")
        .env("HERALD_PING_INTERVAL", "1s")
        .start()
        .await;
    let mut raw = Raw::connect(&server).await;
    raw.send(&get("/v1/sse?channel=quiet", "")).await;
    assert_eq!(raw.head().await.get("connection"), Some("close"));
    raw.until("subscribed").await;
    for _ in 0..2 {
        assert_eq!(raw.event().await.as_deref(), Some(": ping"));
    }
}

#[tokio::test]
async fn shutdown_sends_the_disconnect_event_then_closes() {
    let mut server = Server::start().await;
    let token = server.token(&["news"], &[]);
    let mut raw = Raw::connect(&server).await;
    raw.send(&get(&format!("/v1/sse?channel=news&token={token}"), ""))
        .await;
    assert_eq!(raw.head().await.get("connection"), Some("close"));
    raw.until("subscribed").await;
    assert!(server.terminate().success());
    let mut last = None;
    while let Some(block) = raw.event().await {
        last = Some(block);
    }
    let last = last.expect("an event before the close");
    assert_eq!(event_name(&last), "disconnect");
    assert_eq!(data(&last)["code"], "shutdown");
}

#[tokio::test]
async fn a_reader_that_falls_behind_is_disconnected_as_a_slow_consumer() {
    let server = Server::builder()
        .env("HERALD_OUTBOX_BYTES", "65536")
        .arg("--allow-anonymous")
        .start()
        .await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut raw = Raw::on(socket.connect(server.addr).await.unwrap());
    raw.send(&get("/v1/sse?channel=firehose", "")).await;
    assert_eq!(raw.head().await.get("connection"), Some("close"));
    raw.until("subscribed").await;
    // Stop reading while ~20 MB is published.
    server.flood("firehose").await;
    let (mut last_seq, mut end) = (0, None);
    while let Some(block) = raw.event().await {
        match event_name(&block) {
            "message" => {
                let seq = data(&block)["seq"].as_u64().unwrap();
                assert_eq!(seq, last_seq + 1, "in order, no gap before the disconnect");
                last_seq = seq;
            }
            "disconnect" => end = Some(data(&block)["code"].clone()),
            _ => {}
        }
    }
    assert_eq!(end, Some(json!("slow_consumer")));
    assert!(last_seq < 1200, "the slow reader did not get everything");
}

#[tokio::test]
async fn a_device_token_without_channels_streams_the_inbox_directly() {
    let server = Server::start().await;
    let (status, body) = server
        .post("/v1/devices", json!({"platform": "herald", "id": "lamp"}))
        .await;
    assert!(status == 200 || status == 201, "{status} {body}");
    let (status, body) = server
        .post("/v1/tokens", json!({"sub": "tester", "device": "lamp"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let token = body["token"].as_str().unwrap().to_string();
    let (status, body) = server
        .post(
            "/v1/push",
            json!({"target": {"device": "lamp"}, "data": "on"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let mut raw = Raw::connect(&server).await;
    raw.send(&get(
        "/v1/sse",
        &format!("Authorization: Bearer {token}\r\n"),
    ))
    .await;
    let head = raw.head().await;
    assert_eq!((head.status, head.get("connection")), (200, Some("close")));
    // An inbox message carries the push, whose own `data` is what was sent.
    let m = raw.until("message").await;
    assert_eq!(m["data"]["data"], "on", "{m}");
}
