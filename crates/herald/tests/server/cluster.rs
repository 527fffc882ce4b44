//! Three real `herald serve` processes over one PostgreSQL and one Redis (testkit servers):
//! a node killed with SIGKILL, its subscriber reconnecting to another node with its cursor and
//! getting everything exactly once. (The other cluster tests run in process, in
//! `crates/herald-server/tests/server/cluster`.)

use crate::support::{Server, Ws};

use std::time::Duration;

use herald_testkit::{Postgres, Redis};
use serde_json::{json, Value};

/// The credentials key every node is started with (64 hex digits).
const CREDENTIALS_KEY: &str = "8899aabbccddeeff00112233445566778899aabbccddeeff0011223344556677";

/// A node over the shared store and bus (same publisher key and token secret as every test
/// server, its own data directory and port).
async fn node(store: &str, bus: &str) -> Server {
    Server::builder()
        .arg("--store")
        .arg(store)
        .arg("--bus")
        .arg(bus)
        .arg("--credentials-key")
        .arg(CREDENTIALS_KEY)
        .start()
        .await
}

/// The seqs of the next `n` messages `ws` receives.
async fn message_seqs(ws: &mut Ws, n: usize) -> Vec<u64> {
    let mut seqs = Vec::new();
    while seqs.len() < n {
        let frame: Value = ws.recv().await.expect("connection closed");
        if let Some(seq) = frame["message"]["seq"].as_u64() {
            seqs.push(seq);
        }
    }
    seqs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_with_sigkill_its_subscriber_resumes_exactly_on_another_node() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let (postgres, redis) = tokio::task::spawn_blocking(|| {
            let postgres = Postgres::start().expect("PostgreSQL starts");
            let redis = Redis::start().expect("Redis starts");
            (postgres, redis)
        })
        .await
        .unwrap();
        let store = postgres.create_database("herald").expect("a database");
        let bus = redis.url();
        let mut one = node(&store, &bus).await;
        let two = node(&store, &bus).await;
        let three = node(&store, &bus).await;

        let token = one.token(&["orders"], &[]);
        let mut ws = Ws::connect(&one.ws_url(&format!("?token={token}"))).await;
        let reply = ws
            .request("subscribe", json!({ "channel": "orders" }))
            .await;
        let epoch = reply["subscribe"]["epoch"].clone();
        assert!(epoch.is_string(), "{reply}");
        for i in 1..=10 {
            two.publish("orders", json!(i)).await;
        }
        // The subscriber has read five when its node dies (the rest may be in flight).
        assert_eq!(message_seqs(&mut ws, 5).await, [1, 2, 3, 4, 5]);
        one.kill9();
        drop(ws);
        for i in 11..=15 {
            two.publish("orders", json!(i)).await;
        }

        let mut ws = Ws::connect(&three.ws_url(&format!("?token={token}"))).await;
        let reply = ws
            .request(
                "subscribe",
                json!({ "channel": "orders", "since": { "seq": 5, "epoch": epoch } }),
            )
            .await;
        assert_eq!(reply["subscribe"]["recovered"], true, "{reply}");
        assert_eq!(reply["subscribe"]["seq"], 15, "{reply}");
        two.publish("orders", json!(16)).await;
        assert_eq!(
            message_seqs(&mut ws, 11).await,
            (6..=16).collect::<Vec<_>>(),
            "everything after the cursor exactly once: replayed, then live from node 2"
        );
        // The survivors still agree on the channel.
        for node in [&two, &three] {
            let (status, info) = node.get("/v1/channels/orders").await;
            assert_eq!((status, info["seq"].clone()), (200, json!(16)), "{info}");
        }
        drop((two, three));
        tokio::task::spawn_blocking(move || drop((postgres, redis)))
            .await
            .unwrap();
    })
    .await
    .expect("the test finishes within two minutes");
}
