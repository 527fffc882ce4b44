//! Faults of a running cluster: Redis restarted under a publisher and a subscriber on another
//! node; PostgreSQL stopped and started again; a subscriber that stops reading on one node
//! while another node's publisher keeps going. In each, every acknowledged message reaches the
//! subscribers exactly once, in order. (A node killed with SIGKILL is tested with the real
//! binary, in `crates/herald/tests/server/cluster.rs`.)

use std::time::Duration;

use serde_json::{json, Value};

use super::{bounded, call, eventually, one_to, Cluster};
use crate::support::API_KEY;

/// Publishes `count` messages to `channel` on the server at `base`, one request each; answers
/// the acknowledged seqs. Panics on a refused publish.
async fn publish_many(base: String, channel: &'static str, from: u64, count: u64) -> Vec<u64> {
    let mut seqs = Vec::new();
    for i in from..from + count {
        let path = format!("/v1/channels/{channel}/messages");
        let (status, body) = call(&base, "POST", &path, API_KEY, Some(json!({ "data": i }))).await;
        assert_eq!(status, 200, "publish {i}: {body}");
        seqs.push(body["seq"].as_u64().unwrap());
    }
    seqs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_loses_nothing_acknowledged() {
    let mut cluster = Cluster::start(2).await;
    let mut subscriber = cluster.ws(1, &["orders"]).await;
    subscriber.subscribe("orders", None).await;
    let base_a = cluster.base(0);

    let mut acknowledged = publish_many(base_a.clone(), "orders", 1, 20).await;
    assert_eq!(subscriber.message_seqs(20).await, one_to(20));
    // Redis goes away and comes back (empty) while node A keeps publishing.
    let during = tokio::spawn(publish_many(base_a.clone(), "orders", 21, 20));
    tokio::task::block_in_place(|| cluster.redis().restart()).expect("Redis restarts");
    acknowledged.extend(
        bounded("publishes during the restart", during)
            .await
            .unwrap(),
    );
    acknowledged.extend(publish_many(base_a, "orders", 41, 20).await);
    assert_eq!(acknowledged, one_to(60), "Redis down never fails a publish");

    let received = subscriber.message_seqs(40).await;
    assert_eq!(
        received,
        (21..=60).collect::<Vec<_>>(),
        "every acknowledged message exactly once, in order"
    );
    // And the bus works again: a new subscriber on B gets a live message from A.
    let mut fresh = cluster.ws(1, &["orders"]).await;
    fresh.subscribe("orders", None).await;
    cluster.publish(0, "orders", json!(61)).await;
    assert_eq!(fresh.message_seqs(1).await, [61]);
    assert_eq!(subscriber.message_seqs(1).await, [61]);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_refuses_publishes_and_the_node_recovers_by_itself() {
    let mut cluster = Cluster::start(2).await;
    let mut subscriber = cluster.ws(1, &["audit"]).await;
    subscriber.subscribe("audit", None).await;
    let mut acknowledged = publish_many(cluster.base(0), "audit", 1, 5).await;

    tokio::task::block_in_place(|| cluster.postgres.stop());
    // Every publish while PostgreSQL is down: 503 `store_unavailable` with `Retry-After`, so a
    // client knows to try again rather than give up.
    let path = "/v1/channels/audit/messages";
    for i in 0..3 {
        let answer = bounded(
            "a publish while PostgreSQL is down",
            reqwest::Client::new()
                .post(format!("{}{path}", cluster.base(0)))
                .bearer_auth(API_KEY)
                .json(&json!({ "data": { "down": i } }))
                .timeout(Duration::from_secs(30))
                .send(),
        )
        .await
        .expect("an answer");
        let status = answer.status().as_u16();
        let retry_after = answer.headers().get("retry-after").cloned();
        let body: serde_json::Value = answer.json().await.expect("a JSON error");
        assert_eq!(status, 503, "{body}");
        assert_eq!(
            retry_after.as_ref().and_then(|v| v.to_str().ok()),
            Some("1")
        );
        assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    }

    tokio::task::block_in_place(|| cluster.postgres.restart()).expect("PostgreSQL restarts");
    let next = eventually("node A publishes again by itself", || async {
        let (status, body) = cluster
            .call(0, "POST", path, API_KEY, Some(json!({ "data": "back" })))
            .await;
        (status == 200).then_some(body)
    })
    .await;
    acknowledged.push(next["seq"].as_u64().unwrap());
    acknowledged.extend(publish_many(cluster.base(1), "audit", 100, 3).await);

    // Nothing acknowledged is lost: the subscriber and the log have every acknowledged seq
    // once, in order (a refused publish may or may not have been stored; none was here, as
    // PostgreSQL was down before it was sent).
    let last = *acknowledged.last().unwrap();
    let mut received = Vec::new();
    while received.last() != Some(&last) {
        received.extend(subscriber.message_seqs(1).await);
    }
    assert_eq!(received, acknowledged, "exactly once, in order");
    assert_eq!(acknowledged, one_to(last), "gapless");
    let (status, history) = cluster
        .call(
            1,
            "GET",
            "/v1/channels/audit/messages?limit=100",
            API_KEY,
            None,
        )
        .await;
    assert_eq!(status, 200, "{history}");
    let stored: Vec<u64> = history["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(stored, acknowledged, "{history}");
    cluster.shutdown().await;
}

/// 10 KB of data.
fn bulky(i: u64) -> Value {
    json!({ "i": i, "pad": "x".repeat(10_000) })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_stops_reading_does_not_slow_other_nodes_publishers() {
    // Node C (2) gives each connection a small outbound queue.
    let cluster = Cluster::start_with(3, |k, settings| {
        if k == 2 {
            settings.edge.outbox_bytes = 16 * 1024;
        }
    })
    .await;
    let mut slow = cluster.ws(2, &["firehose"]).await;
    let epoch = slow.subscribe("firehose", None).await["epoch"].clone();
    let mut steady = cluster.ws(1, &["firehose"]).await;
    steady.subscribe("firehose", None).await;
    // The steady reader on B reads everything as it comes.
    const TOTAL: u64 = 600;
    let reader = tokio::spawn(async move { steady.message_seqs(TOTAL as usize).await });

    // More than the slow client's socket buffers and queue can hold (its kernel's send buffer
    // grows to 4 MiB at most): it must be cut, and no publish on A waits for it.
    let batches = 12;
    let per_batch = TOTAL / batches;
    let mut acknowledged = Vec::new();
    for b in 0..batches {
        let messages: Vec<Value> = (0..per_batch)
            .map(|i| json!({ "channel": "firehose", "data": bulky(b * per_batch + i) }))
            .collect();
        let (status, body) = bounded(
            "a batch publish on A",
            cluster.call(
                0,
                "POST",
                "/v1/batch",
                API_KEY,
                Some(json!({ "messages": messages })),
            ),
        )
        .await;
        assert_eq!(
            status,
            200,
            "{}",
            &body.to_string()[..200.min(body.to_string().len())]
        );
        acknowledged.extend(
            body["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["seq"].as_u64().expect("stored")),
        );
    }
    assert_eq!(acknowledged, one_to(TOTAL));
    assert_eq!(
        bounded("the steady reader", reader).await.unwrap(),
        one_to(TOTAL),
        "the reader on B is unaffected"
    );

    // The slow client now reads: what was buffered, then the reason it was cut.
    let mut got = Vec::new();
    let reason = loop {
        match bounded("the slow client's frames", slow.recv()).await {
            Some(frame) if frame.get("message").is_some() => {
                got.push(frame["message"]["seq"].as_u64().unwrap())
            }
            Some(frame) if frame.get("disconnect").is_some() => break frame,
            Some(_) => {}
            None => panic!("closed without a reason after {} messages", got.len()),
        }
    };
    assert_eq!(reason["disconnect"]["code"], "slow_consumer", "{reason}");
    assert!((got.len() as u64) < TOTAL, "it was cut before the end");
    assert_eq!(got, one_to(got.len() as u64), "what it got was in order");

    // It resumes from the log where it stopped, on the same node.
    let mut resumed = cluster.ws(2, &["firehose"]).await;
    let since = json!({ "seq": got.len(), "epoch": epoch });
    let reply = resumed.subscribe("firehose", Some(since)).await;
    assert_eq!(reply["recovered"], true, "{reply}");
    let rest = resumed
        .message_seqs((TOTAL - got.len() as u64) as usize)
        .await;
    assert_eq!(rest, (got.len() as u64 + 1..=TOTAL).collect::<Vec<_>>());
    tokio::time::timeout(Duration::from_secs(60), cluster.shutdown())
        .await
        .expect("shutdown");
}
