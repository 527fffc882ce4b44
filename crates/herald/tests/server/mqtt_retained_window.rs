//! A wildcard SUBSCRIBE's retained messages meeting live ones (herald-mqtt's
//! `retained_window.rs`, issue 33): while publishers flood a few channels, clients subscribe
//! with a wildcard at QoS 2 (HTTP publishes count as QoS 2), one SUBSCRIBE each, and each must
//! get every message of a topic once and in order from its first, the retained one (if any)
//! first.
//! Before the window, a message published while the SUBSCRIBE read the channel's last message
//! went out twice (live, and again as the retained message), or a live one older than the
//! retained one came after it: every run saw it in several rounds. Quiet channels, listed
//! before the flooded ones, make the SUBSCRIBE read a while before it reads a flooded
//! channel's last message.
//!
//! And a message published (its PUBACK received) before a wildcard SUBSCRIBE whose fan-out
//! comes after the SUBSCRIBE registered its filter (the debug build's hold on the fan-out
//! thread makes that certain): it goes as the retained message, RETAIN 1, once, and a RETAIN 0
//! one not at all (core's filters, "Commits before a filter").

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use herald_mqtt::packet::{Packet, ProtocolVersion, PubComp, PubRec, QoS};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::mqtt_conformance::publish_stored;
use crate::mqtt_session::Raw;
use crate::support::{HoldFile, Server, API_KEY};

/// Clients that subscribe while the flood runs, one SUBSCRIBE each.
const ROUNDS: usize = 60;

/// Messages of each flooded channel a client takes before it leaves.
const TAKEN_PER_ROUND: usize = 4;

/// Messages per publish request of the flood.
const PER_REQUEST: u64 = 4;

/// The flooded channels, each by a publisher of its own.
const FLOODED: [&str; 4] = ["flood/w", "flood/x", "flood/y", "flood/z"];

/// Quiet channels (`flood/q00`...), each with one message: retained messages listed (by name)
/// before the flooded channels'.
const QUIET: usize = 40;

/// A SUBSCRIBE to `filter` at QoS 2.
fn subscribe(filter: &str) -> Packet {
    crate::mqtt_shared::subscribe(filter, QoS::ExactlyOnce, false)
}

/// What one client was sent of each topic: (payload, RETAIN), in the order received.
type Received = HashMap<String, Vec<(u64, bool)>>;

/// Subscribes a fresh client to `filter` and takes the quiet channels' retained messages and
/// [`TAKEN_PER_ROUND`] messages of each flooded channel (completing each QoS 2 delivery), and
/// whatever came meanwhile. A quiet channel's message missing would show as the client's
/// 10 s without a packet.
async fn one_round(server: &Server, filter: &str, version: ProtocolVersion) -> Received {
    let (mut raw, _) = Raw::connect(server.mqtt_addr(), version, Some(API_KEY), 30).await;
    raw.send(&subscribe(filter)).await;
    let mut received = Received::new();
    let mut granted = false;
    let taken = |received: &Received| {
        received.len() == QUIET + FLOODED.len()
            && FLOODED
                .iter()
                .all(|t| received.get(*t).is_some_and(|m| m.len() >= TAKEN_PER_ROUND))
    };
    while !granted || !taken(&received) {
        match raw.next().await {
            Some(Packet::SubAck(_)) => granted = true,
            Some(Packet::Publish(p)) => {
                let id = p.packet_id.expect("QoS 2: a packet id");
                assert_eq!(p.qos, QoS::ExactlyOnce, "{p:?}");
                raw.send(&Packet::PubRec(PubRec::new(id))).await;
                let n: u64 = std::str::from_utf8(&p.payload)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("a number: {p:?}"));
                received
                    .entry(p.topic.as_str().to_owned())
                    .or_default()
                    .push((n, p.retain));
            }
            Some(Packet::PubRel(rel)) => {
                raw.send(&Packet::PubComp(PubComp::new(rel.packet_id)))
                    .await
            }
            Some(other) => panic!("unexpected {other:?}"),
            None => panic!("closed; {}", raw.why_closed()),
        }
    }
    received
}

/// Publishes to `channel` until `stop`, one request after another, so that the payloads
/// (1, 2, ...) rise with the seqs; returns how many it published.
fn flood(server: &Server, channel: &'static str, stop: Arc<AtomicBool>) -> JoinHandle<u64> {
    let (http, url) = (server.http.clone(), server.url("/v1/batch"));
    tokio::spawn(async move {
        let mut next = 1u64;
        while !stop.load(Ordering::Relaxed) {
            let messages: Vec<Value> = (next..next + PER_REQUEST)
                .map(|n| json!({ "channel": channel, "data": n }))
                .collect();
            let response = http
                .post(&url)
                .bearer_auth(API_KEY)
                .json(&json!({ "messages": messages }))
                .send()
                .await
                .expect("publish");
            assert_eq!(response.status().as_u16(), 200);
            next += PER_REQUEST;
        }
        next - 1
    })
}

#[tokio::test]
async fn a_wildcard_subscribe_during_a_flood_gets_each_message_once_and_in_order() {
    let server = Server::builder().mqtt().start().await;
    let first: Vec<Value> = (0..QUIET)
        .map(|n| format!("flood/q{n:02}"))
        .chain(FLOODED.iter().map(|t| t.to_string()))
        .map(|channel| json!({ "channel": channel, "data": 0 }))
        .collect();
    let (status, body) = server.post("/v1/batch", json!({ "messages": first })).await;
    assert_eq!(status, 200, "{body}");
    // The answer says they are stored, not that they were fanned out: a first round's
    // SUBSCRIBE may come before that fan-out, and gets them as retained messages all the same
    // (core's filters take only the commits made after them).
    let stop = Arc::new(AtomicBool::new(false));
    let publishers: Vec<_> = FLOODED
        .iter()
        .map(|channel| flood(&server, channel, stop.clone()))
        .collect();
    let mut failures = Vec::new();
    for round in 0..ROUNDS {
        let filter = ["flood/+", "#", "+/+", "flood/#"][round % 4];
        let version = [ProtocolVersion::V5, ProtocolVersion::V311][round % 2];
        let received = one_round(&server, filter, version).await;
        for (topic, messages) in &received {
            // Each message once, in seq order without a gap (the publishers' payloads rise by
            // one); only the first may be the retained one.
            let rising = messages.windows(2).all(|w| w[0].0 + 1 == w[1].0);
            let retained_first = messages.iter().skip(1).all(|&(_, retain)| !retain);
            // A quiet channel's one message, as retained.
            let quiet = FLOODED.contains(&topic.as_str()) || *messages == [(0, true)];
            if !rising || !retained_first || !quiet {
                failures.push(format!("round {round} ({filter}): {topic} {messages:?}"));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut published = 0;
    for publisher in publishers {
        published += publisher.await.expect("a publisher");
    }
    assert!(
        failures.is_empty(),
        "{} times a topic saw a message twice or out of order in {ROUNDS} rounds ({published} \
         published):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn a_message_committed_before_a_wildcard_subscribe_goes_only_as_the_retained_message() {
    let hold = HoldFile::new("fanout");
    let server = Server::builder()
        .mqtt()
        .env("HERALD_TEST_FANOUT_HOLD", hold.path())
        .start()
        .await;
    let addr = server.mqtt_addr();
    for version in [ProtocolVersion::V5, ProtocolVersion::V311] {
        let topic = |name: &str| format!("held/{version:?}/{name}");
        let (mut publisher, _) = Raw::connect(addr, version, Some(API_KEY), 60).await;
        publish_stored(&mut publisher, &topic("b-state"), "config", true).await;
        // Answered while the fan-out thread holds them: committed before the SUBSCRIBE.
        hold.hold();
        publish_stored(&mut publisher, &topic("a-retained"), "retained", true).await;
        publish_stored(&mut publisher, &topic("b-state"), "state", false).await;
        publish_stored(&mut publisher, &topic("c-plain"), "plain", false).await;
        let (mut subscriber, _) = Raw::connect(addr, version, Some(API_KEY), 60).await;
        subscriber
            .send(&crate::mqtt_shared::subscribe(
                &topic("#"),
                QoS::AtLeastOnce,
                false,
            ))
            .await;
        let mut got: Vec<(String, String, bool)> = Vec::new();
        let mut subacked = false;
        let mut released = false;
        loop {
            if subacked && got.len() == 2 && !released {
                // The SUBACK and both retained messages are out: let the fan-out go on, and
                // publish a marker after what it held.
                released = true;
                hold.release();
                publish_stored(&mut publisher, &topic("c-plain"), "marker", false).await;
            }
            match subscriber.next().await {
                Some(Packet::SubAck(_)) => subacked = true,
                Some(Packet::Publish(p)) => {
                    if let Some(id) = p.packet_id {
                        subscriber
                            .send(&Packet::PubAck(herald_mqtt::packet::PubAck::new(id)))
                            .await;
                    }
                    let payload = String::from_utf8_lossy(&p.payload).into_owned();
                    let done = payload == "marker";
                    got.push((p.topic.as_str().to_owned(), payload, p.retain));
                    if done {
                        break;
                    }
                }
                Some(other) => panic!("{version:?}: unexpected {other:?}"),
                None => panic!(
                    "{version:?}: the subscriber was closed (so far {got:?}); {}",
                    subscriber.why_closed()
                ),
            }
        }
        let owned = |name: &str, payload: &str, retain| (topic(name), payload.to_owned(), retain);
        assert_eq!(
            got,
            [
                owned("a-retained", "retained", true),
                owned("b-state", "config", true),
                owned("c-plain", "marker", false),
            ],
            "{version:?}: what was published before the SUBSCRIBE only as retained messages"
        );
    }
}
