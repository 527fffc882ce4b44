//! A resumed persistent session's QoS 1 and 2 messages in flight at its edges (herald-mqtt's
//! `session/resend.rs`): each goes again with its packet identifier and DUP 1
//! [MQTT-4.4.0-1], and RETAIN as it first went, also when
//!
//! - the client **unsubscribes** its channel in the packets right after its CONNECT, before
//!   the replay that was to bring it again reaches it: the delivery it started completes
//!   [MQTT-3.10.4-3], and once acknowledged nothing is left in flight (the connection parks);
//! - a **wildcard SUBSCRIBE** right after the CONNECT is sent the channel's retained message
//!   (newer than the messages in flight) while the channel's replay is still on its way: no
//!   packet identifier is released before its message is really gone;
//! - it was a **live message in flight across a repeated SUBSCRIBE** and the server was
//!   killed (`kill -9`): its RETAIN 0 is read from the store, not guessed (a message the
//!   replay does not bring again went as the retained message at SUBSCRIBE, the guess said).
//!
//! A raw client (herald-mqtt's codec) sees the packets.

use std::num::NonZeroU16;

use herald_mqtt::packet::{
    ConnectProperties, Packet, ProtocolVersion, PubAck, Publish, QoS, TopicFilter, Unsubscribe,
    UnsubscribeProperties,
};
use serde_json::json;

use crate::mqtt_parking::wait_parked;
use crate::mqtt_persistence::{subscribe, Raw};
use crate::mqtt_retained_resend::{
    acknowledge, again, connect, described, packets_until_pingresp, until_pingresp,
};
use crate::support::Server;

/// The properties of a persistent session's CONNECT of `version` (v5: an hour's Session
/// Expiry Interval; 3.1.1: Clean Session 0 is the session).
fn persistent(version: ProtocolVersion) -> ConnectProperties {
    ConnectProperties {
        session_expiry_interval: if version == ProtocolVersion::V5 {
            3600
        } else {
            0
        },
        ..ConnectProperties::default()
    }
}

/// Subscribes `raw` to `filter` at `qos`, expecting only its SUBACK.
async fn subscribed(raw: &mut Raw, filter: &str, qos: QoS) {
    raw.send(&subscribe(&[(filter, qos)])).await;
    match raw.next().await {
        Some(Packet::SubAck(ack)) => assert_eq!(ack.reason_codes.len(), 1),
        other => panic!("{filter}: expected SUBACK, got {other:?}"),
    }
}

fn unsubscribe(filter: &str) -> Packet {
    Packet::Unsubscribe(Unsubscribe {
        packet_id: NonZeroU16::new(2).unwrap(),
        properties: UnsubscribeProperties::default(),
        filters: vec![TopicFilter::new(filter).unwrap()],
    })
}

#[tokio::test]
async fn an_unsubscribe_before_the_replay_reaches_a_message_in_flight_completes_it() {
    // Idle connections park after 100 ms: one still holding a packet id never does.
    let server = Server::builder()
        .mqtt()
        .env("HERALD_PARK_IDLE_AFTER", "100ms")
        .start()
        .await;
    let cases = [
        (ProtocolVersion::V5, QoS::AtLeastOnce),
        (ProtocolVersion::V5, QoS::ExactlyOnce),
        (ProtocolVersion::V311, QoS::AtLeastOnce),
    ];
    let mut parked = Vec::new();
    for (version, qos) in cases {
        let topic = format!("unsub/{version:?}/{qos:?}");
        let id = format!("unsub-{version:?}-{qos:?}");
        let case = format!("{version:?} {qos:?}");
        let (mut first, _) = connect(&server, version, &id).await;
        subscribed(&mut first, &topic, qos).await;
        server.publish(&topic, json!("one")).await;
        server.publish(&topic, json!("two")).await;
        let sent = [first.publish().await, first.publish().await];
        assert_eq!(
            sent.iter().map(|p| (p.qos, p.dup)).collect::<Vec<_>>(),
            [(qos, false), (qos, false)],
            "{case}"
        );
        // Neither acknowledged; the connection ends.
        drop(first);
        // The UNSUBSCRIBE is read with the CONNECT: the replay that was to send both again
        // has not reached them (nor been written at all) when it ends the subscription.
        let token = server.token(&["**"], &[]);
        let addr = server.mqtt_addr();
        let then = [unsubscribe(&topic)];
        let (mut second, connack) =
            Raw::connect_then(addr, version, &token, &id, persistent(version), &then).await;
        assert!(connack.session_present, "{case}");
        let packets = packets_until_pingresp(&mut second).await;
        let unsubacks = packets
            .iter()
            .filter(|p| matches!(p, Packet::UnsubAck(_)))
            .count();
        let publishes: Vec<&Publish> = (packets.iter())
            .filter_map(|p| match p {
                Packet::Publish(p) => Some(p),
                _ => None,
            })
            .collect();
        assert_eq!(unsubacks, 1, "{case}: {packets:?}");
        assert_eq!(
            publishes.iter().map(|p| described(p)).collect::<Vec<_>>(),
            [again(&sent[0]), again(&sent[1])],
            "{case}: both deliveries started go again, in order, with their ids and DUP"
        );
        for p in &sent {
            acknowledge(&mut second, p).await;
        }
        // Unsubscribed: nothing more comes, live or again.
        server.publish(&topic, json!("after")).await;
        assert_eq!(until_pingresp(&mut second).await, Vec::<String>::new());
        // Nothing left in flight: the connection parks.
        parked.push(second);
        wait_parked(&server, parked.len() as u64).await;
    }
}

#[tokio::test]
async fn a_wildcard_subscribe_during_the_replay_releases_no_packet_id_early() {
    // A catch-up page holds a message or two: the replay comes in several.
    let server = Server::builder()
        .mqtt()
        .config("catchup_bytes = 1024\n")
        .start()
        .await;
    let version = ProtocolVersion::V5;
    let (topic, id) = ("early/a", "early");
    let (mut first, _) = connect(&server, version, id).await;
    subscribed(&mut first, topic, QoS::AtLeastOnce).await;
    let filler = "x".repeat(600);
    for n in 1..=10 {
        server.publish(topic, json!(format!("{n} {filler}"))).await;
    }
    let mut in_flight = Vec::new();
    for n in 1..=10 {
        let p = first.publish().await;
        // 1, 5 and 10 stay in flight; the rest are acknowledged.
        if [1, 5, 10].contains(&n) {
            in_flight.push(p);
        } else {
            first
                .send(&Packet::PubAck(PubAck::new(p.packet_id.unwrap())))
                .await;
        }
    }
    assert_eq!(until_pingresp(&mut first).await, Vec::<String>::new());
    drop(first);
    // The channel's retained message is its newest (HTTP's last message), 10: the wildcard
    // SUBSCRIBE read with the CONNECT is sent it while the replay from 1 is on its first page.
    let token = server.token(&["**"], &[]);
    let then = [subscribe(&[("early/+", QoS::AtLeastOnce)])];
    let addr = server.mqtt_addr();
    let (mut second, connack) =
        Raw::connect_then(addr, version, &token, id, persistent(version), &then).await;
    assert!(connack.session_present);
    // Acknowledging each PUBLISH as it comes, until nothing more does.
    let mut seen: Vec<Publish> = Vec::new();
    loop {
        let packets = packets_until_pingresp(&mut second).await;
        let mut more = false;
        for packet in packets {
            match packet {
                Packet::Publish(p) => {
                    second
                        .send(&Packet::PubAck(PubAck::new(p.packet_id.unwrap())))
                        .await;
                    seen.push(p);
                    more = true;
                }
                Packet::SubAck(_) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        if !more {
            break;
        }
    }
    let described_seen: Vec<String> = seen.iter().map(described).collect();
    // Described without their filler, for a failure's message.
    let short: Vec<String> = (seen.iter())
        .map(|p| {
            let n = String::from_utf8_lossy(&p.payload[..4]).into_owned();
            format!("{n} id={:?} dup={} retain={}", p.packet_id, p.dup, p.retain)
        })
        .collect();
    for first_sent in &in_flight {
        assert!(
            described_seen.contains(&again(first_sent)),
            "{:?} goes again with id {:?} and DUP; came: {short:#?}",
            String::from_utf8_lossy(&first_sent.payload[..4]),
            first_sent.packet_id
        );
    }
    // Each id in flight came back only as its own message's.
    for first_sent in &in_flight {
        let with_id: Vec<&String> = (seen.iter().zip(&described_seen))
            .filter(|(p, _)| p.packet_id == first_sent.packet_id && p.dup)
            .map(|(_, d)| d)
            .collect();
        assert_eq!(with_id, [&again(first_sent)], "{short:#?}");
    }
}

#[tokio::test]
async fn a_live_message_in_flight_across_a_repeated_subscribe_goes_again_with_retain_0_after_kill_9(
) {
    let mut server = Server::builder().mqtt().start().await;
    // QoS 1: a QoS 2 retained message would wait for its packet id's commit, after the
    // PINGRESP that ends what the test reads.
    let cases = [
        (ProtocolVersion::V5, QoS::AtLeastOnce),
        (ProtocolVersion::V311, QoS::AtLeastOnce),
    ];
    let mut first_sent = Vec::new();
    for (version, qos) in cases {
        let topic = format!("again/{version:?}/{qos:?}");
        let id = format!("again-{version:?}-{qos:?}");
        let (mut first, _) = connect(&server, version, &id).await;
        subscribed(&mut first, &topic, qos).await;
        server.publish(&topic, json!("state")).await;
        let live = first.publish().await;
        assert_eq!((live.qos, live.retain), (qos, false), "{topic}");
        // The SUBSCRIBE repeated while it is in flight: the subscription starts again at the
        // channel's head, past it. The channel's retained message (the same message: another
        // transport's newest) may be sent again as such (RETAIN 1, a new packet) or not, as
        // the retained window finds the live copy (herald-mqtt's `retained_window.rs`); if it
        // is, it is in flight as well.
        first.send(&subscribe(&[(&topic, qos)])).await;
        let mut in_flight = vec![live];
        for packet in packets_until_pingresp(&mut first).await {
            match packet {
                Packet::SubAck(_) => {}
                Packet::Publish(p) if in_flight.len() == 1 && p.retain && !p.dup => {
                    in_flight.push(p)
                }
                other => panic!("{topic}: unexpected {other:?}"),
            }
        }
        let expected: Vec<String> = in_flight.iter().map(again).collect();
        drop(first);
        // Sent again from what the connection before left in memory.
        let (mut second, _) = connect(&server, version, &id).await;
        assert_eq!(until_pingresp(&mut second).await, expected, "{topic}");
        drop(second);
        first_sent.push((version, id, in_flight));
    }
    // kill -9: the packet ids, their messages and RETAIN are read from the store.
    server.restart().await;
    for (version, id, in_flight) in &first_sent {
        let (mut after, connack) = connect(&server, *version, id).await;
        assert!(connack.session_present, "{id}");
        assert_eq!(
            until_pingresp(&mut after).await,
            in_flight.iter().map(again).collect::<Vec<_>>(),
            "{id}: after kill -9, again with its id, DUP and RETAIN 0 as first sent (and the \
             retained message, if it went, with RETAIN 1)"
        );
        for p in in_flight {
            acknowledge(&mut after, p).await;
        }
        assert_eq!(until_pingresp(&mut after).await, Vec::<String>::new());
    }
}
