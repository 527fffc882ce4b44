//! `subscription_count` on one node, to real receivers: several subscribes within one interval
//! are one event with the final count; a subscribe and unsubscribe within an interval that leave
//! the count where the last event left it are told nothing; each channel has its own interval; an endpoint of `["*"]` is never sent it (opt-in).
//! Absences are shown by order, not by waiting: each endpoint's events arrive in the order they
//! happened, so an event queued before one the receiver already has would have come first.

use std::time::Duration;

use serde_json::{json, Value};

use super::{summary, token, Lang, Receiver, CONFIG};
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
