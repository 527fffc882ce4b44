//! MQTT across the nodes of a cluster (herald-mqtt's `cluster.rs`): two real `herald serve`
//! processes over one PostgreSQL and one Redis (testkit servers). A persistent session taken
//! over on the other node (a raw client, herald-mqtt's codec: the old connection told 0x8E,
//! the subscription and the unacknowledged QoS 1 message found by the new one), and Paho's
//! wills waiting for their delay on one node, dropped or published by a CONNECT on the other,
//! or published when nobody comes back. A Paho wildcard subscriber on one node hears what is
//! published through the other (HTTP and `mosquitto_pub`) to channels its node does not
//! follow, each message once though its connection also holds a matching channel's exact
//! subscription, and once it is gone the cluster's feed flag in Redis is empty.
//!
//! As in `mqtt_will.rs`, no test waits for something not to happen: a will that should have
//! been dropped would be published by the Clean Start that follows on its own node, before
//! the will that must be published, and so be the first message the subscriber gets.

use std::time::Duration;

use herald_mqtt::packet::{Packet, PubAck, QoS, ReasonCode};
use herald_testkit::Redis;
use serde_json::{json, Value};

use crate::mqtt_persistence::{subscribe, Raw};
use crate::mqtt_will::client;
use crate::support::cluster::StoreAndBus;
use crate::support::mqtt::{mosquitto_pub, paho, PahoRun};
use crate::support::{HoldFile, Server, Ws, API_KEY};

/// A PostgreSQL and a Redis for one test (dropped with it, before the nodes) and two MQTT
/// nodes over them.
pub(crate) struct Cluster {
    shared: StoreAndBus,
    pub(crate) one: Server,
    pub(crate) two: Server,
}

impl Cluster {
    pub(crate) async fn start() -> Cluster {
        let shared = StoreAndBus::start().await;
        let node = || Server::builder().mqtt().in_cluster(&shared).start();
        let one = node().await;
        let two = node().await;
        Cluster { shared, one, two }
    }

    /// As [`Cluster::start`], node two not starting to follow an app's feed while `hold`'s
    /// file exists (debug builds' `HERALD_TEST_FEED_HOLD`).
    async fn start_with_feed_hold_on_two(hold: &HoldFile) -> Cluster {
        let shared = StoreAndBus::start().await;
        let one = Server::builder().mqtt().in_cluster(&shared).start().await;
        let two = Server::builder()
            .mqtt()
            .in_cluster(&shared)
            .env("HERALD_TEST_FEED_HOLD", hold.path())
            .start()
            .await;
        Cluster { shared, one, two }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_session_is_taken_over_on_another_node_with_its_unacknowledged_message() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let cluster = Cluster::start().await;
        let (one, two) = (&cluster.one, &cluster.two);
        let token = one.token(&["**"], &[]);
        let connect =
            |server: &Server| Raw::persistent_v5(server.mqtt_addr(), &token, "moving", 3600);
        let (mut first, connack) = connect(one).await;
        assert!(!connack.session_present);
        first
            .send(&subscribe(&[("moves/a", QoS::AtLeastOnce)]))
            .await;
        match first.next().await {
            Some(Packet::SubAck(ack)) => assert_eq!(ack.reason_codes, [ReasonCode::GrantedQoS1]),
            other => panic!("{other:?}"),
        }
        one.publish("moves/a", json!(1)).await;
        let sent = first.publish().await;
        assert_eq!(
            (sent.topic.as_str(), sent.qos),
            ("moves/a", QoS::AtLeastOnce)
        );
        // Not acknowledged. The same client identifier connects to the other node: the first
        // connection is told 0x8E, and the session moves with what it had not acknowledged.
        let (mut second, connack) = connect(two).await;
        assert!(connack.session_present);
        let taken = first.until_closed().await.expect("a DISCONNECT");
        assert_eq!(taken.reason_code, ReasonCode::SessionTakenOver);
        let again = second.publish().await;
        assert_eq!(
            (again.topic.as_str(), again.qos, &again.payload[..]),
            ("moves/a", QoS::AtLeastOnce, &b"1"[..]),
            "the unacknowledged message, sent again on the new node"
        );
        second
            .send(&Packet::PubAck(PubAck::new(again.packet_id.unwrap())))
            .await;
        // Still subscribed there: a message published through the first node reaches it.
        one.publish("moves/a", json!(2)).await;
        let next = second.publish().await;
        assert_eq!(
            (next.topic.as_str(), &next.payload[..]),
            ("moves/a", &b"2"[..])
        );
        second
            .send(&Packet::PubAck(PubAck::new(next.packet_id.unwrap())))
            .await;
        // Its PINGRESP says both PUBACKs were read.
        assert_eq!(second.until_ping().await, Vec::<String>::new());
        // And back: the first node takes it over from the second the same way.
        let (mut third, connack) = connect(one).await;
        assert!(connack.session_present);
        let taken = second.until_closed().await.expect("a DISCONNECT");
        assert_eq!(taken.reason_code, ReasonCode::SessionTakenOver);
        assert_eq!(
            third.until_ping().await,
            Vec::<String>::new(),
            "all acknowledged"
        );
    })
    .await
    .expect("the test finishes within two minutes");
}

async fn run_ok(server: &Server, spec: Value) {
    let out = paho(server.mqtt_addr(), spec).await;
    assert_eq!(out.code, Some(0), "{}", out.describe());
}

/// The next message a WebSocket subscriber gets, as (seq, data).
async fn next_message(ws: &mut Ws) -> (u64, Value) {
    loop {
        let frame = ws.frame().await;
        if let Some(m) = frame.get("message") {
            return (m["seq"].as_u64().unwrap(), m["data"].clone());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_will_is_dropped_or_published_by_a_connect_on_another_node() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let cluster = Cluster::start().await;
        let (one, two) = (&cluster.one, &cluster.two);
        let token = one.token(&["wills/*"], &["wills/*"]);
        let mut ws = Ws::connect(&two.ws_url(&format!("?token={token}"))).await;
        let r = ws
            .request("subscribe", json!({ "channel": "wills/c" }))
            .await;
        assert!(r.get("error").is_none(), "{r}");
        let delayed = |payload: &str, delay: u32| {
            json!({
                "clean": false, "session_expiry": 3600, "end": "drop",
                "will": { "topic": "wills/c", "payload": payload, "qos": 1, "delay": delay }
            })
        };
        // A will waiting an hour on node one; the session resumes on node two (Clean Start
        // 0), so the will is dropped: the Clean Start 1 back on node one then publishes
        // nothing (it would publish a will still waiting there).
        run_ok(one, client(&token, "d", delayed("\"cancelled\"", 3600))).await;
        let resumed = json!({ "clean": false, "session_expiry": 3600 });
        run_ok(two, client(&token, "d", resumed)).await;
        run_ok(one, client(&token, "d", json!({ "clean": true }))).await;
        // A will waiting an hour on node one, whose session ends by a Clean Start on node
        // two: published then.
        run_ok(one, client(&token, "e", delayed("\"session ended\"", 3600))).await;
        run_ok(two, client(&token, "e", json!({ "clean": true }))).await;
        assert_eq!(
            next_message(&mut ws).await,
            (1, json!("session ended")),
            "the ended session's will, not the dropped one"
        );
        // A will waiting a second on node one, and nobody comes back: published.
        run_ok(one, client(&token, "f", delayed("\"delayed\"", 1))).await;
        assert_eq!(next_message(&mut ws).await, (2, json!("delayed")));
    })
    .await
    .expect("the test finishes within two minutes");
}

/// Members of the cluster's flag saying which nodes hold which apps' feeds on (bus-redis's
/// `feeds.rs`), as `NODE:APP`.
fn feed_holders(redis: &Redis) -> String {
    redis
        .cli(&["ZRANGE", "herald:feeds", "0", "-1"])
        .expect("redis-cli answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_subscriber_on_one_node_gets_every_nodes_messages_once() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let cluster = Cluster::start().await;
        let (one, two) = (&cluster.one, &cluster.two);
        let token = two.token(&["**"], &["**"]);
        assert_eq!(
            feed_holders(&cluster.shared.redis).trim(),
            "",
            "no feed yet"
        );
        // On node two, one Paho connection subscribed to a channel exactly and to `sensors/#`
        // (which matches it): nobody on node two follows any other channel.
        let mut run = PahoRun::start(
            two.mqtt_addr(),
            json!({
                "version": "5", "username": "default", "password": token,
                "subscribe": [
                    { "topic": "sensors/kitchen", "qos": 1 },
                    { "topic": "sensors/#", "qos": 1 }
                ],
                "expect": 5, "timeout": 30
            }),
        );
        run.until("subscribed").await;
        assert!(
            feed_holders(&cluster.shared.redis).contains(":default"),
            "node two holds the default app's feed on"
        );
        // Published through node one, over HTTP and MQTT, at once.
        one.publish("sensors/kitchen", json!(1)).await;
        one.publish("sensors/hall", json!(2)).await;
        mosquitto_pub(
            one.mqtt_addr(),
            &[
                "-u",
                "default",
                "-P",
                API_KEY,
                "-q",
                "1",
                "-t",
                "sensors/living room",
                "-m",
                "3",
            ],
        )
        .await
        .ok();
        one.publish("elsewhere", json!(0)).await;
        one.publish("sensors/zz", json!(4)).await;
        let (code, events) = run.finish().await;
        assert_eq!(code, Some(0), "{events:?}");
        let mut messages: Vec<(String, String)> = events
            .iter()
            .filter(|e| e["event"] == "message")
            .map(|e| {
                (
                    e["topic"].as_str().unwrap().to_owned(),
                    e["payload"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        // The last one published comes last of those the feed brings (node one's sends, in
        // order); the exactly subscribed channel comes along its own stream, in no fixed order
        // with the feed.
        assert_eq!(
            messages.iter().rfind(|(t, _)| t != "sensors/kitchen"),
            Some(&("sensors/zz".to_owned(), "4".to_owned())),
            "{messages:?}"
        );
        messages.sort();
        assert_eq!(
            messages,
            [
                ("sensors/hall".to_owned(), "2".to_owned()),
                ("sensors/kitchen".into(), "1".into()),
                ("sensors/kitchen".into(), "1".into()),
                ("sensors/living room".into(), "3".into()),
                ("sensors/zz".into(), "4".into()),
            ],
            "each once, the exactly subscribed channel once per subscription (v5)"
        );
        // The subscriber gone, node two's hold leaves the flag, and no node follows the feed.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !feed_holders(&cluster.shared.redis).trim().is_empty() {
            assert!(tokio::time::Instant::now() < deadline, "the flag stays on");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let followers = cluster
            .shared
            .redis
            .cli(&["PUBSUB", "SHARDNUMSUB", "herald:{feed:default}"])
            .expect("redis-cli answers");
        assert_eq!(
            followers.lines().nth(1).map(str::trim),
            Some("0"),
            "{followers}"
        );
    })
    .await
    .expect("the test finishes within two minutes");
}

/// A persistent session's wildcard filter on one node misses messages while it is away,
/// published through the other node to a channel it had a message of and to a new one; it
/// comes back through the other node and gets each once, in order, before what is published
/// after (herald-mqtt's `session/missed.rs`: positions and the channels' logs are the cluster's
/// store).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_filter_of_a_session_moved_to_another_node_gets_what_it_missed() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let cluster = Cluster::start().await;
        let (one, two) = (&cluster.one, &cluster.two);
        let token = one.token(&["**"], &[]);
        let session = |subscribe: Value, expect: u64| {
            client(
                &token,
                "moving-filter",
                json!({
                    "clean": false, "session_expiry": 3600, "subscribe": subscribe,
                    "expect": expect, "timeout": 30
                }),
            )
        };
        let mut first = PahoRun::start(
            one.mqtt_addr(),
            session(json!([{ "topic": "fleet/+", "qos": 1 }]), 1),
        );
        first.until("subscribed").await;
        one.publish("fleet/a", json!(0)).await;
        let (code, events) = first.finish().await;
        assert_eq!(code, Some(0), "{events:?}");
        for (channel, n) in [
            ("fleet/a", 1),
            ("fleet/new", 1),
            ("other/a", 1),
            ("fleet/a", 2),
        ] {
            two.publish(channel, json!(n)).await;
        }
        let mut back = PahoRun::start(two.mqtt_addr(), session(json!([]), 4));
        let connack = back.until("connack").await;
        assert_eq!(connack["session_present"], true, "{connack}");
        one.publish("fleet/end", json!("end")).await;
        let (code, events) = back.finish().await;
        assert_eq!(code, Some(0), "{events:?}");
        let got: Vec<(String, String)> = events
            .iter()
            .filter(|e| e["event"] == "message")
            .map(|e| {
                let field = |k: &str| e[k].as_str().unwrap().to_owned();
                (field("topic"), field("payload"))
            })
            .collect();
        let of = |topic: &str| -> Vec<&str> {
            got.iter()
                .filter(|(t, _)| t == topic)
                .map(|(_, p)| p.as_str())
                .collect()
        };
        assert_eq!(of("fleet/a"), ["1", "2"], "{got:?}");
        assert_eq!(of("fleet/new"), ["1"], "{got:?}");
        assert_eq!(
            got.last().map(|(t, _)| t.as_str()),
            Some("fleet/end"),
            "{got:?}"
        );
    })
    .await
    .expect("the test finishes within two minutes");
}

/// The Paho spec of persistent session `client_id` (Clean Start 0, an hour's expiry)
/// subscribing to `subscribe` and ending after `expect` messages.
fn persistent(token: &str, client_id: &str, subscribe: Value, expect: u64) -> Value {
    client(
        token,
        client_id,
        json!({
            "clean": false, "session_expiry": 3600, "subscribe": subscribe,
            "expect": expect, "timeout": 15
        }),
    )
}

/// A cluster whose node two does not start following an app's feed while `hold`'s file
/// exists, and persistent session `client_id` made on node one with `filter` (QoS 1), which
/// got one message published to `first_topic` and went away; the cluster and the token.
async fn a_session_gone_from_node_one(
    hold: &HoldFile,
    client_id: &str,
    filter: &str,
    first_topic: &str,
) -> (Cluster, String) {
    let cluster = Cluster::start_with_feed_hold_on_two(hold).await;
    let token = cluster.one.token(&["**"], &[]);
    let mut first = PahoRun::start(
        cluster.one.mqtt_addr(),
        persistent(&token, client_id, json!([{ "topic": filter, "qos": 1 }]), 1),
    );
    first.until("subscribed").await;
    cluster.one.publish(first_topic, json!("before")).await;
    let (code, events) = first.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    (cluster, token)
}

/// The topics and payloads of the messages among a Paho client's `events`.
fn messages(events: &[Value]) -> Vec<(&str, &str)> {
    events
        .iter()
        .filter(|e| e["event"] == "message")
        .map(|e| (e["topic"].as_str().unwrap(), e["payload"].as_str().unwrap()))
        .collect()
}

/// A resumed session's wildcard filter hears every node before its CONNACK (as a SUBSCRIBE
/// of a filter is answered): a message published on another node while the resuming node
/// starts to follow the app's feed is replayed from the log, not lost between the replay's
/// listing and the feed. Node two's start of the feed is held (debug builds' hook) while the
/// session resumes there; the resume once answered the CONNACK at once, listed the
/// channels before the message existed, and never heard it from the feed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_wildcard_filter_misses_nothing_published_elsewhere_while_its_feed_starts() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let hold = HoldFile::new("feed");
        let (cluster, token) =
            a_session_gone_from_node_one(&hold, "resuming-filter", "fleet/+", "fleet/a").await;
        let (one, two) = (&cluster.one, &cluster.two);
        // The session resumes on node two, whose feed does not start while held: its
        // CONNACK waits for it. A message published on node one meanwhile, then the hold
        // released.
        hold.hold();
        let mut back = PahoRun::start(
            two.mqtt_addr(),
            persistent(&token, "resuming-filter", json!([]), 2),
        );
        let early = tokio::time::timeout(Duration::from_millis(500), back.until("connack")).await;
        one.publish("fleet/b", json!("while the feed starts")).await;
        hold.release();
        let connack = match early {
            Ok(connack) => connack,
            Err(_) => back.until("connack").await,
        };
        assert_eq!(connack["session_present"], true, "{connack}");
        one.publish("fleet/c", json!("after")).await;
        let (code, events) = back.finish().await;
        assert_eq!(
            messages(&events),
            [
                ("fleet/b", "\"while the feed starts\""),
                ("fleet/c", "\"after\"")
            ],
            "{events:?}"
        );
        assert_eq!(code, Some(0), "{events:?}");
    })
    .await
    .expect("the test finishes within two minutes");
}

/// A persistent session's shared subscription resumed on another node counts that node among
/// its group's holders before its CONNACK (as a SUBSCRIBE does before its SUBACK), so a
/// message published right after the CONNACK reaches it. Node two's start of the app's feed
/// (and with it of the group's holds) is held while the session resumes there; the resume
/// once answered the CONNACK at once, and a message published then went to no member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_shared_subscription_gets_what_is_published_right_after_its_connack() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let hold = HoldFile::new("feed");
        let (cluster, token) =
            a_session_gone_from_node_one(&hold, "resuming-member", "$share/g/jobs/+", "jobs/a")
                .await;
        let (one, two) = (&cluster.one, &cluster.two);
        // Resumed on node two, whose feed does not start while held; a message is published
        // as soon as the client has its CONNACK.
        hold.hold();
        let mut back = PahoRun::start(
            two.mqtt_addr(),
            persistent(&token, "resuming-member", json!([]), 1),
        );
        let early = tokio::time::timeout(Duration::from_millis(500), back.until("connack")).await;
        let connack = match early {
            Ok(connack) => {
                one.publish("jobs/b", json!("after the CONNACK")).await;
                hold.release();
                connack
            }
            Err(_) => {
                hold.release();
                let connack = back.until("connack").await;
                one.publish("jobs/b", json!("after the CONNACK")).await;
                connack
            }
        };
        assert_eq!(connack["session_present"], true, "{connack}");
        let (code, events) = back.finish().await;
        assert_eq!(
            messages(&events),
            [("jobs/b", "\"after the CONNACK\"")],
            "{events:?}"
        );
        assert_eq!(code, Some(0), "{events:?}");
    })
    .await
    .expect("the test finishes within two minutes");
}
