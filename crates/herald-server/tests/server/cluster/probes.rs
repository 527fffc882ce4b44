//! The probes of a cluster node while what it runs over fails: with PostgreSQL stopped, or
//! Redis stopped, `/readyz` answers 503 and names the failing check with its error, while
//! `/healthz` (liveness: a restart would not help) stays 200; once each is back, `/readyz` is
//! 200 again without a restart.

use serde_json::{json, Value};

use super::{bounded, eventually, Cluster};

/// `GET path` on the server at `base`, without a key: status and JSON body.
async fn probe(base: &str, path: &str) -> (u16, Value) {
    let answer = bounded(
        path,
        reqwest::Client::new()
            .get(format!("{base}{path}"))
            .timeout(std::time::Duration::from_secs(30))
            .send(),
    )
    .await
    .expect("an answer");
    let status = answer.status().as_u16();
    (status, answer.json().await.expect("a JSON body"))
}

/// Polls `/readyz` until it answers `status`; answers its body.
async fn readyz_becomes(base: &str, status: u16, what: &str) -> Value {
    eventually(what, || async {
        let (found, body) = probe(base, "/readyz").await;
        (found == status).then_some(body)
    })
    .await
}

/// `/healthz` answers `200 {"status":"ok"}`.
async fn assert_alive(base: &str, during: &str) {
    let (status, body) = probe(base, "/healthz").await;
    assert_eq!(
        (status, &body),
        (200, &json!({ "status": "ok" })),
        "liveness during {during}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_a_stopped_postgres_or_redis_while_healthz_stays_ok() {
    let mut cluster = Cluster::start(1).await;
    let base = cluster.base(0);
    let (status, ready) = probe(&base, "/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(
        ready,
        json!({
            "status": "ready",
            "checks": {
                "store": { "status": "ok" },
                "bus": { "status": "ok", "link": "connected" },
                "draining": false,
            },
        })
    );

    // PostgreSQL stops: the store takes no writes; the node is alive, not ready.
    tokio::task::block_in_place(|| cluster.postgres.stop());
    let down = readyz_becomes(&base, 503, "/readyz says the store is down").await;
    assert_eq!(down["status"], "not_ready", "{down}");
    let store = &down["checks"]["store"];
    assert_eq!(store["status"], "failing", "{down}");
    assert_eq!(store["error"]["code"], "store_unavailable", "{down}");
    let message = store["error"]["message"].as_str().expect("a message");
    assert!(message.contains("PostgreSQL"), "names the store: {message}");
    assert_eq!(down["checks"]["bus"]["status"], "ok", "{down}");
    assert_eq!(down["checks"]["draining"], false, "{down}");
    assert_alive(&base, "the PostgreSQL outage").await;

    tokio::task::block_in_place(|| cluster.postgres.restart()).expect("PostgreSQL restarts");
    let back = readyz_becomes(&base, 200, "/readyz is ready once PostgreSQL is back").await;
    assert_eq!(back["status"], "ready", "{back}");
    cluster.publish(0, "after-postgres", json!(1)).await;

    // Redis stops: the bus is down (publishes still work); alive, not ready.
    tokio::task::block_in_place(|| cluster.redis().stop());
    let down = readyz_becomes(&base, 503, "/readyz says the bus is down").await;
    let bus = &down["checks"]["bus"];
    assert_eq!(bus["status"], "failing", "{down}");
    assert_eq!(bus["link"], "disconnected", "{down}");
    assert_eq!(bus["error"]["code"], "bus_unavailable", "{down}");
    let message = bus["error"]["message"].as_str().expect("a message");
    assert!(message.contains("Redis"), "names the bus: {message}");
    assert_eq!(down["checks"]["store"]["status"], "ok", "{down}");
    assert_alive(&base, "the Redis outage").await;

    tokio::task::block_in_place(|| cluster.redis().restart()).expect("Redis restarts");
    let back = readyz_becomes(&base, 200, "/readyz is ready once Redis is back").await;
    assert_eq!(back["checks"]["bus"]["link"], "connected", "{back}");
    cluster.publish(0, "after-redis", json!(2)).await;
    cluster.shutdown().await;
}
