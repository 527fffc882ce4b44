//! Three nodes over one PostgreSQL and one Redis (testkit servers), one endpoint registered on
//! one node, a Python receiver verifying every request: a user connected to two nodes goes
//! offline once, when both connections are gone; a channel with subscribers on two nodes is
//! vacated once, when both have left; a node killed with SIGKILL has its user's departure
//! (`node_lost`), offline and its channel's vacated told by a survivor; a node stopped with
//! SIGTERM tells its own before it exits.

use std::time::Duration;

use serde_json::{json, Value};

use super::{
    assert_stated_order, close, connect, count, of, register, summary, Lang, Receiver, CONFIG,
};
use crate::support::cluster::StoreAndBus;
use crate::support::Server;

/// Long enough for any wait here (a lost node is noticed within 6 s, then the offline delay).
const WAIT: Duration = Duration::from_secs(60);

/// A node over the shared store and bus, reaching loopback receivers.
async fn node(shared: &StoreAndBus) -> Server {
    Server::builder()
        .config(CONFIG)
        .arg("--outbound-allow")
        .arg("127.0.0.0/8")
        .in_cluster(shared)
        .start()
        .await
}

/// Waits until node `s` tells of its connections (it learns of the endpoint within the
/// reload period): connects and leaves as `probe` until the receiver hears of it.
async fn until_told(s: &Server, r: &Receiver, probe: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        close(connect(s, probe, &[]).await).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        if count(&r.events(), "client.connected", probe) > 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "node {} never told of a connection within {WAIT:?}:\n{}",
            s.addr,
            summary(&r.events()).join("\n")
        );
    }
}

/// The position of the first event of `kind` about `about` in `events`.
fn position(events: &[Value], kind: &str, about: &str) -> usize {
    events
        .iter()
        .position(|e| {
            e["type"] == kind && (e["data"]["user"] == about || e["data"]["channel"] == about)
        })
        .unwrap_or_else(|| panic!("no {kind} {about}:\n{}", summary(events).join("\n")))
}

/// The position of the last event of `kind` about `about` in `events`.
fn last_position(events: &[Value], kind: &str, about: &str) -> usize {
    events
        .iter()
        .rposition(|e| {
            e["type"] == kind && (e["data"]["user"] == about || e["data"]["channel"] == about)
        })
        .unwrap_or_else(|| panic!("no {kind} {about}:\n{}", summary(events).join("\n")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_and_channels_across_nodes_are_told_once_and_lost_nodes_by_survivors() {
    tokio::time::timeout(Duration::from_secs(300), async {
        let shared = StoreAndBus::start().await;
        let one = node(&shared).await;
        let mut two = node(&shared).await;
        let mut three = node(&shared).await;
        let r = Receiver::start(Lang::Python);
        register(&one, &r, 1_000).await;
        for (i, s) in [&one, &two, &three].into_iter().enumerate() {
            until_told(s, &r, &format!("probe-{i}")).await;
        }

        // carol on nodes one and two: online once, offline once both are gone.
        let on_one = connect(&one, "carol", &[]).await;
        let on_two = connect(&two, "carol", &[]).await;
        r.wait_for("carol's two connections", WAIT, |e| {
            count(e, "client.connected", "carol") == 2
        })
        .await;
        close(on_one).await;
        r.wait_for("carol's first departure", WAIT, |e| {
            count(e, "client.disconnected", "carol") == 1
        })
        .await;
        close(on_two).await;
        let events = r
            .wait_for("carol offline", WAIT, |e| {
                count(e, "user.offline", "carol") > 0
            })
            .await;
        let all = summary(&events).join("\n");
        assert_eq!(count(&events, "user.online", "carol"), 1, "{all}");
        assert_eq!(count(&events, "user.offline", "carol"), 1, "{all}");
        assert!(
            position(&events, "user.offline", "carol")
                > last_position(&events, "client.disconnected", "carol"),
            "offline only once both connections were gone:\n{all}"
        );

        // rooms/shared with a subscriber on nodes two and three: vacated once, after both.
        let dan = connect(&two, "dan", &["rooms/shared"]).await;
        let erin = connect(&three, "erin", &["rooms/shared"]).await;
        r.wait_for("two subscribers of rooms/shared", WAIT, |e| {
            count(e, "client.subscribed", "rooms/shared") == 2
        })
        .await;
        close(dan).await;
        r.wait_for("dan's unsubscribe", WAIT, |e| {
            count(e, "client.unsubscribed", "rooms/shared") == 1
        })
        .await;
        close(erin).await;
        let events = r
            .wait_for("rooms/shared vacated", WAIT, |e| {
                count(e, "channel.vacated", "rooms/shared") > 0
            })
            .await;
        let all = summary(&events).join("\n");
        assert_eq!(
            count(&events, "channel.occupied", "rooms/shared"),
            1,
            "{all}"
        );
        assert_eq!(
            count(&events, "channel.vacated", "rooms/shared"),
            1,
            "{all}"
        );
        assert!(
            position(&events, "channel.vacated", "rooms/shared")
                > last_position(&events, "client.unsubscribed", "rooms/shared"),
            "vacated only once both subscribers left:\n{all}"
        );

        // frank on node three, which is killed: a survivor tells his departure (node_lost),
        // his offline and his channel's vacancy.
        let frank = connect(&three, "frank", &["rooms/three"]).await;
        r.wait_for("frank on node three", WAIT, |e| {
            count(e, "channel.occupied", "rooms/three") == 1
                && count(e, "user.online", "frank") == 1
        })
        .await;
        three.kill9();
        drop(frank);
        let events = r
            .wait_for("node three's departures told by a survivor", WAIT, |e| {
                count(e, "client.disconnected", "frank") > 0
                    && count(e, "user.offline", "frank") > 0
                    && count(e, "channel.vacated", "rooms/three") > 0
            })
            .await;
        let all = summary(&events).join("\n");
        let reasons: Vec<&Value> = of(&events, "client.disconnected", "frank")
            .iter()
            .map(|e| &e["data"]["reason"])
            .collect();
        assert_eq!(reasons, [&json!("node_lost")], "{all}");
        assert_eq!(count(&events, "user.offline", "frank"), 1, "{all}");
        assert_eq!(count(&events, "channel.vacated", "rooms/three"), 1, "{all}");

        // gina on node two, which is stopped with SIGTERM: it tells her departure itself.
        let gina = connect(&two, "gina", &["rooms/two"]).await;
        r.wait_for("gina on node two", WAIT, |e| {
            count(e, "channel.occupied", "rooms/two") == 1 && count(e, "user.online", "gina") == 1
        })
        .await;
        let status = tokio::task::block_in_place(|| two.terminate());
        assert!(status.success(), "{status}");
        drop(gina);
        let events = r
            .wait_for("node two's departures at its shutdown", WAIT, |e| {
                count(e, "client.disconnected", "gina") > 0
                    && count(e, "user.offline", "gina") > 0
                    && count(e, "channel.vacated", "rooms/two") > 0
            })
            .await;
        let all = summary(&events).join("\n");
        let reasons: Vec<&Value> = of(&events, "client.disconnected", "gina")
            .iter()
            .map(|e| &e["data"]["reason"])
            .collect();
        assert_eq!(reasons, [&json!("shutdown")], "{all}");
        assert_eq!(count(&events, "user.offline", "gina"), 1, "{all}");
        assert_eq!(count(&events, "channel.vacated", "rooms/two"), 1, "{all}");

        // The probes' connections may straddle the moment their node learned of the endpoint
        // (what happened before it is not reported): the order is checked without them.
        let settled: Vec<Value> = events
            .into_iter()
            .filter(|e| {
                !e["data"]["user"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("probe-"))
            })
            .collect();
        assert_stated_order(&settled);
        r.assert_every_request_verified();
        drop((one, two, three));
        shared.stop().await;
    })
    .await
    .expect("the test finishes within five minutes");
}
