//! Cluster runs: `--spawn-cluster 2` starts PostgreSQL, Redis and two nodes, spreads
//! subscribers and publishers over the nodes, delivers every message to every subscriber, names
//! each node (and PostgreSQL and Redis) in the report, and stops them all; `--target` with
//! several URLs checks its `--server-pid` list.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

/// Runs `herald-bench ARGS --out DIR` with a bound on the whole run: past it the bench gets
/// SIGTERM (it then stops everything it started) and the test fails.
async fn bench_bounded(args: &[&str], limit: Duration) -> (Value, String) {
    let out = tempfile::tempdir().unwrap();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald-bench"))
        .args(args)
        .arg("--server-bin")
        .arg(super::server_bin())
        .arg("--time-limit")
        .arg("90")
        .arg("--out")
        .arg(out.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run herald-bench");
    let pid = child.id().expect("running");
    let output = match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(output) => output.expect("herald-bench output"),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
            panic!("herald-bench {args:?} did not finish within {limit:?}");
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "herald-bench {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let text = std::fs::read_to_string(out.path().join("summary.json")).unwrap();
    (serde_json::from_str(&text).unwrap(), stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_over_a_two_node_cluster_delivers_everything_and_names_each_node() {
    let (s, stdout) = bench_bounded(
        &[
            "fanout",
            "--spawn-cluster",
            "2",
            "--publishers",
            "2",
            "--messages",
            "200",
            "--subscribers",
            "4",
            "--no-baseline",
        ],
        Duration::from_secs(180),
    )
    .await;
    assert_eq!(s["failed"], 0, "every delivery arrived: {s:#}");
    assert_eq!(s["details"]["published"], 200, "{s:#}");
    assert_eq!(s["details"]["delivered"], 800, "{s:#}");
    let target = s["target"].as_str().unwrap();
    assert_eq!(target.split(',').count(), 2, "both nodes' URLs: {s:#}");
    let cluster = &s["details"]["cluster"];
    assert_eq!(cluster["unit"], "delivery", "{s:#}");
    assert_eq!(cluster["units"], 800, "{s:#}");
    let names: Vec<&str> = cluster["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["process"].as_str().unwrap())
        .collect();
    for (i, url) in target.split(',').enumerate() {
        let name = format!("node {} ({url})", i + 1);
        assert!(names.contains(&name.as_str()), "{name} in {names:?}");
        assert!(stdout.contains(&name), "{name} in the printed report");
    }
    assert!(names.contains(&"postgresql"), "{names:?}");
    assert!(names.contains(&"redis"), "{names:?}");
    for p in cluster["processes"].as_array().unwrap() {
        assert!(p["cpu_seconds"].as_f64().unwrap() >= 0.0, "{p}");
    }
}

#[test]
fn several_targets_need_one_pid_each() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_herald-bench"))
        .args([
            "fanout",
            "--target",
            "http://127.0.0.1:1,http://127.0.0.1:2",
            "--server-pid",
            "1",
            "--no-baseline",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("--server-pid names 1 pids for 2"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_resumes_the_killed_nodes_clients_on_the_others_without_a_loss() {
    let (s, stdout) = bench_bounded(
        &[
            "failover",
            "--spawn-cluster",
            "3",
            "--clients-per-node",
            "20",
            "--channels",
            "2",
            "--no-baseline",
        ],
        Duration::from_secs(180),
    )
    .await;
    let d = &s["details"];
    let t = &d["accounting"];
    assert_eq!(s["failed"], 0, "no message lost: {s:#}");
    assert_eq!(d["clients"], 60, "{s:#}");
    assert_eq!(d["killed_node"], 3, "the last node by default: {s:#}");
    assert_eq!(d["killed_node_clients"], 20, "{s:#}");
    for (key, want) in [
        ("clients", 60),
        ("channels", 120),
        ("caught_up", 60),
        ("disconnected", 20),
        ("resumed", 20),
        ("with_pending", 20),
        // 3 messages pending on each of a resumed client's 2 channels.
        ("pending_at_resume", 120),
        ("lost", 0),
        ("duplicates", 0),
        ("out_of_order", 0),
        ("unexpected", 0),
        ("not_recovered", 0),
    ] {
        assert_eq!(t[key], want, "accounting.{key}: {s:#}");
    }
    // Every channel got its 2 + 3 messages, once each.
    assert_eq!(t["received"], 600, "{s:#}");
    // The killed node's clients went to the other two nodes, and to nothing else.
    let target: Vec<&str> = s["target"].as_str().unwrap().split(',').collect();
    let on: Vec<(String, u64)> = serde_json::from_value(t["resumed_on"].clone()).unwrap();
    assert_eq!(on.iter().map(|(_, n)| n).sum::<u64>(), 20, "{on:?}");
    for (node, _) in &on {
        let url = format!("http://{node}");
        assert!(url != target[2], "none resumed on the killed node: {on:?}");
        assert!(target[..2].contains(&url.as_str()), "{url} in {target:?}");
    }
    assert_eq!(on.len(), 2, "round-robin over both survivors: {on:?}");
    // Each killed client's reconnect-to-resumed time, summarised (never compared to a bound).
    assert!(s["latency_ms"]["max"].as_f64().is_some(), "{s:#}");
    for key in ["kill_to_all_resumed", "kill_to_all_caught_up"] {
        assert!(d["ms"][key].as_f64().is_some(), "ms.{key}: {s:#}");
    }
    // The CPU over the failover: the surviving nodes, PostgreSQL and Redis, not the dead one.
    let names: Vec<&str> = d["cpu_kill_to_caught_up"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["process"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"postgresql") && names.contains(&"redis"),
        "{names:?}"
    );
    assert_eq!(
        names.iter().filter(|n| n.starts_with("node ")).count(),
        2,
        "{names:?}"
    );
    assert!(stdout.contains("messages lost"), "{stdout}");
}

#[test]
fn failover_needs_a_cluster_and_the_pid_of_the_node_it_kills() {
    let run = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_herald-bench"))
            .arg("failover")
            .args(args)
            .args(["--no-baseline", "--api-key", "k", "--token-secret", "s"])
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} must be refused");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let stderr = run(&["--target", "http://127.0.0.1:1,http://127.0.0.1:2"]);
    assert!(
        stderr.contains("node 2 has no known pid to kill: give --server-pid"),
        "{stderr}"
    );
    let stderr = run(&["--target", "http://127.0.0.1:1"]);
    assert!(stderr.contains("at least two nodes"), "{stderr}");
    let stderr = run(&[
        "--target",
        "http://127.0.0.1:1,http://127.0.0.1:2",
        // Pids no process can have: nothing is signalled even if the check were missing.
        "--server-pid",
        "999999998,999999999",
        "--kill",
        "3",
    ]);
    assert!(
        stderr.contains("--kill 3: the nodes are numbered 1 to 2"),
        "{stderr}"
    );
}
