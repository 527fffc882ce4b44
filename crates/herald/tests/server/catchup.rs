//! Paged catch-up against the real server (docs/design/bounded-catchup.md): a subscriber
//! resuming far behind, over WebSocket, SSE and long-poll, while a publisher keeps publishing,
//! gets every seq exactly once and in order, and the catch-up one connection holds queued stays
//! within its bound (`herald_catchup_queued_max_bytes` in /metrics), whatever it missed.

use std::time::Duration;

use crate::support;

use serde_json::{json, Value};
use support::{Server, Sse, Ws, API_KEY};

/// Small queues, so that 20,000 missed messages take hundreds of pages.
const CONFIG: &str = "outbox_bytes = 8192\ncatchup_bytes = 2048\n[history]\nsize = 100000\n";
const CATCHUP_BYTES: f64 = 2048.0;
/// Messages missed before the subscriber comes back.
const BEHIND: u64 = 20_000;
/// Messages published while it catches up.
const DURING: u64 = 400;

/// Publishes `n` messages to `channel` whose data is their seq (the channel must be new), in
/// batches of 1,000, starting at data `from`.
async fn publish_seqs(http: &reqwest::Client, base: &str, channel: &str, from: u64, n: u64) {
    let mut next = from;
    while next < from + n {
        let upto = (next + 1000).min(from + n);
        let batch: Vec<Value> = (next..upto)
            .map(|i| json!({ "channel": channel, "data": i }))
            .collect();
        let r = http
            .post(format!("{base}/v1/batch"))
            .bearer_auth(API_KEY)
            .json(&json!({ "messages": batch }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        next = upto;
    }
}

/// A server with `BEHIND` messages in `channel`, and a task that publishes `DURING` more, ten at
/// a time, once started.
async fn behind(channel: &'static str) -> (Server, tokio::task::JoinHandle<()>) {
    let server = Server::builder().config(CONFIG).start().await;
    let base = server.url("");
    let base = base.trim_end_matches('/').to_string();
    publish_seqs(&server.http, &base, channel, 1, BEHIND).await;
    let http = server.http.clone();
    let publisher = tokio::spawn(async move {
        for k in 0..DURING / 10 {
            publish_seqs(&http, &base, channel, BEHIND + 1 + k * 10, 10).await;
        }
    });
    (server, publisher)
}

/// The value of an unlabelled metric, 0 when absent.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// What one connection held queued of catch-up at most stays within the pager's bound (half the
/// budget, then one page sized to what is free, plus the subscribe reply), and the catch-up was
/// paged.
async fn assert_paged_within_bound(server: &Server) {
    let text = server.metrics().await;
    let max = metric(&text, "herald_catchup_queued_max_bytes");
    assert!(max > 0.0, "catch-up was queued:\n{text}");
    assert!(
        max <= 2.0 * CATCHUP_BYTES,
        "one connection held {max} bytes of catch-up, over 2 x catchup_bytes"
    );
    let pages = metric(&text, "herald_catchup_pages_total");
    assert!(pages >= 100.0, "paged: {pages} pages");
}

fn assert_every_seq_once(got: &[u64]) {
    let total = BEHIND + DURING;
    assert_eq!(got.len() as u64, total, "every message once");
    let expected: Vec<u64> = (1..=total).collect();
    assert!(got == expected.as_slice(), "in order, no gap, no repeat");
}

#[tokio::test]
async fn a_websocket_resuming_20000_behind_gets_every_seq_once_within_the_bound() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let (server, publisher) = behind("far").await;
        let token = server.token(&["far"], &[]);
        let mut ws = Ws::connect(&server.ws_url("")).await;
        ws.request("connect", json!({ "token": token })).await;
        let r = ws
            .request(
                "subscribe",
                json!({ "channel": "far", "since": { "seq": 0 } }),
            )
            .await;
        assert_eq!(r["subscribe"]["recovered"], true, "{r}");
        let mut got = Vec::new();
        while (got.len() as u64) < BEHIND + DURING {
            let v = ws.recv().await.expect("connection closed");
            if let Some(seq) = v["message"]["seq"].as_u64() {
                assert_eq!(v["message"]["data"], seq);
                got.push(seq);
            }
            if got.len() % 5000 == 0 {
                // Reading slowly now and then: the pager must wait for the socket, not queue.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        publisher.await.unwrap();
        assert_every_seq_once(&got);
        assert_paged_within_bound(&server).await;
        // Live after the catch-up.
        server.publish("far", json!(BEHIND + DURING + 1)).await;
        loop {
            let v = ws.recv().await.expect("connection closed");
            if let Some(seq) = v["message"]["seq"].as_u64() {
                assert_eq!(seq, BEHIND + DURING + 1);
                break;
            }
        }
    })
    .await
    .expect("bounded in time");
}

#[tokio::test]
async fn an_sse_stream_resuming_20000_behind_gets_every_seq_once_within_the_bound() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let (server, publisher) = behind("far").await;
        let token = server.token(&["far"], &[]);
        let query = format!("?channel=far&since=0&token={token}");
        let mut sse = Sse::open(&server, &query, None).await.unwrap();
        let mut got = Vec::new();
        while (got.len() as u64) < BEHIND + DURING {
            let e = sse.next().await.expect("stream ended");
            if e.event == "subscribed" {
                assert_eq!(e.json()["recovered"], true, "{e:?}");
            } else if e.event == "message" {
                got.push(e.json()["data"].as_u64().unwrap());
            }
        }
        publisher.await.unwrap();
        assert_every_seq_once(&got);
        assert_paged_within_bound(&server).await;
    })
    .await
    .expect("bounded in time");
}

#[tokio::test]
async fn long_polls_resuming_20000_behind_get_every_seq_once() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let (server, publisher) = behind("far").await;
        let token = server.token(&["far"], &[]);
        let mut cursor = "0".to_string();
        let mut got = Vec::new();
        while (got.len() as u64) < BEHIND + DURING {
            let url = server.url(&format!(
                "/v1/poll?channel=far&since={cursor}&limit=1000&timeout=10&token={token}"
            ));
            let r: Value = server
                .http
                .get(url)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let messages = r["messages"].as_array().expect("messages");
            assert!(!messages.is_empty(), "a poll behind answers at once: {r}");
            got.extend(messages.iter().map(|m| m["data"].as_u64().unwrap()));
            cursor = r["cursor"].as_str().unwrap().to_string();
        }
        publisher.await.unwrap();
        assert_every_seq_once(&got);
        let text = server.metrics().await;
        let max = metric(&text, "herald_catchup_queued_max_bytes");
        assert!(max <= 2.0 * CATCHUP_BYTES, "{max}");
    })
    .await
    .expect("bounded in time");
}
