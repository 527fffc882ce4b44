//! A full disk: the server runs under a file-size limit (`RLIMIT_FSIZE`, which makes the
//! kernel fail writes past it with `EFBIG`, as a full disk fails them with `ENOSPC`), publishes
//! until the store runs into it, then the test raises the limit on the running process.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::{history, integrity_check};
use crate::support::Server;

/// The file-size limit the server starts under: room for the schema and a few hundred
/// messages.
const LIMIT_BYTES: u64 = 3 << 20;

/// Writes fail with `507 insufficient_storage` (publishes and registry writes alike) and
/// `/healthz` says so, while reads keep working; nothing acknowledged before is lost or
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
        let mut refusal = None;
        for i in 0..2000 {
            let (status, body) = server
                .post(
                    "/v1/channels/fill/messages",
                    json!({ "id": format!("m{i}"), "data": { "i": i, "blob": blob } }),
                )
                .await;
            match status {
                200 => acked.push((body["seq"].as_u64().unwrap(), format!("m{i}"))),
                507 => {
                    refusal = Some(body);
                    break;
                }
                other => panic!("publish {i}: unexpected {other} {body}"),
            }
        }
        let refusal = refusal.expect("the store reached the file-size limit");
        assert_eq!(refusal["error"]["code"], "insufficient_storage", "{refusal}");
        assert!(!acked.is_empty(), "some publishes fit before the limit");

        // While full: every write is refused the same way, reads work, /healthz says why.
        let (status, body) = server
            .post("/v1/channels/fill/messages", json!({ "data": { "blob": blob } }))
            .await;
        assert_eq!((status, &body["error"]["code"]), (507, &json!("insufficient_storage")));
        let (status, body) = server
            .post(
                "/v1/devices",
                json!({ "platform": "herald", "id": "phone-while-full", "tags": [blob[..60].to_string()] }),
            )
            .await;
        assert_eq!(status, 507, "a device write while full: {body}");
        let (status, health) = server.get("/healthz").await;
        assert_eq!(status, 503, "{health}");
        assert_eq!(health["error"]["code"], "insufficient_storage", "{health}");
        let metrics = server.metrics().await;
        assert!(metrics.contains("herald_store_write_fault 1"), "{metrics}");
        let (status, info) = server.get("/v1/channels/fill").await;
        assert_eq!(status, 200, "reads work while full: {info}");
        assert_eq!(info["seq"].as_u64(), acked.last().map(|a| a.0));

        // Space returns: raise the soft limit of the running server.
        let raised = Command::new("prlimit")
            .arg("--pid")
            .arg(server.pid().to_string())
            .arg("--fsize=unlimited:")
            .status()
            .expect("run prlimit");
        assert!(raised.success());
        let after = server
            .publish("fill", json!({ "i": "after", "blob": blob }))
            .await;
        let last = acked.last().unwrap().0;
        assert_eq!(after["seq"].as_u64(), Some(last + 1), "seqs go on with no gap");
        let (status, health) = server.get("/healthz").await;
        assert_eq!((status, health), (200, json!({ "status": "ok" })));
        let metrics = server.metrics().await;
        assert!(metrics.contains("herald_store_write_fault 0"), "{metrics}");
        let (status, body) = server
            .post("/v1/devices", json!({ "platform": "herald", "id": "phone-after" }))
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
        let status = server.terminate();
        assert!(status.success(), "{status:?}");
        assert_eq!(integrity_check(&server.data), "ok");
    })
    .await
    .expect("the disk-full test finished in time");
}
