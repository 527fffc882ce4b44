//! Presence members across nodes: one member per user in the cluster, its member events once,
//! its join and leave frames on every node with watchers, the cluster's list, the member limit
//! across nodes, and a lost node's members removed by another node.

use std::sync::Arc;
use std::time::Duration;

use herald_core::lifecycle::Recorded;
use herald_core::outbox::{OutFrame, Outbox};
use herald_core::presence::{Membership, PresenceLimits};
use herald_core::ChannelName;
use herald_testkit::{Redis, RedisCluster};
use serde_json::Value;

use crate::harness::{receive, Node, SharedLog, SharedTenancy};
use herald_bus_redis::BusOptions;

struct Listened {
    node: Node,
    recorded: Arc<Recorded>,
    /// Its watcher's frames, as (event, users).
    watcher: Arc<Outbox>,
    frames: parking_lot::Mutex<Vec<(String, Vec<String>)>>,
}

async fn node(urls: &[String], log: &Arc<SharedLog>, tenancy: &Arc<SharedTenancy>) -> Listened {
    let node = Node::start(urls, log, tenancy).await;
    let recorded = Recorded::new();
    node.engine.lifecycle().join(recorded.clone());
    Listened {
        node,
        recorded,
        watcher: Outbox::new(1 << 20),
        frames: Default::default(),
    }
}

fn room() -> ChannelName {
    ChannelName::parse("rooms/1").unwrap()
}

fn limits(max_members: u32) -> PresenceLimits {
    PresenceLimits {
        max_members,
        ..PresenceLimits::default()
    }
}

impl Listened {
    async fn join(&self, user: &str, max: u32) -> Result<Membership, herald_core::HeraldError> {
        let data = Arc::from(format!("{{\"name\":\"{user}\"}}").as_str());
        self.node
            .engine
            .presence()
            .join(&room(), &limits(max), user, data)?
            .admitted()
            .await
    }

    /// Takes the watcher's new frames into `frames`; answers them all.
    fn frames(&self) -> Vec<(String, Vec<String>)> {
        let mut frames = self.frames.lock();
        for frame in self.watcher.take().0 {
            let OutFrame::Presence(bytes) = frame else {
                continue;
            };
            let value: Value = serde_json::from_slice(&bytes).unwrap();
            let p = &value["presence"];
            let users = match p["members"].as_array() {
                Some(members) => members
                    .iter()
                    .map(|m| m["user"].as_str().unwrap().to_string())
                    .collect(),
                None => vec![p["user"].as_str().unwrap().to_string()],
            };
            frames.push((p["event"].as_str().unwrap().to_string(), users));
        }
        frames.clone()
    }

    fn members_events(&self) -> Vec<String> {
        let summary = self.recorded.summary();
        summary
            .into_iter()
            .filter(|s| s.starts_with("member"))
            .collect()
    }

    async fn listed(&self) -> Vec<String> {
        let listed = self.node.engine.presence().listed(&room()).await;
        listed.iter().map(|m| m.user.to_string()).collect()
    }
}

fn frame(event: &str, users: &[&str]) -> (String, Vec<String>) {
    (
        event.to_string(),
        users.iter().map(|u| u.to_string()).collect(),
    )
}

/// Waits (bounded) for `check` to hold.
async fn wait(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Both nodes follow the room (a message each way went through Redis), so each hears the
/// changes the other's scripts publish on it.
async fn follow_both(a: &Listened, b: &Listened) -> (Arc<Outbox>, Arc<Outbox>) {
    let on_a = a.node.subscribe("rooms/1").await;
    let on_b = b.node.subscribe("rooms/1").await;
    a.node.publish("rooms/1", 1).await;
    receive(&on_b, 1).await;
    b.node.publish("rooms/1", 2).await;
    receive(&on_a, 1).await;
    (on_a, on_b)
}

async fn one_member_per_user_across_nodes(urls: &[String]) {
    let (log, tenancy) = (Arc::default(), Arc::default());
    let a = node(urls, &log, &tenancy).await;
    let b = node(urls, &log, &tenancy).await;
    let _following = follow_both(&a, &b).await;
    // A watcher on each node (members themselves, as every presence subscriber is).
    let mut wa = a.join("wa", 4).await.expect("wa on A");
    wa.watch(&a.watcher).await;
    assert_eq!(a.frames(), [frame("members", &["wa"])]);
    let mut wb = b.join("wb", 4).await.expect("wb on B");
    wb.watch(&b.watcher).await;
    assert_eq!(
        b.frames(),
        [frame("members", &["wa", "wb"])],
        "A's member too"
    );
    let alice_a = a.join("alice", 4).await.expect("alice on A");
    let alice_b = b.join("alice", 4).await.expect("alice on B too");
    let bob = b.join("bob", 4).await.expect("bob on B");
    for (name, node) in [("A", &a), ("B", &b)] {
        wait(
            &format!("{name}'s watcher hears alice and bob join"),
            || {
                let frames = node.frames();
                frames.contains(&frame("join", &["alice"]))
                    && frames.contains(&frame("join", &["bob"]))
            },
        )
        .await;
    }
    // The limit holds across nodes: A holds two members, the cluster four.
    let refused = a.join("carol", 4).await.expect_err("the room is full");
    assert_eq!(refused.code, herald_core::ErrorCode::LimitExceeded);
    assert!(
        refused.message.contains("presence_max_members"),
        "{refused}"
    );
    let all = ["wa", "wb", "alice", "bob"];
    assert_eq!(a.listed().await, all, "the cluster's list on A");
    assert_eq!(b.listed().await, all, "the cluster's list on B");
    // alice leaves A only: still a member.
    drop(alice_a);
    drop(bob);
    wait("bob's leave on A", || {
        a.frames().contains(&frame("leave", &["bob"]))
    })
    .await;
    assert_eq!(b.listed().await, ["wa", "wb", "alice"]);
    drop(alice_b);
    for (name, node) in [("A", &a), ("B", &b)] {
        wait(&format!("alice's leave on {name}"), || {
            node.frames().contains(&frame("leave", &["alice"]))
        })
        .await;
    }
    assert_eq!(a.listed().await, ["wa", "wb"]);
    // Each member event once in the cluster, on the node whose change made it.
    let alice_bob = |node: &Listened| -> Vec<String> {
        let events = node.members_events();
        events
            .into_iter()
            .filter(|e| e.ends_with(":alice") || e.ends_with(":bob"))
            .collect()
    };
    assert_eq!(
        alice_bob(&a),
        ["member+rooms/1:alice"],
        "alice came to A first"
    );
    assert_eq!(
        alice_bob(&b),
        [
            "member+rooms/1:bob",
            "member-rooms/1:bob",
            "member-rooms/1:alice"
        ],
        "B held bob, and alice last"
    );
    // Each node's watcher: the list, then each change once, in order.
    let changes = [
        frame("join", &["alice"]),
        frame("join", &["bob"]),
        frame("leave", &["bob"]),
        frame("leave", &["alice"]),
    ];
    assert_eq!(
        a.frames()[1..],
        [frame("join", &["wb"])]
            .iter()
            .chain(&changes)
            .cloned()
            .collect::<Vec<_>>()[..]
    );
    assert_eq!(b.frames()[1..], changes);
    drop((wa, wb));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_on_two_nodes_is_one_member_of_the_cluster() {
    let redis = Redis::start().expect("redis");
    tokio::time::timeout(
        Duration::from_secs(120),
        one_member_per_user_across_nodes(&[redis.url()]),
    )
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_on_two_nodes_is_one_member_over_a_redis_cluster() {
    let cluster = RedisCluster::start(3).expect("a Redis Cluster");
    tokio::time::timeout(
        Duration::from_secs(120),
        one_member_per_user_across_nodes(&cluster.urls()),
    )
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_nodes_members_are_removed_by_another_node() {
    let redis = Redis::start().expect("redis");
    let (log, tenancy) = (Arc::default(), Arc::default());
    tokio::time::timeout(Duration::from_secs(120), async {
        let urls = [redis.url()];
        let a = node(&urls, &log, &tenancy).await;
        let b = node(&urls, &log, &tenancy).await;
        let _following = follow_both(&a, &b).await;
        // Held (never dropped) while A is lost, as a crashed node's subscriptions are.
        let _dave = a.join("dave", 10).await.expect("dave on A");
        let _erin_a = a.join("erin", 10).await.expect("erin on A");
        let _erin_b = b.join("erin", 10).await.expect("erin on B");
        let mut watch = b.join("watcher", 10).await.expect("B's watcher");
        watch.watch(&b.watcher).await;
        assert_eq!(b.frames(), [frame("members", &["dave", "erin", "watcher"])]);
        a.node.bus.halt();
        wait("B removes dave, held only by A", || {
            b.members_events()
                .contains(&"member-rooms/1:dave".to_string())
        })
        .await;
        wait("B's watcher hears dave leave", || {
            b.frames().contains(&frame("leave", &["dave"]))
        })
        .await;
        assert_eq!(b.listed().await, ["erin", "watcher"], "erin is still on B");
        assert!(!b.frames().contains(&frame("leave", &["erin"])));
        let removed = b
            .members_events()
            .iter()
            .filter(|e| e.starts_with("member-"))
            .count();
        assert_eq!(removed, 1, "dave, once");
        assert!(a.members_events().iter().all(|e| e.starts_with("member+")));
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_serving_presence_claims_a_lost_nodes_members_without_holding_any() {
    let redis = Redis::start().expect("redis");
    let (log, tenancy) = (Arc::default(), Arc::default());
    tokio::time::timeout(Duration::from_secs(120), async {
        let urls = [redis.url()];
        let a = node(&urls, &log, &tenancy).await;
        let options = BusOptions {
            presence_members: true,
            ..BusOptions::default()
        };
        let c = Node::start_with(&urls, &log, &tenancy, options).await;
        let on_c = Recorded::new();
        c.engine.lifecycle().join(on_c.clone());
        let _dave = a.join("dave", 10).await.expect("dave on A");
        a.node.bus.halt();
        wait("C removes dave", || {
            on_c.summary().contains(&"member-rooms/1:dave".to_string())
        })
        .await;
        let listed = c.engine.presence().listed(&room()).await;
        assert!(listed.is_empty(), "{listed:?}");
    })
    .await
    .expect("in time");
}
