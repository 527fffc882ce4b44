//! Revocations in a cluster: a token revoked, or an app deleted, through one node closes the
//! matching connections on every node (each node closes its own, from the bus event), and the
//! revoked token is refused everywhere.

use herald_client::ws::WsClient;
use serde_json::{json, Value};

use super::{bounded, eventually, Cluster, Ws, ADMIN};

/// Reads frames until a `disconnect`; answers its code.
async fn disconnect_code(ws: &mut Ws) -> Value {
    loop {
        let frame = ws.recv().await.expect("a disconnect before the close");
        if let Some(d) = frame.get("disconnect") {
            return d["code"].clone();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_on_one_node_closes_the_connections_on_the_others() {
    let cluster = Cluster::start(3).await;
    let (status, created) = cluster
        .call(0, "POST", "/v1/apps", ADMIN, Some(json!({"id":"shop"})))
        .await;
    assert_eq!(status, 201, "{created}");
    let key = created["key"].as_str().unwrap().to_owned();
    let mut tokens = Vec::new();
    for (sub, jti) in [("alice", "t-1"), ("bob", "t-2")] {
        let (status, minted) = cluster
            .call(
                0,
                "POST",
                "/v1/tokens",
                &key,
                Some(json!({"sub": sub, "jti": jti, "channels": ["news"]})),
            )
            .await;
        assert_eq!(status, 200, "{minted}");
        tokens.push(minted["token"].as_str().unwrap().to_owned());
    }
    let (alice, bob) = (tokens[0].clone(), tokens[1].clone());
    // Once the other nodes know the app, alice holds a connection on B and C, bob one on C.
    for k in [1, 2] {
        let base = cluster.base(k);
        eventually("the new app's token is accepted", || async {
            WsClient::connect(&base, Some(&alice)).await.ok()
        })
        .await;
    }
    let mut alice_b = Ws::connect(&cluster.base(1), &alice).await;
    let mut alice_c = Ws::connect(&cluster.base(2), &alice).await;
    let mut bob_c = Ws::connect(&cluster.base(2), &bob).await;
    for ws in [&mut alice_b, &mut alice_c, &mut bob_c] {
        ws.subscribe("news", None).await;
    }

    let (status, body) = cluster
        .call(
            0,
            "POST",
            "/v1/apps/shop/revoke",
            &key,
            Some(json!({"jti": "t-1"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["closed"], 0, "node A holds none of them: {body}");
    assert_eq!(disconnect_code(&mut alice_b).await, "revoked");
    assert_eq!(disconnect_code(&mut alice_c).await, "revoked");
    let pong = bob_c.request("ping", json!({})).await;
    assert!(pong.get("pong").is_some(), "another token stays: {pong}");
    for k in 0..3 {
        let refused = bounded("connect", WsClient::connect(&cluster.base(k), Some(&alice))).await;
        assert!(refused.is_err(), "node {k} refuses the revoked token");
    }

    let (status, _) = cluster
        .call(1, "DELETE", "/v1/apps/shop", ADMIN, None)
        .await;
    assert_eq!(status, 204);
    assert_eq!(disconnect_code(&mut bob_c).await, "revoked");
    cluster.shutdown().await;
}
