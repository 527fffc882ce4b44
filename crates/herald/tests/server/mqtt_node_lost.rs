//! MQTT when a cluster node crashes (herald-mqtt's `Sessions::node_lost`, bus-redis's
//! `lost_nodes.rs`): real `herald serve` processes over one PostgreSQL and one Redis (testkit
//! servers), one of them killed with SIGKILL while it holds MQTT connections.
//!
//! - Three nodes; Paho clients with persistent sessions and wills on node one, a WebSocket
//!   subscriber on node two. Once node one is killed, one survivor publishes the will due soon
//!   after what was left of its delay, once; the will waiting an hour is still stored (a
//!   Clean Start on node two publishes it then); and the first session's expiry ran from the
//!   crash (it is gone when its client comes back).
//! - Two nodes; a raw client (herald-mqtt's codec) with a persistent session on node one
//!   leaves a QoS 1 message unacknowledged; node one is killed once the packet id is stored;
//!   resumed on node two, the message comes again with its original packet id and DUP
//!   [MQTT-4.4.0-1].
//!
//! The will's single publication is checked as `mqtt_will.rs` checks what must not happen: by
//! what comes next (a message published after it, through the third node, is the next one the
//! subscriber gets).

use std::time::Duration;

use herald_mqtt::packet::{ConnectProperties, Packet, ProtocolVersion, PubAck, QoS, ReasonCode};
use serde_json::{json, Value};

use crate::mqtt_persistence::{subscribe, Raw};
use crate::support::cluster::StoreAndBus;
use crate::support::mqtt::PahoRun;
use crate::support::{Server, Ws};

/// A PostgreSQL and a Redis for one test (dropped with it, before the nodes) and its nodes
/// over them.
struct Cluster {
    shared: StoreAndBus,
    nodes: Vec<Server>,
}

impl Cluster {
    async fn start(n: usize) -> Cluster {
        let shared = StoreAndBus::start().await;
        let mut nodes = Vec::new();
        for _ in 0..n {
            nodes.push(Server::builder().mqtt().in_cluster(&shared).start().await);
        }
        Cluster { shared, nodes }
    }

    /// `sql`'s output from the cluster's database (psql, unaligned, tuples only).
    fn query(&self, sql: &str) -> String {
        self.shared
            .postgres
            .psql("herald", sql)
            .expect("psql answers")
            .trim()
            .to_owned()
    }
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

/// A Paho v5 client `client_id` with a persistent session expiring after `expiry` seconds and a
/// will on `wills/c` delayed `delay` seconds, holding its connection (it waits for a message
/// that never comes) until its server dies.
fn holding(server: &Server, token: &str, client_id: &str, expiry: u32, delay: u32) -> PahoRun {
    PahoRun::start(
        server.mqtt_addr(),
        json!({
            "version": "5", "username": "default", "password": token, "client_id": client_id,
            "clean": false, "session_expiry": expiry, "expect": 1, "timeout": 120,
            "will": {
                "topic": "wills/c", "payload": format!("\"{client_id} gone\""), "qos": 1,
                "delay": delay
            }
        }),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_nodes_wills_are_published_once_by_a_survivor_after_their_delay() {
    tokio::time::timeout(Duration::from_secs(150), async {
        let mut cluster = Cluster::start(3).await;
        let token = cluster.nodes[0].token(&["wills/*"], &["wills/*"]);
        let mut ws = Ws::connect(&cluster.nodes[1].ws_url(&format!("?token={token}"))).await;
        let r = ws
            .request("subscribe", json!({ "channel": "wills/c" }))
            .await;
        assert!(r.get("error").is_none(), "{r}");
        // On node one: a session expiring 2 s after its connection ends, its will delayed 2 s,
        // and one whose will waits an hour.
        let mut quick = holding(&cluster.nodes[0], &token, "quick", 2, 2);
        quick.until("connack").await;
        let mut slow = holding(&cluster.nodes[0], &token, "slow", 3600, 3600);
        slow.until("connack").await;
        // Their sessions are held by node one (the wills stored before the CONNACKs).
        assert_eq!(
            cluster.query(
                "SELECT count(*) FROM mqtt_sessions WHERE node IS NOT NULL
                 AND disconnected_ms IS NULL AND client_id IN ('quick', 'slow')"
            ),
            "2"
        );
        cluster.nodes[0].kill9();
        drop((quick, slow));
        // One survivor finds node one lost and publishes the will whose delay ran out.
        assert_eq!(
            next_message(&mut ws).await,
            (1, json!("quick gone")),
            "the will due soon, first"
        );
        // Once: what node three publishes next is the next message (a second survivor
        // publishing the will too would do so as the first did, at its due time).
        tokio::time::sleep(Duration::from_secs(3)).await;
        cluster.nodes[2]
            .publish("wills/c", json!("after the will"))
            .await;
        assert_eq!(
            next_message(&mut ws).await,
            (2, json!("after the will")),
            "the will was published once; the hour-long one still waits"
        );
        // The sessions were ended at the crash: "quick" expired 2 s after it.
        let (_back, connack) =
            Raw::persistent_v5(cluster.nodes[1].mqtt_addr(), &token, "quick", 60).await;
        assert!(
            !connack.session_present,
            "the session expired from the crash"
        );
        // The hour-long will waited, stored: a Clean Start of its client ends the session and
        // publishes it now.
        let (_slow_back, _) = Raw::connect(
            cluster.nodes[1].mqtt_addr(),
            ProtocolVersion::V5,
            &token,
            "slow",
            true,
            ConnectProperties::default(),
        )
        .await;
        assert_eq!(next_message(&mut ws).await, (3, json!("slow gone")));
    })
    .await
    .expect("the test finishes within 150 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unacknowledged_qos1_message_keeps_its_packet_id_on_another_node_after_a_crash() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let mut cluster = Cluster::start(2).await;
        let token = cluster.nodes[0].token(&["**"], &[]);
        let connect =
            |server: &Server| Raw::persistent_v5(server.mqtt_addr(), &token, "crashing", 3600);
        let (mut first, _) = connect(&cluster.nodes[0]).await;
        first
            .send(&subscribe(&[("moves/b", QoS::AtLeastOnce)]))
            .await;
        match first.next().await {
            Some(Packet::SubAck(ack)) => assert_eq!(ack.reason_codes, [ReasonCode::GrantedQoS1]),
            other => panic!("{other:?}"),
        }
        // The first message acknowledged, the second not: its packet id is not the one a
        // new connection would give first.
        cluster.nodes[0].publish("moves/b", json!(1)).await;
        let one = first.publish().await;
        first
            .send(&Packet::PubAck(PubAck::new(one.packet_id.unwrap())))
            .await;
        assert_eq!(first.until_ping().await, Vec::<String>::new());
        cluster.nodes[0].publish("moves/b", json!(2)).await;
        let two = first.publish().await;
        assert_eq!(&two.payload[..], b"2");
        let id = two.packet_id.expect("QoS 1 has an id");
        assert_ne!(id, one.packet_id.unwrap());
        // Once its packet id is stored (group-committed after it was sent), node one dies.
        let stored =
            "SELECT packet_id FROM mqtt_session_inflight WHERE client_id = 'crashing' AND qos = 1";
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while cluster.query(stored) != id.to_string() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the packet id is never stored: {:?}",
                cluster.query("SELECT * FROM mqtt_session_inflight")
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        cluster.nodes[0].kill9();
        drop(first);
        // Resumed on node two: the message again, with its packet id and DUP.
        let (mut second, connack) = connect(&cluster.nodes[1]).await;
        assert!(connack.session_present);
        let again = second.publish().await;
        assert_eq!(
            (
                again.topic.as_str(),
                &again.payload[..],
                again.packet_id,
                again.dup
            ),
            ("moves/b", &b"2"[..], Some(id), true),
            "the unacknowledged message with its original packet id and DUP"
        );
        second.send(&Packet::PubAck(PubAck::new(id))).await;
        assert_eq!(second.until_ping().await, Vec::<String>::new());
        // Acknowledged: its stored id is gone once the batch went.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !cluster.query(stored).is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the id stays stored"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the test finishes within two minutes");
}
