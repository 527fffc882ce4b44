//! `--transport pusher`: subscribers speaking the Pusher protocol to a spawned Herald, which the
//! bench gives Pusher credentials (`POST /v1/apps/default/pusher`) before the run; publishes
//! through Herald's HTTP API reach them as the event `message`. Behaviour only, never timing.

use std::process::Command;

use super::{bench, check_files, check_summary};

#[test]
fn pusher_subscribers_of_a_spawned_herald() {
    let (s, out) = bench(&[
        "fanout",
        "--transport",
        "pusher",
        "--publishers",
        "2",
        "--messages",
        "60",
        "--subscribers",
        "40",
        "--no-baseline",
    ]);
    check_summary(&s, "fanout");
    assert_eq!(s["transport"], "pusher", "{s:#}");
    assert_eq!(s["details"]["delivered"], 2400, "60 messages x 40: {s:#}");
    check_files(
        out.path(),
        "fanout",
        "second,published,delivered,p50_ms,p99_ms,max_ms",
    );
    let (s, _) = bench(&[
        "connections",
        "--transport",
        "pusher",
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
}

#[test]
fn pusher_transport_refuses_scenarios_it_cannot_run() {
    let o = Command::new(env!("CARGO_BIN_EXE_herald-bench"))
        .args(["reconnect-storm", "--spawn", "--transport", "pusher"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("does not run over --transport pusher"), "{e}");
}
