//! `hooks`: webhook delivery under connection churn against a spawned server. Behaviour only:
//! every event the clients caused arrives at the bench's receiver, signed (the receiver checks
//! every signature), each once by id; an endpoint matching nothing and no endpoint send
//! nothing; a run missing events exits non-zero after its report.

use std::process::Command;

use serde_json::Value;

use super::{bench, check_files, check_summary, server_bin};

/// The figures of one event type in summary.json.
fn per_type<'a>(s: &'a Value, kind: &str) -> &'a Value {
    &s["details"]["per_type"][kind]
}

#[test]
fn hooks_churn_delivers_every_expected_event_once_and_signed() {
    let (s, out) = bench(&[
        "hooks",
        "--clients",
        "50",
        "--rounds",
        "2",
        "--batch-delay",
        "200ms",
        "--no-baseline",
    ]);
    check_summary(&s, "hooks");
    let d = &s["details"];
    assert_eq!(d["missing"], 0, "{s:#}");
    assert_eq!(d["unexpected"], 0, "{s:#}");
    assert_eq!(d["failed_cycles"], 0, "{s:#}");
    assert_eq!(d["bad_signatures"], 0, "every request verified: {s:#}");
    assert_eq!(d["connections"], 100, "{s:#}");
    for kind in [
        "client.connected",
        "client.subscribed",
        "channel.occupied",
        "client.unsubscribed",
        "channel.vacated",
        "client.disconnected",
    ] {
        let t = per_type(&s, kind);
        assert_eq!(
            t["expected"], 100,
            "one per client per round: {kind}: {s:#}"
        );
        assert_eq!(t["received"], 100, "{kind}: {s:#}");
    }
    // Presence: between one pair per user (every reconnect within the offline delay) and one
    // per connection, in strict alternation per user (online, offline, ...: never two onlines
    // in a row), each user heard offline at the end, as they last disconnected.
    let online = per_type(&s, "user.online")["received"].as_u64().unwrap();
    let offline = per_type(&s, "user.offline")["received"].as_u64().unwrap();
    assert!((50..=100).contains(&online), "{s:#}");
    assert_eq!(online, offline, "{s:#}");
    assert_eq!(d["out_of_order_users"], 0, "{s:#}");
    assert_eq!(d["final_online_users"], 0, "{s:#}");
    assert_eq!(
        d["withdrawn_pairs"].as_u64().unwrap() + online,
        100,
        "each reconnect either sent a pair or withdrew one: {s:#}"
    );
    let distinct = d["events_distinct"].as_u64().unwrap();
    assert_eq!(distinct, 600 + online + offline, "{s:#}");
    assert_eq!(d["expected"].as_u64().unwrap(), distinct, "{s:#}");
    assert_eq!(
        d["events_received"].as_u64().unwrap(),
        distinct + d["duplicates"].as_u64().unwrap(),
        "{s:#}"
    );
    assert_eq!(d["foreign_events"], 0, "{s:#}");
    let requests = d["http_requests"].as_u64().unwrap();
    assert!(requests >= 1 && requests <= distinct, "{s:#}");
    assert!(d["server_cpu_us_per_event"].as_f64().is_some(), "{s:#}");
    assert!(
        d["last_action_to_last_event_ms"].as_f64().is_some(),
        "{s:#}"
    );
    assert!(d["connections_per_sec"].as_f64().is_some(), "{s:#}");
    check_files(
        out.path(),
        "hooks",
        "type,expected,received,duplicates,missing,unexpected",
    );
}

#[test]
fn hooks_matching_nothing_and_no_hooks_send_nothing() {
    for mode in ["--hooks-matching-nothing", "--no-hooks"] {
        let (s, _out) = bench(&[
            "hooks",
            "--clients",
            "20",
            "--rounds",
            "2",
            mode,
            "--no-baseline",
        ]);
        check_summary(&s, "hooks");
        let d = &s["details"];
        assert_eq!(d["connections"], 40, "{mode}: {s:#}");
        assert_eq!(d["failed_cycles"], 0, "{mode}: {s:#}");
        assert_eq!(d["events_received"], 0, "{mode}: {s:#}");
        assert_eq!(d["http_requests"], 0, "{mode}: {s:#}");
        assert_eq!(d["missing"], 0, "{mode}: {s:#}");
        for k in [
            "server_cpu_us_per_connection",
            "server_cpu_us_per_connection_all",
        ] {
            assert!(d[k].as_f64().is_some(), "{mode}: {k}: {s:#}");
        }
    }
}

#[test]
fn hooks_run_missing_events_exits_non_zero_after_its_report() {
    // The offline delay outlasts the wait: every user's last user.offline is still held.
    let output = Command::new(env!("CARGO_BIN_EXE_herald-bench"))
        .args([
            "hooks",
            "--clients",
            "10",
            "--rounds",
            "1",
            "--offline-delay-ms",
            "60000",
            "--wait",
            "3",
            "--batch-delay",
            "100ms",
            "--no-baseline",
            "--spawn",
            "--time-limit",
            "60",
        ])
        .arg("--server-bin")
        .arg(server_bin())
        .output()
        .expect("run herald-bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("user.offline"),
        "the report came first: {stdout}"
    );
    assert!(
        stderr.contains("expected events missing"),
        "stderr:\n{stderr}\nstdout:\n{stdout}"
    );
}
