//! A full disk: the server runs under a file-size limit (`RLIMIT_FSIZE`, which makes the
//! kernel fail writes past it with `EFBIG`, as a full disk fails them with `ENOSPC`), publishes
//! until the store runs into it, then the test raises the limit on the running process.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::{history, integrity_check};
use crate::support::Server;

/// The file-size limit the server starts under: room for the schema and a few hundred
/// messages.
const LIMIT_BYTES: u64 = 3 << 20;

/// Writes fail with `507 insufficient_storage` (publishes and registry writes alike) and
/// `/readyz` says so (`/healthz` stays 200: a restart would not free space), while reads keep
/// working; nothing acknowledged before is lost or
/// damaged; once the limit is raised writes work again without a restart, and seqs go on
/// with no gap.
#[tokio::test]
async fn a_full_disk_answers_507_loses_nothing_and_recovers_when_space_returns() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let mut server = Server::builder()
            .through(&["prlimit", &format!("--fsize={LIMIT_BYTES}:")])
            .config("[history]\nsize = 100000\n")
            .start()
            .await;
        let blob = "x".repeat(16 * 1024);
        let mut acked = Vec::new();
        // Publish until the store is refused for lack of space and /readyz says so. (The file
        // that hits the limit may be the write-ahead log, which a checkpoint can empty: then a
        // background write, such as the usage counters, finds room again and clears the state,
        // and the filling goes on.)
        let mut full = false;
        for _ in 0..20 {
            let refusal = fill(&server, &blob, &mut acked).await;
            assert_eq!(
                refusal["error"]["code"], "insufficient_storage",
                "{refusal}"
            );
            let message = refusal["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("File too large"),
                "names the reason: {message}"
            );
            let (status, ready) = server.get("/readyz").await;
            if status == 503 {
                let store = &ready["checks"]["store"];
                assert_eq!(store["status"], "failing", "{ready}");
                assert_eq!(store["error"]["code"], "insufficient_storage", "{ready}");
                // Alive: space comes back without a restart, which would drop every client.
                let (status, health) = server.get("/healthz").await;
                assert_eq!((status, health), (200, json!({ "status": "ok" })));
                // The gauge says so too, unless a background write found room again in the
                // meantime (see above): then the filling goes on.
                let metrics = server.metrics().await;
                if metrics.contains("herald_store_write_fault 1") {
                    full = true;
                    break;
                }
                assert!(metrics.contains("herald_store_write_fault 0"), "{metrics}");
            }
        }
        assert!(
            full,
            "/readyz and herald_store_write_fault reported the full store"
        );
        assert!(!acked.is_empty(), "some publishes fit before the limit");

        // Registry writes are refused the same way once they reach the limit too.
        let mut devices = Vec::new();
        let mut device_refused = false;
        for k in 0..500 {
            let id = format!("phone-{k}");
            let tags: Vec<String> = (0..100).map(|t| format!("t{t}-{}", &blob[..40])).collect();
            let (status, body) = server
                .post(
                    "/v1/devices",
                    json!({ "platform": "herald", "id": id, "tags": tags }),
                )
                .await;
            match status {
                201 => devices.push(id),
                507 => {
                    assert_eq!(body["error"]["code"], "insufficient_storage", "{body}");
                    device_refused = true;
                    break;
                }
                other => panic!("device {id}: unexpected {other} {body}"),
            }
        }
        assert!(device_refused, "a device write reached the limit");
        let (status, info) = server.get("/v1/channels/fill").await;
        assert_eq!(status, 200, "reads work while full: {info}");
        assert_eq!(
            info["seq"].as_u64(),
            acked.last().map(|a: &(u64, String)| a.0)
        );

        // Space returns: raise the soft limit of the running server.
        let raised = Command::new("prlimit")
            .arg("--pid")
            .arg(server.pid().to_string())
            .arg("--fsize=unlimited:")
            .status()
            .expect("run prlimit");
        assert!(raised.success());
        // Ready again before any publish: a node out of its load balancer's rotation gets no
        // publish to find the space, so /readyz tries a write itself. (The pause is only the
        // polling rate; the test's own time limit bounds the wait.)
        loop {
            let (status, ready) = server.get("/readyz").await;
            if status == 200 {
                assert_eq!(ready["checks"]["store"]["status"], "ok", "{ready}");
                break;
            }
            assert_eq!(
                ready["checks"]["store"]["error"]["code"], "insufficient_storage",
                "{ready}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let after = server
            .publish("fill", json!({ "i": "after", "blob": blob }))
            .await;
        let last = acked.last().unwrap().0;
        assert_eq!(
            after["seq"].as_u64(),
            Some(last + 1),
            "seqs go on with no gap"
        );
        let (status, ready) = server.get("/readyz").await;
        assert_eq!(
            (status, &ready["status"]),
            (200, &json!("ready")),
            "{ready}"
        );
        let (status, health) = server.get("/healthz").await;
        assert_eq!((status, health), (200, json!({ "status": "ok" })));
        let metrics = server.metrics().await;
        assert!(metrics.contains("herald_store_write_fault 0"), "{metrics}");
        let (status, body) = server
            .post(
                "/v1/devices",
                json!({ "platform": "herald", "id": "phone-after" }),
            )
            .await;
        assert_eq!(status, 201, "{body}");

        // Everything acknowledged is there, once, in order; nothing refused is.
        let stored = history(&server, "fill").await;
        let expected: Vec<(u64, String)> = acked.clone();
        let found: Vec<(u64, String)> = stored
            .iter()
            .filter(|(seq, _)| **seq <= last)
            .map(|(seq, (id, _))| (*seq, id.clone()))
            .collect();
        assert_eq!(found, expected);
        assert_eq!(stored.len() as u64, last + 1);
        for id in &devices {
            let (status, _) = server.get(&format!("/v1/devices/{id}")).await;
            assert_eq!(status, 200, "acknowledged device {id}");
        }
        let status = server.terminate();
        assert!(status.success(), "{status:?}");
        assert_eq!(integrity_check(&server.data), "ok");
    })
    .await
    .expect("the disk-full test finished in time");
}

/// Publishes 16 KiB messages to `fill` until one is refused with `507`; records the
/// acknowledged ones (seq, id) in `acked`; the refusal's body.
async fn fill(server: &Server, blob: &str, acked: &mut Vec<(u64, String)>) -> Value {
    for _ in 0..2000 {
        let id = format!("m{}", acked.len());
        let (status, body) = server
            .post(
                "/v1/channels/fill/messages",
                json!({ "id": id, "data": { "blob": blob } }),
            )
            .await;
        match status {
            200 => acked.push((body["seq"].as_u64().unwrap(), id)),
            507 => return body,
            other => panic!("publish {id}: unexpected {other} {body}"),
        }
    }
    panic!("2000 publishes of 16 KiB fitted under a 3 MiB file-size limit");
}
