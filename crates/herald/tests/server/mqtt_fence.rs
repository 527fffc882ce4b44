//! MQTT on a cluster node cut off from Redis while the other nodes still reach it (a network
//! partition; bus-redis's `fence.rs`, herald-mqtt's `cluster.rs`): real `herald serve`
//! processes over one PostgreSQL and one Redis (testkit servers), node one reaching Redis
//! through a proxy the test black-holes ([`Proxy`]).
//!
//! The cut-off node fences itself before the other node takes it for lost: its MQTT clients
//! are disconnected (v5 DISCONNECT 0x9C Use another server, 3.1.1 closed) while their
//! persistent sessions are still the node's in the store, no will published; its CONNECTs are
//! refused (CONNACK 0x88 Server unavailable, 3.1.1 return code 3) and `/readyz` fails. The
//! other node claims it and publishes the stored will, once; the client resumes its session
//! there. Healed, the fenced node serves CONNECTs again.
//!
//! Before the fence the client stayed connected to the cut-off node while the other node
//! published its will and handed its session to a new connection.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use herald_mqtt::packet::{
    ConnectProperties, Packet, ProtocolVersion, QoS, ReasonCode, TopicName, Will,
};
use serde_json::{json, Value};

use crate::mqtt_persistence::{subscribe, Raw};
use crate::support::cluster::StoreAndBus;
use crate::support::proxy::Proxy;
use crate::support::{Server, Ws};

/// `sql`'s output from the cluster's database (psql, unaligned, tuples only).
fn query(shared: &StoreAndBus, sql: &str) -> String {
    shared
        .postgres
        .psql("herald", sql)
        .expect("psql answers")
        .trim()
        .to_owned()
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

/// A CONNECT of `client_id` in `version`: a persistent session of `expiry` seconds (v5; 3.1.1:
/// Clean Session 0) unless `clean`, with `will` if given.
fn connect(
    version: ProtocolVersion,
    token: &str,
    client_id: &str,
    clean: bool,
    expiry: u32,
    will: Option<Will>,
) -> herald_mqtt::packet::Connect {
    let properties = match version {
        ProtocolVersion::V5 => ConnectProperties {
            session_expiry_interval: expiry,
            ..ConnectProperties::default()
        },
        _ => ConnectProperties::default(),
    };
    herald_mqtt::packet::Connect {
        protocol_version: version,
        clean_start: clean,
        keep_alive: 60,
        client_id: client_id.into(),
        will,
        username: Some("default".into()),
        password: Some(Bytes::copy_from_slice(token.as_bytes())),
        properties,
    }
}

/// The reason code of the CONNACK `answer` is (panics on anything else).
fn connack_code(answer: Option<Packet>) -> ReasonCode {
    match answer {
        Some(Packet::ConnAck(connack)) => connack.reason_code,
        other => panic!("expected CONNACK, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_redis_fences_its_mqtt_clients_before_the_other_takes_it_for_lost() {
    tokio::time::timeout(Duration::from_secs(180), async {
        let shared = StoreAndBus::start().await;
        let redis = SocketAddr::from(([127, 0, 0, 1], shared.redis.port()));
        let proxy = Proxy::start(redis).await;
        let bus_one = format!("redis://{}", proxy.addr());
        let one = Server::builder()
            .mqtt()
            .in_cluster_over(&shared, &bus_one)
            .start()
            .await;
        let two = Server::builder().mqtt().in_cluster(&shared).start().await;
        let token = one.token(&["wills/*", "moves/*"], &["wills/*", "moves/*"]);
        let mut wills = Ws::connect(&two.ws_url(&format!("?token={token}"))).await;
        let r = wills
            .request("subscribe", json!({ "channel": "wills/f" }))
            .await;
        assert!(r.get("error").is_none(), "{r}");

        // On node one: a v5 client with a persistent session, a subscription and a will; a
        // 3.1.1 client with a clean session.
        let will = Will {
            topic: TopicName::new("wills/f").unwrap(),
            payload: Bytes::from_static(b"\"fenced gone\""),
            qos: QoS::AtLeastOnce,
            retain: false,
            properties: Default::default(),
        };
        let v5 = connect(
            ProtocolVersion::V5,
            &token,
            "fenced",
            false,
            3600,
            Some(will),
        );
        let (mut client, answer) = Raw::connect_with(one.mqtt_addr(), v5).await;
        assert_eq!(connack_code(answer), ReasonCode::Success);
        client
            .send(&subscribe(&[("moves/f", QoS::AtLeastOnce)]))
            .await;
        match client.next().await {
            Some(Packet::SubAck(ack)) => assert_eq!(ack.reason_codes, [ReasonCode::GrantedQoS1]),
            other => panic!("{other:?}"),
        }
        let v3 = connect(ProtocolVersion::V311, &token, "fenced-v3", true, 0, None);
        let (mut v3_client, answer) = Raw::connect_with(one.mqtt_addr(), v3).await;
        assert_eq!(connack_code(answer), ReasonCode::Success);
        let held = "SELECT node IS NOT NULL AND disconnected_ms IS NULL FROM mqtt_sessions
                    WHERE client_id = 'fenced'";
        assert_eq!(query(&shared, held), "t", "the session is node one's");

        // Node one loses Redis (its sockets stay open, silent); node two still reaches it.
        proxy.cut();
        let disconnect = tokio::select! {
            closed = client.until_closed() => closed,
            will = next_message(&mut wills) => panic!(
                "the will {will:?} was published while its client was still connected to the \
                 cut-off node"
            ),
        };
        let disconnect = disconnect.unwrap_or_else(|| panic!("closed without a DISCONNECT"));
        assert_eq!(
            disconnect.reason_code,
            ReasonCode::UseAnotherServer,
            "{disconnect:?}"
        );
        // Before node two took node one for lost: the session is still node one's (a claim
        // ends it), its will not published.
        assert_eq!(
            query(&shared, held),
            "t",
            "the client was disconnected before node two claimed node one"
        );
        assert_eq!(v3_client.until_closed().await, None, "3.1.1: closed");
        // Node one refuses CONNECTs meanwhile, in both versions, and is not ready.
        let probe = connect(ProtocolVersion::V5, &token, "probe", true, 0, None);
        let (_probe, answer) = Raw::connect_with(one.mqtt_addr(), probe).await;
        assert_eq!(connack_code(answer), ReasonCode::ServerUnavailable);
        let probe = connect(ProtocolVersion::V311, &token, "probe-v3", true, 0, None);
        let (_probe, answer) = Raw::connect_with(one.mqtt_addr(), probe).await;
        assert_eq!(connack_code(answer), ReasonCode::ServerUnavailable);
        let (status, ready) = one.get("/readyz").await;
        assert_eq!(status, 503, "{ready}");
        assert_eq!(ready["checks"]["bus"]["status"], "failing", "{ready}");

        // Node two claims node one: it ends the session and publishes the stored will.
        assert_eq!(
            next_message(&mut wills).await,
            (1, json!("fenced gone")),
            "the will, published by node two"
        );
        let ended = "SELECT disconnected_ms IS NOT NULL FROM mqtt_sessions
                     WHERE client_id = 'fenced'";
        assert_eq!(query(&shared, ended), "t", "ended by node two's claim");
        // The client resumes its session on node two, with what was published meanwhile.
        two.publish("moves/f", json!("while away")).await;
        let (mut back, connack) = Raw::persistent_v5(two.mqtt_addr(), &token, "fenced", 3600).await;
        assert!(connack.session_present, "the session resumed on node two");
        let missed = back.publish().await;
        assert_eq!(
            (missed.topic.as_str(), &missed.payload[..]),
            ("moves/f", &br#""while away""#[..])
        );

        // Healed: node one serves CONNECTs again, and is ready.
        proxy.heal();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let again = connect(ProtocolVersion::V5, &token, "after-heal", true, 0, None);
            let (_again, answer) = Raw::connect_with(one.mqtt_addr(), again).await;
            match connack_code(answer) {
                ReasonCode::Success => break,
                ReasonCode::ServerUnavailable => {}
                other => panic!("a CONNECT after the heal was answered {other:?}"),
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "node one never serves again"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        loop {
            let (status, ready) = one.get("/readyz").await;
            if status == 200 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "node one is never ready again: {ready}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        // The will was published once: a message published after the heal is the next one.
        one.publish("wills/f", json!("after the heal")).await;
        assert_eq!(
            next_message(&mut wills).await,
            (2, json!("after the heal")),
            "the will was published once"
        );
        drop((one, two, proxy));
        shared.stop().await;
    })
    .await
    .expect("the test finishes within three minutes");
}
