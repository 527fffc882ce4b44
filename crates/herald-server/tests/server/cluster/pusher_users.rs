//! Pusher users in a cluster: a signed-in user's connections on two nodes both get what
//! `sendToUser` sends through a third; `terminate_connections` through that third node closes
//! them on both with 4009 and leaves another user's; deleting the app's Pusher credentials
//! closes the connections left with 4001, on the node that did not delete them. A watchlist
//! on one node is told of users coming online and going offline on the others.

use herald_client::ws::WsClient;
use herald_pusher::signature::{
    body_md5, hmac_sha256_hex, key_signature, request_string, signin_string,
};
use serde_json::{json, Value};

use super::{bounded, Cluster, ADMIN};

/// The default app's Pusher credentials: app id, key, secret.
struct Creds {
    app_id: String,
    key: String,
    secret: String,
}

/// A raw Pusher connection to node `k`, signed in as `user`.
struct PusherWs {
    client: WsClient,
}

impl PusherWs {
    async fn signed_in(cluster: &Cluster, k: usize, creds: &Creds, user: &str) -> PusherWs {
        PusherWs::watching(cluster, k, creds, user, &[]).await
    }

    /// Signed in as `user` with `watchlist`.
    async fn watching(
        cluster: &Cluster,
        k: usize,
        creds: &Creds,
        user: &str,
        watchlist: &[&str],
    ) -> PusherWs {
        let url = format!("ws://{}/app/{}?protocol=7", cluster.addr(k), creds.key);
        let client = bounded("a Pusher connection", WsClient::open_url(&url))
            .await
            .expect("connected");
        let mut ws = PusherWs { client };
        let established = ws.frame().await;
        assert_eq!(
            established["event"], "pusher:connection_established",
            "{established}"
        );
        let data: Value = serde_json::from_str(established["data"].as_str().unwrap()).unwrap();
        let socket_id = data["socket_id"].as_str().unwrap();
        let user_data = json!({ "id": user, "watchlist": watchlist }).to_string();
        let signed = signin_string(socket_id, &user_data);
        let auth = key_signature(&creds.key, creds.secret.as_bytes(), &signed);
        ws.send(
            json!({ "event": "pusher:signin", "data": { "auth": auth, "user_data": user_data } }),
        )
        .await;
        let answer = ws.frame().await;
        assert_eq!(
            answer["event"], "pusher:signin_success",
            "node {k}: {answer}"
        );
        ws
    }

    async fn send(&mut self, frame: Value) {
        self.client
            .send_text(frame.to_string())
            .await
            .expect("sent");
    }

    /// The next frame; `None` once closed.
    async fn next(&mut self) -> Option<Value> {
        let frame = bounded("a Pusher frame", self.client.next_frame()).await;
        frame
            .ok()
            .flatten()
            .map(|f| serde_json::from_str(f.text()).unwrap())
    }

    async fn frame(&mut self) -> Value {
        self.next().await.expect("a frame before the close")
    }

    /// The frames until the close, and the close code.
    async fn closed(&mut self) -> (Vec<Value>, Option<u16>) {
        let mut frames = Vec::new();
        while let Some(frame) = self.next().await {
            frames.push(frame);
        }
        (frames, self.client.closed().map(|c| c.code))
    }
}

/// A request to Pusher's HTTP API on node `k`, signed as the server SDKs sign it.
async fn signed_post(
    cluster: &Cluster,
    k: usize,
    creds: &Creds,
    path: &str,
    body: Value,
) -> (u16, String) {
    let path = format!("/apps/{}{path}", creds.app_id);
    let body = body.to_string();
    let md5 = body_md5(body.as_bytes());
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let params = [
        ("auth_key", creds.key.as_str()),
        ("auth_timestamp", timestamp.as_str()),
        ("auth_version", "1.0"),
        ("body_md5", md5.as_str()),
    ];
    let signature = hmac_sha256_hex(
        creds.secret.as_bytes(),
        request_string("POST", &path, params).as_bytes(),
    );
    let query: String = params
        .iter()
        .map(|(k, v)| format!("{k}={v}&"))
        .collect::<String>()
        + &format!("auth_signature={signature}");
    let response = reqwest::Client::new()
        .post(format!("{}{path}?{query}", cluster.base(k)))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("an answer");
    (
        response.status().as_u16(),
        response.text().await.unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pusher_users_are_reached_and_terminated_on_every_node() {
    let cluster = Cluster::start(3).await;
    let (status, created) = cluster
        .call(0, "POST", "/v1/apps/default/pusher", ADMIN, None)
        .await;
    assert_eq!(status, 201, "{created}");
    let creds = Creds {
        app_id: created["app_id"].as_str().unwrap().into(),
        key: created["key"].as_str().unwrap().into(),
        secret: created["secret"].as_str().unwrap().into(),
    };
    let mut ann_b = PusherWs::signed_in(&cluster, 1, &creds, "ann").await;
    let mut ann_c = PusherWs::signed_in(&cluster, 2, &creds, "ann").await;
    let mut bob_c = PusherWs::signed_in(&cluster, 2, &creds, "bob").await;

    // sendToUser through node A reaches both of Ann's connections.
    let (status, body) = signed_post(
        &cluster,
        0,
        &creds,
        "/events",
        json!({ "name": "hello", "channels": ["#server-to-user-ann"], "data": "{\"n\":1}" }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for ws in [&mut ann_b, &mut ann_c] {
        let e = ws.frame().await;
        assert_eq!(
            (
                e["event"].as_str(),
                e["channel"].as_str(),
                e["data"].as_str()
            ),
            (
                Some("hello"),
                Some("#server-to-user-ann"),
                Some("{\"n\":1}")
            ),
            "{e}"
        );
    }

    // terminate_connections through node A closes Ann's on B and C with 4009.
    let (status, body) = signed_post(
        &cluster,
        0,
        &creds,
        "/users/ann/terminate_connections",
        json!({}),
    )
    .await;
    assert_eq!((status, body.trim()), (200, "{}"));
    for (node, ws) in [("B", &mut ann_b), ("C", &mut ann_c)] {
        let (frames, code) = ws.closed().await;
        let last = frames.last().cloned().unwrap_or_default();
        assert_eq!(last["data"]["code"], 4009, "node {node}: {frames:?}");
        assert_eq!(code, Some(4009), "node {node}: {frames:?}");
    }
    // Bob's stays.
    bob_c
        .send(json!({ "event": "pusher:ping", "data": {} }))
        .await;
    let pong = bob_c.frame().await;
    assert_eq!(pong["event"], "pusher:pong", "{pong}");

    // The credentials deleted through node A: Bob's connection on C is closed with 4001.
    let (status, body) = cluster
        .call(0, "DELETE", "/v1/apps/default/pusher", ADMIN, None)
        .await;
    assert!(status == 200 || status == 204, "{status}: {body}");
    let (frames, code) = bob_c.closed().await;
    let last = frames.last().cloned().unwrap_or_default();
    assert_eq!(last["data"]["code"], 4001, "{frames:?}");
    assert_eq!(code, Some(4001), "{frames:?}");
    cluster.shutdown().await;
}

/// A watchlist event frame's (name, user ids).
fn watchlist_event(frame: &Value) -> (String, Vec<String>) {
    assert_eq!(
        frame["event"], "pusher_internal:watchlist_events",
        "{frame}"
    );
    let data: Value = serde_json::from_str(frame["data"].as_str().unwrap()).unwrap();
    let event = &data["events"][0];
    let ids = event["user_ids"].as_array().unwrap();
    (
        event["name"].as_str().unwrap().to_owned(),
        ids.iter().map(|i| i.as_str().unwrap().to_owned()).collect(),
    )
}

fn told(name: &str, ids: &[&str]) -> (String, Vec<String>) {
    (
        name.to_owned(),
        ids.iter().map(|s| (*s).to_owned()).collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watchlist_on_one_node_sees_users_come_and_go_on_the_others() {
    let cluster = Cluster::start(2).await;
    let (status, created) = cluster
        .call(0, "POST", "/v1/apps/default/pusher", ADMIN, None)
        .await;
    assert_eq!(status, 201, "{created}");
    let creds = Creds {
        app_id: created["app_id"].as_str().unwrap().into(),
        key: created["key"].as_str().unwrap().into(),
        secret: created["secret"].as_str().unwrap().into(),
    };
    // Carl is online on node B before Ann signs in on node A.
    let carl = PusherWs::signed_in(&cluster, 1, &creds, "carl").await;
    let mut ann = PusherWs::watching(&cluster, 0, &creds, "ann", &["bob", "carl"]).await;
    assert_eq!(
        watchlist_event(&ann.frame().await),
        told("online", &["carl"])
    );

    // Bob's first connection (node B) makes him online; his second (node A) changes nothing;
    // his last one closing makes him offline.
    let bob_b = PusherWs::signed_in(&cluster, 1, &creds, "bob").await;
    assert_eq!(
        watchlist_event(&ann.frame().await),
        told("online", &["bob"])
    );
    let bob_a = PusherWs::signed_in(&cluster, 0, &creds, "bob").await;
    drop(bob_b);
    drop(bob_a);
    assert_eq!(
        watchlist_event(&ann.frame().await),
        told("offline", &["bob"])
    );
    drop(carl);
    assert_eq!(
        watchlist_event(&ann.frame().await),
        told("offline", &["carl"])
    );
    cluster.shutdown().await;
}
