//! The shared recent-tail cache against the real server (docs/design/bounded-catchup.md,
//! "Shared recent-tail cache"): catch-ups served from a channel's cached tail are exactly what
//! the store answers (every seq once, in order, the same `recovered`) inside and across the
//! window's edge, while publishing, after retention trims, after a restart, over WebSocket,
//! SSE and device inboxes; `herald_tail_cache_reads_total` shows the cache answered.

use std::time::Duration;

use crate::support;

use serde_json::{json, Value};
use support::{Server, Sse, Ws, API_KEY};

/// Publishes messages whose data is their seq, `from..=to`, ten per request, in order.
async fn publish_range(server: &Server, channel: &str, from: u64, to: u64) {
    let base = server.url("");
    let base = base.trim_end_matches('/');
    let mut next = from;
    while next <= to {
        let upto = (next + 10).min(to + 1);
        let batch: Vec<Value> = (next..upto)
            .map(|i| json!({ "channel": channel, "data": i }))
            .collect();
        let r = server
            .http
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

/// `herald_tail_cache_reads_total{result="..."}`, 0 when absent.
async fn tail_reads(server: &Server, result: &str) -> f64 {
    let text = server.metrics().await;
    let prefix = format!("herald_tail_cache_reads_total{{result=\"{result}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A WebSocket subscribed to `channel` from `since`, with the subscribe reply's `recovered`.
async fn resume(server: &Server, channel: &str, since: u64) -> (Ws, bool) {
    let token = server.token(&[channel], &[]);
    let mut ws = Ws::connect(&server.ws_url("")).await;
    ws.request("connect", json!({ "token": token })).await;
    let sub = json!({ "channel": channel, "since": { "seq": since } });
    let r = ws.request("subscribe", sub).await;
    let recovered = r["subscribe"]["recovered"]
        .as_bool()
        .unwrap_or_else(|| panic!("{r}"));
    (ws, recovered)
}

/// The seqs `ws` receives until `last`, each checked against its data.
async fn seqs_until(ws: &mut Ws, last: u64) -> Vec<u64> {
    let mut got = Vec::new();
    while got.last() != Some(&last) {
        let v = ws.frame().await;
        if let Some(seq) = v["message"]["seq"].as_u64() {
            assert_eq!(v["message"]["data"], seq, "{v}");
            got.push(seq);
        }
    }
    got
}

/// About 110 small messages per channel: the tail's window is well inside the log.
const SMALL_TAIL: &str = "tail_cache_bytes = 120000\n[history]\nsize = 100000\n";

#[tokio::test]
async fn websockets_resuming_inside_and_across_the_tail_window_while_publishing_get_every_seq_once()
{
    tokio::time::timeout(Duration::from_secs(120), async {
        let server = Server::builder().config(SMALL_TAIL).start().await;
        publish_range(&server, "edge", 1, 1000).await;
        // The first resume reads the store and fills the tail with 901..=1000.
        let (mut first, recovered) = resume(&server, "edge", 900).await;
        assert!(recovered);
        assert_eq!(
            seqs_until(&mut first, 1000).await,
            (901..=1000).collect::<Vec<_>>()
        );
        assert_eq!(tail_reads(&server, "hit").await, 0.0);
        // Inside the window: served from the tail, exactly.
        let (mut inside, recovered) = resume(&server, "edge", 950).await;
        assert!(recovered);
        assert_eq!(
            seqs_until(&mut inside, 1000).await,
            (951..=1000).collect::<Vec<_>>()
        );
        assert!(tail_reads(&server, "hit").await >= 1.0, "the tail answered");
        // Now while a publisher publishes 1001..=1300: cursors before, at and inside the
        // window's edge, at the head, and from the start.
        // A cursor is only resumable once its seq is committed: the reader from 1100 resumes
        // after the publisher told it 1100 was stored.
        let (stored_1100, mut past_1100) = tokio::sync::oneshot::channel::<()>();
        let publisher = {
            let (http, base) = (server.http.clone(), server.url(""));
            let mut stored_1100 = Some(stored_1100);
            tokio::spawn(async move {
                for from in (1001..=1300).step_by(10) {
                    let batch: Vec<Value> = (from..from + 10)
                        .map(|i| json!({ "channel": "edge", "data": i }))
                        .collect();
                    let r = http
                        .post(format!("{}/v1/batch", base.trim_end_matches('/')))
                        .bearer_auth(API_KEY)
                        .json(&json!({ "messages": batch }))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), 200);
                    if from + 9 >= 1100 {
                        if let Some(told) = stored_1100.take() {
                            let _ = told.send(());
                        }
                    }
                }
            })
        };
        let mut readers = Vec::new();
        for since in [0, 850, 889, 890, 900, 901, 950, 999, 1000, 1100] {
            if since == 1100 {
                (&mut past_1100).await.expect("the publisher reached 1100");
            }
            let (mut ws, recovered) = resume(&server, "edge", since).await;
            readers.push(tokio::spawn(async move {
                let got = seqs_until(&mut ws, 1300).await;
                (since, recovered, got)
            }));
        }
        publisher.await.unwrap();
        for reader in readers {
            let (since, recovered, got) = reader.await.unwrap();
            assert!(recovered, "from {since}");
            let expected: Vec<u64> = (since + 1..=1300).collect();
            assert!(got == expected, "from {since}: every seq once, in order");
        }
        assert_eq!(
            seqs_until(&mut first, 1300).await,
            (1001..=1300).collect::<Vec<_>>()
        );
    })
    .await
    .expect("bounded in time");
}

#[tokio::test]
async fn sse_streams_resuming_from_the_tail_get_every_seq_once() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let server = Server::builder().config(SMALL_TAIL).start().await;
        publish_range(&server, "feed", 1, 500).await;
        let token = server.token(&["feed"], &[]);
        let mut streams = Vec::new();
        for since in [450, 480, 300, 499, 500] {
            let query = format!("?channel=feed&since={since}&token={token}");
            let sse = Sse::open(&server, &query, None).await.unwrap();
            streams.push((since, sse));
        }
        publish_range(&server, "feed", 501, 600).await;
        for (since, mut sse) in streams {
            let mut got = Vec::new();
            while got.last() != Some(&600) {
                let e = sse.next().await.expect("stream ended");
                if e.event == "subscribed" {
                    assert_eq!(e.json()["recovered"], true, "{e:?}");
                } else if e.event == "message" {
                    got.push(e.json()["data"].as_u64().unwrap());
                }
            }
            let expected: Vec<u64> = (since + 1..=600).collect();
            assert!(got == expected, "from {since}: every seq once, in order");
        }
        assert!(tail_reads(&server, "hit").await >= 1.0, "the tail answered");
    })
    .await
    .expect("bounded in time");
}

/// A small reconnect storm: devices that were offline for the same broadcasts come back; the
/// first reads the store, the others are served from the tail, each gets every push once.
#[tokio::test]
async fn device_inboxes_coming_back_together_share_the_tail_and_get_every_push_once() {
    const DEVICES: usize = 10;
    const PUSHES: u64 = 60;
    tokio::time::timeout(Duration::from_secs(120), async {
        let server = Server::start().await;
        let mut tokens = Vec::new();
        for d in 0..DEVICES {
            let device = json!({ "platform": "herald", "id": format!("d{d}") });
            let (status, body) =
                support::call(&server, "POST", "/v1/devices", API_KEY, Some(device)).await;
            assert!(status == 201 || status == 200, "{status} {body}");
            let claims = json!({ "sub": format!("u{d}"), "device": format!("d{d}") });
            let (status, body) =
                support::call(&server, "POST", "/v1/tokens", API_KEY, Some(claims)).await;
            assert_eq!(status, 200, "{body}");
            tokens.push(body["token"].as_str().unwrap().to_string());
        }
        for i in 0..PUSHES {
            let (status, body) = server
                .post("/v1/push", json!({ "target": { "app": true }, "data": i }))
                .await;
            assert_eq!(status, 202, "{body}");
        }
        let inbox = |token: String| {
            let url = server.ws_url(&format!("?token={token}"));
            async move {
                let mut ws = Ws::connect(&url).await;
                let mut data = Vec::new();
                while (data.len() as u64) < PUSHES {
                    let v = ws.frame().await;
                    if let Some(m) = v.get("message") {
                        data.push(m["data"]["data"].as_u64().unwrap_or_else(|| panic!("{v}")));
                    } else if v.get("error").is_some() || v.get("disconnect").is_some() {
                        panic!("{v}");
                    }
                }
                (ws, data)
            }
        };
        let expected: Vec<u64> = (0..PUSHES).collect();
        let (_first, data) = inbox(tokens[0].clone()).await;
        assert!(data == expected, "every push once, in order");
        let rest: Vec<_> = tokens[1..]
            .iter()
            .map(|t| tokio::spawn(inbox(t.clone())))
            .collect();
        for device in rest {
            let (_ws, data) = device.await.unwrap();
            assert!(data == expected, "every push once, in order");
        }
        let hits = tail_reads(&server, "hit").await;
        assert!(
            hits >= (DEVICES - 1) as f64,
            "the others read the tail: {hits} hits"
        );
    })
    .await
    .expect("bounded in time");
}

/// What resuming from each cursor gives after retention trimmed the log under a live tail:
/// `(cursor, recovered, seqs up to the marker)`.
async fn resumes_after_trims(config: &str) -> (Vec<(u64, bool, Vec<u64>)>, f64) {
    let server = Server::builder().config(config).start().await;
    publish_range(&server, "kept", 1, 130).await;
    // A live subscriber keeps the channel's entry (and its tail, fed by deliveries).
    let (mut live, recovered) = resume(&server, "kept", 120).await;
    assert!(recovered);
    publish_range(&server, "kept", 131, 400).await;
    assert_eq!(
        seqs_until(&mut live, 400).await,
        (121..=400).collect::<Vec<_>>()
    );
    let mut out = Vec::new();
    for (i, since) in [150, 250, 280, 290, 299, 300, 320, 349, 350, 380, 399, 400]
        .into_iter()
        .enumerate()
    {
        let (mut ws, recovered) = resume(&server, "kept", since).await;
        let marker = 401 + i as u64;
        publish_range(&server, "kept", marker, marker).await;
        out.push((since, recovered, seqs_until(&mut ws, marker).await));
        assert_eq!(seqs_until(&mut live, marker).await, vec![marker]);
    }
    (out, tail_reads(&server, "hit").await)
}

#[tokio::test]
async fn after_retention_trims_resumes_get_exactly_what_the_store_alone_gives() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let (cached, hits) = resumes_after_trims("[history]\nsize = 100\n").await;
        let (store, _) = resumes_after_trims("tail_cache_bytes = 0\n[history]\nsize = 100\n").await;
        assert!(hits >= 1.0, "the tail answered some");
        assert_eq!(cached, store);
        assert!(
            cached.iter().any(|(_, recovered, _)| !recovered),
            "some cursors were trimmed: {cached:?}"
        );
    })
    .await
    .expect("bounded in time");
}

#[tokio::test]
async fn after_a_restart_the_empty_tail_fills_from_the_store_and_stays_exact() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let mut server = Server::start().await;
        publish_range(&server, "again", 1, 200).await;
        let (mut ws, _) = resume(&server, "again", 150).await;
        assert_eq!(
            seqs_until(&mut ws, 200).await,
            (151..=200).collect::<Vec<_>>()
        );
        drop(ws);
        server.restart().await;
        assert_eq!(tail_reads(&server, "hit").await, 0.0, "a new process");
        let (mut a, recovered) = resume(&server, "again", 150).await;
        assert!(recovered);
        assert_eq!(
            seqs_until(&mut a, 200).await,
            (151..=200).collect::<Vec<_>>()
        );
        assert!(
            tail_reads(&server, "miss").await >= 1.0,
            "the first read went to the store"
        );
        let (mut b, recovered) = resume(&server, "again", 180).await;
        assert!(recovered);
        publish_range(&server, "again", 201, 210).await;
        assert_eq!(
            seqs_until(&mut b, 210).await,
            (181..=210).collect::<Vec<_>>()
        );
        assert_eq!(
            seqs_until(&mut a, 210).await,
            (201..=210).collect::<Vec<_>>()
        );
        assert!(
            tail_reads(&server, "hit").await >= 1.0,
            "the second read the tail"
        );
    })
    .await
    .expect("bounded in time");
}
