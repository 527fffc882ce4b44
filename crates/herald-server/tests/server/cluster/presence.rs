//! Presence channels in a cluster, with real WebSocket clients: a user connected to two nodes
//! is one member (added once, removed once when both connections are gone), every node's
//! presence subscribers get the joins and leaves of members on any node, `GET
//! /v1/channels/{name}/presence` lists the members of every node on each, the member limit
//! holds across nodes, and a node killed with SIGKILL has its members removed by the node that
//! survives. The killed node is this test program run again as a child process
//! ([`presence_child_node`]).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_client::proto::token::{mint, ClientClaims};
use herald_client::ws::WsClient;
use herald_core::lifecycle::Recorded;
use herald_server::vocabulary::{NamespaceOptions, Namespaces, PresenceLimits};
use herald_server::{RunningServer, Server, ServerSettings};
use serde_json::{json, Value};
use tempfile::TempDir;

use super::{bounded, call, Cluster, ADMIN, CREDENTIALS_KEY};
use crate::support::{API_KEY, SECRET};

/// Set in the child's environment: the database and Redis the child node joins.
const CHILD_POSTGRES: &str = "HERALD_PRESENCE_CHILD_POSTGRES";
const CHILD_REDIS: &str = "HERALD_PRESENCE_CHILD_REDIS";
/// The line the child prints once it serves.
const CHILD_ADDR: &str = "HERALD_PRESENCE_CHILD_ADDR=";

/// `rooms/` channels are presence channels of at most four members.
fn with_rooms(settings: &mut ServerSettings) {
    let rooms = NamespaceOptions {
        presence: Some(PresenceLimits {
            max_members: 4,
            ..PresenceLimits::default()
        }),
        ..NamespaceOptions::default()
    };
    settings.namespaces =
        Namespaces::new(NamespaceOptions::default(), vec![("rooms/".into(), rooms)]);
}

/// A node with presence rooms and a listener recording its lifecycle events.
async fn listened_node(mut settings: ServerSettings) -> (RunningServer, Arc<Recorded>) {
    with_rooms(&mut settings);
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

/// A WebSocket client of user `sub`, handing the tests its presence frames as (event, users).
struct Member {
    client: WsClient,
    next_id: u64,
}

impl Member {
    async fn connect(base: &str, sub: &str) -> Member {
        let token = mint(
            SECRET.as_bytes(),
            &ClientClaims {
                sub: sub.into(),
                channels: vec!["rooms/*".into()],
                ..Default::default()
            },
        );
        let client = bounded("ws connect", WsClient::connect(base, Some(&token)))
            .await
            .expect("ws connect");
        Member { client, next_id: 1 }
    }

    /// The next frame as JSON; panics after 20 s, or saying the close code if the connection
    /// closed.
    async fn frame(&mut self) -> Value {
        let next = tokio::time::timeout(Duration::from_secs(20), self.client.next_frame())
            .await
            .expect("timed out waiting for a frame");
        match next {
            Ok(Some(frame)) => serde_json::from_str(frame.text()).unwrap(),
            other => panic!(
                "the connection closed ({:?}): {:?}",
                self.client.closed(),
                other.err()
            ),
        }
    }

    /// Subscribes to `rooms/1` (asking for presence frames if `watch`); answers the reply.
    async fn subscribe(&mut self, watch: bool) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({"id": id, "subscribe": {"channel": "rooms/1", "presence": watch}});
        self.client.send_text(body.to_string()).await.expect("sent");
        loop {
            let frame = self.frame().await;
            if frame["id"] == id {
                return frame;
            }
        }
    }

    /// The next presence frame, as (event, users).
    async fn presence(&mut self) -> (String, Vec<String>) {
        loop {
            let frame = self.frame().await;
            let Some(p) = frame.get("presence") else {
                continue;
            };
            let users = match p["members"].as_array() {
                Some(members) => members
                    .iter()
                    .map(|m| m["user"].as_str().unwrap().to_string())
                    .collect(),
                None => vec![p["user"].as_str().unwrap().to_string()],
            };
            return (p["event"].as_str().unwrap().to_string(), users);
        }
    }
}

fn frame(event: &str, users: &[&str]) -> (String, Vec<String>) {
    (
        event.to_string(),
        users.iter().map(|u| u.to_string()).collect(),
    )
}

/// The users `GET /v1/channels/rooms/1/presence` lists on the node at `base`.
async fn listed(base: &str) -> Vec<String> {
    let (status, body) = call(base, "GET", "/v1/channels/rooms/1/presence", API_KEY, None).await;
    assert_eq!(status, 200, "{body}");
    let members = body["members"].as_array().expect("members");
    assert_eq!(body["count"], members.len());
    members
        .iter()
        .map(|m| m["user"].as_str().unwrap().to_string())
        .collect()
}

/// How many times `recorded` says `line`.
fn count(recorded: &Recorded, line: &str) -> usize {
    recorded.summary().iter().filter(|s| *s == line).count()
}

/// Waits (with a generous deadline) until `check` holds.
async fn wait(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_on_two_nodes_is_one_member_and_every_node_sees_the_cluster() {
    let cluster = Cluster::start(0).await;
    let dirs = [TempDir::new().unwrap(), TempDir::new().unwrap()];
    let (a, on_a) = listened_node(cluster.settings(dirs[0].path())).await;
    let (b, on_b) = listened_node(cluster.settings(dirs[1].path())).await;
    let (base_a, base_b) = (
        format!("http://{}", a.http_addr()),
        format!("http://{}", b.http_addr()),
    );
    // A presence subscriber on each node.
    let mut wa = Member::connect(&base_a, "wa").await;
    wa.subscribe(true).await;
    assert_eq!(wa.presence().await, frame("members", &["wa"]));
    let mut wb = Member::connect(&base_b, "wb").await;
    wb.subscribe(true).await;
    assert_eq!(
        wb.presence().await,
        frame("members", &["wa", "wb"]),
        "A's member listed on B"
    );
    assert_eq!(wa.presence().await, frame("join", &["wb"]), "B's join on A");
    // alice on both nodes: one member, one join on each node.
    let mut alice_a = Member::connect(&base_a, "alice").await;
    alice_a.subscribe(false).await;
    let mut alice_b = Member::connect(&base_b, "alice").await;
    alice_b.subscribe(false).await;
    assert_eq!(wa.presence().await, frame("join", &["alice"]));
    assert_eq!(wb.presence().await, frame("join", &["alice"]));
    let all = ["wa", "wb", "alice"];
    assert_eq!(listed(&base_a).await, all, "the cluster's members on A");
    assert_eq!(listed(&base_b).await, all, "the cluster's members on B");
    // The limit (four) holds across nodes: bob is the fourth, carol is refused.
    let mut bob = Member::connect(&base_b, "bob").await;
    bob.subscribe(false).await;
    assert_eq!(wa.presence().await, frame("join", &["bob"]));
    assert_eq!(wb.presence().await, frame("join", &["bob"]));
    let mut carol = Member::connect(&base_a, "carol").await;
    let refused = carol.subscribe(false).await;
    assert_eq!(refused["error"]["code"], "limit_exceeded", "{refused}");
    drop(bob);
    assert_eq!(wa.presence().await, frame("leave", &["bob"]));
    assert_eq!(wb.presence().await, frame("leave", &["bob"]));
    // alice leaves A: still a member through B; then B: gone, one leave on each node.
    alice_a.client.close().await;
    alice_b.client.close().await;
    assert_eq!(wa.presence().await, frame("leave", &["alice"]));
    assert_eq!(wb.presence().await, frame("leave", &["alice"]));
    assert_eq!(listed(&base_a).await, ["wa", "wb"]);
    // Each member event once in the cluster (its node's listeners heard it as its script
    // answered, before the leave frames went out).
    wait("alice's removal told", || {
        count(&on_a, "member-rooms/1:alice") + count(&on_b, "member-rooms/1:alice") == 1
    })
    .await;
    let events = |line: &str| count(&on_a, line) + count(&on_b, line);
    assert_eq!(events("member+rooms/1:alice"), 1, "added once");
    assert_eq!(events("member-rooms/1:alice"), 1, "removed once");
    assert_eq!(events("member+rooms/1:bob"), 1);
    assert_eq!(events("member-rooms/1:bob"), 1);
    assert_eq!(events("member+rooms/1:carol"), 0, "refused, never a member");
    assert_eq!(
        count(&on_a, "member+rooms/1:alice"),
        1,
        "on A, where alice came first"
    );
    drop((wa, wb, carol));
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_nodes_members_are_removed_by_the_node_that_survives() {
    let cluster = Cluster::start(0).await;
    let dir = TempDir::new().unwrap();
    let settings = cluster.settings(dir.path());
    let redis_url = settings.cluster.redis[0].clone();
    let (survivor, recorded) = listened_node(settings).await;
    let survivor_base = format!("http://{}", survivor.http_addr());

    // The node to kill: this program again, running `presence_child_node`.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "cluster::presence::presence_child_node",
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
            .find_map(|line| line.split_once(CHILD_ADDR).map(|(_, addr)| addr.to_owned()))
    });
    let addr = bounded("the child node serves", addr)
        .await
        .unwrap()
        .expect("the child says where it serves");
    let doomed_base = format!("http://{addr}");

    let mut watcher = Member::connect(&survivor_base, "watcher").await;
    watcher.subscribe(true).await;
    assert_eq!(watcher.presence().await, frame("members", &["watcher"]));
    // dave only on the doomed node, erin on both.
    let mut dave = Member::connect(&doomed_base, "dave").await;
    dave.subscribe(false).await;
    let mut erin_doomed = Member::connect(&doomed_base, "erin").await;
    erin_doomed.subscribe(false).await;
    let mut erin = Member::connect(&survivor_base, "erin").await;
    erin.subscribe(false).await;
    assert_eq!(watcher.presence().await, frame("join", &["dave"]));
    assert_eq!(watcher.presence().await, frame("join", &["erin"]));
    assert_eq!(listed(&survivor_base).await, ["watcher", "dave", "erin"]);

    child.kill().expect("SIGKILL"); // by its PID, nothing else
    let _ = child.wait();
    let killed = Instant::now();

    assert_eq!(
        watcher.presence().await,
        frame("leave", &["dave"]),
        "dave, held only by the killed node, leaves; erin stays"
    );
    eprintln!(
        "the killed node's member left {:?} after the kill",
        killed.elapsed()
    );
    wait("the survivor tells dave's removal", || {
        count(&recorded, "member-rooms/1:dave") == 1
    })
    .await;
    assert_eq!(listed(&survivor_base).await, ["watcher", "erin"]);
    assert_eq!(
        count(&recorded, "member-rooms/1:erin"),
        0,
        "erin is still here"
    );
    // erin's last connection goes: now she leaves.
    erin.client.close().await;
    assert_eq!(watcher.presence().await, frame("leave", &["erin"]));
    assert_eq!(count(&recorded, "member-rooms/1:dave"), 1, "once");
    drop((watcher, dave, erin_doomed));
    survivor.shutdown().await.unwrap();
    cluster.shutdown().await;
}

/// The node `a_killed_nodes_members_are_removed_by_the_node_that_survives` kills: runs only in
/// the child process that test starts (else it returns at once). Serves presence rooms, says
/// where, and runs until killed or until its parent goes away (its stdin closes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_child_node() {
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
