//! MQTT in `herald bench`: `--transport mqtt` against a spawned Herald (started with an MQTT
//! listener, the clients authenticating with the run's token) and `--peer mosquitto` against a
//! spawned `mosquitto` (installed by scripts/test.sh; the test says so and passes only when it is
//! absent), for fanout (also to persistent sessions at QoS 1), subscribers, subscribe-storm and
//! connections, every delivery and subscription accounted for. Behaviour only, never timing.

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
    let e = run(&["all-to-all", "--spawn", "--peer", "mosquitto"]);
    assert!(e.contains("no Mosquitto counterpart"), "{e}");
    let e = run(&["channels", "--spawn", "--transport", "mqtt"]);
    assert!(e.contains("does not run over --transport mqtt"), "{e}");
    let e = run(&["fanout", "--spawn", "--mqtt-session-expiry", "60"]);
    assert!(
        e.contains("--mqtt-session-expiry is for MQTT clients"),
        "{e}"
    );
    let e = run(&[
        "subscribe-storm",
        "--spawn",
        "--peer",
        "mosquitto",
        "--subjects",
        "70000",
        "--no-baseline",
    ]);
    assert!(e.contains("at most 65,535 topics"), "{e}");
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

/// The storm's subscriptions: every one acknowledged, none failed, as many as users x subjects.
fn check_storm(s: &Value, expected: u64) {
    check_summary(s, "subscribe-storm");
    assert_eq!(s["details"]["expected"], expected, "{s:#}");
    assert_eq!(s["details"]["acknowledged"], expected, "{s:#}");
    assert_eq!(s["details"]["error_replies"], 0, "{s:#}");
    assert_eq!(s["failed"], 0, "{s:#}");
}

#[test]
fn mqtt_subscribe_storm_persistent_sessions_and_subscribers_against_herald() {
    // The storm, SUBSCRIBEs written all at once, each user its own topics.
    let (s, _) = bench(&[
        "subscribe-storm",
        "--transport",
        "mqtt",
        "--users",
        "20",
        "--subjects",
        "50",
        "--distinct",
        "--no-baseline",
    ]);
    check_storm(&s, 1000);
    assert_eq!(s["transport"], "mqtt", "{s:#}");
    assert_eq!(s["details"]["mqtt"]["version"], "3.1.1", "{s:#}");
    // One at a time, MQTT 5, QoS 1 subscriptions of persistent sessions (each stored).
    let (s, _) = bench(&[
        "subscribe-storm",
        "--transport",
        "mqtt",
        "--mqtt-version",
        "5",
        "--mqtt-qos",
        "1",
        "--mqtt-session-expiry",
        "600",
        "--users",
        "5",
        "--subjects",
        "40",
        "--one-at-a-time",
        "--no-baseline",
    ]);
    check_storm(&s, 200);
    assert_eq!(s["details"]["one_at_a_time"], true, "{s:#}");
    assert_eq!(s["details"]["mqtt"]["session_expiry"], 600, "{s:#}");
    // QoS 1 to persistent sessions, every delivery acknowledged with a PUBACK, in both versions.
    for version in ["3.1.1", "5"] {
        let (s, _) = bench(&[
            "fanout",
            "--transport",
            "mqtt",
            "--mqtt-version",
            version,
            "--mqtt-qos",
            "1",
            "--mqtt-session-expiry",
            "3600",
            "--messages",
            "100",
            "--batch",
            "5",
            "--subscribers",
            "30",
            "--no-baseline",
        ]);
        check_summary(&s, "fanout");
        assert_eq!(s["details"]["delivered"], 3000, "100 messages x 30: {s:#}");
        assert_eq!(s["details"]["mqtt"]["qos"], 1, "{s:#}");
        assert_eq!(s["details"]["mqtt"]["session_expiry"], 3600, "{s:#}");
    }
    // subscribers: steps of MQTT subscribers, each sample published at QoS 1 over MQTT.
    let (s, _) = bench(&[
        "subscribers",
        "--transport",
        "mqtt",
        "--step",
        "10",
        "--max-subscribers",
        "20",
        "--samples",
        "2",
        "--no-baseline",
    ]);
    check_summary(&s, "subscribers");
    assert_eq!(s["details"]["subscribers"], 20, "{s:#}");
    assert_eq!(s["steps"][1]["delivered"], 40, "2 samples x 20: {s:#}");
}

#[test]
fn mosquitto_peer_runs_subscribe_storm_persistent_sessions_and_subscribers() {
    if mosquitto().is_none() {
        eprintln!("SKIPPED: mosquitto is not installed (scripts/install-mqtt-clients.sh)");
        return;
    }
    let (s, _) = mosquitto_bench(&[
        "subscribe-storm",
        "--users",
        "20",
        "--subjects",
        "50",
        "--distinct",
    ]);
    check_storm(&s, 1000);
    let (s, _) = mosquitto_bench(&[
        "subscribe-storm",
        "--mqtt-version",
        "5",
        "--users",
        "5",
        "--subjects",
        "40",
        "--one-at-a-time",
    ]);
    check_storm(&s, 200);
    let (s, _) = mosquitto_bench(&[
        "fanout",
        "--mqtt-version",
        "5",
        "--mqtt-qos",
        "1",
        "--mqtt-session-expiry",
        "3600",
        "--messages",
        "100",
        "--subscribers",
        "30",
    ]);
    check_summary(&s, "fanout");
    assert_eq!(s["details"]["delivered"], 3000, "100 messages x 30: {s:#}");
    let (s, _) = mosquitto_bench(&[
        "subscribers",
        "--step",
        "10",
        "--max-subscribers",
        "20",
        "--samples",
        "2",
    ]);
    check_summary(&s, "subscribers");
    assert_eq!(s["steps"][1]["delivered"], 40, "2 samples x 20: {s:#}");
}
