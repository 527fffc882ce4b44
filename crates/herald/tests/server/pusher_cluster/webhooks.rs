//! Pusher-format webhooks from two nodes, checked by the Pusher SDKs' receivers
//! (`webhook_receiver.mjs` and `.py`): each channel's and member's transitions told once for
//! the cluster, each client event once, and the cluster's `subscription_count`.

use serde_json::{json, Value};

use super::{Nodes, WAIT};
use crate::pusher_client::PusherJs;
use crate::pusher_webhooks::{has, register, Lang, Receiver};
use crate::support::Server;

/// How many of `events` are named `name` about `channel` with the fields of `more`.
fn count(events: &[Value], name: &str, channel: &str, more: Value) -> usize {
    events
        .iter()
        .filter(|e| has(std::slice::from_ref(e), name, channel, more.clone()))
        .count()
}

/// The position of the first event named `name` about `channel` in `events`.
fn position(events: &[Value], name: &str, channel: &str) -> usize {
    events
        .iter()
        .position(|e| e["name"] == name && e["channel"] == channel)
        .unwrap_or_else(|| panic!("no {name} of {channel}: {events:?}"))
}

/// Waits until node `s` tells the receivers of its subscribers (it learns of an endpoint
/// created through the other node within its reload period): subscribes to a probe channel
/// of its own until its `channel_occupied` arrives.
async fn until_told(s: &Server, nodes: &Nodes, receivers: &[Receiver], name: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    for attempt in 0.. {
        let channel = format!("probe-{name}-{attempt}");
        let probe = PusherJs::start(s, &nodes.creds, &[&channel], false).await;
        let told_by = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
        while tokio::time::Instant::now() < told_by {
            if receivers
                .iter()
                .all(|r| has(&r.events(), "channel_occupied", &channel, json!({})))
            {
                probe.exit().await;
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        probe.exit().await;
        assert!(
            tokio::time::Instant::now() < deadline,
            "node {name} never told of a subscriber within {WAIT:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pusher_webhooks_are_told_once_for_the_cluster() {
    let nodes = Nodes::start().await;
    let (a, b, creds) = (&nodes.a, &nodes.b, &nodes.creds);
    let receivers = [Receiver::start(Lang::Node), Receiver::start(Lang::Python)];
    let everything = json!(["*", "subscription_count", "pusher.client_event"]);
    for receiver in &receivers {
        receiver.set_credentials(creds, &creds.secret);
        register(a, receiver, everything.clone()).await;
    }
    until_told(a, &nodes, &receivers, "a").await;
    until_told(b, &nodes, &receivers, "b").await;

    // orders: occupied by its first subscriber (A), not again by B's; B's leaving does not
    // vacate it (A's subscriber stays), A's does.
    let mut orders_a = PusherJs::start(a, creds, &["orders"], false).await;
    orders_a.subscribed(&["orders"]).await;
    let mut orders_b = PusherJs::start(b, creds, &["orders"], false).await;
    orders_b.subscribed(&["orders"]).await;
    // The cluster's count: one subscriber on each node.
    for receiver in &receivers {
        receiver
            .wait_for("channel_occupied of orders and its count of 2", |e| {
                has(e, "channel_occupied", "orders", json!({}))
                    && has(
                        e,
                        "subscription_count",
                        "orders",
                        json!({ "subscription_count": 2 }),
                    )
            })
            .await;
    }
    orders_b.send(json!({ "unsubscribe": "orders" })).await;
    orders_b.until(|l| l["type"] == "unsubscribed").await;
    for receiver in &receivers {
        receiver
            .wait_for("orders' count back to 1", |e| {
                e.iter()
                    .rev()
                    .find(|e| e["name"] == "subscription_count" && e["channel"] == "orders")
                    .is_some_and(|e| e["subscription_count"] == 1)
            })
            .await;
    }

    // presence-room: Ann on both nodes and Bob on B are two members, each added once; Ann's
    // connection on A leaving removes nobody, her last one (B) removes her once.
    let ann = |id: &str| json!({ "user": { "user_id": id, "user_info": {} } });
    let room = "presence-room";
    let mut ann_a = PusherJs::start_with(a, creds, &[room], ann("ann")).await;
    ann_a.subscribed(&[room]).await;
    let mut ann_b = PusherJs::start_with(b, creds, &[room], ann("ann")).await;
    ann_b.subscribed(&[room]).await;
    let mut bob_b = PusherJs::start_with(b, creds, &[room], ann("bob")).await;
    bob_b.subscribed(&[room]).await;
    // A client event from A, heard on B: told once, by the sender's node.
    ann_a
        .send(json!({ "trigger": { "channel": room, "event": "client-hi", "data": { "x": 1 } } }))
        .await;
    bob_b.until(|l| l["event"] == "client-hi").await;
    for receiver in &receivers {
        receiver
            .wait_for("both members added and the client event", |e| {
                has(e, "member_added", room, json!({ "user_id": "ann" }))
                    && has(e, "member_added", room, json!({ "user_id": "bob" }))
                    && has(e, "client_event", room, json!({ "event": "client-hi" }))
            })
            .await;
    }
    ann_a.exit().await;
    // What A tells after its subscriber of presence-room left: orders vacated.
    orders_a.exit().await;
    for receiver in &receivers {
        receiver
            .wait_for("orders vacated", |e| {
                has(e, "channel_vacated", "orders", json!({}))
            })
            .await;
    }
    ann_b.exit().await;
    bob_b.exit().await;

    for receiver in &receivers {
        let events = receiver
            .wait_for("both members removed and presence-room vacated", |e| {
                has(e, "member_removed", room, json!({ "user_id": "ann" }))
                    && has(e, "member_removed", room, json!({ "user_id": "bob" }))
                    && has(e, "channel_vacated", room, json!({}))
            })
            .await;
        let once = |name: &str, channel: &str, more: Value| {
            assert_eq!(
                count(&events, name, channel, more.clone()),
                1,
                "{name} {channel} {more}: {events:?}"
            );
        };
        for channel in ["orders", room] {
            once("channel_occupied", channel, json!({}));
            once("channel_vacated", channel, json!({}));
        }
        for user in ["ann", "bob"] {
            once("member_added", room, json!({ "user_id": user }));
            once("member_removed", room, json!({ "user_id": user }));
        }
        once("client_event", room, json!({ "event": "client-hi" }));
        // Ann was removed only once her connection on B left: after orders was vacated, which
        // node A told after her connection on A had gone.
        assert!(
            position(&events, "member_removed", room)
                > position(&events, "channel_vacated", "orders"),
            "ann removed while her connection on B stayed: {events:?}"
        );
        let requests = receiver.requests();
        assert!(
            requests
                .iter()
                .all(|r| r["valid"] == true && r["status"] == 200),
            "{requests:?}"
        );
    }
    nodes.shutdown().await;
}
