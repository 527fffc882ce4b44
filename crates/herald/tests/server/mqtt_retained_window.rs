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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use herald_mqtt::packet::{Packet, ProtocolVersion, PubComp, PubRec, QoS};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::mqtt_session::Raw;
use crate::support::{Server, API_KEY};

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

/// The channel of `mqtt_retained::fanned_out`'s markers (`#` matches it: the rounds skip it).
pub(crate) const FENCE: &str = "fence";

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
                if p.topic.as_str() == FENCE {
                    continue; // `fanned_out`'s, for the filters that match it
                }
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
    // SUBSCRIBE registered before that fan-out would get a quiet channel's message live, with
    // RETAIN 0, where this test expects it as the retained message (`retained_window.rs`).
    let (mut publisher, _) =
        Raw::connect(server.mqtt_addr(), ProtocolVersion::V5, Some(API_KEY), 30).await;
    crate::mqtt_retained::fanned_out(server.mqtt_addr(), &mut publisher).await;
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
