//! Device inboxes across nodes: a push on one node reaches a device connected to another, an
//! ack there settles the receipt read on a third; tag and app pushes reach devices on every
//! node. Devices here are `herald` (live connection only): no provider jobs.

use serde_json::{json, Value};

use super::{eventually, Cluster, Ws};
use crate::support::API_KEY;

async fn register(cluster: &Cluster, k: usize, device: Value) {
    let (status, body) = cluster
        .call(k, "POST", "/v1/devices", API_KEY, Some(device))
        .await;
    assert!(status == 200 || status == 201, "{status} {body}");
}

/// A device token for `device`, minted on node `k`.
async fn device_token(cluster: &Cluster, k: usize, device: &str) -> String {
    let body = json!({ "sub": "tester", "device": device });
    let (status, answer) = cluster
        .call(k, "POST", "/v1/tokens", API_KEY, Some(body))
        .await;
    assert_eq!(status, 200, "{answer}");
    answer["token"].as_str().unwrap().to_owned()
}

/// A device's connection to node `k`, once its inbox (`$app`, `$device`) is open.
async fn connect_device(cluster: &Cluster, k: usize, device: &str) -> Ws {
    let token = device_token(cluster, k, device).await;
    let mut ws = Ws::open_with_token(&cluster.base(k), &token).await;
    let mut opened = Vec::new();
    while opened.len() < 2 {
        let frame = ws.recv().await.expect("inbox opens");
        assert!(frame.get("error").is_none(), "inbox did not open: {frame}");
        if let Some(reply) = frame.get("subscribe") {
            opened.push(reply["channel"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(opened, ["$app", "$device"]);
    ws
}

/// Pushes `body` on node `k`; answers the push id.
async fn push(cluster: &Cluster, k: usize, body: Value) -> String {
    let (status, answer) = cluster
        .call(k, "POST", "/v1/push", API_KEY, Some(body))
        .await;
    assert_eq!(status, 202, "{answer}");
    answer["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_on_one_node_reaches_a_device_on_another_and_its_ack_settles_the_receipt_everywhere()
{
    let cluster = Cluster::start(3).await;
    register(&cluster, 0, json!({"platform":"herald","id":"d1"})).await;
    let mut device = connect_device(&cluster, 1, "d1").await;

    let id = push(
        &cluster,
        0,
        json!({"target":{"device":"d1"},"data":{"n":1}}),
    )
    .await;
    let got = device.messages(1).await;
    assert_eq!(
        (got[0]["channel"].clone(), got[0]["id"].clone()),
        (json!("$device"), json!(id))
    );
    assert_eq!(got[0]["data"]["data"], json!({"n":1}), "{}", got[0]);

    let ack = device
        .request("ack", json!({"channel":"$device","seq":got[0]["seq"]}))
        .await;
    assert_eq!(ack["ack"]["seq"], got[0]["seq"], "{ack}");
    let receipt = eventually("the receipt on node C says acked", || async {
        let (status, r) = cluster
            .call(2, "GET", &format!("/v1/push/{id}"), API_KEY, None)
            .await;
        assert_eq!(status, 200, "{r}");
        (r["delivered"] == 1 && r["pending"] == 0).then_some(r)
    })
    .await;
    assert_eq!(receipt["targeted"], 1, "{receipt}");

    // Reconnected to node C, the acked message is not delivered again; a new one is.
    drop(device);
    let mut device = connect_device(&cluster, 2, "d1").await;
    let second = push(&cluster, 1, json!({"target":{"device":"d1"},"data":2})).await;
    let got = device.messages(1).await;
    assert_eq!(
        got[0]["id"],
        json!(second),
        "only the unacked push: {}",
        got[0]
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_and_app_pushes_reach_devices_on_every_node() {
    let cluster = Cluster::start(3).await;
    register(
        &cluster,
        0,
        json!({"platform":"herald","id":"t0","tags":["sports"]}),
    )
    .await;
    register(
        &cluster,
        1,
        json!({"platform":"herald","id":"t1","tags":["sports"]}),
    )
    .await;
    register(
        &cluster,
        2,
        json!({"platform":"herald","id":"t2","tags":["news"]}),
    )
    .await;
    let mut devices = Vec::new();
    for k in 0..3 {
        devices.push(connect_device(&cluster, k, &format!("t{k}")).await);
    }

    let tagged = push(
        &cluster,
        2,
        json!({"target":{"tags":"sports"},"data":"tagged"}),
    )
    .await;
    let everyone = push(&cluster, 0, json!({"target":{"app":true},"data":"all"})).await;
    for (k, device) in devices.iter_mut().enumerate() {
        let expected: Vec<&str> = if k < 2 {
            vec![&tagged, &everyone]
        } else {
            vec![&everyone]
        };
        let got = device.messages(expected.len()).await;
        let ids: Vec<&str> = got.iter().map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!(ids, expected, "device t{k} on node {k}");
        assert!(got.iter().all(|m| m["channel"] == "$app"), "{got:?}");
    }
    let receipt = eventually("the tag push's receipt counts both devices", || async {
        let (_, r) = cluster
            .call(1, "GET", &format!("/v1/push/{tagged}"), API_KEY, None)
            .await;
        (r["targeted"] == 2).then_some(r)
    })
    .await;
    assert_eq!(receipt["targeted"], 2, "{receipt}");
    cluster.shutdown().await;
}
