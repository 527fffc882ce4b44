//! A failing fsync: the server runs with a shim (`LD_PRELOAD`) whose `fsync` and `fdatasync`
//! fail with `EIO` while a trigger file exists, as a dying disk or a thin-provisioned volume that
//! ran out makes them fail. The shim is a few lines of C built here with `cc`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::{history, integrity_check};
use crate::support::{Server, Ws};

const SHIM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* fsync and fdatasync fail with EIO while the file HERALD_TEST_FSYNC_TRIGGER names exists. */
static int failing(void) {
    const char *trigger = getenv("HERALD_TEST_FSYNC_TRIGGER");
    return trigger != NULL && access(trigger, F_OK) == 0;
}

int fsync(int fd) {
    if (failing()) { errno = EIO; return -1; }
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}

int fdatasync(int fd) {
    if (failing()) { errno = EIO; return -1; }
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return real(fd);
}
"#;

/// Builds the shim into `dir`; its path.
fn build_shim(dir: &Path) -> PathBuf {
    let source = dir.join("failing_fsync.c");
    let library = dir.join("failing_fsync.so");
    std::fs::write(&source, SHIM).unwrap();
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&library)
        .arg(&source)
        .arg("-ldl")
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed to build the fsync shim");
    library
}

/// After an fsync fails, the failed write is not acknowledged and no later write is (`503
/// store_halted`, `/healthz` and `/readyz` too: only a restart clears it, so liveness fails)
/// even once fsync works again, until a restart; reads keep working; the failed write is not
/// delivered to a live subscriber either; after the restart every acknowledged write is there,
/// with its seq, and writes go on. While halted, reads do not show the failed write.
#[tokio::test]
async fn a_failed_fsync_halts_writes_until_a_restart_and_loses_nothing_acknowledged() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let shim_dir = tempfile::tempdir().unwrap();
        let shim = build_shim(shim_dir.path());
        let trigger = shim_dir.path().join("fail-fsync-now");
        let mut server = Server::builder()
            .env("LD_PRELOAD", shim.to_str().unwrap())
            .env("HERALD_TEST_FSYNC_TRIGGER", trigger.to_str().unwrap())
            .start()
            .await;
        let mut acked = Vec::new();
        for i in 0..20 {
            let answer = server.publish("log", json!({ "i": i })).await;
            acked.push(answer["seq"].as_u64().unwrap());
        }
        let (status, _) = server
            .post(
                "/v1/devices",
                json!({ "platform": "herald", "id": "phone-before" }),
            )
            .await;
        assert_eq!(status, 201);

        // A live subscriber: a message is delivered only after its fsync, so never this one.
        let mut ws = Ws::connect(&server.ws_url("")).await;
        let token = server.token(&["log"], &[]);
        let r = ws.request("connect", json!({ "token": token })).await;
        assert!(r.get("connect").is_some(), "{r}");
        let r = ws.request("subscribe", json!({ "channel": "log" })).await;
        assert_eq!(r["subscribe"]["seq"], acked.len(), "{r}");

        std::fs::write(&trigger, b"").unwrap();
        let (status, body) = server
            .post("/v1/channels/log/messages", json!({ "data": "during" }))
            .await;
        assert_eq!(status, 503, "the write whose fsync failed: {body}");
        assert_eq!(body["error"]["code"], "store_halted", "{body}");
        // Delivery would have been queued before the answer; the next frame is the pong.
        ws.send(json!({ "id": 100, "ping": {} })).await;
        let next = ws.recv().await.expect("the connection stays open");
        assert!(
            next.get("pong").is_some(),
            "delivered though not fsynced: {next}"
        );
        std::fs::remove_file(&trigger).unwrap();

        // fsync works again, but the page cache cannot be trusted: still refused.
        let (status, body) = server
            .post("/v1/channels/log/messages", json!({ "data": "after" }))
            .await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (503, &json!("store_halted"))
        );
        let (status, body) = server
            .post(
                "/v1/devices",
                json!({ "platform": "herald", "id": "phone-after" }),
            )
            .await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (503, &json!("store_halted"))
        );
        let (status, health) = server.get("/healthz").await;
        assert_eq!(status, 503, "{health}");
        assert_eq!(health["error"]["code"], "store_halted");
        assert!(
            health["error"]["message"]
                .as_str()
                .unwrap()
                .contains("restart"),
            "{health}"
        );
        let (status, ready) = server.get("/readyz").await;
        assert_eq!(status, 503, "{ready}");
        assert_eq!(
            ready["checks"]["store"]["error"]["code"], "store_halted",
            "{ready}"
        );
        let (status, info) = server.get("/v1/channels/log").await;
        assert_eq!(status, 200, "reads work while halted: {info}");
        // The write whose fsync failed is not read either (a power loss could take it back,
        // and its seq with it).
        assert_eq!(
            info["seq"],
            acked.len(),
            "the unsynced write is not read: {info}"
        );
        let read: Vec<u64> = history(&server, "log").await.into_keys().collect();
        assert_eq!(
            read, acked,
            "history while halted: only what was acknowledged"
        );
        let metrics = server.metrics().await;
        assert!(metrics.contains("herald_store_write_fault 2"), "{metrics}");

        // A restart recovers from what is on disk: everything acknowledged, writes again.
        server.restart().await;
        let stored = history(&server, "log").await;
        for seq in &acked {
            assert!(stored.contains_key(seq), "acknowledged seq {seq} lost");
        }
        let last = *stored.keys().last().unwrap();
        assert_eq!(stored.len() as u64, last, "seqs contiguous from 1");
        let next = server.publish("log", json!("restarted")).await;
        assert_eq!(next["seq"].as_u64(), Some(last + 1));
        let (status, _) = server.get("/v1/devices/phone-before").await;
        assert_eq!(status, 200);
        let (status, health) = server.get("/healthz").await;
        assert_eq!((status, health), (200, json!({ "status": "ok" })));
        let (status, ready) = server.get("/readyz").await;
        assert_eq!(
            (status, &ready["status"]),
            (200, &json!("ready")),
            "{ready}"
        );
        let status = server.terminate();
        assert!(status.success(), "{status:?}");
        assert_eq!(integrity_check(&server.data), "ok");
    })
    .await
    .expect("the fsync test finished in time");
}
