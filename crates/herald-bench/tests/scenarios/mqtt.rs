//! MQTT in `herald bench`: `--transport mqtt` against a spawned Herald (started with an MQTT
//! listener, the clients authenticating with the run's token) and `--peer mosquitto` against a
//! spawned `mosquitto` (installed by scripts/test.sh; the test says so and passes only when it is
//! absent), both for fanout and connections, every delivery accounted for. Behaviour only, never
//! timing.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::{bench, check_files, check_summary};

/// Where `mosquitto` is, as the bench looks for it (PATH, then /usr/sbin).
fn mosquitto() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|d| d.join("mosquitto"))
        .find(|p| p.is_file())
}

/// Runs `herald-bench ARGS --spawn --peer mosquitto --out DIR` and returns summary.json.
fn mosquitto_bench(args: &[&str]) -> (Value, tempfile::TempDir) {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_herald-bench"))
        .args(args)
        .args(["--spawn", "--peer", "mosquitto", "--no-baseline"])
        .args(["--time-limit", "60", "--out"])
        .arg(out.path())
        .output()
        .expect("run herald-bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "herald-bench {args:?} --peer mosquitto failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("(mqtt)"), "the report names MQTT: {stdout}");
    let text = std::fs::read_to_string(out.path().join("summary.json")).unwrap();
    (serde_json::from_str(&text).unwrap(), out)
}

#[test]
fn mqtt_subscribers_and_publishers_against_herald() {
    // MQTT 3.1.1, subscriptions at QoS 0: 60 messages to 40 subscribers, published over MQTT
    // at QoS 1 by two publishers.
    let (s, out) = bench(&[
        "fanout",
        "--transport",
        "mqtt",
        "--publishers",
        "2",
        "--messages",
        "60",
        "--subscribers",
        "40",
        "--no-baseline",
    ]);
    check_summary(&s, "fanout");
    assert_eq!(s["transport"], "mqtt", "{s:#}");
    assert!(
        s["target"].as_str().unwrap().starts_with("http://"),
        "{s:#}"
    );
    assert_eq!(s["details"]["published"], 60, "{s:#}");
    assert_eq!(s["details"]["delivered"], 2400, "60 messages x 40: {s:#}");
    check_files(
        out.path(),
        "fanout",
        "second,published,delivered,p50_ms,p99_ms,max_ms",
    );
    // MQTT 5, subscriptions at QoS 1 (every delivery acknowledged), publishes in fives.
    let (s, _) = bench(&[
        "fanout",
        "--transport",
        "mqtt",
        "--mqtt-version",
        "5",
        "--mqtt-qos",
        "1",
        "--messages",
        "150",
        "--batch",
        "5",
        "--subscribers",
        "10",
        "--no-baseline",
    ]);
    check_summary(&s, "fanout");
    assert_eq!(s["details"]["delivered"], 1500, "150 messages x 10: {s:#}");
    // Idle connections, three subscriptions each; the closing message reaches all of them.
    let (s, _) = bench(&[
        "connections",
        "--transport",
        "mqtt",
        "--mqtt-version",
        "5",
        "--connections",
        "100",
        "--channels",
        "3",
        "--idle-seconds",
        "0.5",
        "--no-baseline",
    ]);
    check_summary(&s, "connections");
    assert_eq!(s["details"]["connections"], 100, "{s:#}");
    assert_eq!(s["details"]["lost_connections"], 0, "{s:#}");
    assert!(s["bytes_per_connection"].as_f64().is_some(), "{s:#}");
}

#[test]
fn mosquitto_peer_runs_fanout_and_connections() {
    if mosquitto().is_none() {
        eprintln!(
            "SKIPPED: mosquitto is not installed (Debian: apt-get install mosquitto; \
             scripts/install-mqtt-clients.sh installs it)"
        );
        return;
    }
    let (s, _) = mosquitto_bench(&[
        "fanout",
        "--publishers",
        "2",
        "--messages",
        "60",
        "--subscribers",
        "40",
    ]);
    check_summary(&s, "fanout");
    assert!(
        s["target"].as_str().unwrap().starts_with("mqtt://"),
        "{s:#}"
    );
    assert_eq!(s["details"]["delivered"], 2400, "60 messages x 40: {s:#}");
    assert!(
        s["details"]["server_cpu_seconds_per_million_deliveries"]
            .as_f64()
            .is_some(),
        "{s:#}"
    );
    let (s, _) = mosquitto_bench(&[
        "fanout",
        "--mqtt-version",
        "5",
        "--mqtt-qos",
        "1",
        "--messages",
        "100",
        "--subscribers",
        "10",
    ]);
    check_summary(&s, "fanout");
    assert_eq!(s["details"]["delivered"], 1000, "100 messages x 10: {s:#}");
    let (s, _) = mosquitto_bench(&[
        "connections",
        "--connections",
        "100",
        "--channels",
        "2",
        "--idle-seconds",
        "0.5",
    ]);
    check_summary(&s, "connections");
    assert_eq!(s["details"]["lost_connections"], 0, "{s:#}");
    assert!(s["bytes_per_connection"].as_f64().is_some(), "{s:#}");
}

#[test]
fn mqtt_and_mosquitto_refuse_scenarios_without_a_counterpart() {
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_herald-bench"))
            .args(args)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} ran");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = run(&["subscribe-storm", "--spawn", "--peer", "mosquitto"]);
    assert!(e.contains("no Mosquitto counterpart"), "{e}");
    let e = run(&["subscribers", "--spawn", "--transport", "mqtt"]);
    assert!(e.contains("does not run over --transport mqtt"), "{e}");
    let e = run(&[
        "fanout",
        "--spawn",
        "--peer",
        "mosquitto",
        "--transport",
        "sse",
        "--no-baseline",
    ]);
    assert!(e.contains("speaks MQTT"), "{e}");
    let e = run(&[
        "fanout",
        "--target",
        "http://127.0.0.1:9",
        "--transport",
        "mqtt",
        "--no-baseline",
    ]);
    assert!(e.contains("--mqtt-target"), "{e}");
}
