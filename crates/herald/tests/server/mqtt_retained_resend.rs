//! A retained message sent at SUBSCRIBE to a persistent session at QoS 1 or 2 and not
//! acknowledged when the connection ends goes again when the session resumes, with its packet
//! identifier, DUP 1 and RETAIN 1, ahead of anything else [MQTT-4.4.0-1] (herald-mqtt's
//! `session/resend.rs`): for exact and wildcard filters, MQTT 5.0 and 3.1.1, QoS 1 and 2, from
//! the connection before in the process, after a `kill -9` and restart (from the store) and on
//! another node of a cluster (not again on the first once acknowledged on the other).
//! Once acknowledged it is not sent again and the connection parks; one whose message is gone
//! by then (cleared and trimmed) is not sent, and its packet identifier is free again (the
//! next message takes it). A raw client (herald-mqtt's codec) sees the packets.

use std::num::NonZeroU16;
use std::time::Duration;

use herald_mqtt::packet::{
    ConnAck, ConnectProperties, Packet, ProtocolVersion, PubAck, PubComp, PubRec, Publish,
    PublishProperties, QoS, ReasonCode, TopicName,
};
use serde_json::json;

use crate::mqtt_cluster::Cluster;
use crate::mqtt_parking::wait_parked;
use crate::mqtt_persistence::{subscribe, Raw};
use crate::support::Server;

/// A persistent session's client `id` of `version` (v5: an hour's Session Expiry Interval;
/// 3.1.1: Clean Session 0).
pub(crate) async fn connect(server: &Server, version: ProtocolVersion, id: &str) -> (Raw, ConnAck) {
    let token = server.token(&["**"], &[]);
    let properties = ConnectProperties {
        session_expiry_interval: if version == ProtocolVersion::V5 {
            3600
        } else {
            0
        },
        ..ConnectProperties::default()
    };
    Raw::connect(server.mqtt_addr(), version, &token, id, false, properties).await
}

/// Publishes `topic`'s retained message `cfg` over HTTP, then an MQTT client's RETAIN 0
/// message `state` after it (so the retained message is not the channel's newest, and no
/// subscription's replay brings it again).
async fn retained_then_newer(server: &Server, topic: &str) {
    let retained = json!({ "$mqtt": { "text": "cfg", "retain": true } });
    server.publish(topic, retained).await;
    let token = server.token(&["**"], &[]);
    let (mut publisher, _) = Raw::connect(
        server.mqtt_addr(),
        ProtocolVersion::V5,
        &token,
        "",
        true,
        ConnectProperties::default(),
    )
    .await;
    let id = NonZeroU16::new(1).unwrap();
    let state = Publish {
        dup: false,
        qos: QoS::AtLeastOnce,
        retain: false,
        topic: TopicName::new(topic).unwrap(),
        packet_id: Some(id),
        properties: PublishProperties::default(),
        payload: b"state".to_vec().into(),
    };
    publisher.send(&Packet::Publish(state)).await;
    match publisher.next().await {
        Some(Packet::PubAck(ack)) => assert_eq!(ack.packet_id, id),
        other => panic!("expected PUBACK, got {other:?}"),
    }
}

/// Subscribes `raw` to `filter` at `qos`: the retained message it is sent.
async fn retained_on_subscribe(raw: &mut Raw, filter: &str, qos: QoS) -> Publish {
    raw.send(&subscribe(&[(filter, qos)])).await;
    loop {
        match raw.next().await {
            Some(Packet::SubAck(_)) => {}
            Some(Packet::Publish(p)) => return p,
            other => panic!("{filter}: expected the retained message, got {other:?}"),
        }
    }
}

/// Sends PINGREQ: the packets before its PINGRESP.
pub(crate) async fn packets_until_pingresp(raw: &mut Raw) -> Vec<Packet> {
    raw.send(&Packet::PingReq).await;
    let mut seen = Vec::new();
    loop {
        match raw.next().await {
            Some(Packet::PingResp) => return seen,
            Some(packet) => seen.push(packet),
            None => panic!("the server closed before PINGRESP; {seen:?}"),
        }
    }
}

/// Sends PINGREQ: the packets before its PINGRESP, described (a PUBLISH with its QoS, flags,
/// packet identifier and payload).
pub(crate) async fn until_pingresp(raw: &mut Raw) -> Vec<String> {
    (packets_until_pingresp(raw).await.iter())
        .map(|packet| match packet {
            Packet::Publish(p) => described(p),
            other => format!("{other:?}"),
        })
        .collect()
}

pub(crate) fn described(p: &Publish) -> String {
    format!(
        "PUBLISH {} {:?} dup={} retain={} id={:?} {}",
        p.topic.as_str(),
        p.qos,
        p.dup,
        p.retain,
        p.packet_id.map(|id| id.get()),
        String::from_utf8_lossy(&p.payload)
    )
}

/// `first` as sent again on resume: the same packet with DUP 1.
pub(crate) fn again(first: &Publish) -> String {
    described(&Publish {
        dup: true,
        ..first.clone()
    })
}

/// Acknowledges `p` (QoS 1: PUBACK; QoS 2: PUBREC, the server's PUBREL, PUBCOMP).
pub(crate) async fn acknowledge(raw: &mut Raw, p: &Publish) {
    let id = p.packet_id.expect("QoS 1 or 2");
    if p.qos == QoS::AtLeastOnce {
        raw.send(&Packet::PubAck(PubAck::new(id))).await;
        return;
    }
    raw.send(&Packet::PubRec(PubRec::new(id))).await;
    match raw.next().await {
        Some(Packet::PubRel(rel)) => assert_eq!(rel.packet_id, id),
        other => panic!("expected PUBREL {id}, got {other:?}"),
    }
    raw.send(&Packet::PubComp(PubComp::new(id))).await;
}

#[tokio::test]
async fn an_unacknowledged_retained_message_goes_again_on_resume_with_its_id_dup_and_retain() {
    let server = Server::builder().mqtt().start().await;
    for version in [ProtocolVersion::V5, ProtocolVersion::V311] {
        for qos in [QoS::AtLeastOnce, QoS::ExactlyOnce] {
            for wildcard in [false, true] {
                let base = format!("rr/{version:?}/{qos:?}/{wildcard}");
                let topic = format!("{base}/cfg");
                let filter = if wildcard {
                    format!("{base}/+")
                } else {
                    topic.clone()
                };
                let id = format!("rr-{version:?}-{qos:?}-{wildcard}");
                let case = format!("{version:?} {qos:?} {filter}");
                retained_then_newer(&server, &topic).await;
                let (mut first, _) = connect(&server, version, &id).await;
                let retained = retained_on_subscribe(&mut first, &filter, qos).await;
                assert_eq!(
                    (
                        retained.qos,
                        retained.retain,
                        retained.dup,
                        &retained.payload[..]
                    ),
                    (qos, true, false, &b"cfg"[..]),
                    "{case}: {retained:?}"
                );
                // Not acknowledged; the connection ends.
                drop(first);
                let (mut second, connack) = connect(&server, version, &id).await;
                assert!(connack.session_present, "{case}");
                assert_eq!(
                    until_pingresp(&mut second).await,
                    [again(&retained)],
                    "{case}: sent again with its id, DUP and RETAIN"
                );
                acknowledge(&mut second, &retained).await;
                assert_eq!(until_pingresp(&mut second).await, Vec::<String>::new());
                drop(second);
                let (mut third, _) = connect(&server, version, &id).await;
                assert_eq!(
                    until_pingresp(&mut third).await,
                    Vec::<String>::new(),
                    "{case}: acknowledged, not sent again"
                );
                // Still subscribed: a new message comes live, RETAIN 0, a new packet.
                server.publish(&topic, json!("live")).await;
                let live = third.publish().await;
                assert_eq!(
                    (live.dup, live.retain, &live.payload[..]),
                    (false, false, &b"\"live\""[..]),
                    "{case}"
                );
            }
        }
    }
}

#[tokio::test]
async fn the_resend_survives_kill_9_and_comes_from_the_store() {
    let mut server = Server::builder().mqtt().start().await;
    let cases = [
        (
            ProtocolVersion::V5,
            QoS::AtLeastOnce,
            "kill/exact/cfg",
            "kill/exact/cfg",
        ),
        (
            ProtocolVersion::V311,
            QoS::ExactlyOnce,
            "kill/wild/cfg",
            "kill/wild/+",
        ),
    ];
    let mut first_sent = Vec::new();
    for (version, qos, topic, filter) in cases {
        retained_then_newer(&server, topic).await;
        let id = format!("kill-{filter}");
        let (mut first, _) = connect(&server, version, &id).await;
        let retained = retained_on_subscribe(&mut first, filter, qos).await;
        assert!(
            retained.retain && &retained.payload[..] == b"cfg",
            "{filter}"
        );
        drop(first);
        // Sent again from what the connection before left in memory.
        let (mut second, _) = connect(&server, version, &id).await;
        assert_eq!(until_pingresp(&mut second).await, [again(&retained)]);
        drop(second);
        first_sent.push(retained);
    }
    // kill -9: the packet ids and their messages are read from the store.
    server.restart().await;
    for ((version, _, _, filter), retained) in cases.into_iter().zip(&first_sent) {
        let id = format!("kill-{filter}");
        let (mut after, connack) = connect(&server, version, &id).await;
        assert!(connack.session_present, "{filter}");
        assert_eq!(
            until_pingresp(&mut after).await,
            [again(retained)],
            "{filter}: after kill -9, again with its id, DUP and RETAIN"
        );
        acknowledge(&mut after, retained).await;
        assert_eq!(until_pingresp(&mut after).await, Vec::<String>::new());
        drop(after);
        let (mut last, _) = connect(&server, version, &id).await;
        assert_eq!(
            until_pingresp(&mut last).await,
            Vec::<String>::new(),
            "{filter}: acknowledged"
        );
    }
}

/// A server whose idle connections park after 100 ms, and whose channels keep 2 messages.
async fn parking_server() -> Server {
    Server::builder()
        .mqtt()
        .env("HERALD_PARK_IDLE_AFTER", "100ms")
        .config("[history]\nsize = 2\n")
        .start()
        .await
}

#[tokio::test]
async fn a_resumed_connection_parks_once_the_resend_is_acknowledged() {
    let server = parking_server().await;
    let version = ProtocolVersion::V5;
    retained_then_newer(&server, "park/acked").await;
    let (mut first, _) = connect(&server, version, "park-acked").await;
    let retained = retained_on_subscribe(&mut first, "park/acked", QoS::AtLeastOnce).await;
    drop(first);
    let (mut acked, _) = connect(&server, version, "park-acked").await;
    assert_eq!(until_pingresp(&mut acked).await, [again(&retained)]);
    acknowledge(&mut acked, &retained).await;
    wait_parked(&server, 1).await;
}

#[tokio::test]
async fn a_resend_whose_message_is_gone_is_not_sent_and_its_id_is_released() {
    let server = parking_server().await;
    let version = ProtocolVersion::V5;
    retained_then_newer(&server, "park/gone").await;
    let (mut first, _) = connect(&server, version, "park-gone").await;
    let retained = retained_on_subscribe(&mut first, "park/gone", QoS::AtLeastOnce).await;
    assert_eq!(&retained.payload[..], b"cfg");
    drop(first);
    // Cleared, then trimmed: the history keeps 2 once it holds 16 more (herald-store's
    // `count_trim_target`).
    let clear = json!({ "$mqtt": { "text": "", "retain": true } });
    server.publish("park/gone", clear).await;
    for n in 0..20 {
        server.publish("park/gone", json!(n)).await;
    }
    let (mut gone, connack) = connect(&server, version, "park-gone").await;
    assert!(connack.session_present);
    // What the subscription missed comes (as far as the history of 2 keeps), not the message;
    // its packet identifier is no longer held, so the first of them takes it (a connection
    // numbers its packets from 1, and the message gone was its session's first).
    let missed = packets_until_pingresp(&mut gone).await;
    assert!(!missed.is_empty());
    for (n, packet) in missed.into_iter().enumerate() {
        match packet {
            Packet::Publish(p) if p.payload != retained.payload => {
                if n == 0 {
                    assert_eq!(p.packet_id, retained.packet_id, "the id was released");
                }
                acknowledge(&mut gone, &p).await;
            }
            other => panic!("only what was missed, not the message gone: {other:?}"),
        }
    }
    // Its packet identifier released, nothing is left in flight: the connection parks.
    wait_parked(&server, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resend_goes_from_another_node_of_a_cluster() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let cluster = Cluster::start().await;
        let (one, two) = (&cluster.one, &cluster.two);
        let version = ProtocolVersion::V5;
        retained_then_newer(one, "moved/cfg").await;
        let (mut first, _) = connect(one, version, "moved").await;
        let retained = retained_on_subscribe(&mut first, "moved/+", QoS::AtLeastOnce).await;
        assert!(retained.retain && &retained.payload[..] == b"cfg");
        // Not acknowledged; the session moves to the other node, which reads it from the store.
        let (mut second, connack) = connect(two, version, "moved").await;
        assert!(connack.session_present);
        let taken = first.until_closed().await.expect("a DISCONNECT");
        assert_eq!(taken.reason_code, ReasonCode::SessionTakenOver);
        assert_eq!(until_pingresp(&mut second).await, [again(&retained)]);
        acknowledge(&mut second, &retained).await;
        assert_eq!(until_pingresp(&mut second).await, Vec::<String>::new());
        // Back on the first node, whose memory of its last connection still has the id: it
        // was acknowledged on the other node, so it is not sent again.
        let (mut third, connack) = connect(one, version, "moved").await;
        assert!(connack.session_present);
        let taken = second.until_closed().await.expect("a DISCONNECT");
        assert_eq!(taken.reason_code, ReasonCode::SessionTakenOver);
        assert_eq!(until_pingresp(&mut third).await, Vec::<String>::new());
    })
    .await
    .expect("the test finishes within two minutes");
}
