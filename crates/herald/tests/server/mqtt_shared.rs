//! MQTT shared subscriptions (`$share/{ShareName}/{filter}`, herald-mqtt's `shared.rs` over
//! core's share groups) end to end with Paho of both versions: each message to exactly one
//! member of a group, every group (and every plain subscriber) getting every message, no
//! retained message on a shared SUBSCRIBE, no QoS 1 message lost when a member leaves with
//! messages it did not acknowledge (a raw client, herald-mqtt's codec on a socket, that never
//! PUBACKs), a persistent session keeping its shared subscription across a restart, and the
//! refusals with the codes the standards name.

use std::collections::BTreeSet;
use std::num::NonZeroU16;

use bytes::BytesMut;
use herald_mqtt::packet::{
    self, Packet, ProtocolVersion, QoS, ReasonCode, Subscribe, SubscribeProperties,
    SubscriptionOptions, TopicFilter,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::mqtt_session::Raw;
use crate::support::mqtt::{paho, PahoRun};
use crate::support::Server;

/// A Paho member of `filter` at QoS 1 that exits after `expect` messages.
fn member(server: &Server, version: &str, token: &str, filter: &str, expect: usize) -> PahoRun {
    PahoRun::start(
        server.mqtt_addr(),
        json!({
            "version": version, "username": "default", "password": token,
            "subscribe": [{ "topic": filter, "qos": 1 }],
            "expect": expect, "timeout": 20
        }),
    )
}

/// The `n` of each message a finished run received (payloads `{"n":N}`), after checking it
/// came live (not retained) on `topic`.
async fn numbers(run: PahoRun, topic: &str) -> Vec<u64> {
    let (code, events) = run.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    events
        .iter()
        .filter(|e| e["event"] == "message")
        .map(|e| {
            assert_eq!(e["topic"], topic, "{e}");
            assert_eq!(
                e["retain"], false,
                "a shared SUBSCRIBE sends no retained message: {e}"
            );
            let data: Value = serde_json::from_str(e["payload"].as_str().unwrap()).unwrap();
            data["n"].as_u64().unwrap()
        })
        .collect()
}

#[tokio::test]
async fn a_group_of_three_receives_each_message_exactly_once_spread_over_its_members() {
    let server = Server::builder().mqtt().start().await;
    let token = server.token(&["jobs/*", "=jobs/*"], &[]);
    const N: u64 = 30;
    // Round-robin: each of the three members gets a third, whatever its version.
    let mut members: Vec<PahoRun> = ["5", "3.1.1", "5"]
        .iter()
        .map(|v| {
            member(
                &server,
                v,
                &token,
                "$share/workers/jobs/+",
                (N / 3) as usize,
            )
        })
        .collect();
    for run in &mut members {
        let suback = run.until("suback").await;
        assert_eq!(suback["reason_codes"], json!([1]), "granted QoS 1");
        run.until("subscribed").await;
    }
    for n in 1..=N {
        server.publish("jobs/print", json!({ "n": n })).await;
    }
    let mut all = Vec::new();
    for run in members {
        let got = numbers(run, "jobs/print").await;
        assert_eq!(got.len() as u64, N / 3, "spread over the members: {got:?}");
        all.extend(got);
    }
    all.sort_unstable();
    assert_eq!(
        all,
        (1..=N).collect::<Vec<_>>(),
        "each message once in total"
    );
}

#[tokio::test]
async fn two_groups_on_one_filter_and_a_plain_subscriber_each_get_every_message() {
    let server = Server::builder().mqtt().start().await;
    let token = server.token(&["feed"], &[]);
    // A message before anyone subscribes: the channel's retained message, which a shared
    // SUBSCRIBE does not send (the plain subscriber's is counted and checked below).
    server.publish("feed", json!({ "n": 0 })).await;
    const N: u64 = 12;
    let mut runs = vec![
        member(&server, "5", &token, "$share/a/feed", (N / 2) as usize),
        member(&server, "3.1.1", &token, "$share/a/feed", (N / 2) as usize),
        member(&server, "5", &token, "$share/b/feed", N as usize),
    ];
    let mut plain = PahoRun::start(
        server.mqtt_addr(),
        json!({
            "version": "5", "username": "default", "password": token,
            "subscribe": [{ "topic": "feed", "qos": 1 }], "expect": N + 1, "timeout": 20
        }),
    );
    for run in runs.iter_mut().chain([&mut plain]) {
        run.until("subscribed").await;
    }
    for n in 1..=N {
        server.publish("feed", json!({ "n": n })).await;
    }
    let b = numbers(runs.pop().unwrap(), "feed").await;
    assert_eq!(
        b,
        (1..=N).collect::<Vec<_>>(),
        "group b: every message, in order"
    );
    let mut a = Vec::new();
    for run in runs {
        a.extend(numbers(run, "feed").await);
    }
    a.sort_unstable();
    assert_eq!(
        a,
        (1..=N).collect::<Vec<_>>(),
        "group a: every message once"
    );
    let (code, events) = plain.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    let retained: Vec<bool> = events
        .iter()
        .filter(|e| e["event"] == "message")
        .map(|e| e["retain"] == true)
        .collect();
    assert_eq!(retained.len() as u64, N + 1);
    assert!(
        retained[0],
        "the plain subscriber got the retained message first"
    );
}

/// A SUBSCRIBE (packet id 1) to `filter` at `qos`, with No Local as given.
pub(crate) fn subscribe(filter: &str, qos: QoS, no_local: bool) -> Packet {
    Packet::Subscribe(Subscribe {
        packet_id: NonZeroU16::new(1).unwrap(),
        properties: SubscribeProperties::default(),
        filters: vec![(
            TopicFilter::new(filter).unwrap(),
            SubscriptionOptions {
                qos,
                no_local,
                ..Default::default()
            },
        )],
    })
}

/// The `n` of the next message event of either run, and which run (0 or 1) it came to.
async fn next_number(runs: &mut [PahoRun; 2]) -> (usize, u64) {
    let [one, two] = runs;
    let (at, event) = tokio::select! {
        e = one.until("message") => (0, e),
        e = two.until("message") => (1, e),
    };
    let data: Value = serde_json::from_str(event["payload"].as_str().unwrap()).unwrap();
    (at, data["n"].as_u64().unwrap())
}

#[tokio::test]
async fn a_member_leaving_with_unacknowledged_qos1_messages_loses_none_of_them() {
    let server = Server::builder().mqtt().start().await;
    let token = server.token(&["work"], &[]);
    const N: u64 = 30;
    // A member that takes its messages and never acknowledges them.
    let (mut leaver, connack) =
        Raw::connect(server.mqtt_addr(), ProtocolVersion::V5, Some(&token), 60).await;
    assert!(connack.properties.shared_subscription_available);
    leaver
        .send(&subscribe("$share/g/work", QoS::AtLeastOnce, false))
        .await;
    match leaver.next().await {
        Some(Packet::SubAck(ack)) => assert_eq!(ack.reason_codes, [ReasonCode::GrantedQoS1]),
        other => panic!("expected SUBACK, got {other:?}"),
    }
    let mut stayers = [
        member(&server, "5", &token, "$share/g/work", 1000),
        member(&server, "3.1.1", &token, "$share/g/work", 1000),
    ];
    for run in &mut stayers {
        run.until("subscribed").await;
    }
    // Mid-stream: the first half published, the leaver reads its share of it without a
    // PUBACK, then goes away; then the second half.
    for n in 1..=N / 2 {
        server.publish("work", json!({ "n": n })).await;
    }
    let mut unacked = Vec::new();
    while unacked.len() < (N / 2 / 3) as usize {
        match leaver.next().await {
            Some(Packet::Publish(p)) => {
                assert_eq!(p.qos, QoS::AtLeastOnce);
                unacked.push(String::from_utf8_lossy(&p.payload).into_owned());
            }
            Some(_) => {}
            None => panic!("closed; {}", leaver.why_closed()),
        }
    }
    drop(leaver);
    for n in N / 2 + 1..=N {
        server.publish("work", json!({ "n": n })).await;
    }
    // The members that stay get every message between them: their own, and what the leaver
    // had not acknowledged, handed over to them.
    let mut got = BTreeSet::new();
    let mut per_member = [0usize; 2];
    while got.len() < N as usize {
        let (at, n) = next_number(&mut stayers).await;
        per_member[at] += 1;
        got.insert(n);
    }
    assert_eq!(
        got,
        (1..=N).collect(),
        "unacknowledged by the leaver: {unacked:?}"
    );
    assert!(per_member.iter().all(|&n| n > 0), "{per_member:?}");
}

#[tokio::test]
async fn a_persistent_session_keeps_its_shared_subscription_across_a_restart() {
    let mut server = Server::builder().mqtt().start().await;
    let token = server.token(&["jobs/*", "=jobs/*"], &[]);
    for version in ["3.1.1", "5"] {
        let id = format!("share-keeper-{}", version.replace('.', ""));
        let topic = format!("jobs/{}", id);
        let out = paho(
            server.mqtt_addr(),
            json!({
                "version": version, "client_id": id, "clean": false, "session_expiry": 3600,
                "username": "default", "password": token,
                "subscribe": [{ "topic": "$share/keepers/jobs/+", "qos": 1 }]
            }),
        )
        .await
        .ok();
        assert_eq!(out.events("suback")[0]["reason_codes"], json!([1]));
        // A connection taking the session over waits for the first one's end to be stored,
        // so the subscription is stored before the kill.
        let out = paho(
            server.mqtt_addr(),
            json!({
                "version": version, "client_id": id, "clean": false, "session_expiry": 3600,
                "username": "default", "password": token
            }),
        )
        .await
        .ok();
        assert_eq!(out.events("connack")[0]["session_present"], true);
        server.restart().await;
        // Back without subscribing: the session's group is joined again.
        let mut back = PahoRun::start(
            server.mqtt_addr(),
            json!({
                "version": version, "client_id": id, "clean": false, "session_expiry": 3600,
                "username": "default", "password": token, "expect": 1, "timeout": 20
            }),
        );
        let connack = back.until("connack").await;
        assert_eq!(connack["session_present"], true, "v{version}");
        server.publish(&topic, json!({ "n": 1 })).await;
        assert_eq!(numbers(back, &topic).await, [1], "v{version}");
    }
}

#[tokio::test]
async fn refusals_have_the_codes_the_standards_name_in_both_versions() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["jobs/*"], &[]);
    // The token's patterns must cover the filter as for a wildcard subscription: `jobs/*`
    // without `=jobs/*` does not cover `jobs/+`; `other` is not allowed at all.
    for (version, refused) in [("5", 0x87), ("3.1.1", 0x80)] {
        let out = paho(
            mqtt,
            json!({
                "version": version, "username": "default", "password": token,
                "subscribe": [
                    { "topic": "$share/g/jobs/+", "qos": 1 },
                    { "topic": "$share/g/other", "qos": 1 },
                    { "topic": "$share/g/jobs/x", "qos": 1 }
                ]
            }),
        )
        .await
        .ok();
        let codes: Vec<Value> = out
            .events("suback")
            .iter()
            .map(|e| e["reason_codes"][0].clone())
            .collect();
        assert_eq!(
            codes,
            [json!(refused), json!(refused), json!(1)],
            "v{version}"
        );
    }
    // A malformed `$share` filter (no filter after the ShareName, an empty ShareName) closes
    // the connection: v5 with DISCONNECT 0x8F Topic Filter invalid.
    for filter in ["$share/g", "$share//jobs/x"] {
        for version in ["5", "3.1.1"] {
            let out = paho(
                mqtt,
                json!({
                    "version": version, "username": "default", "password": token,
                    "subscribe": [{ "topic": filter, "qos": 1 }]
                }),
            )
            .await;
            assert_eq!(out.code, Some(4), "{filter} v{version}: {}", out.describe());
            if version == "5" {
                let disconnect = &out.events("disconnect")[0];
                assert_eq!(disconnect["reason_code"], 0x8F, "{filter}: {disconnect}");
            }
        }
    }
    // A ShareName with `+` or `#` (which client libraries will not send) and No Local on a
    // shared subscription: DISCONNECT 0x8F and 0x82 Protocol Error [MQTT-3.8.3-4].
    for (version, bad, code) in [
        (
            ProtocolVersion::V5,
            b'+',
            Some(ReasonCode::TopicFilterInvalid),
        ),
        (
            ProtocolVersion::V5,
            b'#',
            Some(ReasonCode::TopicFilterInvalid),
        ),
        (ProtocolVersion::V311, b'+', None),
    ] {
        let got = subscribe_raw(&server, &token, version, "$share/aXb/jobs/x", Some(bad)).await;
        assert_eq!(got, code, "{version:?} {}", bad as char);
    }
    let got = subscribe_raw(
        &server,
        &token,
        ProtocolVersion::V5,
        "$share/g/jobs/x",
        None,
    )
    .await;
    assert_eq!(got, Some(ReasonCode::ProtocolError), "No Local");
}

/// Sends a SUBSCRIBE to `filter` (its `X` replaced by `bad` if given; else with No Local) on
/// a new connection and reads until the server closes it: the DISCONNECT's reason code, if
/// one came (a SUBACK fails the test).
async fn subscribe_raw(
    server: &Server,
    token: &str,
    version: ProtocolVersion,
    filter: &str,
    bad: Option<u8>,
) -> Option<ReasonCode> {
    let mut stream = TcpStream::connect(server.mqtt_addr()).await.unwrap();
    let connect = packet::Connect {
        protocol_version: version,
        clean_start: true,
        keep_alive: 60,
        client_id: "raw-share".into(),
        will: None,
        username: Some("default".into()),
        password: Some(packet::Bytes::copy_from_slice(token.as_bytes())),
        properties: Default::default(),
    };
    let mut out = BytesMut::new();
    packet::encode(&Packet::Connect(Box::new(connect)), version, &mut out).unwrap();
    let mut sub = BytesMut::new();
    let packet = match bad {
        Some(_) => subscribe(filter, QoS::AtLeastOnce, false),
        // The codec refuses to encode No Local on a shared filter: encode it on a plain
        // filter of the same length and make it shared after.
        None => subscribe(
            &filter.replace("$share/g/", "$share_g/"),
            QoS::AtLeastOnce,
            true,
        ),
    };
    packet::encode(&packet, version, &mut sub).unwrap();
    let needle: &[u8] = if bad.is_some() { b"aXb" } else { b"$share_g" };
    let at = sub.windows(needle.len()).position(|w| w == needle).unwrap();
    match bad {
        Some(b) => sub[at + 1] = b,
        None => sub[at + 6] = b'/',
    }
    out.extend_from_slice(&sub);
    stream.write_all(&out).await.unwrap();
    let mut buf = BytesMut::new();
    let mut seen = Vec::new();
    loop {
        while let Some(p) = packet::decode(&mut buf, Some(version), u32::MAX).unwrap() {
            match p {
                Packet::ConnAck(c) => assert_eq!(c.reason_code, ReasonCode::Success),
                Packet::Disconnect(d) => return Some(d.reason_code),
                other => seen.push(format!("{other:?}")),
            }
        }
        let mut chunk = [0u8; 1024];
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut chunk))
                .await
                .expect("the server closes the connection");
        match read {
            Ok(0) | Err(_) => {
                assert!(seen.is_empty(), "no answer but a close: {seen:?}");
                return None;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
