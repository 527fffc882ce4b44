//! The audit log on PostgreSQL: admin actions recorded through any node are one log, read
//! newest first from every node, with the publisher key's view limited to its own app, and
//! entries past the retention deleted.

use std::time::Duration;

use serde_json::{json, Value};

use super::{Cluster, ADMIN};

/// The entries `key` sees on node `k`.
async fn entries(cluster: &Cluster, k: usize, key: &str, query: &str) -> Vec<Value> {
    let (status, page) = cluster
        .call(k, "GET", &format!("/v1/audit?{query}"), key, None)
        .await;
    assert_eq!(status, 200, "{page}");
    page["entries"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_actions_on_any_node_are_one_log_in_postgresql() {
    let cluster = Cluster::start(2).await;
    let (status, created) = cluster
        .call(0, "POST", "/v1/apps", ADMIN, Some(json!({"id": "shop"})))
        .await;
    assert_eq!(status, 201, "{created}");
    let key = created["key"].as_str().unwrap().to_owned();
    let (status, _) = cluster
        .call(1, "POST", "/v1/apps", ADMIN, Some(json!({"id": "other"})))
        .await;
    assert_eq!(status, 201);
    let (status, _) = cluster
        .call(1, "DELETE", "/v1/apps/other", ADMIN, None)
        .await;
    assert_eq!(status, 204);

    for k in 0..2 {
        let all = entries(&cluster, k, ADMIN, "limit=10").await;
        let seen: Vec<(&str, &str)> = all
            .iter()
            .map(|e| (e["action"].as_str().unwrap(), e["app"].as_str().unwrap()))
            .collect();
        assert_eq!(
            seen,
            [
                ("app.delete", "other"),
                ("app.create", "other"),
                ("app.create", "shop")
            ],
            "node {k}"
        );
        let text = serde_json::to_string(&all).unwrap();
        assert!(!text.contains(ADMIN) && !text.contains(&key), "{text}");
    }
    let paged = entries(&cluster, 0, ADMIN, "limit=2").await;
    let cursor = paged[1]["id"].as_u64().unwrap();
    let rest = entries(&cluster, 1, ADMIN, &format!("limit=2&cursor={cursor}")).await;
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["app"], "shop");
    let own = entries(&cluster, 1, &key, "").await;
    assert_eq!(own.len(), 1, "{own:#?}");
    assert_eq!(own[0]["app"], "shop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_past_the_retention_are_deleted_in_postgresql() {
    let cluster = Cluster::start_with(1, |_, settings| {
        settings.audit_retention = Duration::from_secs(1);
    })
    .await;
    let (status, _) = cluster
        .call(0, "POST", "/v1/apps", ADMIN, Some(json!({"id": "old"})))
        .await;
    assert_eq!(status, 201);
    // Time passing is what is tested: the entry is older than the retention once this is over.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _) = cluster
        .call(0, "POST", "/v1/apps", ADMIN, Some(json!({"id": "new"})))
        .await;
    assert_eq!(status, 201);
    let left = entries(&cluster, 0, ADMIN, "limit=10").await;
    assert_eq!(left.len(), 1, "{left:#?}");
    assert_eq!(left[0]["app"], "new");
}
