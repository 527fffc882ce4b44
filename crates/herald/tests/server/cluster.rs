//! Three real `herald serve` processes over one PostgreSQL and one Redis (testkit servers):
//! a node killed with SIGKILL, its subscriber reconnecting to another node with its cursor and
//! getting everything exactly once. (The other cluster tests run in process, in
//! `crates/herald-server/tests/server/cluster`.)

use crate::support::cluster::{StoreAndBus, CREDENTIALS_KEY};
use crate::support::{Server, Ws};

use std::time::Duration;

use serde_json::{json, Value};

/// A node over the shared store and bus (same publisher key and token secret as every test
/// server, its own data directory and port).
async fn node(shared: &StoreAndBus) -> Server {
    Server::builder().in_cluster(shared).start().await
}

/// The seqs of the next `n` messages `ws` receives.
async fn message_seqs(ws: &mut Ws, n: usize) -> Vec<u64> {
    let mut seqs = Vec::new();
    while seqs.len() < n {
        let frame: Value = ws.frame().await;
        if let Some(seq) = frame["message"]["seq"].as_u64() {
            seqs.push(seq);
        }
    }
    seqs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_with_sigkill_its_subscriber_resumes_exactly_on_another_node() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let shared = StoreAndBus::start().await;
        let mut one = node(&shared).await;
        let two = node(&shared).await;
        let three = node(&shared).await;

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
        shared.stop().await;
    })
    .await
    .expect("the test finishes within two minutes");
}

/// Runs `herald migrate` with `env`; answers whether it succeeded and its output.
fn migrate(env: &[(&str, &str)]) -> (bool, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_herald"));
    command.arg("migrate").env_remove("HERALD_CONFIG");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("herald migrate runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn herald_migrate_then_serve_configured_by_environment() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let shared = StoreAndBus::start().await;
        let store_env = [("HERALD_STORE", shared.store.as_str())];
        let (ok, said) = tokio::task::block_in_place(|| migrate(&store_env));
        assert!(ok, "{said}");
        assert!(said.contains("schema version 0 ->"), "{said}");
        let (ok, said) = tokio::task::block_in_place(|| migrate(&store_env));
        assert!(ok && said.contains("already current"), "{said}");

        // A store nobody listens on: a clear failure that never shows the password.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let unreachable = format!("postgres://herald:s3cret-pw@127.0.0.1:{port}/herald");
        let (ok, said) =
            tokio::task::block_in_place(|| migrate(&[("HERALD_STORE", unreachable.as_str())]));
        assert!(!ok, "{said}");
        assert!(
            said.contains("PostgreSQL at postgres://herald:***@127.0.0.1"),
            "{said}"
        );
        assert!(!said.contains("s3cret-pw"), "{said}");

        // Two nodes configured through the environment alone share channels.
        let start = || {
            Server::builder()
                .env("HERALD_STORE", &shared.store)
                .env("HERALD_BUS", &shared.bus)
                .env("HERALD_POSTGRES_POOL", "4")
                .env("HERALD_CREDENTIALS_KEY", CREDENTIALS_KEY)
                .start()
        };
        let one = start().await;
        let two = start().await;
        let token = one.token(&["env"], &[]);
        let mut ws = Ws::connect(&two.ws_url(&format!("?token={token}"))).await;
        ws.request("subscribe", json!({ "channel": "env" })).await;
        one.publish("env", json!("hello")).await;
        assert_eq!(message_seqs(&mut ws, 1).await, [1]);
        drop((one, two));
        shared.stop().await;
    })
    .await
    .expect("the test finishes within two minutes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stopped_with_sigterm_tells_its_subscriber_who_resumes_on_another_node() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let shared = StoreAndBus::start().await;
        let mut one = node(&shared).await;
        let two = node(&shared).await;

        let token = one.token(&["orders"], &[]);
        let mut ws = Ws::connect(&one.ws_url(&format!("?token={token}"))).await;
        let reply = ws
            .request("subscribe", json!({ "channel": "orders" }))
            .await;
        let epoch = reply["subscribe"]["epoch"].clone();
        // Published on the node that is about to stop.
        for i in 1..=3 {
            one.publish("orders", json!(i)).await;
        }
        assert_eq!(message_seqs(&mut ws, 3).await, [1, 2, 3]);
        let status = tokio::task::block_in_place(|| one.terminate());
        assert!(status.success(), "{status}");
        let mut last = None;
        while let Some(frame) = ws.recv().await {
            last = Some(frame);
        }
        let last = last.expect("a frame before the close");
        assert_eq!(last["disconnect"]["code"], "shutdown", "{last}");

        let mut ws = Ws::connect(&two.ws_url(&format!("?token={token}"))).await;
        let reply = ws
            .request(
                "subscribe",
                json!({ "channel": "orders", "since": { "seq": 3, "epoch": epoch } }),
            )
            .await;
        assert_eq!(reply["subscribe"]["recovered"], true, "{reply}");
        two.publish("orders", json!(4)).await;
        assert_eq!(message_seqs(&mut ws, 1).await, [4]);
        drop(two);
        shared.stop().await;
    })
    .await
    .expect("the test finishes within two minutes");
}
