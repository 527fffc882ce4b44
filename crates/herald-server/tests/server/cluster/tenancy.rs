//! Apps, keys and limits changed on one node take effect on the others (bus events, awaited
//! with a deadline); cluster-wide subscriber counts through presence; usage counters that add
//! up across nodes.

use herald_client::ws::WsClient;
use serde_json::{json, Value};

use super::{call, eventually, Cluster, ADMIN};
use crate::support::API_KEY;

/// Publishes `data` on node `k` with `key`: the status and body.
async fn publish_with(cluster: &Cluster, k: usize, key: &str, data: Value) -> (u16, Value) {
    cluster
        .call(
            k,
            "POST",
            "/v1/channels/news/messages",
            key,
            Some(json!({ "data": data })),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_keys_and_limits_changed_on_one_node_apply_on_the_others() {
    let cluster = Cluster::start(3).await;
    let (status, created) = cluster
        .call(0, "POST", "/v1/apps", ADMIN, Some(json!({"id":"shop"})))
        .await;
    assert_eq!(status, 201, "{created}");
    let key = created["key"].as_str().unwrap().to_owned();
    let key_id = created["key_id"].as_str().unwrap().to_owned();

    // The new app's key publishes on node B (as soon as B heard of it).
    let first = eventually("the new key works on node B", || async {
        let (status, body) = publish_with(&cluster, 1, &key, json!("first")).await;
        (status == 200).then_some(body)
    })
    .await;
    assert_eq!(first["seq"], 1, "{first}");
    // A client token minted on A for the new app is accepted on C (its secret read from the
    // store there: secrets never travel on the bus).
    let (status, minted) = cluster
        .call(
            0,
            "POST",
            "/v1/tokens",
            &key,
            Some(json!({"sub":"u","channels":["news"]})),
        )
        .await;
    assert_eq!(status, 200, "{minted}");
    let token = minted["token"].as_str().unwrap().to_owned();
    let base_c = cluster.base(2);
    eventually("the new app's token is accepted on node C", || async {
        WsClient::connect(&base_c, Some(&token)).await.ok()
    })
    .await;

    // Deleting the key on A: refused on B.
    let (status, body) = cluster
        .call(
            0,
            "DELETE",
            &format!("/v1/apps/shop/keys/{key_id}"),
            ADMIN,
            None,
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let refused = eventually("the deleted key is refused on node B", || async {
        let (status, body) = publish_with(&cluster, 1, &key, json!("late")).await;
        (status != 200).then_some((status, body))
    })
    .await;
    assert_eq!(refused.0, 401, "{refused:?}");

    // Limits changed on A apply on B and C.
    let (status, body) = cluster
        .call(
            0,
            "PATCH",
            "/v1/apps/default",
            ADMIN,
            Some(json!({"limits":{"max_message_bytes":64}})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for k in [1, 2] {
        let (status, body) = eventually("the new limit applies on another node", || async {
            let (status, body) = publish_with(&cluster, k, API_KEY, json!("x".repeat(200))).await;
            (status != 200).then_some((status, body))
        })
        .await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (413, Some("too_large")),
            "node {k}: {body}"
        );
        let (status, body) = publish_with(&cluster, k, API_KEY, json!("small")).await;
        assert_eq!(status, 200, "a small message still goes: {body}");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_info_counts_the_subscribers_on_every_node() {
    let cluster = Cluster::start(3).await;
    let mut on_b = Vec::new();
    for _ in 0..2 {
        let mut ws = cluster.ws(1, &["lobby"]).await;
        ws.subscribe("lobby", None).await;
        on_b.push(ws);
    }
    let mut on_c = cluster.ws(2, &["lobby"]).await;
    on_c.subscribe("lobby", None).await;
    cluster.publish(2, "lobby", json!("hello")).await;

    let subscribers = |k: usize| {
        let base = cluster.base(k);
        async move {
            let (status, info) = call(&base, "GET", "/v1/channels/lobby", API_KEY, None).await;
            assert_eq!(status, 200, "{info}");
            info["subscribers"].as_u64()
        }
    };
    eventually("node A counts B's two and C's one", || async {
        (subscribers(0).await == Some(3)).then_some(())
    })
    .await;
    drop(on_b);
    eventually("node A sees B's subscribers leave", || async {
        (subscribers(0).await == Some(1)).then_some(())
    })
    .await;
    eventually("node C counts its own one", || async {
        (subscribers(2).await == Some(1)).then_some(())
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_counters_add_up_across_nodes() {
    let mut cluster = Cluster::start(3).await;
    for (k, n) in [(0, 3), (1, 4), (2, 5)] {
        for i in 0..n {
            cluster.publish(k, "news", json!(i)).await;
        }
    }
    // Each node adds what it counted to the store (periodically, and when it stops); a node
    // started afterwards reads the sum.
    for k in 0..3 {
        cluster.stop_node(k).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let settings = cluster.settings(dir.path());
    let node = herald_server::Server::builder(settings)
        .start()
        .await
        .expect("a fourth node starts");
    let base = format!("http://{}", node.http_addr());
    let (status, stats) = call(&base, "GET", "/v1/apps/default/stats", API_KEY, None).await;
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["usage"]["published"], 12, "3 + 4 + 5: {stats}");
    node.shutdown().await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_limit_holds_for_the_cluster() {
    let cluster = Cluster::start(3).await;
    let (status, body) = cluster
        .call(
            0,
            "PATCH",
            "/v1/apps/default",
            ADMIN,
            Some(json!({"limits":{"max_connections":2}})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let _a = cluster.ws(0, &["news"]).await;
    let _b = cluster.ws(1, &["news"]).await;
    // Presence reports each node's connections within a period; after that, a third
    // connection on any node is refused.
    let base_c = cluster.base(2);
    let token = crate::support::token(&["news"]);
    let refused = eventually("a third connection is refused on node C", || async {
        WsClient::connect(&base_c, Some(&token)).await.err()
    })
    .await;
    assert_eq!(
        refused.code().map(|c| c.to_string()),
        Some("limit_exceeded".into())
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_limit_holds_for_the_cluster() {
    let cluster = Cluster::start(3).await;
    let (status, body) = cluster
        .call(
            0,
            "PATCH",
            "/v1/apps/default",
            ADMIN,
            Some(json!({"limits":{"max_devices":2}})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for (k, id) in [(0, "d0"), (1, "d1")] {
        let (status, body) = cluster
            .call(
                k,
                "POST",
                "/v1/devices",
                API_KEY,
                Some(json!({"id": id, "platform": "herald"})),
            )
            .await;
        assert!(status == 200 || status == 201, "{status} {body}");
    }
    // Node C learns, within a presence period, the count the others stored (its stats show
    // it); then a third device is refused there, and registering an existing one again is
    // still allowed.
    eventually(
        "node C counts the devices registered on A and B",
        || async {
            let (status, stats) = cluster
                .call(2, "GET", "/v1/apps/default/stats", ADMIN, None)
                .await;
            (status == 200 && stats["devices"] == 2).then_some(())
        },
    )
    .await;
    let (status, refused) = cluster
        .call(
            2,
            "POST",
            "/v1/devices",
            API_KEY,
            Some(json!({"id": "d2", "platform": "herald"})),
        )
        .await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["error"]["code"], "limit_exceeded", "{refused}");
    let (status, body) = cluster
        .call(
            2,
            "POST",
            "/v1/devices",
            API_KEY,
            Some(json!({"id": "d1", "platform": "herald"})),
        )
        .await;
    assert_eq!(status, 200, "registering d1 again: {body}");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_key_configured_on_a_node_that_starts_later_works_on_the_running_nodes() {
    let cluster = Cluster::start(2).await;
    // A third node starts with another key for the default app, keeping the old one as
    // previous_api_key (a key rotation, node by node): the running nodes learn the new key
    // from the bus, not at their next restart, and the old one still works.
    let rotated = "hk_rotated_default_app_key";
    let dir = tempfile::tempdir().unwrap();
    let mut settings = cluster.settings(dir.path());
    settings.api_key = Some(rotated.into());
    settings.previous_api_key = Some(API_KEY.into());
    let third = herald_server::Server::builder(settings)
        .start()
        .await
        .expect("a third node starts");
    for k in 0..2 {
        let body = eventually("the rotated key works on a running node", || async {
            let (status, body) = publish_with(&cluster, k, rotated, json!("rotated")).await;
            (status == 200).then_some(body)
        })
        .await;
        assert!(body["seq"].is_u64(), "{body}");
    }
    let (status, body) = publish_with(&cluster, 0, API_KEY, json!("old key")).await;
    assert_eq!(status, 200, "the previous key still works: {body}");
    third.shutdown().await.unwrap();
    // The second round of the rotation: a node starts with the new key alone, and the old one
    // stops working on every node.
    let dir = tempfile::tempdir().unwrap();
    let mut settings = cluster.settings(dir.path());
    settings.api_key = Some(rotated.into());
    let fourth = herald_server::Server::builder(settings)
        .start()
        .await
        .expect("a fourth node starts");
    for k in 0..2 {
        eventually("the old key is refused on a running node", || async {
            let (status, _) = publish_with(&cluster, k, API_KEY, json!("old key")).await;
            (status == 401).then_some(())
        })
        .await;
        let (status, body) = publish_with(&cluster, k, rotated, json!("rotated")).await;
        assert_eq!(status, 200, "{body}");
    }
    fourth.shutdown().await.unwrap();
    cluster.shutdown().await;
}
