//! MQTT wildcard subscriptions (`+`, `#`) end to end: `mosquitto_sub` and Paho of both versions
//! receiving HTTP and MQTT publishes through filters, never a `$` topic through a leading
//! wildcard, encoded channels matched by their topic, the token's patterns deciding who may
//! subscribe to a filter, the anonymous deny rules checked per delivery, a copy per matching
//! subscription in v5 and one delivery in 3.1.1, retained messages of existing channels, and
//! UNSUBSCRIBE ending delivery (a raw client, herald-mqtt's codec on a socket, for what must be
//! seen packet by packet).

use std::num::NonZeroU16;
use std::time::Duration;

use herald_mqtt::packet::{
    Packet, ProtocolVersion, QoS, ReasonCode, Subscribe, SubscribeProperties, SubscriptionOptions,
    TopicFilter, Unsubscribe, UnsubscribeProperties,
};
use serde_json::{json, Value};

use crate::mqtt_session::Raw;
use crate::support::mqtt::{mosquitto_pub, mosquitto_sub, PahoRun};
use crate::support::{Server, API_KEY};

fn subscribe(id: u16, filters: &[(&str, QoS)]) -> Packet {
    Packet::Subscribe(Subscribe {
        packet_id: NonZeroU16::new(id).unwrap(),
        properties: SubscribeProperties::default(),
        filters: filters
            .iter()
            .map(|(f, qos)| {
                let options = SubscriptionOptions {
                    qos: *qos,
                    ..Default::default()
                };
                (TopicFilter::new(*f).unwrap(), options)
            })
            .collect(),
    })
}

/// The SUBACK's reason codes (the next packet must be it).
async fn suback(raw: &mut Raw) -> Vec<ReasonCode> {
    match raw.next().await {
        Some(Packet::SubAck(ack)) => ack.reason_codes,
        other => panic!("expected SUBACK, got {other:?}"),
    }
}

/// The next PUBLISH's (topic, payload, QoS, RETAIN), acknowledged if QoS 1.
async fn next_publish(raw: &mut Raw) -> (String, String, QoS, bool) {
    loop {
        match raw.next().await {
            Some(Packet::Publish(p)) => {
                if let Some(id) = p.packet_id {
                    raw.send(&Packet::PubAck(herald_mqtt::packet::PubAck::new(id)))
                        .await;
                }
                let payload = String::from_utf8_lossy(&p.payload).into_owned();
                return (p.topic.as_str().to_owned(), payload, p.qos, p.retain);
            }
            Some(_) => continue,
            None => panic!("closed; {}", raw.why_closed()),
        }
    }
}

#[tokio::test]
async fn mosquitto_sub_with_a_plus_filter_gets_matching_http_publishes_in_both_versions() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["a/**", "=a/**"], &[]);
    for version in ["mqttv311", "mqttv5"] {
        let args: Vec<String> = [
            "-V", version, "-u", "default", "-P", &token, "-t", "a/+/c", "-q", "1", "-R", "-C",
            "3", "-W", "15", "-F", "%t|%q|%p",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        let sub = tokio::spawn(async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            mosquitto_sub(mqtt, &args).await
        });
        // Each round publishes to channels the filter does not match, then to one it does: a
        // non-matching message delivered would be printed before the matching one after it.
        let mut n = 0;
        while !sub.is_finished() {
            n += 1;
            for channel in ["a/b/d", "a/b/c/d", "b/x/c", "a/c"] {
                server.publish(channel, json!({ "n": n })).await;
            }
            server.publish("a/b/c", json!({ "n": n })).await;
            server.publish("=a/x=20y/c", json!({ "n": n })).await;
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        let out = sub.await.unwrap().ok();
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines.len(), 3, "{}", out.describe());
        for line in lines {
            let (topic, rest) = line.split_once('|').unwrap();
            assert!(
                topic == "a/b/c" || topic == "a/x y/c",
                "{version}: only topics a/+/c matches, encoded ones by their topic: {line}"
            );
            assert!(rest.starts_with("1|"), "granted QoS 1: {line}");
        }
    }
}

#[tokio::test]
async fn paho_receives_http_and_mqtt_publishes_through_hash_but_no_dollar_topic() {
    for version in ["3.1.1", "5"] {
        // A server each: no retained message from the other round.
        let server = Server::builder().mqtt().start().await;
        let mqtt = server.mqtt_addr();
        let token = server.token(&["**"], &[]);
        let mut run = PahoRun::start(
            mqtt,
            json!({
                "version": version, "username": "default", "password": token,
                "subscribe": [{ "topic": "#", "qos": 1 }, { "topic": "sensors/+", "qos": 0 }],
                "expect": if version == "5" { 3 } else { 2 }, "timeout": 15
            }),
        );
        // Paho sends one SUBSCRIBE per filter.
        let first = run.until("suback").await;
        let second = run.until("suback").await;
        assert_eq!(
            (&first["reason_codes"], &second["reason_codes"]),
            (&json!([1]), &json!([0])),
            "v{version}"
        );
        run.until("subscribed").await;
        // `#` does not see `$SYS/x` [MQTT-4.7.2-1], over HTTP (its channel) or MQTT.
        server.publish("==24SYS/x", json!("dollar")).await;
        mosquitto_pub(
            mqtt,
            &[
                "-u", "default", "-P", API_KEY, "-q", "1", "-t", "$SYS/y", "-m", "dollar",
            ],
        )
        .await
        .ok();
        server
            .publish(&format!("news/v{version}"), json!({ "via": "http" }))
            .await;
        mosquitto_pub(
            mqtt,
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
                "mqtt",
            ],
        )
        .await
        .ok();
        let (code, events) = run.finish().await;
        assert_eq!(code, Some(0), "v{version}: {events:?}");
        let messages: Vec<(Value, Value, Value)> = events
            .iter()
            .filter(|e| e["event"] == "message")
            .map(|e| (e["topic"].clone(), e["payload"].clone(), e["qos"].clone()))
            .collect();
        let news = (
            json!(format!("news/v{version}")),
            json!(r#"{"via":"http"}"#),
            json!(1),
        );
        let living = |qos: u64| (json!("sensors/living room"), json!("mqtt"), json!(qos));
        // Matched by both filters: v5, a copy each at its QoS (lowest first); 3.1.1, once at
        // the higher QoS.
        let expected = match version {
            "5" => vec![news, living(0), living(1)],
            _ => vec![news, living(1)],
        };
        assert_eq!(messages, expected, "v{version}: no $ topic");
    }
}

#[tokio::test]
async fn a_token_subscribes_to_a_filter_only_if_its_patterns_cover_every_channel_it_matches() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let plain_only = server.token(&["sensors/*"], &[]);
    let both = server.token(&["sensors/*", "=sensors/*"], &[]);
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(plain_only.as_str()), 30).await;
    raw.send(&subscribe(
        1,
        &[
            ("sensors/+", QoS::AtLeastOnce),
            ("sensors/#", QoS::AtLeastOnce),
        ],
    ))
    .await;
    assert_eq!(
        suback(&mut raw).await,
        [ReasonCode::NotAuthorized, ReasonCode::NotAuthorized],
        "sensors/living room is the channel =sensors/living=20room; sensors/# also matches sensors"
    );
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(both.as_str()), 30).await;
    raw.send(&subscribe(
        1,
        &[("sensors/+", QoS::AtLeastOnce), ("#", QoS::AtMostOnce)],
    ))
    .await;
    assert_eq!(
        suback(&mut raw).await,
        [ReasonCode::GrantedQoS1, ReasonCode::NotAuthorized]
    );
    server.publish("=sensors/living=20room", json!(21)).await;
    let (topic, payload, qos, retain) = next_publish(&mut raw).await;
    assert_eq!(
        (topic.as_str(), payload.as_str(), qos, retain),
        ("sensors/living room", "21", QoS::AtLeastOnce, false)
    );
}

#[tokio::test]
async fn overlapping_subscriptions_deliver_a_copy_each_in_v5_once_in_3_1_1_and_unsubscribe_stops_delivery(
) {
    for version in [ProtocolVersion::V5, ProtocolVersion::V311] {
        // A server each: the first's messages would be the second's retained ones.
        let server = Server::builder().mqtt().start().await;
        let mqtt = server.mqtt_addr();
        let (mut raw, connack) = Raw::connect(mqtt, version, Some(API_KEY), 30).await;
        if version == ProtocolVersion::V5 {
            assert!(connack.properties.wildcard_subscription_available);
        }
        raw.send(&subscribe(
            1,
            &[
                ("a/b", QoS::AtMostOnce),
                ("a/+", QoS::AtMostOnce),
                ("a/#", QoS::AtLeastOnce),
                ("z", QoS::AtMostOnce),
            ],
        ))
        .await;
        assert_eq!(
            suback(&mut raw).await,
            [
                ReasonCode::GrantedQoS0,
                ReasonCode::GrantedQoS0,
                ReasonCode::GrantedQoS1,
                ReasonCode::GrantedQoS0
            ]
        );
        server.publish("a/b", json!(1)).await;
        server.publish("a", json!(2)).await;
        server.publish("z", json!(3)).await;
        // v5: a/b once per matching subscription, each at its QoS (lowest first); 3.1.1: once,
        // at the highest QoS. a/# matches a.
        let expected: &[(&str, &str, QoS)] = match version {
            ProtocolVersion::V5 => &[
                ("a/b", "1", QoS::AtMostOnce),
                ("a/b", "1", QoS::AtMostOnce),
                ("a/b", "1", QoS::AtLeastOnce),
                ("a", "2", QoS::AtLeastOnce),
                ("z", "3", QoS::AtMostOnce),
            ],
            ProtocolVersion::V311 => &[
                ("a/b", "1", QoS::AtLeastOnce),
                ("a", "2", QoS::AtLeastOnce),
                ("z", "3", QoS::AtMostOnce),
            ],
        };
        let mut got = Vec::new();
        for _ in expected {
            got.push(next_publish(&mut raw).await);
        }
        let got: Vec<(&str, &str, QoS)> = got
            .iter()
            .map(|(t, p, q, _)| (t.as_str(), p.as_str(), *q))
            .collect();
        assert_eq!(got, expected, "{version:?}");
        raw.send(&Packet::Unsubscribe(Unsubscribe {
            packet_id: NonZeroU16::new(2).unwrap(),
            properties: UnsubscribeProperties::default(),
            filters: ["a/+", "a/#", "a/b", "x/#"]
                .iter()
                .map(|f| TopicFilter::new(*f).unwrap())
                .collect(),
        }))
        .await;
        match raw.next().await {
            Some(Packet::UnsubAck(ack)) if version == ProtocolVersion::V5 => assert_eq!(
                ack.reason_codes,
                [
                    ReasonCode::Success,
                    ReasonCode::Success,
                    ReasonCode::Success,
                    ReasonCode::NoSubscriptionExisted
                ]
            ),
            Some(Packet::UnsubAck(_)) => {}
            other => panic!("expected UNSUBACK, got {other:?}; {}", raw.why_closed()),
        }
        server.publish("a/b", json!(4)).await;
        server.publish("a/c", json!(5)).await;
        server.publish("z", json!(6)).await;
        let (topic, payload, _, _) = next_publish(&mut raw).await;
        assert_eq!(
            (topic.as_str(), payload.as_str()),
            ("z", "6"),
            "nothing through the filters once unsubscribed ({version:?})"
        );
    }
}

#[tokio::test]
async fn a_wildcard_subscribe_gets_each_matching_channels_last_message_as_retained() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    server.publish("prices/eur/usd", json!(1.07)).await;
    server.publish("prices/eur/usd", json!(1.08)).await;
    server.publish("prices/gbp/usd", json!(1.27)).await;
    server.publish("prices/gbp/chf", json!(1.11)).await;
    server.publish("pricesx/eur/usd", json!(0)).await;
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V311, Some(API_KEY), 30).await;
    raw.send(&subscribe(1, &[("prices/+/usd", QoS::AtLeastOnce)]))
        .await;
    // The retained messages are queued as the subscription is made and sent after its SUBACK
    // (as for an exact topic); read in any order here.
    let mut retained = Vec::new();
    let mut granted = None;
    while granted.is_none() || retained.len() < 2 {
        match raw.next().await {
            Some(Packet::SubAck(ack)) => granted = Some(ack.reason_codes),
            Some(Packet::Publish(p)) => {
                if let Some(id) = p.packet_id {
                    raw.send(&Packet::PubAck(herald_mqtt::packet::PubAck::new(id)))
                        .await;
                }
                let payload = String::from_utf8_lossy(&p.payload).into_owned();
                retained.push((p.topic.as_str().to_owned(), payload, p.qos, p.retain));
            }
            other => panic!("expected SUBACK or PUBLISH, got {other:?}"),
        }
    }
    assert_eq!(granted.unwrap(), [ReasonCode::GrantedQoS1]);
    retained.sort();
    assert_eq!(
        retained,
        [
            (
                "prices/eur/usd".into(),
                "1.08".into(),
                QoS::AtLeastOnce,
                true
            ),
            (
                "prices/gbp/usd".into(),
                "1.27".into(),
                QoS::AtLeastOnce,
                true
            ),
        ]
    );
    server.publish("prices/gbp/chf", json!(1.12)).await;
    server.publish("prices/eur/usd", json!(1.09)).await;
    assert_eq!(
        next_publish(&mut raw).await,
        (
            "prices/eur/usd".into(),
            "1.09".into(),
            QoS::AtLeastOnce,
            false
        ),
        "then live, without RETAIN"
    );

    // `#`: every channel once (plain and encoded), none starting with `$`.
    server.publish("=living=20room", json!("lamp")).await;
    server.publish("==24SYS/x", json!("dollar")).await;
    let (mut all, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(API_KEY), 30).await;
    all.send(&subscribe(1, &[("#", QoS::AtMostOnce)])).await;
    let mut topics = Vec::new();
    let mut granted = false;
    while !granted || topics.len() < 5 {
        match all.next().await {
            Some(Packet::SubAck(_)) => granted = true,
            Some(Packet::Publish(p)) => topics.push(p.topic.as_str().to_owned()),
            other => panic!("expected SUBACK or PUBLISH, got {other:?}"),
        }
    }
    server.publish("z", json!("live")).await;
    assert_eq!(
        next_publish(&mut all).await.0,
        "z",
        "no more retained messages"
    );
    topics.sort();
    assert_eq!(
        topics,
        [
            "living room",
            "prices/eur/usd",
            "prices/gbp/chf",
            "prices/gbp/usd",
            "pricesx/eur/usd"
        ]
    );
}

/// A server accepting anonymous MQTT clients, which may subscribe to `#` but not `secret/x`.
async fn anonymous_with_secret_x_denied() -> Server {
    Server::builder()
        .mqtt()
        .config(
            r##"
[mqtt]
allow_anonymous = true

[[mqtt.anonymous_rules]]
allow = "#"
action = "subscribe"

[[mqtt.anonymous_rules]]
deny = "secret/x"
action = "subscribe"
"##,
        )
        .start()
        .await
}

#[tokio::test]
async fn an_anonymous_wildcard_subscriber_is_not_sent_what_a_deny_rule_matches() {
    let server = anonymous_with_secret_x_denied().await;
    let mqtt = server.mqtt_addr();
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V5, None, 30).await;
    raw.send(&subscribe(
        1,
        &[("secret/+", QoS::AtMostOnce), ("secret/x", QoS::AtMostOnce)],
    ))
    .await;
    assert_eq!(
        suback(&mut raw).await,
        [ReasonCode::GrantedQoS0, ReasonCode::NotAuthorized]
    );
    server.publish("secret/x", json!("hidden")).await;
    server.publish("secret/y", json!("shown")).await;
    let (topic, payload, _, _) = next_publish(&mut raw).await;
    assert_eq!(
        (topic.as_str(), payload.as_str()),
        ("secret/y", "\"shown\""),
        "secret/x is checked per delivery and not sent"
    );
}

#[tokio::test]
async fn an_anonymous_wildcard_subscriber_is_not_sent_retained_messages_a_deny_rule_matches() {
    let server = anonymous_with_secret_x_denied().await;
    // Both channels have a last message before the SUBSCRIBE: its retained messages.
    server.publish("secret/x", json!("hidden")).await;
    server.publish("secret/y", json!("shown")).await;
    let (mut raw, _) = Raw::connect(server.mqtt_addr(), ProtocolVersion::V5, None, 30).await;
    raw.send(&subscribe(1, &[("secret/+", QoS::AtMostOnce)]))
        .await;
    // Retained messages come after the SUBACK (the standards would allow them before it,
    // MQTT 5.0 3.8.4); read in any order here.
    let mut received = Vec::new();
    let codes = loop {
        match raw.next().await {
            Some(Packet::SubAck(ack)) => break ack.reason_codes,
            Some(Packet::Publish(p)) => received.push((p.topic.as_str().to_owned(), p.retain)),
            other => panic!("expected SUBACK, got {other:?}; {}", raw.why_closed()),
        }
    };
    assert_eq!(codes, [ReasonCode::GrantedQoS0]);
    // A live message after the SUBACK; the retained ones (queued together, in name order:
    // `secret/x` first were it sent) and it are read until both allowed ones came.
    server.publish("secret/z", json!("live")).await;
    while !(received.contains(&("secret/y".to_string(), true))
        && received.contains(&("secret/z".to_string(), false)))
    {
        let (topic, _, _, retain) = next_publish(&mut raw).await;
        received.push((topic, retain));
    }
    assert!(
        !received.iter().any(|(topic, _)| topic == "secret/x"),
        "the deny rule's topic has no retained message for the anonymous client: {received:?}"
    );
}

#[tokio::test]
async fn a_persistent_sessions_wildcard_subscription_is_kept_and_made_again_on_resume() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["**"], &[]);
    let session = |subscribe: Value, expect: u64| {
        json!({
            "version": "5", "client_id": "wild-1", "clean": false, "session_expiry": 3600,
            "username": "default", "password": token, "subscribe": subscribe,
            "expect": expect, "timeout": 15
        })
    };
    let first = PahoRun::start(mqtt, session(json!([{ "topic": "rooms/+", "qos": 1 }]), 0));
    let (code, events) = first.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    // Reconnected without a SUBSCRIBE: the stored filter delivers.
    let mut again = PahoRun::start(mqtt, session(json!([]), 1));
    let connack = again.until("connack").await;
    assert_eq!(connack["session_present"], true, "{connack}");
    // The stored subscriptions are made again as the session resumes, about when the
    // CONNACK goes: a few publishes, the client ends with the first it receives.
    for n in 0..10 {
        server.publish("rooms/kitchen", json!({ "t": n })).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, events) = again.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    let message = events
        .iter()
        .find(|e| e["event"] == "message")
        .unwrap_or_else(|| panic!("no message: {events:?}"));
    assert_eq!(
        (&message["topic"], &message["qos"]),
        (&json!("rooms/kitchen"), &json!(1))
    );
}

#[tokio::test]
async fn retained_messages_of_a_wildcard_subscribe_are_bounded_by_the_setting() {
    let server = Server::builder()
        .mqtt()
        .config("[mqtt]\nmax_retained_per_filter = 1\n")
        .start()
        .await;
    let mqtt = server.mqtt_addr();
    // An observer of the last channel: once it has `bounded/c`, the node has handed all three
    // to its subscribers, so none is still on its way to the wildcard subscription made next
    // (a publish is answered once stored, before its delivery; one still in transit would
    // reach the new subscription live, after its retained copy).
    let (mut observer, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(API_KEY), 30).await;
    observer
        .send(&subscribe(1, &[("bounded/c", QoS::AtMostOnce)]))
        .await;
    suback(&mut observer).await;
    for channel in ["bounded/a", "bounded/b", "bounded/c"] {
        server.publish(channel, json!(channel)).await;
    }
    assert_eq!(next_publish(&mut observer).await.0, "bounded/c");
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(API_KEY), 30).await;
    raw.send(&subscribe(1, &[("bounded/+", QoS::AtMostOnce)]))
        .await;
    // The SUBACK first, then the retained messages, queued before any live one.
    suback(&mut raw).await;
    server.publish("bounded/z", json!("live")).await;
    let mut retained = 0;
    let (topic, retain) = loop {
        let (topic, _, _, retain) = next_publish(&mut raw).await;
        if !retain {
            break (topic, retain);
        }
        retained += 1;
    };
    assert_eq!(
        (retained, topic.as_str(), retain),
        (1, "bounded/z", false),
        "one retained message, then live ones"
    );
}

/// A persistent session's `a/+` and `b/#` miss messages while it is away, published over HTTP
/// and MQTT to matching and other topics, on channels it had a message of and on new ones;
/// after a `kill -9` and restart it resumes and gets exactly the matching messages sent at
/// QoS 1 or 2, each once, in order per topic (the QoS 0 one is not kept, as Mosquitto's
/// default); and nothing again on the next resume.
#[tokio::test]
async fn a_persistent_sessions_wildcards_get_what_they_missed_once_across_kill_9() {
    let mut server = Server::builder().mqtt().start().await;
    let token = server.token(&["**"], &["**"]);
    let session = |token: &str, subscribe: Value, expect: u64| {
        json!({
            "version": "5", "client_id": "wild-offline", "clean": false,
            "session_expiry": 3600, "username": "default", "password": token,
            "subscribe": subscribe, "expect": expect, "timeout": 20
        })
    };
    let filters = json!([{ "topic": "a/+", "qos": 1 }, { "topic": "b/#", "qos": 2 }]);
    let mut first = PahoRun::start(server.mqtt_addr(), session(&token, filters, 1));
    first.until("subscribed").await;
    // A channel the filter delivered while connected: it resumes from its position.
    server.publish("a/x", json!({ "n": 0 })).await;
    let (code, events) = first.finish().await;
    assert_eq!(code, Some(0), "{events:?}");

    for (channel, n) in [
        ("a/x", 1),
        ("a/y", 1),
        ("b", 1),
        ("b/c/d", 1),
        ("c/x", 1),
        ("a/x/deep", 1),
    ] {
        server.publish(channel, json!({ "n": n })).await;
    }
    let publisher = json!({
        "version": "5", "client_id": "wild-publisher", "username": "default",
        "password": token, "publish": [
            { "topic": "a/x", "payload": "x-qos0", "qos": 0 },
            { "topic": "a/y", "payload": "y-qos1", "qos": 1 },
            { "topic": "b/c/d", "payload": "bcd-qos2", "qos": 2 },
            { "topic": "c/x", "payload": "cx-qos1", "qos": 1 },
        ]
    });
    let out = crate::support::mqtt::paho(server.mqtt_addr(), publisher)
        .await
        .ok();
    let published = out.events("published");
    assert!(
        published.len() == 4 && published.iter().all(|p| p["reason_code"] == 0),
        "{}",
        out.describe()
    );
    server.publish("a/x", json!({ "n": 2 })).await;

    server.restart().await;

    // Back, without a SUBSCRIBE: what was missed, then a message published once connected.
    let resume = |server: &Server, expect: u64| {
        PahoRun::start(server.mqtt_addr(), session(&token, json!([]), expect))
    };
    let mut back = resume(&server, 8);
    let connack = back.until("connack").await;
    assert_eq!(connack["session_present"], true, "{connack}");
    server.publish("a/end", json!("end")).await;
    let (code, events) = back.finish().await;
    let got: Vec<(String, String, u64)> = events
        .iter()
        .filter(|e| e["event"] == "message")
        .map(|e| {
            (
                e["topic"].as_str().unwrap().to_owned(),
                e["payload"].as_str().unwrap().to_owned(),
                e["qos"].as_u64().unwrap(),
            )
        })
        .collect();
    let per_topic = |topic: &str| -> Vec<(String, u64)> {
        got.iter()
            .filter(|(t, _, _)| t == topic)
            .map(|(_, p, q)| (p.clone(), *q))
            .collect()
    };
    let expected: [(&str, Vec<(&str, u64)>); 5] = [
        ("a/x", vec![(r#"{"n":1}"#, 1), (r#"{"n":2}"#, 1)]),
        ("a/y", vec![(r#"{"n":1}"#, 1), ("y-qos1", 1)]),
        ("b", vec![(r#"{"n":1}"#, 2)]),
        ("b/c/d", vec![(r#"{"n":1}"#, 2), ("bcd-qos2", 2)]),
        ("a/end", vec![(r#""end""#, 1)]),
    ];
    for (topic, messages) in &expected {
        let messages: Vec<(String, u64)> =
            messages.iter().map(|(p, q)| (p.to_string(), *q)).collect();
        assert_eq!(per_topic(topic), messages, "{topic}: {got:?}");
    }
    assert_eq!(code, Some(0), "{events:?}");
    assert_eq!(got.len(), 8, "nothing else (c/x, a/x/deep, QoS 0): {got:?}");
    assert!(
        events.iter().all(|e| e["retain"] != true),
        "missed, not retained: {events:?}"
    );

    // Once: the next resume gets only what is new.
    let mut again = resume(&server, 1);
    again.until("connack").await;
    server.publish("b/again", json!("again")).await;
    let (code, events) = again.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    let got: Vec<&Value> = events.iter().filter(|e| e["event"] == "message").collect();
    assert_eq!(got.len(), 1, "{events:?}");
    assert_eq!(got[0]["topic"], "b/again", "{events:?}");
}
