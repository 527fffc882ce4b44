//! Burst pacing (`fanout_backlog`, docs/config.md): publishes to a channel with subscribers wait
//! while the fan-out is behind, and the fan-out waits for the connections' writers. With the
//! tightest backlog (every publish waits for the queue to empty), pacing on and off: a burst
//! from concurrent publishers to more subscribers than the writers' wait lets go still reaches
//! every subscriber whole, in order, exactly once, each publisher's messages in the order it
//! published them, and every publish is answered.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{Server, Ws};

/// More than the 64 untaken outboxes the fan-out's wait for writers lets go.
const SUBSCRIBERS: usize = 100;
const PUBLISHERS: usize = 8;
const EACH: usize = 40;

/// `herald_publishes_paced_total` as `/metrics` shows it, if it is exported.
async fn paced(server: &Server) -> Option<f64> {
    server
        .metrics()
        .await
        .lines()
        .find_map(|l| l.strip_prefix("herald_publishes_paced_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
}

async fn burst_reaches_everyone(server: &Server) {
    let url = server.ws_url(&format!("?token={}", server.token(&["burst"], &[])));
    let mut readers = Vec::new();
    for _ in 0..SUBSCRIBERS {
        let mut ws = Ws::connect(&url).await;
        let r = ws.request("subscribe", json!({ "channel": "burst" })).await;
        assert!(r["subscribe"].is_object(), "{r}");
        readers.push(tokio::spawn(async move {
            let mut got: Vec<(u64, Value)> = Vec::new();
            while got.len() < PUBLISHERS * EACH {
                let v = ws.recv().await.expect("the connection stays open");
                if let Some(seq) = v["message"]["seq"].as_u64() {
                    got.push((seq, v["message"]["data"].clone()));
                }
            }
            got
        }));
    }
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|p| {
            let (addr, key) = (
                server.url("/v1/channels/burst/messages"),
                crate::support::API_KEY.to_string(),
            );
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                for i in 0..EACH {
                    let r = http
                        .post(&addr)
                        .bearer_auth(&key)
                        .json(&json!({ "data": { "p": p, "i": i } }))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), 200);
                }
            })
        })
        .collect();
    tokio::time::timeout(Duration::from_secs(120), async {
        for p in publishers {
            p.await.unwrap();
        }
    })
    .await
    .expect("every publish answered");
    for reader in readers {
        let got = tokio::time::timeout(Duration::from_secs(120), reader)
            .await
            .expect("every subscriber gets the whole burst")
            .unwrap();
        let seqs: Vec<u64> = got.iter().map(|(s, _)| *s).collect();
        let expected: Vec<u64> = (1..=(PUBLISHERS * EACH) as u64).collect();
        assert_eq!(seqs, expected, "every seq once, in order");
        for p in 0..PUBLISHERS {
            let order: Vec<u64> = got
                .iter()
                .filter(|(_, d)| d["p"] == p)
                .map(|(_, d)| d["i"].as_u64().unwrap())
                .collect();
            assert_eq!(order, (0..EACH as u64).collect::<Vec<_>>(), "publisher {p}");
        }
    }
}

#[tokio::test]
async fn a_burst_paced_at_the_tightest_backlog_reaches_every_subscriber_in_order() {
    let server = Server::builder().config("fanout_backlog = 1").start().await;
    burst_reaches_everyone(&server).await;
    assert!(
        paced(&server).await.is_some(),
        "herald_publishes_paced_total is exported"
    );
}

#[tokio::test]
async fn with_pacing_off_the_same_burst_arrives_the_same() {
    let server = Server::builder().config("fanout_backlog = 0").start().await;
    burst_reaches_everyone(&server).await;
}
