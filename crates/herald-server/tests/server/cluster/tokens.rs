//! Token keys in a cluster: a secret rotated through one node keeps its overlap on every node
//! (each reads the rotated-out secret and its end from PostgreSQL, where both are sealed) and
//! the connections of the old secret are closed on the other nodes when it ends.

use herald_client::ws::WsClient;
use serde_json::{json, Value};

use super::{eventually, Cluster, Ws, ADMIN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_rotated_on_one_node_ends_on_every_node_and_postgres_holds_it_sealed() {
    let cluster = Cluster::start(2).await;
    let (status, created) = cluster
        .call(0, "POST", "/v1/apps", ADMIN, Some(json!({"id":"shop"})))
        .await;
    assert_eq!(status, 201, "{created}");
    let key = created["key"].as_str().unwrap().to_owned();
    let first = created["token_secret"].as_str().unwrap().to_owned();
    let mint = |k: usize| {
        let key = key.clone();
        let cluster = &cluster;
        async move {
            let claims = json!({"sub": "alice", "channels": ["news"]});
            let (status, minted) = cluster
                .call(k, "POST", "/v1/tokens", &key, Some(claims))
                .await;
            assert_eq!(status, 200, "{minted}");
            minted["token"].as_str().unwrap().to_owned()
        }
    };
    let old = mint(0).await;
    let base_b = cluster.base(1);
    eventually("node B knows the new app", || async {
        WsClient::connect(&base_b, Some(&old)).await.ok()
    })
    .await;
    let mut old_on_b = Ws::connect(&base_b, &old).await;
    old_on_b.subscribe("news", None).await;

    let (status, rotated) = cluster
        .call(
            0,
            "POST",
            "/v1/apps/shop/token-secret",
            &key,
            Some(json!({"overlap": 2})),
        )
        .await;
    assert_eq!(status, 200, "{rotated}");
    let second = rotated["token_secret"].as_str().unwrap().to_owned();
    // Node B learns the new secret from the store (secrets never travel on the bus).
    let new = mint(0).await;
    eventually("node B accepts the new secret's tokens", || async {
        WsClient::connect(&base_b, Some(&new)).await.ok()
    })
    .await;
    // When the overlap ends, node B closes the old secret's connection itself.
    let code: Value = loop {
        let frame = old_on_b
            .recv()
            .await
            .expect("a disconnect before the close");
        if let Some(d) = frame.get("disconnect") {
            break d["code"].clone();
        }
    };
    assert_eq!(code, "revoked");
    assert!(WsClient::connect(&base_b, Some(&old)).await.is_err());

    // PostgreSQL holds both secrets sealed, neither in plain text.
    let stored = cluster
        .postgres
        .psql(
            "herald",
            "SELECT token_secret FROM apps WHERE id = 'shop' \
             UNION ALL SELECT previous_secret FROM app_token_keys WHERE app = 'shop'",
        )
        .expect("psql answers");
    assert!(stored.contains("sealed:v1:"), "{stored}");
    for secret in [&first, &second] {
        assert!(!stored.contains(secret.as_str()), "a secret in plain text");
    }
}
