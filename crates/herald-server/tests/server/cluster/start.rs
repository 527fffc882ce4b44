//! Starting and stopping a cluster node: a clear error when PostgreSQL or Redis cannot be
//! reached or a secret every node must share is missing; a node started after the others serves
//! the same channels at once; a node serves and stops while Redis is away; nodes reach a TLS
//! Redis (`rediss://`) when given its CA, and refuse to start without it.

use herald_server::{Server, ServerError};
use serde_json::json;

use super::{bounded, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_does_not_start_without_its_postgres_redis_or_shared_secrets() {
    let mut cluster = Cluster::start(0).await;
    let dir = tempfile::tempdir().unwrap();

    let mut settings = cluster.settings(dir.path());
    settings.token_secret = None;
    match bounded("start", Server::builder(settings).start()).await {
        Err(ServerError::ClusterSecret { what, .. }) => assert!(what.contains("token"), "{what}"),
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("started without a shared token secret"),
    }

    tokio::task::block_in_place(|| cluster.redis().stop());
    let failed = bounded(
        "start",
        Server::builder(cluster.settings(dir.path())).start(),
    )
    .await;
    match failed {
        Err(e @ ServerError::Bus(_)) => {
            let shown = e.to_string();
            assert!(
                shown.contains(&cluster.redis().port().to_string()),
                "{shown}"
            );
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("started without Redis"),
    }
    tokio::task::block_in_place(|| cluster.redis().restart()).expect("Redis restarts");

    tokio::task::block_in_place(|| cluster.postgres.stop());
    let failed = bounded(
        "start",
        Server::builder(cluster.settings(dir.path())).start(),
    )
    .await;
    match failed {
        Err(ServerError::OpenStore { place, .. }) => {
            assert!(place.starts_with("PostgreSQL at postgres://"), "{place}");
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("started without PostgreSQL"),
    }
    tokio::task::block_in_place(|| cluster.postgres.restart()).expect("PostgreSQL restarts");

    // With both back, the same settings start a node.
    let node = bounded(
        "start",
        Server::builder(cluster.settings(dir.path())).start(),
    )
    .await
    .expect("starts once both are back");
    node.shutdown().await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_started_later_serves_what_the_others_stored_and_publish() {
    let mut cluster = Cluster::start(1).await;
    let mut epoch = json!(null);
    for i in 1..=3 {
        epoch = cluster.publish(0, "late", json!(i)).await["epoch"].clone();
    }
    let dir = tempfile::tempdir().unwrap();
    let settings = cluster.settings(dir.path());
    let late = bounded("a late node starts", Server::builder(settings).start())
        .await
        .expect("starts");
    let base = format!("http://{}", late.http_addr());
    let mut ws = super::Ws::connect(&base, &crate::support::token(&["late"])).await;
    let reply = ws
        .subscribe("late", Some(json!({ "seq": 1, "epoch": epoch })))
        .await;
    assert_eq!(
        (reply["seq"].clone(), reply["recovered"].clone()),
        (json!(3), json!(true)),
        "{reply}"
    );
    cluster.publish(0, "late", json!(4)).await;
    let seqs = ws.message_seqs(3).await;
    assert_eq!(
        seqs,
        [2, 3, 4],
        "replayed from the store, then live from the first node"
    );
    late.shutdown().await.unwrap();
    cluster.stop_node(0).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_redis_is_away_a_node_publishes_answers_channel_info_and_shuts_down() {
    let mut cluster = Cluster::start(1).await;
    let mut ws = cluster.ws(0, &["news"]).await;
    ws.subscribe("news", None).await;
    tokio::task::block_in_place(|| cluster.redis().stop());
    // Publishing still works, and the node's own subscriber still gets it.
    cluster
        .publish(0, "news", json!("while Redis is away"))
        .await;
    assert_eq!(ws.message_seqs(1).await, [1]);
    // Channel info answers with this node's own count instead of waiting for Redis.
    let (status, info) = bounded(
        "channel info while Redis is away",
        cluster.call(0, "GET", "/v1/channels/news", crate::support::API_KEY, None),
    )
    .await;
    assert_eq!(
        (status, info["seq"].clone(), info["subscribers"].clone()),
        (200, json!(1), json!(1)),
        "{info}"
    );
    // Shutdown does not wait for Redis to come back (stop_node is bounded).
    cluster.stop_node(0).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_over_a_tls_redis_fan_out_and_a_node_without_its_ca_does_not_start() {
    let cluster = Cluster::start_over_tls_redis(2).await;
    let mut on_b = cluster.ws(1, &["tls"]).await;
    on_b.subscribe("tls", None).await;
    // Both nodes started, so both bus connections passed the TLS handshake. B follows the
    // channel on Redis shortly after the subscribe (a publish before that reaches it from the
    // store): either way every message must arrive, in order.
    for i in 1..=3 {
        cluster.publish(0, "tls", json!(i)).await;
    }
    assert_eq!(on_b.message_seqs(3).await, [1, 2, 3]);

    let dir = tempfile::tempdir().unwrap();
    let mut settings = cluster.settings(dir.path());
    assert!(settings.cluster.redis[0].starts_with("rediss://"));
    settings.cluster.redis_ca_pem = None;
    match bounded("start", Server::builder(settings).start()).await {
        Err(e @ ServerError::Bus(_)) => {
            let shown = e.to_string();
            assert!(shown.contains("certificate did not verify"), "{shown}");
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("started trusting a certificate no root signs"),
    }
    cluster.shutdown().await;
}
