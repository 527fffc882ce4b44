//! `--peer nats`: fanout, subscribe-storm (pipelined and one at a time) and connections against
//! a NATS server, the bench's own NATS client on both sides. What CI runs is a scripted broker
//! in this test process that speaks the subset of NATS's protocol the bench uses (INFO, CONNECT,
//! SUB, UNSUB, PUB, PING/PONG, MSG to every subscription of the exact subject), its pid given
//! as `--server-pid`; the run against a real `nats-server` (`--spawn --peer nats`) is the
//! ignored test at the end (`cargo test -p herald-bench --test scenarios -- --ignored nats`,
//! after `apt-get install nats-server`). Behaviour only, never timing.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::{check_files, check_summary};

/// Subscriptions by subject: (connection, sid, the connection's writer).
type Subs = Arc<Mutex<HashMap<String, Vec<(u64, u64, mpsc::UnboundedSender<Vec<u8>>)>>>>;

/// Starts the scripted broker on a thread of its own; returns its address.
fn scripted_broker() -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let subs: Subs = Default::default();
            let mut next_conn = 0u64;
            while let Ok((socket, _)) = listener.accept().await {
                next_conn += 1;
                tokio::spawn(serve(socket, next_conn, subs.clone()));
            }
        });
    });
    rx.recv().unwrap()
}

/// One client connection of the broker: its operations in order, everything it is sent
/// (`PONG`s, `MSG`s) through one queue, so a `PONG` follows what its `PING` came after.
async fn serve(socket: TcpStream, conn: u64, subs: Subs) {
    let (rd, mut wr) = socket.into_split();
    let (out, mut queue) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        while let Some(bytes) = queue.recv().await {
            if wr.write_all(&bytes).await.is_err() {
                return;
            }
        }
    });
    let _ = out
        .send(b"INFO {\"server_id\":\"SCRIPTED\",\"version\":\"2.9.10\",\"proto\":1}\r\n".to_vec());
    let mut rd = BufReader::new(rd);
    let mut line = String::new();
    let mut mine: Vec<(String, u64)> = Vec::new();
    loop {
        line.clear();
        match rd.read_line(&mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["CONNECT", ..] => {}
            ["PING"] => {
                let _ = out.send(b"PONG\r\n".to_vec());
            }
            ["PONG"] => {}
            ["SUB", subject, sid] => {
                let sid: u64 = sid.parse().unwrap();
                mine.push((subject.to_string(), sid));
                let mut s = subs.lock().unwrap();
                s.entry(subject.to_string())
                    .or_default()
                    .push((conn, sid, out.clone()));
            }
            ["UNSUB", sid] => {
                let sid: u64 = sid.parse().unwrap();
                let mut s = subs.lock().unwrap();
                for list in s.values_mut() {
                    list.retain(|(c, d, _)| !(*c == conn && *d == sid));
                }
            }
            ["PUB", subject, len] => {
                let len: usize = len.parse().unwrap();
                let mut payload = vec![0u8; len + 2];
                if rd.read_exact(&mut payload).await.is_err() {
                    break;
                }
                payload.truncate(len);
                let s = subs.lock().unwrap();
                for (_, sid, to) in s.get(*subject).into_iter().flatten() {
                    let mut msg = format!("MSG {subject} {sid} {len}\r\n").into_bytes();
                    msg.extend_from_slice(&payload);
                    msg.extend_from_slice(b"\r\n");
                    let _ = to.send(msg);
                }
            }
            other => {
                let _ = out
                    .send(format!("-ERR 'Unknown Protocol Operation {other:?}'\r\n").into_bytes());
                break;
            }
        }
    }
    let mut s = subs.lock().unwrap();
    for (subject, sid) in mine {
        if let Some(list) = s.get_mut(&subject) {
            list.retain(|(c, d, _)| !(*c == conn && *d == sid));
        }
    }
}

/// Runs `herald-bench ARGS --out DIR` against `server` and returns summary.json and the folder.
fn nats_bench(server: &[&str], args: &[&str]) -> (Value, tempfile::TempDir) {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_herald-bench"))
        .args(args)
        .args(server)
        .args(["--no-baseline", "--time-limit", "60", "--out"])
        .arg(out.path())
        .output()
        .expect("run herald-bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "herald-bench {args:?} {server:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("(nats)"), "the report names NATS: {stdout}");
    let text = std::fs::read_to_string(out.path().join("summary.json")).unwrap();
    (serde_json::from_str(&text).unwrap(), out)
}

/// fanout, both storms and connections against `server` (the flags naming it), every
/// delivery and acknowledgement accounted for.
fn every_scenario(server: &[&str]) {
    let (s, out) = nats_bench(
        server,
        &[
            "fanout",
            "--publishers",
            "2",
            "--messages",
            "60",
            "--subscribers",
            "40",
        ],
    );
    check_summary(&s, "fanout");
    assert_eq!(s["transport"], "nats", "{s:#}");
    assert!(
        s["target"].as_str().unwrap().starts_with("nats://"),
        "{s:#}"
    );
    assert_eq!(s["details"]["delivered"], 2400, "60 messages x 40: {s:#}");
    assert!(
        s["details"]["server_cpu_seconds_per_million_deliveries"]
            .as_f64()
            .is_some(),
        "{s:#}"
    );
    check_files(
        out.path(),
        "fanout",
        "second,published,delivered,p50_ms,p99_ms,max_ms",
    );

    // Publishers that keep up to 16 publishes unconfirmed (as a NATS client that does not flush
    // after each publish): every message still reaches every subscriber.
    let (s, _) = nats_bench(
        server,
        &[
            "fanout",
            "--publishers",
            "2",
            "--messages",
            "300",
            "--subscribers",
            "20",
            "--nats-window",
            "16",
        ],
    );
    check_summary(&s, "fanout");
    assert_eq!(s["details"]["delivered"], 6000, "300 messages x 20: {s:#}");
    assert_eq!(s["details"]["published"], 300, "{s:#}");
    assert_eq!(s["details"]["nats_window"], 16, "{s:#}");
    // Paced, with a window: each message goes out at its time, all of them arrive.
    let (s, _) = nats_bench(
        server,
        &[
            "fanout",
            "--publishers",
            "1",
            "--messages",
            "40",
            "--rate",
            "200",
            "--subscribers",
            "10",
            "--nats-window",
            "8",
        ],
    );
    check_summary(&s, "fanout");
    assert_eq!(s["details"]["delivered"], 400, "40 messages x 10: {s:#}");

    for how in ["", "--one-at-a-time", "--nats-one-ping"] {
        let mut args = vec![
            "subscribe-storm",
            "--users",
            "5",
            "--subjects",
            "40",
            "--distinct",
        ];
        if !how.is_empty() {
            args.push(how);
        }
        let (s, _) = nats_bench(server, &args);
        check_summary(&s, "subscribe-storm");
        assert_eq!(s["details"]["acknowledged"], 200, "{s:#}");
        assert!(s["subscriptions_per_sec"].as_f64().unwrap() > 0.0, "{s:#}");
        assert!(
            s["details"]["server_cpu_us_per_subscription"]
                .as_f64()
                .is_some(),
            "{s:#}"
        );
    }

    let (s, _) = nats_bench(
        server,
        &[
            "connections",
            "--connections",
            "30",
            "--idle-seconds",
            "0.5",
        ],
    );
    check_summary(&s, "connections");
    assert_eq!(s["details"]["lost_connections"], 0, "{s:#}");
    assert!(s["bytes_per_connection"].as_f64().is_some(), "{s:#}");
}

#[test]
fn nats_peer_runs_fanout_storms_and_connections() {
    let addr = scripted_broker();
    let url = format!("nats://{addr}");
    let pid = std::process::id().to_string();
    every_scenario(&["--target", &url, "--server-pid", &pid]);
}

#[test]
fn nats_peer_refuses_scenarios_without_a_counterpart() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_herald-bench"))
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["subscribers", "--target", "nats://127.0.0.1:4222"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("no NATS counterpart"), "{e}");
    let o = run(&[
        "subscribe-storm",
        "--spawn",
        "--peer",
        "nats",
        "--prepublish",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("NATS keeps no history"));
    let o = run(&[
        "fanout",
        "--spawn",
        "--peer",
        "nats",
        "--transport",
        "sse",
        "--no-baseline",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("leave out --transport"));
    let o = run(&["fanout", "--spawn", "--nats-window", "8", "--no-baseline"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--nats-window is for --peer nats"));
}

#[test]
#[ignore = "needs nats-server (Debian: apt-get install nats-server); run with --ignored"]
fn nats_peer_against_a_real_nats_server() {
    every_scenario(&["--spawn", "--peer", "nats"]);
}
