//! `subscription_count` on one node, to real receivers: several subscribes within one interval
//! are one event with the final count; a subscribe and unsubscribe within an interval that leave
//! the count where the last event left it are told nothing; each channel has its own interval; an endpoint of `["*"]` is never sent it (opt-in).
//! Absences are shown by order: each endpoint's events arrive in the order they happened, so an
//! event queued before one the receiver already has would have come first. In a cluster of two
//! nodes: the cluster's count, at most one told per interval, and a count back where the last
//! event (told by either node) left it not told again.

use std::time::Duration;

use serde_json::{json, Value};

use super::{summary, token, Lang, Receiver, CONFIG};
use crate::support::cluster::StoreAndBus;
use crate::support::{Server, Ws};

const WAIT: Duration = Duration::from_secs(60);

/// Longer than the few subscribes below take on a loaded machine, short for the test.
const INTERVAL: &str = "3s";

async fn node() -> Server {
    Server::builder()
        .config(&format!(
            "{CONFIG}subscription_count_interval = \"{INTERVAL}\"\n"
        ))
        .arg("--outbound-allow")
        .arg("127.0.0.0/8")
        .start()
        .await
}

/// Registers an endpoint of the default app for `receiver`, asking for `events`.
async fn register(server: &Server, receiver: &Receiver, events: &[&str]) {
    let (status, created) = server
        .post(
            "/v1/apps/default/hooks",
            json!({ "url": receiver.url(), "events": events }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    receiver.set_secret(created["secret"].as_str().expect("the secret"));
    let events_shown: Vec<&str> = created["hook"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        events_shown.contains(&"subscription_count"),
        events.contains(&"subscription_count"),
        "{created}"
    );
}

async fn subscribe(ws: &mut Ws, channel: &str) {
    let reply = ws.request("subscribe", json!({ "channel": channel })).await;
    assert!(reply.get("subscribe").is_some(), "{reply}");
}

/// The `subscription_count` events received: (channel, count).
fn counts(events: &[Value]) -> Vec<(String, u64)> {
    events
        .iter()
        .filter(|e| e["type"] == "subscription_count")
        .map(|e| {
            let data = e["data"].as_object().expect("data");
            assert_eq!(data.len(), 2, "{e}");
            (
                data["channel"].as_str().unwrap().to_owned(),
                data["subscription_count"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribes_within_an_interval_are_one_event_with_the_final_count() {
    let named = Receiver::start(Lang::Python);
    let star = Receiver::start(Lang::Node);
    let s = node().await;
    register(&s, &named, &["subscription_count"]).await;
    register(&s, &star, &["*"]).await;

    let url = s.ws_url(&format!("?token={}", token("alice")));
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(Ws::connect(&url).await);
    }
    // Three subscribes at once (well within the interval): one event, with 3.
    for ws in &mut clients[..3] {
        subscribe(ws, "rooms/1").await;
    }
    let events = named
        .wait_for("the count of rooms/1", WAIT, |e| !counts(e).is_empty())
        .await;
    assert_eq!(
        counts(&events),
        [("rooms/1".to_owned(), 3)],
        "{}",
        summary(&events).join("\n")
    );

    // In and out again: the count is back at 3 when that interval ends, nothing is told. The
    // same client then subscribes to rooms/2: its interval ends after rooms/1's, so its count
    // comes after anything rooms/1's interval told.
    subscribe(&mut clients[3], "rooms/1").await;
    let reply = clients[3]
        .request("unsubscribe", json!({ "channel": "rooms/1" }))
        .await;
    assert!(reply.get("unsubscribe").is_some(), "{reply}");
    subscribe(&mut clients[3], "rooms/2").await;
    let events = named
        .wait_for("the count of rooms/2", WAIT, |e| {
            counts(e).iter().any(|(c, _)| c == "rooms/2")
        })
        .await;
    let r = |c: &str, n: u64| (c.to_owned(), n);
    assert_eq!(
        counts(&events),
        [r("rooms/1", 3), r("rooms/2", 1)],
        "{}",
        summary(&events).join("\n")
    );
    // In for good: 4.
    subscribe(&mut clients[3], "rooms/1").await;
    let events = named
        .wait_for("the count of rooms/1 at 4", WAIT, |e| counts(e).len() == 3)
        .await;
    assert_eq!(
        counts(&events),
        [r("rooms/1", 3), r("rooms/2", 1), r("rooms/1", 4)],
        "{}",
        summary(&events).join("\n")
    );
    assert!(
        events.iter().all(|e| e["type"] == "subscription_count"),
        "only what it named"
    );
    named.assert_every_request_verified();

    // The "*" endpoint: a connection made after the count of 4 was queued arrives after where
    // that count would be, and no count came before it.
    let late = Ws::connect(&s.ws_url(&format!("?token={}", token("bob")))).await;
    let events = star
        .wait_for("bob's connection", WAIT, |e| {
            e.iter()
                .any(|e| e["type"] == "client.connected" && e["data"]["user"] == "bob")
        })
        .await;
    assert!(
        counts(&events).is_empty(),
        "\"*\" does not include subscription_count:\n{}",
        summary(&events).join("\n")
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "client.subscribed")
            .count(),
        6
    );
    star.assert_every_request_verified();
    drop(late);
}

/// A node of a cluster over `shared` (as `super::cluster`'s), interval `INTERVAL`.
async fn cluster_node(shared: &StoreAndBus) -> Server {
    Server::builder()
        .config(&format!(
            "{CONFIG}subscription_count_interval = \"{INTERVAL}\"\n"
        ))
        .arg("--outbound-allow")
        .arg("127.0.0.0/8")
        .in_cluster(shared)
        .start()
        .await
}

/// A WebSocket client of `sub` on `s`, subscribed to `channel`.
async fn subscribed(s: &Server, sub: &str, channel: &str) -> Ws {
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={}", token(sub)))).await;
    subscribe(&mut ws, channel).await;
    ws
}

/// The timestamps (RFC 3339 text) and counts of `channel`'s events.
fn of_channel(events: &[Value], channel: &str) -> Vec<(String, u64)> {
    events
        .iter()
        .filter(|e| e["type"] == "subscription_count" && e["data"]["channel"] == channel)
        .map(|e| {
            (
                e["timestamp"].as_str().unwrap().to_owned(),
                e["data"]["subscription_count"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_cluster_one_node_tells_the_clusters_count_per_interval() {
    tokio::time::timeout(Duration::from_secs(300), async {
        let shared = StoreAndBus::start().await;
        let one = cluster_node(&shared).await;
        let two = cluster_node(&shared).await;
        let r = Receiver::start(Lang::Python);
        register(&one, &r, &["subscription_count"]).await;
        // Node two learns of the endpoint within its reload period: a probe channel of its own
        // is told once it does.
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut probes = Vec::new();
        loop {
            let channel = format!("rooms/probe-{}", probes.len());
            probes.push(subscribed(&two, "probe", &channel).await);
            tokio::time::sleep(Duration::from_millis(500)).await;
            if r.events().iter().any(|e| e["type"] == "subscription_count") {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "node two never told"
            );
        }

        // Two subscribers on each node within one interval: the cluster's 4, told by one node
        // per interval.
        let mut clients = Vec::new();
        for (i, s) in [&one, &two, &one, &two].into_iter().enumerate() {
            clients.push(subscribed(s, &format!("u{i}"), "rooms/1").await);
        }
        let events = r
            .wait_for("rooms/1 at 4", WAIT, |e| {
                of_channel(e, "rooms/1")
                    .last()
                    .is_some_and(|(_, n)| *n == 4)
            })
            .await;
        let told = of_channel(&events, "rooms/1");
        // How far apart they come is the claim's business and depends on the machine's pace;
        // what must hold whatever the pace: no count told twice in a row.
        for pair in told.windows(2) {
            assert_ne!(
                pair[0].1, pair[1].1,
                "a count told twice in a row: {told:?}"
            );
        }
        let interval = humantime::parse_duration(INTERVAL).unwrap().as_millis() as i64;

        // One leaves and another joins on node one, within an interval: back at 4, which node
        // one finds told already, whichever node told it (the last count is the cluster's, in
        // Redis). Node two's share does not move, so no stale share can make another count.
        let leaving = clients.remove(2);
        drop(leaving);
        clients.push(subscribed(&one, "u4", "rooms/1").await);
        // Past both nodes' windows (and a claim another node held), a marker channel: its count
        // comes after anything those windows told.
        tokio::time::sleep(Duration::from_millis(2 * interval as u64)).await;
        let marker = subscribed(&two, "marker", "rooms/marker").await;
        let events = r
            .wait_for("the marker's count", WAIT, |e| {
                !of_channel(e, "rooms/marker").is_empty()
            })
            .await;
        let again = of_channel(&events, "rooms/1");
        assert_eq!(
            again.len(),
            told.len(),
            "rooms/1 back at 4 was told again: {again:?}\n{}",
            summary(&events).join("\n")
        );
        r.assert_every_request_verified();
        drop((clients, marker, probes));
    })
    .await
    .expect("the cluster test ended within 300 s");
}
