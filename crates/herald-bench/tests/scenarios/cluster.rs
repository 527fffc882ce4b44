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
