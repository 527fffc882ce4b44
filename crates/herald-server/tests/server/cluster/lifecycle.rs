//! Lifecycle events in a cluster, with real clients: a channel subscribed on two nodes is
//! vacated once, by the node whose client left last; a node killed with SIGKILL has its
//! connections' departures and its channels' vacancies reported by the node that survives.
//! The killed node is this test program run again as a child process
//! ([`lifecycle_child_node`]), since a node in this process cannot be killed alone.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use herald_core::lifecycle::{DisconnectReason, LifecycleEvent, Recorded, Transport};
use herald_server::{RunningServer, Server, ServerSettings};
use serde_json::json;
use tempfile::TempDir;

use super::{bounded, Cluster, Ws, ADMIN, CREDENTIALS_KEY};
use crate::support::token;

/// Set in the child's environment: the database and Redis the child node joins.
const CHILD_POSTGRES: &str = "HERALD_LIFECYCLE_CHILD_POSTGRES";
const CHILD_REDIS: &str = "HERALD_LIFECYCLE_CHILD_REDIS";
/// The line the child prints once it serves.
const CHILD_ADDR: &str = "HERALD_LIFECYCLE_CHILD_ADDR=";

/// A node of `cluster` with a listener recording its lifecycle events.
async fn listened_node(settings: ServerSettings) -> (RunningServer, Arc<Recorded>) {
    let recorded = Recorded::new();
    let server = bounded(
        "a node starts",
        Server::builder(settings)
            .lifecycle_listener(recorded.clone())
            .start(),
    )
    .await
    .expect("a node starts");
    (server, recorded)
}

/// Waits (with a generous deadline) until `check` holds.
async fn wait(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many times `recorded` says `line`.
fn count(recorded: &Recorded, line: &str) -> usize {
    recorded.summary().iter().filter(|s| *s == line).count()
}

/// Occupies and vacates `marker` on the node at `base` and waits for its listener to hear of
/// both: every change that node queued before has been through Redis by then.
async fn settle(base: &str, recorded: &Recorded, marker: &str) {
    let mut ws = Ws::connect(base, &token(&[marker])).await;
    ws.subscribe(marker, None).await;
    let reply = ws
        .request("unsubscribe", json!({ "channel": marker }))
        .await;
    assert!(reply.get("error").is_none(), "{reply}");
    let vacated = format!("-{marker}");
    wait(&format!("{marker} through Redis"), || {
        recorded.summary().contains(&vacated)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_subscribed_on_two_nodes_is_vacated_once_by_the_last_to_leave() {
    let cluster = Cluster::start(0).await;
    let dirs = [TempDir::new().unwrap(), TempDir::new().unwrap()];
    let (a, on_a) = listened_node(cluster.settings(dirs[0].path())).await;
    let (b, on_b) = listened_node(cluster.settings(dirs[1].path())).await;
    let (base_a, base_b) = (
        format!("http://{}", a.http_addr()),
        format!("http://{}", b.http_addr()),
    );
    let mut first = Ws::connect(&base_a, &token(&["news"])).await;
    first.subscribe("news", None).await;
    // Through Redis before B's subscriber comes: the first to reach Redis occupies.
    settle(&base_a, &on_a, "marker-a1").await;
    let mut second = Ws::connect(&base_b, &token(&["news"])).await;
    second.subscribe("news", None).await;
    settle(&base_b, &on_b, "marker-b1").await;
    assert_eq!((count(&on_a, "+news"), count(&on_b, "+news")), (1, 0));
    drop(first);
    wait("A hears its client leave", || {
        count(&on_a, "disconnect:tester:closed") >= 2
    })
    .await;
    settle(&base_a, &on_a, "marker-a2").await;
    assert_eq!(count(&on_a, "-news"), 0, "B still holds news");
    drop(second);
    wait("news vacated", || count(&on_b, "-news") == 1).await;
    settle(&base_a, &on_a, "marker-a3").await;
    settle(&base_b, &on_b, "marker-b3").await;
    assert_eq!(
        (count(&on_a, "-news"), count(&on_b, "-news")),
        (0, 1),
        "vacated once in the cluster, by the node whose client left last"
    );
    let connected = on_a.events().into_iter().find_map(|e| match e {
        LifecycleEvent::Connected { connection } => Some(connection),
        _ => None,
    });
    let connected = connected.expect("a connection");
    assert_eq!(connected.sub.as_deref(), Some("tester"));
    assert_eq!(connected.transport, Transport::WebSocket);
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_has_its_departures_reported_by_the_node_that_survives() {
    let mut cluster = Cluster::start(0).await;
    let dir = TempDir::new().unwrap();
    let settings = cluster.settings(dir.path());
    let redis_url = settings.cluster.redis[0].clone();
    let (survivor, recorded) = listened_node(settings).await;
    let survivor_base = format!("http://{}", survivor.http_addr());

    // The node to kill: this program again, running `lifecycle_child_node`.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "cluster::lifecycle::lifecycle_child_node",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_POSTGRES, &cluster.database)
        .env(CHILD_REDIS, &redis_url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the child node starts");
    let stdout = child.stdout.take().unwrap();
    let addr = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            // The test harness may have written the test's name on the same line.
            .find_map(|line| line.split_once(CHILD_ADDR).map(|(_, addr)| addr.to_owned()))
    });
    let addr = bounded("the child node serves", addr)
        .await
        .unwrap()
        .expect("the child says where it serves");
    let doomed_base = format!("http://{addr}");

    let mut on_doomed = Ws::connect(&doomed_base, &token(&["doomed", "shared"])).await;
    on_doomed.subscribe("doomed", None).await;
    on_doomed.subscribe("shared", None).await;
    let mut on_survivor = Ws::connect(&survivor_base, &token(&["shared"])).await;
    on_survivor.subscribe("shared", None).await;
    settle(&survivor_base, &recorded, "marker-1").await;
    // The child's connection and channels are in Redis (its changes go in order: the
    // connection before its subscriptions).
    let redis = cluster.redis();
    wait("the child's channels in Redis", || {
        let held = |channel: &str| {
            redis
                .cli(&["SCARD", &format!("herald:{{lifecycle}}:chan:{channel}")])
                .map(|out| out.trim().to_string())
        };
        held("doomed").is_ok_and(|n| n == "1") && held("shared").is_ok_and(|n| n == "2")
    })
    .await;

    child.kill().expect("SIGKILL"); // by its PID, nothing else
    let _ = child.wait();

    let lost = |e: &LifecycleEvent| {
        matches!(e, LifecycleEvent::Disconnected { connection, reason }
            if *reason == DisconnectReason::NodeLost
                && connection.sub.as_deref() == Some("tester")
                && connection.transport == Transport::WebSocket)
    };
    wait(
        "the survivor reports the killed node's connection gone",
        || recorded.events().iter().any(lost),
    )
    .await;
    wait(
        "the survivor reports the killed node's channel vacated",
        || count(&recorded, "-doomed") == 1,
    )
    .await;
    settle(&survivor_base, &recorded, "marker-2").await;
    assert_eq!(recorded.events().iter().filter(|e| lost(e)).count(), 1);
    assert_eq!(
        count(&recorded, "-shared"),
        0,
        "the survivor still holds it"
    );
    drop(on_survivor);
    wait("shared vacated by its last subscriber", || {
        count(&recorded, "-shared") == 1
    })
    .await;
    drop(on_doomed);
    survivor.shutdown().await.unwrap();
    cluster.shutdown().await;
}

/// The node `a_node_killed_has_its_departures_reported_by_the_node_that_survives` kills: runs
/// only in the child process that test starts (else it returns at once). Serves with a
/// listener (so the node records its connections), says where, and runs until killed or
/// until its parent goes away (its stdin closes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_child_node() {
    let (Ok(postgres), Ok(redis)) = (std::env::var(CHILD_POSTGRES), std::env::var(CHILD_REDIS))
    else {
        return;
    };
    let dir = TempDir::new().unwrap();
    let mut settings = crate::support::settings(dir.path());
    settings.admin_key = Some(ADMIN.into());
    settings.providers.credentials_key = Some(CREDENTIALS_KEY.into());
    settings.cluster.postgres = Some(postgres);
    settings.cluster.redis = vec![redis];
    let (server, _recorded) = listened_node(settings).await;
    println!("{CHILD_ADDR}{}", server.http_addr());
    let parent_gone = tokio::task::spawn_blocking(|| {
        let mut sink = String::new();
        while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {}
    });
    let _ = parent_gone.await;
    std::process::exit(0);
}
