//! Crash durability and graceful shutdown against the real binary: every publish answered with a
//! seq survives `kill -9`; seqs continue after restart and are never reused; SIGTERM tells
//! connected clients why and exits cleanly.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use support::{Server, Ws};

async fn history(server: &Server, channel: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut since = 0;
    loop {
        let (status, h) = server
            .get(&format!(
                "/v1/channels/{channel}/messages?since={since}&limit=1000"
            ))
            .await;
        assert_eq!(status, 200);
        let page = h["messages"].as_array().unwrap().clone();
        if page.is_empty() {
            return all;
        }
        since = page.last().unwrap()["seq"].as_u64().unwrap();
        all.extend(page);
    }
}

async fn acked_publishes_survive(sync: &str) {
    let mut server = Server::builder()
        .arg("--sync")
        .arg(sync)
        .config("[history]\nsize = 100000\n")
        .start()
        .await;
    // Many concurrent publishers; record every acknowledged (seq -> data); kill -9 mid-stream.
    let acked = std::sync::Arc::new(parking_lot_free::Acked::default());
    let mut tasks = Vec::new();
    for p in 0..8 {
        let http = server.http.clone();
        let url = server.url("/v1/channels/durable/messages");
        let acked = acked.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0.. {
                let data = json!({ "p": p, "i": i });
                let r = http
                    .post(&url)
                    .bearer_auth(support::API_KEY)
                    .json(&json!({ "data": data }))
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status() == 200 => {
                        let b: Value = r.json().await.unwrap();
                        acked.insert(b["seq"].as_u64().unwrap(), data);
                    }
                    _ => return,
                }
            }
        }));
    }
    while acked.len() < 300 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let epoch_before = server.get("/v1/channels/durable").await.1["epoch"].clone();
    server.kill9();
    for t in tasks {
        t.await.unwrap();
    }
    let acked = acked.snapshot();
    server.restart().await;
    let stored: BTreeMap<u64, Value> = history(&server, "durable")
        .await
        .into_iter()
        .map(|m| (m["seq"].as_u64().unwrap(), m["data"].clone()))
        .collect();
    for (seq, data) in &acked {
        assert_eq!(
            stored.get(seq),
            Some(data),
            "acknowledged seq {seq} lost ({sync})"
        );
    }
    let max = *stored.keys().last().unwrap();
    assert_eq!(stored.len() as u64, max, "seqs are contiguous from 1");
    let (_, info) = server.get("/v1/channels/durable").await;
    assert_eq!(info["epoch"], epoch_before, "epoch survives a restart");
    let next = server.publish("durable", json!("after")).await;
    assert_eq!(
        next["seq"].as_u64().unwrap(),
        max + 1,
        "seq continues, never reused"
    );
}

#[tokio::test]
async fn kill9_loses_nothing_acknowledged_batch_sync() {
    acked_publishes_survive("batch").await;
}

#[tokio::test]
async fn kill9_loses_nothing_acknowledged_always_sync() {
    acked_publishes_survive("always").await;
}

#[tokio::test]
async fn sigterm_tells_clients_and_exits_cleanly() {
    let mut server = Server::start().await;
    let token = server.token(&["news"], &[]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    ws.request("subscribe", json!({ "channel": "news" })).await;
    server.publish("news", json!(1)).await;
    let status = server.terminate();
    assert!(status.success(), "exit status {status:?}");
    let mut reason = None;
    while let Some(v) = ws.recv().await {
        if v.get("disconnect").is_some() {
            reason = Some(v["disconnect"]["code"].clone());
        }
    }
    assert_eq!(reason, Some(json!("shutdown")));
    server.restart().await;
    let (_, info) = server.get("/v1/channels/news").await;
    assert_eq!(info["seq"], 1);
}

/// Ctrl-C starts an orderly shutdown that waits for connections (here a request whose body never
/// comes, for up to a minute); a second Ctrl-C exits at once with 130, and what was acknowledged
/// before is there after a restart.
#[tokio::test]
async fn a_second_ctrl_c_exits_at_once() {
    use tokio::io::AsyncWriteExt;
    let mut server = Server::builder()
        .env("HERALD_SHUTDOWN_GRACE", "60s")
        .start()
        .await;
    server.publish("news", json!(1)).await;
    let token = server.token(&["news"], &[]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    ws.request("subscribe", json!({ "channel": "news" })).await;
    // A publish stuck in its body. `Expect: 100-continue` makes the server say when its
    // handler starts reading the body, so the request is known to be in flight before the
    // first Ctrl-C (else a shutdown that begins first closes the connection as idle and exits
    // by itself, which is not what this test is about).
    let mut stuck = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let request = format!(
        "POST /v1/channels/news/messages HTTP/1.1\r\nHost: x\r\n\
         Authorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\nExpect: 100-continue\r\n\r\n",
        support::API_KEY
    );
    stuck.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 256];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stuck.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before 100 Continue");
            head.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("100 Continue");
    assert!(
        head.starts_with(b"HTTP/1.1 100"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    stuck.write_all(b"{\"data\":").await.unwrap();
    server.signal("INT");
    // The shutdown has begun once clients are told.
    let mut told = false;
    while let Some(v) = ws.recv().await {
        told |= v["disconnect"]["code"] == "shutdown";
    }
    assert!(told, "no shutdown disconnect after the first Ctrl-C");
    server.signal("INT");
    let status = server.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(130), "{status:?}");
    drop(stuck);
    server.restart().await;
    let (_, info) = server.get("/v1/channels/news").await;
    assert_eq!(info["seq"], 1);
}

mod parking_lot_free {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use serde_json::Value;

    #[derive(Default)]
    pub struct Acked(Mutex<BTreeMap<u64, Value>>);

    impl Acked {
        pub fn insert(&self, seq: u64, v: Value) {
            let prev = self.0.lock().unwrap().insert(seq, v);
            assert!(prev.is_none(), "seq {seq} acknowledged twice");
        }
        pub fn len(&self) -> usize {
            self.0.lock().unwrap().len()
        }
        pub fn snapshot(&self) -> BTreeMap<u64, Value> {
            self.0.lock().unwrap().clone()
        }
    }
}

/// A second `herald serve` on a data directory in use refuses to start, says which process holds
/// it and changes nothing there; the first keeps serving. After a kill -9 the directory is free
/// again (the kernel drops the lock with the process).
#[tokio::test]
async fn a_second_server_on_the_same_data_directory_refuses_to_start() {
    let mut server = Server::start().await;
    server.publish("guarded", json!(1)).await;
    let before: BTreeMap<String, Vec<u8>> = files(&server.data);
    let second = tokio::task::spawn_blocking({
        let data = server.data.clone();
        move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
                .args(["serve", "--listen", "127.0.0.1:0", "--data"])
                .arg(&data)
                .env_remove("HERALD_CONFIG")
                .env_remove("HERALD_TOKEN_SECRET")
                .env_remove("HERALD_API_KEY")
                .output()
                .expect("run herald")
        }
    });
    let out = tokio::time::timeout(std::time::Duration::from_secs(30), second)
        .await
        .expect("the second server did not exit")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("is in use by another herald server")
            && stderr.contains(&format!("(process {})", server.pid())),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "the refused server printed {:?}",
        out.stdout
    );
    let after = files(&server.data);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "the refused server created or removed files"
    );
    assert_eq!(before.get("token-secret"), after.get("token-secret"));
    server.publish("guarded", json!(2)).await;
    server.restart().await;
    let seqs: Vec<u64> = history(&server, "guarded")
        .await
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2]);
}

/// The data directory's files (not the database's, which change as the server runs) by name.
fn files(dir: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let bytes = if name.starts_with("herald.db") {
                Vec::new()
            } else {
                std::fs::read(e.path()).unwrap()
            };
            (name, bytes)
        })
        .collect()
}

/// The database holds every app's token secret: it and SQLite's side files are owner-only, and
/// an old world-readable file is tightened when the server opens it.
#[cfg(unix)]
#[tokio::test]
async fn the_store_files_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let mut server = Server::start().await;
    server.publish("news", json!(1)).await;
    for name in ["herald.db", "herald.db-wal", "herald.db-shm"] {
        assert_eq!(mode(&server.data.join(name)), 0o600, "{name}");
    }
    server.kill9();
    let db = server.data.join("herald.db");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    server.restart().await;
    assert_eq!(mode(&db), 0o600);
    let (_, info) = server.get("/v1/channels/news").await;
    assert_eq!(info["seq"], 1);
}
