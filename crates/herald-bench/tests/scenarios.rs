//! Every scenario, run briefly against a server the bench starts itself: the run completes, every
//! expected delivery or acknowledgement arrived (`failed == 0`), and the outputs are well formed
//! (summary.json keys, CSV header, SVG root element). Never timing assertions.
//!
//! The server binary is `target/{debug,release}/herald` of this workspace (or
//! `HERALD_BENCH_SERVER_BIN`); `cargo test --workspace` builds it before running tests, and a
//! lone `cargo test -p herald-bench` builds it here if it is missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

// A folder of its own, so Cargo does not build it as a second test program.
#[path = "scenarios/cluster.rs"]
mod cluster;
#[path = "scenarios/hooks.rs"]
mod hooks;
#[path = "scenarios/mqtt.rs"]
mod mqtt;
#[path = "scenarios/nats.rs"]
mod nats;
#[path = "scenarios/pusher.rs"]
mod pusher;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn server_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("HERALD_BENCH_SERVER_BIN") {
            return PathBuf::from(p);
        }
        let find = || {
            ["debug", "release"]
                .iter()
                .map(|p| workspace().join("target").join(p).join("herald"))
                .find(|p| p.is_file())
        };
        if let Some(p) = find() {
            return p;
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "herald"])
            .current_dir(workspace())
            .status()
            .expect("run cargo build -p herald");
        assert!(status.success(), "cargo build -p herald failed");
        find().expect("target/debug/herald after building it")
    })
}

/// Runs `herald-bench ARGS --spawn --out DIR` and returns summary.json and the output dir.
fn bench(args: &[&str]) -> (Value, tempfile::TempDir) {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_herald-bench"))
        .args(args)
        .arg("--spawn")
        .arg("--server-bin")
        .arg(server_bin())
        .arg("--time-limit")
        .arg("60")
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("run herald-bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "herald-bench {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("limited by:"),
        "human report on stdout: {stdout}"
    );
    let text = std::fs::read_to_string(out.path().join("summary.json")).unwrap();
    let summary: Value = serde_json::from_str(&text).unwrap();
    (summary, out)
}

/// The headline keys are always present (null where they do not apply).
fn check_summary(s: &Value, scenario: &str) {
    assert_eq!(s["scenario"], scenario, "{s:#}");
    for key in [
        "deliveries_per_sec",
        "subscriptions_per_sec",
        "failed",
        "bytes_per_connection",
        "latency_ms",
        "server_cpu_seconds",
        "server_peak_rss_bytes",
        "limited_by",
        "command",
        "ratios",
    ] {
        assert!(s.get(key).is_some(), "summary.json lacks {key}: {s:#}");
    }
    assert_eq!(s["failed"], 0, "every expected delivery arrived: {s:#}");
    assert!(s["server_peak_rss_bytes"].as_u64().unwrap() > 0, "{s:#}");
    assert!(s["server_cpu_seconds"].as_f64().is_some(), "{s:#}");
    assert!(!s["limited_by"].as_str().unwrap().is_empty());
    if !s["latency_ms"].is_null() {
        for k in ["p50", "p99", "max"] {
            assert!(
                s["latency_ms"][k].as_f64().is_some(),
                "latency_ms.{k}: {s:#}"
            );
        }
    }
}

fn check_files(dir: &Path, scenario: &str, header: &str) {
    let csv = std::fs::read_to_string(dir.join(format!("{scenario}.csv"))).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(header), "CSV header of {scenario}");
    let width = header.split(',').count();
    for l in lines {
        assert_eq!(l.split(',').count(), width, "CSV row {l:?}");
    }
    let svg = std::fs::read_to_string(dir.join(format!("{scenario}.svg"))).unwrap();
    assert!(
        svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "SVG root: {}",
        &svg[..svg.len().min(120)]
    );
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<svg").count(), 1);
}

const STEP_HEADER: &str =
    "subscribers,delivered,failed,p50_ms,p99_ms,max_ms,deliveries_per_sec,publish_ms,server_rss_mb";

fn check_steps(s: &Value, steps: usize, last: u64) {
    let list = s["steps"].as_array().expect("steps list");
    assert_eq!(list.len(), steps, "{s:#}");
    assert_eq!(list.last().unwrap()["subscribers"], last);
    for step in list {
        assert_eq!(step["failed"], 0, "{step}");
        assert_eq!(step["delivered"], step["expected"], "{step}");
    }
}

#[test]
fn baseline_measures_the_floors() {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_herald-bench"))
        .args(["baseline", "--seconds", "0.2", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap())
            .unwrap();
    for k in ["tcp_writes_per_sec", "connects_per_sec", "fsyncs_per_sec"] {
        assert!(s["baseline"][k].as_f64().unwrap() > 0.0, "{k}: {s:#}");
    }
    check_files(out.path(), "baseline", "floor,per_sec,us_each");
}

#[test]
fn subscribers_over_websocket_with_baseline() {
    let (s, out) = bench(&[
        "subscribers",
        "--step",
        "40",
        "--max-subscribers",
        "120",
        "--samples",
        "2",
        // a busy CI machine must not end the run on latency: the count is what this test checks
        "--max-latency",
        "60s",
    ]);
    check_summary(&s, "subscribers");
    check_steps(&s, 3, 120);
    assert_eq!(s["transport"], "ws");
    assert!(s["baseline"]["fsyncs_per_sec"].as_f64().unwrap() > 0.0);
    assert!(
        s["ratios"]["deliveries_per_tcp_write"].as_f64().is_some(),
        "{s:#}"
    );
    assert!(s["limited_by"].as_str().unwrap().starts_with("count"));
    check_files(out.path(), "subscribers", STEP_HEADER);
}

/// `herald bench` inside a copy of the server binary under another name (as an A/B run keeps
/// two builds side by side) starts its workers and its server from that same copy.
#[test]
fn the_herald_binary_benches_under_any_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("herald-build-a");
    std::fs::copy(server_bin(), &copy).unwrap();
    let out = dir.path().join("out");
    let output = Command::new(&copy)
        .args([
            "bench",
            "subscribers",
            "--step",
            "20",
            "--max-subscribers",
            "20",
        ])
        .args([
            "--samples",
            "1",
            "--max-latency",
            "60s",
            "--no-baseline",
            "--spawn",
        ])
        .args(["--time-limit", "60", "--out"])
        .arg(&out)
        .output()
        .expect("run the copied herald");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "herald-build-a bench failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let summary: Value = serde_json::from_str(&text).unwrap();
    check_steps(&summary, 1, 20);
}

#[test]
fn subscribers_over_sse_and_long_poll() {
    for transport in ["sse", "poll"] {
        let (s, out) = bench(&[
            "subscribers",
            "--transport",
            transport,
            "--step",
            "25",
            "--max-subscribers",
            "50",
            "--no-baseline",
        ]);
        check_summary(&s, "subscribers");
        check_steps(&s, 2, 50);
        assert_eq!(s["transport"], transport);
        check_files(out.path(), "subscribers", STEP_HEADER);
    }
}

#[test]
fn channels_gives_each_subscriber_its_own_channel() {
    let (s, out) = bench(&[
        "channels",
        "--step",
        "30",
        "--max-subscribers",
        "60",
        "--samples",
        "1",
        "--no-baseline",
    ]);
    check_summary(&s, "channels");
    check_steps(&s, 2, 60);
    check_files(out.path(), "channels", STEP_HEADER);
}

#[test]
fn all_to_all_delivers_n_squared() {
    for transport in ["ws", "sse"] {
        let (s, out) = bench(&[
            "all-to-all",
            "--transport",
            transport,
            "--subscribers",
            "25",
            "--no-baseline",
        ]);
        check_summary(&s, "all-to-all");
        assert_eq!(s["details"]["delivered"], 625, "{s:#}");
        assert_eq!(s["details"]["published"], 25, "{s:#}");
        assert!(s["deliveries_per_sec"].as_f64().unwrap() > 0.0);
        check_files(
            out.path(),
            "all-to-all",
            "t_ms,delivered,cumulative,p50_ms,p99_ms,max_ms",
        );
    }
}

#[test]
fn subscribe_storm_acknowledges_every_subscription() {
    let (s, out) = bench(&[
        "subscribe-storm",
        "--users",
        "8",
        "--subjects",
        "50",
        "--no-baseline",
    ]);
    check_summary(&s, "subscribe-storm");
    assert_eq!(s["details"]["acknowledged"], 400, "{s:#}");
    assert!(s["subscriptions_per_sec"].as_f64().unwrap() > 0.0);
    check_files(
        out.path(),
        "subscribe-storm",
        "second,completed,total,failed",
    );
    // distinct channels per user, over long-poll
    let (s, _) = bench(&[
        "subscribe-storm",
        "--transport",
        "poll",
        "--users",
        "4",
        "--subjects",
        "20",
        "--distinct",
        "--no-baseline",
    ]);
    check_summary(&s, "subscribe-storm");
    assert_eq!(s["details"]["acknowledged"], 80, "{s:#}");
    // 16 subscribes to a WebSocket message (batches of 16, 16, 16 and 2), each acknowledged
    let (s, _) = bench(&[
        "subscribe-storm",
        "--users",
        "8",
        "--subjects",
        "50",
        "--distinct",
        "--batch",
        "16",
        "--no-baseline",
    ]);
    check_summary(&s, "subscribe-storm");
    assert_eq!(s["details"]["acknowledged"], 400, "{s:#}");
    assert_eq!(s["details"]["error_replies"], 0, "{s:#}");
    assert_eq!(s["details"]["subscribes_per_message"], 16, "{s:#}");
}

/// `--channels 3`: six publishers on three channels, every subscriber on all three, so each
/// still receives every message.
#[test]
fn fanout_over_several_channels_delivers_every_message_to_every_subscriber() {
    let (s, _) = bench(&[
        "fanout",
        "--channels",
        "3",
        "--publishers",
        "6",
        "--messages",
        "120",
        "--subscribers",
        "4",
        "--no-baseline",
    ]);
    check_summary(&s, "fanout");
    assert_eq!(s["details"]["channels"], 3, "{s:#}");
    assert_eq!(s["details"]["published"], 120, "{s:#}");
    assert_eq!(s["details"]["delivered"], 480, "{s:#}");
    assert_eq!(s["failed"], 0, "{s:#}");
}

#[test]
fn fanout_delivers_every_message_to_every_subscriber() {
    let (s, out) = bench(&[
        "fanout",
        "--publishers",
        "2",
        "--messages",
        "100",
        "--subscribers",
        "15",
        "--no-baseline",
    ]);
    check_summary(&s, "fanout");
    assert_eq!(s["details"]["delivered"], 1500, "{s:#}");
    assert!(s["details"]["server_cpu_seconds_per_million_deliveries"]
        .as_f64()
        .is_some());
    // Reported, as a number: /proc counts CPU in 10 ms ticks, so a run this short may read 0.
    assert!(
        s["details"]["loadgen_cpu_seconds_per_million_deliveries"]
            .as_f64()
            .is_some_and(|c| c >= 0.0),
        "{s:#}"
    );
    check_files(
        out.path(),
        "fanout",
        "second,published,delivered,p50_ms,p99_ms,max_ms",
    );
    // in batches: 95 messages in requests of 10 (the last one of 5), each delivered once
    let (s, _) = bench(&[
        "fanout",
        "--publishers",
        "2",
        "--messages",
        "95",
        "--batch",
        "10",
        "--subscribers",
        "4",
        "--no-baseline",
    ]);
    check_summary(&s, "fanout");
    assert_eq!(s["details"]["published"], 95, "{s:#}");
    assert_eq!(s["details"]["delivered"], 380, "{s:#}");
    assert_eq!(s["details"]["batch"], 10, "{s:#}");
    // subscribers with a small receive buffer (`--rcvbuf`) still get every message
    let (s, _) = bench(&[
        "fanout",
        "--messages",
        "300",
        "--subscribers",
        "3",
        "--rcvbuf",
        "4096",
        "--no-baseline",
    ]);
    check_summary(&s, "fanout");
    assert_eq!(s["details"]["delivered"], 900, "{s:#}");
    assert_eq!(s["details"]["failed_connections"], 0, "{s:#}");
    // paced
    let (s, _) = bench(&[
        "fanout",
        "--transport",
        "sse",
        "--messages",
        "20",
        "--rate",
        "100",
        "--subscribers",
        "5",
        "--no-baseline",
    ]);
    check_summary(&s, "fanout");
    assert_eq!(s["details"]["delivered"], 100, "{s:#}");
    // Pacing holds: 20 messages at 100/s cannot be published faster than the rate (a slow
    // machine may publish slower, and then says what held it back).
    let pps = s["details"]["publishes_per_sec"].as_f64().unwrap();
    assert!(pps <= 110.0, "{s:#}");
    let why = s["limited_by"].as_str().unwrap();
    assert!(
        why.contains("--rate 100") || why.starts_with("CPU"),
        "{s:#}"
    );
}

#[test]
fn connections_reports_memory_per_connection() {
    let (s, out) = bench(&[
        "connections",
        "--connections",
        "200",
        "--channels",
        "3",
        "--idle-seconds",
        "0.5",
        "--workers",
        "2",
        "--no-baseline",
    ]);
    check_summary(&s, "connections");
    assert_eq!(s["details"]["connections"], 200, "{s:#}");
    assert!(s["bytes_per_connection"].as_f64().is_some(), "{s:#}");
    check_files(
        out.path(),
        "connections",
        "connections,server_rss_mb,bytes_per_connection",
    );
}

#[test]
fn refuses_remote_targets_and_missing_server_choice() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_herald-bench"))
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&[
        "fanout",
        "--target",
        "http://192.0.2.1:7070",
        "--no-baseline",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--allow-remote"));
    let o = run(&["fanout", "--no-baseline"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--spawn"));
}

#[test]
fn subscribers_and_channels_over_meteor_as_deacon() {
    for (scenario, mode) in [
        ("subscribers", "longpoll"),
        ("channels", "longpoll"),
        ("subscribers", "deaconstream"),
    ] {
        let (s, out) = bench(&[
            scenario,
            "--transport",
            "meteor",
            "--meteor-mode",
            mode,
            "--step",
            "20",
            "--max-subscribers",
            "40",
            "--no-baseline",
        ]);
        check_summary(&s, scenario);
        check_steps(&s, 2, 40);
        assert_eq!(s["transport"], "meteor");
        check_files(out.path(), scenario, STEP_HEADER);
    }
}

#[test]
fn broadcast_registers_every_device_and_stores_each_push_once() {
    let (s, out) = bench(&[
        "broadcast",
        "--devices",
        "3000",
        "--messages",
        "3",
        "--batch",
        "500",
        "--concurrency",
        "2",
        "--no-baseline",
    ]);
    check_summary(&s, "broadcast");
    let d = &s["details"];
    assert_eq!(d["registered"], 3000, "{s:#}");
    assert_eq!(d["refused_devices"], 0, "{s:#}");
    assert_eq!(d["broadcasts_accepted"], 3, "{s:#}");
    assert_eq!(d["refused_pushes"], 0, "{s:#}");
    assert!(s["devices_per_sec"].as_f64().unwrap() > 0.0, "{s:#}");
    // Four pushes (three broadcasts and a tag push) to 300 devices: stored once each, the
    // store grows by pages for four messages, not by a row per device (300 x 4 inbox rows
    // would be ~100 KB of rows alone; the WAL holds whole 4 KiB pages, so allow a few each).
    let growth = d["store_growth_bytes"]
        .as_i64()
        .expect("store size with --spawn");
    assert!(growth < 4 * 64 * 1024, "store grew {growth} B: {s:#}");
    let csv = std::fs::read_to_string(out.path().join("broadcast.csv")).unwrap();
    let total: u64 = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 3000, "the per-second table adds up: {csv}");
    check_files(out.path(), "broadcast", "second,registered,total");
}

#[test]
fn reconnect_storm_catches_every_device_up() {
    for (transport, direct) in [("ws", "0"), ("sse", "2"), ("poll", "1")] {
        let (s, out) = bench(&[
            "reconnect-storm",
            "--transport",
            transport,
            "--devices",
            "50",
            "--pending",
            "5",
            "--direct",
            direct,
            "--workers",
            "2",
            "--no-baseline",
        ]);
        check_summary(&s, "reconnect-storm");
        let d = &s["details"];
        assert_eq!(d["caught_up"], 50, "{transport}: {s:#}");
        assert_eq!(
            d["delivered"], 250,
            "{transport}: every pending message: {s:#}"
        );
        assert_eq!(d["failed_connections"], 0, "{s:#}");
        assert_eq!(d["disconnected"], 0, "{s:#}");
        assert!(d["server_cpu_ms_per_device"].as_f64().is_some(), "{s:#}");
        check_files(
            out.path(),
            "reconnect-storm",
            "t_ms,caught_up,total,messages,errors",
        );
    }
}

#[test]
fn provider_broadcast_gets_every_device_accepted_by_the_mock_apns() {
    let (s, out) = bench(&[
        "broadcast",
        "--provider",
        "apns",
        "--devices",
        "300",
        "--batch",
        "100",
    ]);
    check_summary(&s, "broadcast-apns");
    let d = &s["details"];
    assert_eq!(d["receipt_accepted"], 300, "{s:#}");
    assert_eq!(d["receipt_ended"], 300, "{s:#}");
    assert_eq!(
        d["mock_accepted_in_all"], 301,
        "the broadcast and the warm-up push, each once: {s:#}"
    );
    assert!(d["settled_seconds"].as_f64().is_some(), "{s:#}");
    assert_eq!(d["sqlite_floor"]["rows"], 300, "{s:#}");
    check_files(out.path(), "broadcast-apns", "second,accepted,total");
}

#[test]
fn auto_push_to_acking_devices_sends_no_provider_push() {
    let (s, out) = bench(&[
        "auto",
        "--devices",
        "60",
        "--ack-window",
        "1",
        "--workers",
        "2",
        "--no-baseline",
    ]);
    check_summary(&s, "auto");
    let d = &s["details"];
    assert_eq!(d["connected"], 60, "{s:#}");
    assert_eq!(d["auto_acked"], 60, "{s:#}");
    assert_eq!(d["live_acked"], 60, "{s:#}");
    assert_eq!(d["receipt_live"], 60, "{s:#}");
    assert_eq!(d["receipt_accepted"], 0, "{s:#}");
    assert_eq!(d["mock_accepted_in_all"], 0, "no provider push: {s:#}");
    check_files(
        out.path(),
        "auto",
        "delivery,devices_acked,all_acked_s,p50_ms,p99_ms,max_ms,server_cpu_s",
    );
}

/// Runs `herald-bench <provider> ARGS` against `herald mock <provider>` (started by the bench
/// from the workspace's herald binary) and returns summary.json and the output dir.
fn provider_bench(provider: &str, args: &[&str]) -> (Value, tempfile::TempDir) {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_herald-bench"))
        .arg(provider)
        .args(args)
        .arg("--mock-bin")
        .arg(server_bin())
        .arg("--time-limit")
        .arg("60")
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("run herald-bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "herald-bench {provider} {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("best: Herald"), "{stdout}");
    let text = std::fs::read_to_string(out.path().join("summary.json")).unwrap();
    (serde_json::from_str(&text).unwrap(), out)
}

const PROVIDER_HEADER: &str = "threads,connections,herald_per_sec,raw_per_sec,herald_to_raw,\
herald_client_us,raw_client_us,mock_us,herald_client_cores,raw_client_cores,mock_cores_herald,\
mock_cores_raw,herald_syscalls_per_100,raw_syscalls_per_100,machine_busy_pct,failed";

/// Every row's notifications were accepted by both clients, and the mock's own count (printed
/// as it stops) matches what the clients counted.
fn check_provider_rows(s: &Value, rows: usize, per_round: u64) {
    let d = &s["details"];
    let list = d["rows"].as_array().expect("rows");
    assert_eq!(list.len(), rows, "{s:#}");
    for row in list {
        assert_eq!(row["failed"], 0, "{row}");
        for key in ["herald_rounds_per_sec", "raw_rounds_per_sec"] {
            assert_eq!(row[key].as_array().unwrap().len(), 1, "{row}");
        }
        assert!(row["herald_per_sec"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["raw_per_sec"].as_f64().unwrap() > 0.0, "{row}");
    }
    assert_eq!(d["notifications_per_round"], per_round);
    assert_eq!(
        d["mock_accepted_in_all"], d["clients_counted_accepted"],
        "the mock accepted what the clients counted: {s:#}"
    );
}

#[test]
fn apns_compares_heralds_client_with_raw_h2() {
    let (s, out) = provider_bench(
        "apns",
        &[
            "--threads",
            "1",
            "--connections",
            "1,2",
            "--notifications",
            "300",
            "--in-flight",
            "20",
            "--rounds",
            "1",
        ],
    );
    check_summary(&s, "apns");
    check_provider_rows(&s, 2, 300);
    assert_eq!(s["details"]["pushy_v03_best_per_sec"], 95200.0);
    check_files(out.path(), "apns", PROVIDER_HEADER);
}

#[test]
fn fcm_and_webpush_compare_heralds_clients_with_raw_h2() {
    let (s, out) = provider_bench(
        "fcm",
        &[
            "--threads",
            "2",
            "--connections",
            "1",
            "--notifications",
            "200",
            "--in-flight",
            "10",
            "--rounds",
            "1",
        ],
    );
    check_summary(&s, "fcm");
    check_provider_rows(&s, 1, 200);
    check_files(out.path(), "fcm", PROVIDER_HEADER);
    let (s, out) = provider_bench(
        "webpush",
        &[
            "--threads",
            "1",
            "--connections",
            "1",
            "--notifications",
            "100",
            "--in-flight",
            "10",
            "--rounds",
            "1",
            "--subscriptions",
            "3",
            "--encryptions",
            "20",
        ],
    );
    check_summary(&s, "webpush");
    check_provider_rows(&s, 1, 100);
    let cost = &s["details"]["encryption_us_per_message"];
    assert!(cost["wall"].as_f64().unwrap() > 0.0, "{s:#}");
    assert!(cost["cpu"].as_f64().is_some(), "{s:#}");
    check_files(out.path(), "webpush", PROVIDER_HEADER);
}

const SOAK_HEADER: &str = "t_s,rss_mb,open_files,publishes,publish_p50_ms,publish_p99_ms,\
deliveries,delivery_p99_ms,reconnects,pushes,errors";

/// `soak` for three short intervals: a row per interval with the server's memory and files,
/// the load ran (publishes stored, messages delivered, pushes accepted) without errors, the
/// summary has the growth figures, and the chart has its four panels in one document.
#[test]
fn soak_records_every_interval() {
    let (s, out) = bench(&[
        "soak",
        "--duration",
        "6s",
        "--interval",
        "2s",
        "--churn",
        "1s",
        "--rate",
        "20",
        "--subscribers",
        "6",
        "--channels",
        "3",
        "--devices",
        "3",
        "--push-rate",
        "3",
        "--no-baseline",
    ]);
    check_summary(&s, "soak");
    check_files(out.path(), "soak", SOAK_HEADER);
    let csv = std::fs::read_to_string(out.path().join("soak.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 3, "one row per interval: {csv}");
    for row in &rows {
        assert!(row[1].parse::<f64>().unwrap() > 0.0, "rss_mb: {row:?}");
        assert!(row[2].parse::<u64>().unwrap() > 0, "open_files: {row:?}");
    }
    let d = &s["details"];
    assert!(d["publishes"].as_u64().unwrap() > 0, "{d:#}");
    assert!(d["deliveries"].as_u64().unwrap() > 0, "{d:#}");
    assert!(d["pushes"].as_u64().unwrap() > 0, "{d:#}");
    assert_eq!(d["errors"], 0, "{d:#}");
    assert_eq!(d["intervals"], 3);
    for key in ["first", "last", "total", "per_hour"] {
        assert!(d["rss_mb"][key].as_f64().is_some(), "rss_mb.{key}: {d:#}");
        assert!(
            d["open_files"][key].as_f64().is_some(),
            "open_files.{key}: {d:#}"
        );
    }
    let svg = std::fs::read_to_string(out.path().join("soak.svg")).unwrap();
    assert_eq!(svg.matches("<g transform=").count(), 4, "four panels");
}

/// A soak is bounded: more than 24 hours, or an interval longer than the run, is refused
/// before anything starts.
#[test]
fn soak_refuses_unbounded_runs() {
    for args in [
        ["--duration", "25h", "--interval", "1m"],
        ["--duration", "10s", "--interval", "1m"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_herald-bench"))
            .arg("soak")
            .args(args)
            .args(["--spawn", "--server-bin"])
            .arg(server_bin())
            .output()
            .expect("run herald-bench");
        assert!(!output.status.success(), "{args:?} was accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("--duration") || stderr.contains("--interval"),
            "{stderr}"
        );
    }
}
