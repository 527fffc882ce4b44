//! Parked MQTT connections (herald-mqtt's `park.rs`) against the real binary, with
//! `park_idle_after` shortened: an idle MQTT connection leaves its task
//! (`herald_connections_parked` counts it), answers PINGREQ while parked without a task, and
//! comes back at once for a message, a PUBACK, a takeover of its client identifier or a
//! keep-alive timeout, its session state (subscriptions and their options, QoS 1 in flight,
//! topic aliases) intact, whether its record is lean or full. A raw client
//! (herald-mqtt's codec) sees the packets. Tests wait for the gauge, never a time.

use std::num::NonZeroU32;
use std::time::Duration;

use herald_mqtt::packet::{ConnectProperties, Packet, ProtocolVersion, PubAck, QoS, ReasonCode};
use serde_json::json;

use crate::mqtt_persistence::{subscribe, Raw};
use crate::support::Server;

async fn server() -> Server {
    Server::builder()
        .mqtt()
        .env("HERALD_PARK_IDLE_AFTER", "100ms")
        .start()
        .await
}

/// A value of `/metrics` (0 if absent).
pub(crate) async fn metric(s: &Server, name: &str) -> u64 {
    let text = s.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap_or(0.0) as u64)
}

/// Waits (at most 20 s) until `series` reads `n`.
pub(crate) async fn wait_for_metric(s: &Server, series: &str, n: u64) {
    let wait = async {
        while metric(s, series).await != n {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .is_err()
    {
        panic!("{series} never read {n}: {}", metric(s, series).await);
    }
}

/// Waits (at most 20 s) until exactly `n` connections are parked.
pub(crate) async fn wait_parked(s: &Server, n: u64) {
    wait_for_metric(s, "herald_connections_parked", n).await;
}

/// A v5 raw client `id` with a clean start and a keep-alive of `keep_alive` s, subscribed to
/// `topic` at `qos` (and granted it).
pub(crate) async fn subscribed_to(
    s: &Server,
    id: &str,
    keep_alive: u16,
    topic: &str,
    qos: QoS,
) -> Raw {
    let token = s.token(&["**"], &[]);
    let (mut raw, _) = Raw::connect_keeping_alive(
        s.mqtt_addr(),
        ProtocolVersion::V5,
        &token,
        id,
        true,
        ConnectProperties::default(),
        keep_alive,
    )
    .await;
    raw.send(&subscribe(&[(topic, qos)])).await;
    let granted = match qos {
        QoS::AtMostOnce => ReasonCode::GrantedQoS0,
        QoS::AtLeastOnce => ReasonCode::GrantedQoS1,
        QoS::ExactlyOnce => ReasonCode::GrantedQoS2,
    };
    match raw.next().await {
        Some(Packet::SubAck(ack)) => assert_eq!(ack.reason_codes, [granted]),
        other => panic!("{other:?}"),
    }
    raw
}

/// A v5 raw client `id` subscribed to `t/one` at QoS 1, with a keep-alive of `keep_alive` s.
async fn subscribed(s: &Server, id: &str, keep_alive: u16) -> Raw {
    subscribed_to(s, id, keep_alive, "t/one", QoS::AtLeastOnce).await
}

#[tokio::test]
async fn a_parked_connection_answers_pingreq_parked_and_gets_a_publish_at_once() {
    let server = server().await;
    let mut raw = subscribed(&server, "parked", 60).await;
    wait_parked(&server, 1).await;
    let revived = metric(&server, "herald_connections_revived_total").await;
    // Answered on the parking thread: no task for a PINGREQ.
    assert_eq!(raw.until_ping().await, Vec::<String>::new());
    assert_eq!(raw.until_ping().await, Vec::<String>::new());
    assert_eq!(
        metric(&server, "herald_connections_revived_total").await,
        revived,
        "a PINGREQ revived the connection"
    );
    assert_eq!(metric(&server, "herald_connections_parked").await, 1);
    // A message wakes it at once, its subscription intact.
    server.publish("t/one", json!(1)).await;
    let one = raw.publish().await;
    assert_eq!(
        (one.topic.as_str(), one.qos, one.dup),
        ("t/one", QoS::AtLeastOnce, false)
    );
    assert_eq!(&one.payload[..], b"1");
    // It parks again with the QoS 1 message in flight, still answers PINGREQ, and its PUBACK
    // settles it: the next message goes with the next packet id, not again.
    wait_parked(&server, 1).await;
    assert_eq!(raw.until_ping().await, Vec::<String>::new());
    raw.send(&Packet::PubAck(PubAck::new(one.packet_id.unwrap())))
        .await;
    assert_eq!(raw.until_ping().await, Vec::<String>::new());
    wait_parked(&server, 1).await;
    server.publish("t/one", json!(2)).await;
    let two = raw.publish().await;
    assert_eq!((two.topic.as_str(), two.dup), ("t/one", false));
    assert_eq!(&two.payload[..], b"2");
    assert_ne!(two.packet_id, one.packet_id);
}

#[tokio::test]
async fn a_parked_connection_is_kept_by_pingreq_and_closed_after_its_keep_alive() {
    let server = server().await;
    let mut raw = subscribed(&server, "keep-alive", 1).await;
    wait_parked(&server, 1).await;
    // Pinged every half second for three seconds, twice the 1.5 s it may stay silent.
    for _ in 0..6 {
        assert_eq!(raw.until_ping().await, Vec::<String>::new());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Silent: closed with 0x8D, parked or not.
    let closed = raw.until_closed().await.expect("a DISCONNECT");
    assert_eq!(closed.reason_code, ReasonCode::KeepAliveTimeout);
}

#[tokio::test]
async fn a_parked_connection_is_taken_over_by_its_client_identifier() {
    let server = server().await;
    let mut first = subscribed(&server, "taken", 60).await;
    wait_parked(&server, 1).await;
    let _second = subscribed(&server, "taken", 60).await;
    let taken = first.until_closed().await.expect("a DISCONNECT");
    assert_eq!(taken.reason_code, ReasonCode::SessionTakenOver);
}

#[tokio::test]
async fn a_lean_parked_connection_keeps_its_subscription_options_and_topic_aliases() {
    // Parked with one subscription and nothing else, a connection's record keeps its parts
    // inline (herald-mqtt's `wire/parked.rs`, lean); once it set a topic alias, in its box
    // (full). Either way it comes back as it parked: the subscription's identifier and QoS,
    // the client's Topic Alias Maximum, the alias it set.
    let server = server().await;
    let token = server.token(&["**"], &[]);
    let properties = ConnectProperties {
        topic_alias_maximum: 2,
        ..ConnectProperties::default()
    };
    let (mut raw, _) = Raw::connect(
        server.mqtt_addr(),
        ProtocolVersion::V5,
        &token,
        "lean",
        true,
        properties,
    )
    .await;
    let mut subscribe = subscribe(&[("t/lean", QoS::AtMostOnce)]);
    if let Packet::Subscribe(s) = &mut subscribe {
        s.properties.subscription_identifier = NonZeroU32::new(7);
    }
    raw.send(&subscribe).await;
    match raw.next().await {
        Some(Packet::SubAck(ack)) => assert_eq!(ack.reason_codes, [ReasonCode::GrantedQoS0]),
        other => panic!("{other:?}"),
    }
    let seven = vec![NonZeroU32::new(7).unwrap()];
    wait_parked(&server, 1).await;
    server.publish("t/lean", json!(1)).await;
    let one = raw.publish().await;
    assert_eq!(
        (one.topic.as_str(), one.qos, one.packet_id, &one.payload[..]),
        ("t/lean", QoS::AtMostOnce, None, &b"1"[..])
    );
    assert_eq!(one.properties.subscription_identifiers, seven);
    let alias = one.properties.topic_alias.expect("the topic's alias set");
    // Parked again, now with the alias set: the next message goes by the alias alone.
    wait_parked(&server, 1).await;
    server.publish("t/lean", json!(2)).await;
    let two = raw.publish().await;
    assert_eq!(
        (
            two.topic.as_str(),
            two.properties.topic_alias,
            &two.payload[..]
        ),
        ("", Some(alias), &b"2"[..])
    );
    assert_eq!(two.properties.subscription_identifiers, seven);
}
