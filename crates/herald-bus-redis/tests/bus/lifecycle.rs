//! Lifecycle events across nodes: each channel transition delivered once in the cluster, a
//! lost node's departures delivered by another node, a stopping node leaving nothing to claim.

use std::sync::Arc;
use std::time::Duration;

use herald_core::auth::Client;
use herald_core::engine::SubscribeRequest;
use herald_core::lifecycle::{DisconnectReason, LifecycleEvent, Recorded, Transport};
use herald_core::outbox::Outbox;
use herald_core::tenant::AppId;
use herald_core::ChannelName;
use herald_testkit::{Redis, RedisCluster};

use crate::harness::{Node, SharedLog, SharedTenancy};

/// A node with a listener.
async fn node(urls: &[String], log: &Arc<SharedLog>, tenancy: &Arc<SharedTenancy>) -> Listened {
    let node = Node::start(urls, log, tenancy).await;
    let recorded = Recorded::new();
    node.engine.lifecycle().join(recorded.clone());
    Listened { node, recorded }
}

struct Listened {
    node: Node,
    recorded: Arc<Recorded>,
}

impl Listened {
    /// Subscribes a bare outbox to `channel`; answers what unsubscribes it.
    async fn subscribe(&self, channel: &str) -> impl FnOnce() + '_ {
        let channel = ChannelName::parse(channel).unwrap();
        let engine = &self.node.engine;
        let outbox = Outbox::new(1024);
        let catchup = engine
            .subscribe(&channel, &outbox, &SubscribeRequest::default())
            .await
            .expect("subscribed");
        let sub = catchup.go_live(None);
        move || {
            engine.unsubscribe(&channel, &sub);
        }
    }

    /// Occupies and vacates `marker` here, and waits for both to be delivered: every change
    /// this node queued before has been through Redis by then (one ordered queue per node).
    async fn settle(&self, marker: &str) {
        let leave = self.subscribe(marker).await;
        leave();
        let vacated = format!("-{marker}");
        wait(&format!("{marker} through Redis"), || {
            self.recorded.summary().contains(&vacated)
        })
        .await;
    }

    /// This node's channel transitions, without the markers.
    fn transitions(&self) -> Vec<String> {
        self.recorded
            .summary()
            .into_iter()
            .filter(|s| (s.starts_with('+') || s.starts_with('-')) && !s.contains("marker"))
            .collect()
    }
}

/// Waits (with a generous deadline) for `check` to hold.
async fn wait(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn vacated_once_when_the_last_subscriber_anywhere_leaves(urls: &[String]) {
    let (log, tenancy) = (Arc::default(), Arc::default());
    let a = node(urls, &log, &tenancy).await;
    let b = node(urls, &log, &tenancy).await;
    let leave_a = a.subscribe("news").await;
    a.settle("marker-1").await;
    let leave_b = b.subscribe("news").await;
    b.settle("marker-2").await;
    leave_a();
    a.settle("marker-3").await;
    assert_eq!(a.transitions(), ["+news"], "A brought the first subscriber");
    assert!(
        b.transitions().is_empty(),
        "news stays occupied while B holds it"
    );
    leave_b();
    b.settle("marker-4").await;
    a.settle("marker-5").await;
    assert_eq!(a.transitions(), ["+news"]);
    assert_eq!(
        b.transitions(),
        ["-news"],
        "vacated once, by the last to leave"
    );
    // Subscriptions are each node's own, told at once.
    let subs = |l: &Listened| {
        let summary = l.recorded.summary();
        summary.iter().filter(|s| s.as_str() == "sub:news").count()
    };
    assert_eq!((subs(&a), subs(&b)), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_on_two_nodes_is_occupied_and_vacated_once() {
    let redis = Redis::start().expect("redis");
    tokio::time::timeout(
        Duration::from_secs(120),
        vacated_once_when_the_last_subscriber_anywhere_leaves(&[redis.url()]),
    )
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_on_two_nodes_is_vacated_once_over_a_redis_cluster() {
    let cluster = RedisCluster::start(3).expect("a Redis Cluster");
    tokio::time::timeout(
        Duration::from_secs(120),
        vacated_once_when_the_last_subscriber_anywhere_leaves(&cluster.urls()),
    )
    .await
    .expect("in time");
}

fn alice() -> Client {
    Client {
        app: AppId::parse("shop").unwrap(),
        sub: "alice".into(),
        ..Client::anonymous()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_connected_to_two_nodes_goes_offline_once_when_both_connections_are_gone() {
    let redis = Redis::start().expect("redis");
    let (log, tenancy) = (Arc::default(), Arc::default());
    tokio::time::timeout(Duration::from_secs(120), async {
        let a = node(&[redis.url()], &log, &tenancy).await;
        let b = node(&[redis.url()], &log, &tenancy).await;
        let (phone, laptop) = (Outbox::new(1024), Outbox::new(1024));
        let on_a = a
            .node
            .caches
            .live
            .register(&alice(), &phone, Transport::WebSocket);
        a.settle("marker-1").await;
        let on_b = b
            .node
            .caches
            .live
            .register(&alice(), &laptop, Transport::Sse);
        b.settle("marker-2").await;
        drop(on_a);
        a.settle("marker-3").await;
        let users = |l: &Listened| -> Vec<String> {
            let summary = l.recorded.summary();
            summary
                .into_iter()
                .filter(|s| s.starts_with("online") || s.starts_with("offline"))
                .collect()
        };
        assert_eq!(
            users(&a),
            ["online:alice"],
            "A brought alice's first connection"
        );
        assert!(users(&b).is_empty(), "alice is still online on B");
        drop(on_b);
        b.settle("marker-4").await;
        a.settle("marker-5").await;
        assert_eq!(users(&a), ["online:alice"]);
        assert_eq!(
            users(&b),
            ["offline:alice"],
            "offline once, with the last connection"
        );
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_nodes_connections_and_channels_are_reported_by_another_node() {
    let redis = Redis::start().expect("redis");
    let (log, tenancy) = (Arc::default(), Arc::default());
    tokio::time::timeout(Duration::from_secs(120), async {
        let a = node(&[redis.url()], &log, &tenancy).await;
        let b = node(&[redis.url()], &log, &tenancy).await;
        let outbox = Outbox::new(1024);
        // Held (never dropped) while A is lost, as a crashed node's connections are.
        let _registration = a
            .node
            .caches
            .live
            .register(&alice(), &outbox, Transport::Sse);
        let _only_on_a = a.subscribe("only-a").await;
        let _on_both = a.subscribe("both").await;
        let leave_b = b.subscribe("both").await;
        a.settle("marker-a").await;
        b.settle("marker-b").await;
        // A's tasks stop as a crashed node's would: no heartbeat, no goodbye.
        a.node.bus.halt();
        let recorded = a.recorded.clone();
        let lost = |e: &LifecycleEvent| {
            matches!(e, LifecycleEvent::Disconnected { connection, reason }
                if reason == &DisconnectReason::NodeLost
                    && connection.sub.as_deref() == Some("alice")
                    && connection.transport == Transport::Sse)
        };
        wait("B reports A's connection gone", || {
            b.recorded.events().iter().any(lost)
        })
        .await;
        wait("B reports the channel only A held vacated", || {
            b.transitions().contains(&"-only-a".to_string())
        })
        .await;
        wait("B reports alice, connected only to A, offline", || {
            b.recorded.summary().contains(&"offline:alice".to_string())
        })
        .await;
        assert!(recorded.events().iter().all(|e| !lost(e)));
        // `both` is still held by B: vacated only when B leaves it.
        assert!(!b.transitions().contains(&"-both".to_string()));
        leave_b();
        b.settle("marker-c").await;
        assert_eq!(
            b.transitions()
                .iter()
                .filter(|t| t.as_str() == "-both")
                .count(),
            1
        );
        let departures = b.recorded.events().into_iter().filter(lost).count();
        assert_eq!(departures, 1, "one node claimed A, once");
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_stops_leaves_nothing_to_claim() {
    let redis = Redis::start().expect("redis");
    let (log, tenancy) = (Arc::default(), Arc::default());
    tokio::time::timeout(Duration::from_secs(120), async {
        let a = node(&[redis.url()], &log, &tenancy).await;
        let b = node(&[redis.url()], &log, &tenancy).await;
        let outbox = Outbox::new(1024);
        let registration = a
            .node
            .caches
            .live
            .register(&alice(), &outbox, Transport::WebSocket);
        let leave = a.subscribe("news").await;
        a.settle("marker-a").await;
        b.settle("marker-b").await;
        leave();
        drop(registration);
        a.node.bus.shutdown().await;
        assert_eq!(
            a.transitions(),
            ["+news", "-news"],
            "its last changes written before it left"
        );
        // Nothing of A is left in Redis for a claim to find.
        let redis_client = fred::prelude::Builder::from_config(
            fred::prelude::Config::from_url(&redis.url()).unwrap(),
        )
        .build()
        .unwrap();
        fred::prelude::ClientLike::init(&redis_client)
            .await
            .unwrap();
        let nodes: Vec<String> = fred::prelude::LuaInterface::eval(
            &redis_client,
            "return redis.call('SMEMBERS', KEYS[1])",
            "herald:{lifecycle}:nodes",
            None::<String>,
        )
        .await
        .unwrap();
        let a_id = format!("{:016x}", a.node.bus.node_id());
        let b_id = format!("{:016x}", b.node.bus.node_id());
        assert_eq!(nodes, [b_id], "A left, B is still there");
        let a_connections: u64 = fred::prelude::KeysInterface::exists(
            &redis_client,
            format!("herald:{{lifecycle}}:conns:{a_id}"),
        )
        .await
        .unwrap();
        assert_eq!(a_connections, 0);
    })
    .await
    .expect("in time");
}
